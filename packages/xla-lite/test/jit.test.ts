// End to end: jit through the xla-lite compiler equals eager; AOT objects; compile cache,
// recompile explanations and warnings; disableJit; bad inputs named.
import { grad, jit as coreJit, lax, nn, np, systolic, valueAndGrad, vmap } from '@tpukit/core';
import { asArray, fnId, getCompiler } from '@tpukit/core/internal';
import { describe, expect, it } from 'vitest';
import { expectAllclose } from './build';
import { compileLog, disableJit, jit, lower, xlaCompiler } from '../src/index';

const x = np.array([[1, -2, 3], [0.5, 4, -1]], 'float32');
const w = np.array([[0.1, 0.2], [0.3, -0.4], [0.5, 0.6]], 'float32');

describe('jit through xla-lite', () => {
  it('is the registered compiler', () => {
    expect(getCompiler()).toBe(xlaCompiler);
  });

  it('matches eager on an MLP with grads, fusing the elementwise tail', () => {
    const loss = (w: any, x: any) => np.mean(np.square(np.add(np.multiply(nn.gelu(np.matmul(x, w)), 0.5), np.tanh(np.matmul(x, w)))));
    const vg = valueAndGrad(loss);
    const before = compileLog().length;
    const [lj, gj] = jit(vg)(w, x) as [any, any];
    const [le, ge] = vg(w, x) as [any, any];
    expectAllclose(lj, le);
    expectAllclose(gj, ge);
    const rec = compileLog().slice(before);
    expect(rec).toHaveLength(1);
    expect(rec[0].fusedKernels).toBeGreaterThan(0);
  });

  it('dot/broadcast/reduce rewrites keep batched-matmul grads equal to eager', () => {
    const f = (x: any, w: any) => np.sum(np.tanh(np.matmul(x, w)));
    const xb = np.array(Float32Array.from({ length: 2 * 3 * 4 }, (_, i) => Math.sin(i)), 'float32').reshape([2, 3, 4]);
    const wb = np.array(Float32Array.from({ length: 4 * 5 }, (_, i) => Math.cos(i)), 'float32').reshape([4, 5]);
    const g = grad(f, { argnums: [0, 1] });
    const lowered = jit(g).lower(xb, wb);
    const compiled = lowered.compile();
    expect(compiled.passStats.algebraic).toBeGreaterThan(0);
    const got = compiled.call([xb, wb]);
    const want = g(xb, wb) as any[];
    expectAllclose(got[0], want[0], { rtol: 1e-5, atol: 1e-5 });
    expectAllclose(got[1], want[1], { rtol: 1e-5, atol: 1e-5 });
  });

  it('fused reductions (leading and trailing axes) and broadcasts match eager', () => {
    const f = (a: any, b: any) => [
      np.sum(np.multiply(np.exp(a), b), { axis: 0 }),
      np.max(np.add(np.tanh(a), np.sum(a, { axis: 1, keepdims: true })), { axis: 1 }),
      np.divide(a, np.sqrt(np.add(np.mean(np.square(a), { axis: -1, keepdims: true }), 1e-6))),
    ];
    const a = np.array([[1, -2, 3, 0.5], [4, -1, 0.25, 2], [-3, 1, 1, 1]], 'float32');
    const b = np.array([0.5, 1, -1, 2], 'float32');
    const compiled = jit(f).lower(a, b).compile();
    expect(compiled.stats.fusedKernels).toBeGreaterThanOrEqual(3);
    const got = compiled.call([a, b]);
    const want = f(a, b);
    got.forEach((g, k) => expectAllclose(g, want[k]));
  });

  it('composes with vmap, grad and nested jit', () => {
    const f = (v: any) => np.sum(np.multiply(np.tanh(v), np.exp(np.negative(v))));
    expectAllclose(jit(vmap(f))(x), vmap(f)(x));
    expectAllclose(vmap(jit(f))(x), vmap(f)(x));
    expectAllclose(grad(jit(f))(x), grad(f)(x));
    const outer = (v: any) => np.add(coreJit(f)(v), jit(f)(np.multiply(v, 2)));
    expectAllclose(jit(outer)(x), outer(x));
    // A weakly typed result (from a JS-number input) stays weak through a fused kernel.
    const weakIn = asArray(2);
    const wf = (v: any) => np.exp(np.multiply(v, 3));
    expect(wf(weakIn).aval.weakType).toBe(true);
    expect(jit(wf)(weakIn).aval).toEqual(wf(weakIn).aval);
  });

  it('runs control flow (cond, scan, while) and matches eager', () => {
    const condScan = (x: any) => {
      const c = lax.cond(np.greater(np.sum(x), 0), (v: any) => np.sin(np.multiply(v, 2)), (v: any) => np.cos(v), x);
      return lax.scan((h: any, r: any) => [np.tanh(np.add(h, r)), np.multiply(h, 2)], np.zeros([3]), c);
    };
    const f = (x: any) => {
      const [carry, ys] = condScan(x);
      const n = lax.whileLoop((s: any) => np.less(s[0], 5), (s: any) => [np.add(s[0], 1), np.multiply(s[1], 1.5)], [np.array(0, 'int32'), carry]);
      return [n[1], ys];
    };
    const n0 = compileLog().length;
    const [a, b] = jit(f)(x);
    const [ea, eb] = f(x);
    // The scan body, the cond branches and the while body/condition were compiled too.
    const names = compileLog().slice(n0).map((r) => r.name);
    expect(names.some((n) => n.includes('scan.jaxpr'))).toBe(true);
    expect(names.some((n) => n.includes('cond.branches'))).toBe(true);
    expect(names.some((n) => n.includes('while.bodyJaxpr'))).toBe(true);
    expectAllclose(a, ea);
    expectAllclose(b, eb);
    // grad through cond and scan (JAX has no reverse mode through while either).
    const g = (v: any) => np.sum(condScan(v)[1]);
    expectAllclose(jit(grad(g))(x), grad(g)(x), { rtol: 1e-4, atol: 1e-5 });
  });

  it('lowers to HLO text and compiles with cost and memory analysis', () => {
    const f = (a: any, b: any) => np.tanh(np.add(np.multiply(np.matmul(a, b), 2), 1));
    const lowered = jit(f).lower(x, w);
    const text = lowered.asText();
    expect(text).toMatch(/^HloModule jit_f/);
    expect(text).toContain('dot(');
    expect(text).toContain('lhs_contracting_dims={1}');
    expect(text).toContain('ENTRY %jit_f');
    const compiled = lowered.compile();
    const ct = compiled.asText();
    expect(ct).toContain('fusion(');
    expect(ct).toContain('kind=kOutput'); // the dot with its scale/bias/tanh epilogue
    const cost = compiled.costAnalysis(systolic.presets.v4);
    expect(cost.flops).toBeGreaterThanOrEqual(2 * 2 * 3 * 2);
    expect(cost.transcendentals).toBe(4);
    expect(cost.seconds).toBeGreaterThan(0);
    expect(cost.mxuSeconds).toBeGreaterThan(0);
    expect(cost.bytesAccessed).toBeLessThan(lowered.costAnalysis(systolic.presets.v4).bytesAccessed);
    const mem = compiled.memoryAnalysis();
    expect(mem.argumentBytes).toBe((6 + 6) * 4);
    expect(mem.outputBytes).toBe(4 * 4);
    expect(mem.peakBytes).toBeGreaterThanOrEqual(mem.argumentBytes + mem.outputBytes);
    expectAllclose(compiled.call([x, w])[0], f(x, w));
    expect(lower(f)(x, w).asText().replace(/\.\d+/g, '')).toBe(text.replace(/\.\d+/g, ''));
  });

  it('counts hits and misses and explains recompiles, warning after the limit', () => {
    const warnings: string[] = [];
    const f = jit((a: any, n: number) => np.multiply(a, n), { staticArgnums: 1, warnAfterRecompiles: 2, onWarning: (m) => warnings.push(m) });
    f(np.ones([2]), 3);
    f(np.ones([2]), 3);
    f(np.ones([4]), 3);
    f(np.ones([4]), 5);
    f(np.ones([4]), 5);
    const s = f.compileStats();
    expect(s.hits).toBe(2);
    expect(s.misses).toBe(3);
    expect(s.recompiles).toBe(2);
    expect(s.explanations[0]).toContain('argument 0 (a): f32[2] -> f32[4]');
    expect(s.explanations[1]).toContain('argument 1 (n): static number:3 -> static number:5');
    expect(s.compileMs.length).toBe(3);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('recompiled 2 times');
  });

  it('keys a static function by its identity, with the ids core gives functions', () => {
    // Ids handed out by core first, so a second counter here could not coincide with core's.
    for (let k = 0; k < 3; k++) fnId(() => k);
    const relu = (v: any) => nn.relu(v);
    const gelu = (v: any) => nn.gelu(v);
    const f = jit((a: any, act: (v: any) => any) => act(a), { staticArgnums: 1 });
    f(np.ones([2]), relu);
    f(np.ones([2]), relu);
    f(np.ones([2]), gelu);
    f(np.ones([2]), (v: any) => nn.relu(v)); // same source, another function: a new entry
    const s = f.compileStats();
    expect([s.hits, s.misses]).toEqual([1, 3]);
    expect(s.explanations[0]).toBe(`argument 1 (act): static fn:relu#${fnId(relu)} -> static fn:gelu#${fnId(gelu)}`);
  });

  it('lower() carries donated arguments into memoryAnalysis', () => {
    const step = (p: any, g: any) => np.subtract(p, np.multiply(np.exp(g), 0.1));
    const p0 = np.ones([64]);
    const plain = jit(step).lower(p0, p0).compile().memoryAnalysis();
    const donated = jit(step, { donateArgnums: 0 }).lower(p0, p0).compile().memoryAnalysis();
    expect(plain.aliasBytes).toBe(0);
    expect(donated.aliasBytes).toBe(256);
  });

  it('treats distinct static functions as distinct signatures', () => {
    const f = jit((a: any, fn: (v: any) => any) => fn(a), { staticArgnums: 1 });
    const one = (v: any) => np.sin(v);
    const two = (v: any) => np.cos(v);
    expectAllclose(f(x, one), np.sin(x));
    expectAllclose(f(x, two), np.cos(x));
    expect(f.compileStats().misses).toBe(2);
  });

  it('disableJit runs eagerly with the same results', () => {
    let traced = 0;
    const f = jit((a: any) => {
      traced++;
      return np.multiply(np.exp(a), 2);
    });
    const eager = disableJit(() => f(x));
    expect(traced).toBe(1);
    expect(f.compileStats().misses).toBe(0);
    expectAllclose(f(x), eager);
    disableJit(true);
    try {
      f(x);
      expect(traced).toBe(3);
    } finally {
      disableJit(false);
    }
  });

  it('names the function and argument on bad input', () => {
    const g = jit(function makeLoss(a: any) {
      return { loss: np.sum(a), step: 3 };
    });
    expect(() => g(x)).toThrow(/jit\(makeLoss\): output leaf 1 .* is a number \(3\), not an Array/);
    const h = jit(function scale(a: any, cfg: any) {
      return np.multiply(a, cfg.k);
    }, { staticArgnums: 1 });
    expect(() => h(x, new Map([['k', 2]]))).toThrow(/jit\(scale\): static argument 1 is not hashable: a Map/);
    const cyc: any = { k: 2 };
    cyc.self = cyc;
    expect(() => h(x, cyc)).toThrow(/static argument 1 is not hashable: a cyclic object/);
    expect(() => h(x, x)).toThrow(/static argument 1 is not hashable: an Array f32\[2,3\]/);
  });
});
