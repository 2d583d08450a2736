import { describe, expect, it } from 'vitest';
import { paramNamesOf } from './jitSignature';

describe('paramNamesOf (argument names in jit messages)', () => {
  it('reads parenthesised, bare-arrow, async, default and rest parameters', () => {
    expect(paramNamesOf(function f(a: number, b: number) { return a + b; })).toEqual(['a', 'b']);
    expect(paramNamesOf((x: number, y = 2, ...zs: number[]) => x + y + zs.length)).toEqual(['x', 'y', 'zs']);
    // One parameter without parentheses (esbuild emits `(t: T) => ...` so), whose body calls f(b, c):
    const f = (b: number, c: number): number => b + c;
    const b = 1;
    const c = 2;
    // eslint-disable-next-line @typescript-eslint/no-implied-eval
    const bare = new Function('f', 'b', 'c', 'return t => t.a + f(b, c)')(f, b, c) as (t: { a: number }) => number;
    expect(paramNamesOf(bare)).toEqual(['t']);
    const asyncBare = new Function('return async t => t')() as (t: unknown) => unknown;
    expect(paramNamesOf(asyncBare)).toEqual(['t']);
    const named = new Function('return async => async')() as (x: unknown) => unknown;
    expect(paramNamesOf(named)).toEqual(['async']);
  });
});
