import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Array as ArrayClass, jit, lax, np, tree } from '../index';
import { SingleDeviceSharding } from '../device';
import { flattenCall, paramNamesOf, type SignatureSpec } from './jitSignature';

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

describe("flattenCall's reuse of the last call's signature", () => {
  // The law: a spec that has seen earlier calls (and may reuse the last one's signature) gives
  // every call the key and per-argument types a fresh spec gives it.
  const dtypes = ['float32', 'int32', 'bfloat16'] as const;
  const leafArb = fc.record({ shape: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 2 }), dtype: fc.constantFrom(...dtypes), weak: fc.boolean() });
  /** A call: an argument list whose pytrees vary in structure (keys, list lengths) and leaf types; numbers sometimes. */
  const callArb = fc.record({
    keys: fc.subarray(['a', 'b', 'c'], { minLength: 1 }),
    listLen: fc.integer({ min: 0, max: 2 }),
    leaves: fc.array(leafArb, { minLength: 6, maxLength: 6 }),
    scalar: fc.option(fc.oneof(fc.integer({ min: -5, max: 5 }), fc.double({ min: -10, max: 10, noNaN: true }), fc.boolean()), { nil: undefined, freq: 3 }),
  });
  const build = (c: { keys: string[]; listLen: number; leaves: { shape: number[]; dtype: (typeof dtypes)[number]; weak: boolean }[]; scalar: number | boolean | undefined }): unknown[] => {
    const arr = (k: number) => {
      const l = c.leaves[k];
      const x = np.zeros(l.shape, l.dtype);
      return l.weak ? lax.convertElementType(x, l.dtype, true) : x;
    };
    const dict: Record<string, unknown> = {};
    c.keys.forEach((k, i) => (dict[k] = arr(i)));
    const list = Array.from({ length: c.listLen }, (_, i) => arr(3 + i));
    return c.scalar === undefined ? [dict, list, arr(5)] : [dict, list, c.scalar];
  };
  const spec = (): SignatureSpec => ({ fname: 'f', staticNums: [], staticNames: [], names: ['p', 'q', 'r'], last: null });

  /** The previous call with one leaf changed (`n` picks the leaf and the change: weak type, dtype, one dimension, or a number for an Array). */
  const tweak = (prev: unknown[], n: number): unknown[] => {
    const [leaves, def] = tree.flatten(prev, { isLeaf: (x) => x instanceof ArrayClass });
    const k = n % leaves.length;
    const l = leaves[k];
    const out = leaves.map((x) => (x instanceof ArrayClass ? np.zerosLike(x) : x));
    if (!(l instanceof ArrayClass)) out[k] = np.array(1);
    else {
      const change = Math.floor(n / 7) % 4;
      if (change === 0) out[k] = lax.convertElementType(np.zerosLike(l), l.dtype, !l.weakType);
      else if (change === 1) out[k] = np.zeros(l.shape, l.dtype === 'float32' ? 'int32' : 'float32');
      else if (change === 2) out[k] = np.zeros(l.shape.length ? [l.shape[0] + 1, ...l.shape.slice(1)] : [1], l.dtype);
      else out[k] = 2.5;
    }
    return def.unflatten(out) as unknown[];
  };

  it('gives every call the key and types a fresh spec gives it', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(callArb, fc.constantFrom('new', 'repeat', 'tweak'), fc.nat()), { minLength: 2, maxLength: 6 }), (calls) => {
        const s = spec();
        let prev: unknown[] | null = null;
        for (const [c, how, n] of calls) {
          // The previous call's types with new Arrays (the reuse path), or that with one leaf
          // changed (a near miss the reuse must reject), or a new call.
          const args: unknown[] =
            prev === null || how === 'new' ? build(c) : how === 'repeat' ? prev.map((a) => tree.map((x: unknown) => (x instanceof ArrayClass ? np.zerosLike(x) : x), a)) : tweak(prev, n);
          const got = flattenCall(args, s);
          const want = flattenCall(args, spec());
          expect(got.key).toBe(want.key);
          expect(got.sigs.map((x) => x.types)).toEqual(want.sigs.map((x) => x.types));
          expect(got.leaves).toEqual(want.leaves);
          prev = args;
        }
      }),
      { numRuns: 80 },
    );
  });

  it("keys a registered node's aux data and a Map key's type (as JAX keys a treedef's aux data)", () => {
    class Act {
      constructor(readonly kind: string, readonly x: unknown) {}
    }
    tree.registerNode(Act, (a) => [[a.x], a.kind], (aux, ch) => new Act(aux as string, ch[0]));
    const s = spec();
    const a = flattenCall([new Act('double', np.zeros([2]))], s);
    const b = flattenCall([new Act('plus1', np.zeros([2]))], s);
    expect(b.key).not.toBe(a.key);
    expect(flattenCall([new Act('double', np.ones([2]))], s).key).toBe(a.key);
    // End to end: the second call traces anew instead of reusing the first call's program.
    const f = jit((t: Act) => (t.kind === 'double' ? np.multiply(t.x as ArrayClass, 2) : np.add(t.x as ArrayClass, 1)));
    expect(Array.from(f(new Act('double', np.array([5]))).dataSync())).toEqual([10]);
    expect(Array.from(f(new Act('plus1', np.array([5]))).dataSync())).toEqual([6]);
    const m1 = flattenCall([new Map([[1, np.zeros([2])]])], s);
    const m2 = flattenCall([new Map([['1', np.zeros([2])]])], s);
    expect(m2.key).not.toBe(m1.key);
    // Objects as aux data or Map keys: by value when plain, else by identity.
    const k1 = { id: 1 };
    const k2 = { id: 1 };
    expect(flattenCall([new Map([[k1, np.zeros([2])]])], s).key).toBe(flattenCall([new Map([[k2, np.zeros([2])]])], s).key);
    const d1 = new Date(0);
    const d2 = new Date(0);
    expect(flattenCall([new Map([[d1, np.zeros([2])]])], s).key).not.toBe(flattenCall([new Map([[d2, np.zeros([2])]])], s).key);
  });

  /** `x` under a sharding other than the default (one the signature names). */
  const sharded = (x: ArrayClass): ArrayClass => {
    const other = Object.create(SingleDeviceSharding.prototype) as SingleDeviceSharding;
    Object.defineProperty(other, 'toString', { value: () => 'TestSharding(rows)' });
    return new ArrayClass(x.aval, x._backend, x._buf, other);
  };

  it('reuses the signature object only for a repeated call, and holds no Array of the last call', () => {
    const s = spec();
    const a = flattenCall([{ w: np.zeros([2, 3]) }, [np.ones([4])], np.array(1)], s);
    const b = flattenCall([{ w: np.ones([2, 3]) }, [np.zeros([4])], np.array(2)], s);
    expect(b.sigs).toBe(a.sigs);
    expect(b.key).toBe(a.key);
    // Right after a call of a's signature, a changed shape, dtype, weak type, dict key or
    // container kind with the same leaves is a new signature.
    for (const args of [
      [{ w: np.zeros([3, 2]) }, [np.ones([4])], np.array(1)],
      [{ w: np.zeros([2, 3], 'int32') }, [np.ones([4])], np.array(1)],
      [{ w: np.zeros([2, 3]) }, [np.ones([4])], np.array(1, 'int32')],
      [{ v: np.zeros([2, 3]) }, [np.ones([4])], np.array(1)],
      [{ w: np.zeros([2, 3]) }, new Map([['0', np.ones([4])]]), np.array(1)],
      [{ w: np.zeros([2, 3]) }, [np.ones([4])], true],
      [{ w: sharded(np.zeros([2, 3])) }, [np.ones([4])], np.array(1)],
    ]) {
      const base = flattenCall([{ w: np.zeros([2, 3]) }, [np.ones([4])], np.array(1)], s);
      expect(flattenCall([{ w: np.ones([2, 3]) }, [np.ones([4])], np.array(3)], s).sigs).toBe(base.sigs);
      const c = flattenCall(args, s);
      expect(c.key).not.toBe(a.key);
      expect(c.key).toBe(flattenCall(args, spec()).key);
    }
    expect(tree.leaves(s.last as unknown, { isLeaf: (x) => x instanceof ArrayClass }).some((x) => x instanceof ArrayClass)).toBe(false);
  });
});
