/**
 * Gradients of sharded programs: `grad(jit(f))` (and `valueAndGrad`, `jvp`, `vmap` around a
 * sharded jit) runs the programs core's pjit rules derive (jvp, partial eval, transpose) with
 * the shardings carried through, so xla-lite partitions each of them: the backward program's
 * collectives show in its text, results equal the unsharded gradients, and the compiled
 * programs are cached per sharding.
 */
import { type Array, grad, jvp, np, valueAndGrad, vmap } from '@tpukit/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clearCompileLog, compileLog, type CompileRecord, jit } from '../src/internal';
import { close, collectives, M1, M2, put, rand, S, type Spec } from './gridSharding';

const partitioned = (): CompileRecord[] => compileLog().filter((r) => r.partitioned !== undefined);
const textOf = (r: CompileRecord): string => r.partitioned!.program.asText();

describe('grad of a sharded jit', () => {
  const x = rand([8, 16], 1);
  const w = rand([16, 8], 2);
  const loss = (w: Array, x: Array) => np.sum(np.tanh(np.matmul(x, w)));

  it('data parallel: the forward and backward programs are partitioned; the weight gradient is one all-reduce', () => {
    clearCompileLog();
    const g = grad(jit(loss))(w, put(x, S(M1, 'x', null)));
    close(g, grad(loss)(w, x), 1e-5, 1e-5);
    const progs = partitioned();
    expect(progs.map((r) => r.name)).toEqual(['pe(jvp(loss))', 'transpose(pe(jvp(loss)))']);
    expect(progs.every((r) => r.partitioned!.devices === 2)).toBe(true);
    // The batch-split residuals arrive split; the weight gradient's partial sums are all-reduced.
    const bwd = textOf(progs[1]);
    expect(collectives(bwd)).toEqual({ 'all-reduce': 1 });
    expect(bwd).toMatch(/f32\[4,16\]\{1,0\} parameter\(\d\), sharding=\{devices=\[2,1\]0,1\}/);
    expect(bwd).toMatch(/f32\[8,16\]\{1,0\} all-reduce\(/);
    expect(g.sharding.isFullyReplicated).toBe(true);
  });

  it('FSDP: the gradient of a split weight comes back split, by a reduce-scatter in the backward program', () => {
    clearCompileLog();
    const ws = put(w, S(M1, 'x', null));
    const g = grad(jit(loss))(ws, put(x, S(M1, 'x', null)));
    close(g, grad(loss)(w, x), 1e-5, 1e-5);
    expect(g.sharding).toBe(ws.sharding);
    expect((g as Array).addressableShards.map((s) => s.index)).toEqual([[[0, 8], [0, 8]], [[8, 16], [0, 8]]]);
    const [fwd, bwd] = partitioned();
    expect(collectives(textOf(fwd))['all-gather']).toBe(1);
    expect(collectives(textOf(bwd))['reduce-scatter']).toBe(1);
    expect(textOf(bwd)).not.toMatch(/all-gather\(/);
  });

  it('inShardings under grad place unsharded arguments: the options travel into the derived programs', () => {
    clearCompileLog();
    const g = grad(jit(loss, { inShardings: [null, S(M1, 'x', null)] }))(w, x);
    close(g, grad(loss)(w, x), 1e-5, 1e-5);
    const [fwd, bwd] = partitioned();
    expect(fwd.partitioned!.inShardings).toEqual(['{replicated}', '{devices=[2,1]0,1}']);
    expect(bwd.partitioned!.inShardings).toContain('{devices=[2,1]0,1}');
    expect(collectives(textOf(bwd))).toEqual({ 'all-reduce': 1 });
  });

  it('outShardings under grad fix the derived programs\' outputs and the cotangents\' inputs', () => {
    clearCompileLog();
    const f = (w: Array, x: Array) => np.tanh(np.matmul(x, w));
    const j = jit(f, { outShardings: S(M1, 'x', null) });
    const g = grad((w: Array, x: Array) => np.sum(np.square(j(w, x))))(w, put(x, S(M1, 'x', null)));
    close(g, grad((w: Array, x: Array) => np.sum(np.square(f(w, x))))(w, x), 1e-5, 1e-5);
    const [, bwd] = partitioned();
    // The cotangent of the split output enters the backward program split as that output.
    expect(textOf(bwd)).toMatch(/f32\[4,8\]\{1,0\} parameter\(\d\), sharding=\{devices=\[2,1\]0,1\}/);
  });

  it('valueAndGrad and jvp around a sharded jit, and jit(valueAndGrad(f)) inside one, equal the unsharded results', () => {
    const xs = put(x, S(M2, ['x', 'y'], null));
    const [v, g] = valueAndGrad(jit(loss), { argnums: [0, 1] })(w, xs) as [Array, [Array, Array]];
    const [v0, g0] = valueAndGrad(loss, { argnums: [0, 1] })(w, x) as [Array, [Array, Array]];
    close(v, v0, 1e-5, 1e-5);
    close(g[0], g0[0], 1e-5, 1e-5);
    close(g[1], g0[1], 1e-5, 1e-5);
    expect(g[1].sharding).toBe(xs.sharding);
    clearCompileLog();
    const [y, t] = jvp(jit(loss), [w, xs], [np.onesLike(w), np.onesLike(x)]) as [Array, Array];
    const [y0, t0] = jvp(loss, [w, x], [np.onesLike(w), np.onesLike(x)]) as [Array, Array];
    close(y, y0, 1e-5, 1e-5);
    close(t, t0, 1e-4, 1e-4);
    expect(partitioned().map((r) => r.name)).toEqual(['jvp(loss)']);
    const inner = jit(valueAndGrad(loss), { inShardings: [null, S(M2, 'x', 'y')] });
    const [vi, gi] = inner(w, x) as [Array, Array];
    close(vi, v0, 1e-5, 1e-5);
    close(gi, g0[0], 1e-5, 1e-5);
  });

  it('vmap of a sharded jit runs its batched program (shardings are not carried through vmap)', () => {
    const xs = put(x, S(M1, 'x', null));
    const ws = np.stack([w, np.multiply(w, 2)]);
    const out = vmap((wi: Array) => jit(loss)(wi, xs))(ws) as Array;
    close(out, np.stack([loss(w, x), loss(np.multiply(w, 2), x)]), 1e-5, 1e-5);
  });

  it('a sharded jit inside jit(grad(...)) is an equation whose shardings print in the jaxpr; the outer program is partitioned', () => {
    const inner = jit(loss, { inShardings: [null, S(M1, 'x', null)] });
    const outer = jit(grad(inner), { inShardings: [null, S(M1, 'x', null)] });
    close(outer(w, x), grad(loss)(w, x), 1e-5, 1e-5);
    expect(String(jit(grad(inner)).lower(w, x).jaxpr)).toMatch(/in_shardings=\(None, GridSharding\(\{"x":2\}, P\("x", null\)\)\)/);
  });

  it('law: for random shapes and specs, grad of a sharded jit equals the unsharded grad', () => {
    const axes: (string | readonly string[] | null)[] = [null, 'x', 'y', ['x', 'y']];
    const used = (a: string | readonly string[] | null): string[] => (a === null ? [] : typeof a === 'string' ? [a] : [...a]);
    const spec2 = fc.tuple(fc.constantFrom(...axes), fc.constantFrom(...axes)).filter(([a, b]) => !used(a).some((u) => used(b).includes(u)));
    const fs = [
      (p: Array, q: Array) => np.sum(np.tanh(np.matmul(p, q))),
      (p: Array, q: Array) => np.mean(np.square(np.add(np.matmul(p, q), np.sum(q, { axis: 0 })))),
      (p: Array, q: Array) => np.sum(np.multiply(np.exp(np.multiply(np.transpose(np.matmul(p, q)), 0.1)), np.max(p))),
    ];
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 3 }), spec2, spec2, fc.integer({ min: 0, max: fs.length - 1 }), (m, k, n, sa, sb, which) => {
        const a = rand([4 * m, 4 * k], m + 3 * k);
        const b = rand([4 * k, 4 * n], n + 5 * k);
        const f = fs[which];
        const [ga, gb] = grad(jit(f), { argnums: [0, 1] })(put(a, S(M2, ...(sa as Spec))), put(b, S(M2, ...(sb as Spec)))) as [Array, Array];
        const [ea, eb] = grad(f, { argnums: [0, 1] })(a, b) as [Array, Array];
        close(ga, ea, 1e-4, 1e-5);
        close(gb, eb, 1e-4, 1e-5);
        expect(ga.sharding.deviceSet.length).toBe(4);
      }),
      { numRuns: 30 },
    );
  });

  it('the compiled derived programs are cached per sharding', () => {
    const j = jit(loss);
    const g = grad(j);
    clearCompileLog();
    g(w, put(x, S(M1, 'x', null)));
    expect(partitioned()).toHaveLength(2);
    g(w, put(x, S(M1, 'x', null)));
    expect(partitioned()).toHaveLength(2);
    g(w, put(x, S(M1, null, 'x')));
    const progs = partitioned();
    expect(progs).toHaveLength(4);
    expect(progs[2].partitioned!.inShardings).not.toEqual(progs[0].partitioned!.inShardings);
    expect(progs[2].partitioned!.inShardings.at(-1)).toBe('{devices=[1,2]0,1}');
  });

  it('bad inputs: mismatched meshes between grad arguments, a non-Sharding in inShardings, a wrong outShardings count', () => {
    expect(() => grad(jit(loss))(put(w, S({ x: 4 }, 'x', null)), put(x, S(M1, 'x', null)))).toThrow(
      /jit\(loss\): mismatched meshes: argument 0 \(w\) is sharded over devices \[0,1,2,3\] but argument 1 \(x\) over \[0,1\]/,
    );
    expect(() => grad(jit(loss, { inShardings: [null, 'x' as never] }))(w, x)).toThrow(/jit\(loss\): inShardings\[1\] is string, not a Sharding/);
    expect(() => jit(loss, { inShardings: [{ w: S(M1) } as never, S(M1, 'x', null)] })(w, x)).toThrow(/jit\(loss\): inShardings\[0\] is a Object \{w\}, not a Sharding or null/);
    expect(() => grad(jit(loss, { inShardings: [S(M1, 'x', null)] }))(w, x)).toThrow(/inShardings has 1 entries but the call passes 2 positional arguments/);
    expect(() => grad(jit(loss, { outShardings: [S(M1), S(M1)] }))(w, put(x, S(M1, 'x', null)))).toThrow(/jit\(loss\): outShardings has 2 entries but the function returns 1 arrays/);
    expect(() => grad(jit(loss, { inShardings: [null, S(M1, 'x', null)] }))(w, rand([3, 16], 5))).toThrow(/input 1.*\[3,16\]|not divisible|even tiles/);
  });
});
