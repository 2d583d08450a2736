// nn.dotProductAttention and nn.rmsNorm against naive per-element references (plain JS loops).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { grad, nn, np, random } from './index';
import type { Array } from './array';
import { onBackend } from '../test/backend';

// Plain-loop float64 references and finite differences: exact reference numerics, not the MXU's bf16.
onBackend('reference');

const f32 = (a: Array): number[] => globalThis.Array.from(a.dataSync() as Float32Array);

/** out[b,t,n,:] = sum_s softmax_s(q.k * scale + bias, masked) v[b,s,n/(N/K),:] with plain loops. */
function naive(q: Array, k: Array, v: Array, opts: { causal?: boolean; mask?: boolean[][]; bias?: number[][] } = {}): number[] {
  const [B, T, N, H] = q.shape;
  const [, S, K] = k.shape;
  const [qd, kd, vd] = [f32(q), f32(k), f32(v)];
  const out: number[] = [];
  for (let b = 0; b < B; b++)
    for (let t = 0; t < T; t++)
      for (let n = 0; n < N; n++) {
        const kh = Math.floor(n / (N / K));
        const logits: number[] = [];
        for (let s = 0; s < S; s++) {
          let dot = 0;
          for (let h = 0; h < H; h++) dot += qd[((b * T + t) * N + n) * H + h] * kd[((b * S + s) * K + kh) * H + h];
          let l = dot / Math.sqrt(H) + (opts.bias ? opts.bias[t][s] : 0);
          if ((opts.causal && s > t) || (opts.mask && !opts.mask[t][s])) l = -Infinity;
          logits.push(l);
        }
        const m = Math.max(...logits);
        const e = logits.map((l) => Math.exp(l - m));
        const z = e.reduce((x, y) => x + y, 0);
        for (let h = 0; h < H; h++) {
          let acc = 0;
          for (let s = 0; s < S; s++) acc += (e[s] / z) * vd[((b * S + s) * K + kh) * H + h];
          out.push(acc);
        }
      }
  return out;
}

const close = (a: number[], b: number[], tol: number): void => {
  expect(a.length).toBe(b.length);
  a.forEach((x, i) => expect(Math.abs(x - b[i])).toBeLessThan(tol));
};

describe('nn.dotProductAttention', () => {
  const [kq, kk, kv] = [random.key(1), random.key(2), random.key(3)];
  const q = random.normal(kq, [2, 5, 4, 3]);
  const k = random.normal(kk, [2, 5, 2, 3]);
  const v = random.normal(kv, [2, 5, 2, 3]);

  it('grouped-query attention matches the naive loop, with and without the causal mask', () => {
    close(f32(nn.dotProductAttention(q, k, v)), naive(q, k, v), 1e-5);
    close(f32(nn.dotProductAttention(q, k, v, { isCausal: true })), naive(q, k, v, { causal: true }), 1e-5);
  });

  it('a boolean mask and an additive bias broadcast to [B, N, T, S]', () => {
    const mask = [0, 1, 2, 3, 4].map((t) => [0, 1, 2, 3, 4].map((s) => (t + s) % 3 !== 1 || s === t));
    const bias = [0, 1, 2, 3, 4].map((t) => [0, 1, 2, 3, 4].map((s) => 0.1 * (t - s)));
    const out = nn.dotProductAttention(q, k, v, { mask: np.array(mask, 'bool'), bias: np.array(bias, 'float32'), isCausal: true });
    const m2 = mask.map((row, t) => row.map((x, s) => x && s <= t));
    close(f32(out), naive(q, k, v, { mask: m2, bias }), 1e-5);
  });

  it('law: the gradient wrt the query matches central differences', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1000 }), (seed) => {
        const qs = random.normal(random.key(seed), [1, 3, 2, 2]);
        const ks = random.normal(random.key(seed + 1), [1, 3, 1, 2]);
        const f = (x: Array): Array => np.sum(np.square(nn.dotProductAttention(x, ks, ks, { isCausal: true })));
        const g = f32(grad(f)(qs));
        const base = f32(qs);
        const i = seed % base.length;
        const eps = 1e-2;
        const shifted = (d: number): number => {
          const c = base.slice();
          c[i] += d;
          return f(np.array(c, 'float32').reshape(qs.shape)).item() as number;
        };
        expect(Math.abs(g[i] - (shifted(eps) - shifted(-eps)) / (2 * eps))).toBeLessThan(2e-2);
      }),
      { numRuns: 8 },
    );
  });

  it("implementation 'fused' (the primitives' reference kernels here) matches the naive loop, GQA, causal or not", () => {
    close(f32(nn.dotProductAttention(q, k, v, { implementation: 'fused' })), naive(q, k, v), 1e-5);
    close(f32(nn.dotProductAttention(q, k, v, { isCausal: true, implementation: 'fused' })), naive(q, k, v, { causal: true }), 1e-5);
    const loss = (impl: 'fused' | 'xla') => (a: Array, b: Array, c: Array) => np.sum(np.square(nn.dotProductAttention(a, b, c, { isCausal: true, implementation: impl })));
    const gf = grad(loss('fused'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
    const gx = grad(loss('xla'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
    gf.forEach((g, i) => close(f32(g), f32(gx[i]), 1e-5));
  });

  it("law: the fused implementation's gradient (every operand, with or without a mask) matches central differences", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 2 }), fc.boolean(), fc.boolean(), (seed, arg, causal, masked) => {
        const xs = [random.normal(random.key(seed), [1, 3, 2, 3]), random.normal(random.key(seed + 1), [1, 4, 1, 3]), random.normal(random.key(seed + 2), [1, 4, 1, 3])];
        // (with a mask: row 1 sees no key, the others some)
        const mask = masked ? np.array([[true, false, true, true], [false, false, false, false], [false, true, true, false]], 'bool') : undefined;
        const f = (...a: Array[]): Array => np.sum(np.square(nn.dotProductAttention(a[0], a[1], a[2], { isCausal: causal, mask, implementation: 'fused' })));
        const g = f32((grad(f, { argnums: [0, 1, 2] })(...xs) as Array[])[arg]);
        const base = f32(xs[arg]);
        const i = seed % base.length;
        const eps = 1e-2;
        const shifted = (d: number): number => {
          const c = base.slice();
          c[i] += d;
          const ys = xs.slice();
          ys[arg] = np.array(c, 'float32').reshape(xs[arg].shape);
          return f(...ys).item() as number;
        };
        expect(Math.abs(g[i] - (shifted(eps) - shifted(-eps)) / (2 * eps))).toBeLessThan(2e-2);
      }),
      { numRuns: 12 },
    );
  });

  it("implementation 'fused' with a mask (reference kernels): rows that see no key get the uniform softmax over all keys, as the composite", () => {
    // row t: keys s with (t + s) % 3 !== 1; rows 1 and 3 see none (with isCausal row 0 sees none too)
    const rows = [0, 1, 2, 3, 4].map((t) => [0, 1, 2, 3, 4].map((s) => t !== 1 && t !== 3 && (t + s) % 3 !== 1));
    const mask = np.array(rows, 'bool');
    for (const isCausal of [false, true]) {
      const fused = f32(nn.dotProductAttention(q, k, v, { mask, isCausal, implementation: 'fused' }));
      close(fused, f32(nn.dotProductAttention(q, k, v, { mask, isCausal, implementation: 'xla' })), 1e-5);
      // row 1 (batch 0, head 0) is the mean of value's head 0 over all keys
      const vd = f32(v);
      for (let h = 0; h < 3; h++) expect(fused[(1 * 4 + 0) * 3 + h]).toBeCloseTo([0, 1, 2, 3, 4].reduce((a, s) => a + vd[(s * 2 + 0) * 3 + h], 0) / 5, 5);
      const loss = (impl: 'fused' | 'xla') => (a: Array, b: Array, c: Array) => np.sum(np.square(nn.dotProductAttention(a, b, c, { mask, isCausal, implementation: impl })));
      const gf = grad(loss('fused'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
      const gx = grad(loss('xla'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
      gf.forEach((g, i) => close(f32(g), f32(gx[i]), 1e-5));
    }
  });

  it('names the bad operand', () => {
    expect(() => nn.dotProductAttention(q, np.zeros([2, 5, 3, 3]), np.zeros([2, 5, 3, 3]))).toThrow('dot_product_attention: key [2,5,3,3] does not fit query [2,5,4,3]: need the same batch and head dim, and query heads (4) a multiple of key heads (3)');
    expect(() => nn.dotProductAttention(np.zeros([5, 4, 3]), k, v)).toThrow('must be rank 4');
    expect(() => nn.dotProductAttention(q, k, v, { causal: true } as never)).toThrow('dot_product_attention: unknown option "causal"; valid options: bias, mask, scale, isCausal, implementation');
    expect(() => nn.rmsNorm(q, { eps: 1 } as never)).toThrow('rms_norm: unknown option "eps"');
  });
});

describe('nn.rmsNorm', () => {
  it('x / sqrt(mean(x^2) + eps) * scale, in x dtype', () => {
    const x = np.array([[1, 2, 3, 4]], 'float32');
    const r = Math.sqrt((1 + 4 + 9 + 16) / 4 + 1e-6);
    close(f32(nn.rmsNorm(x, { scale: np.array([1, 1, 2, 2], 'float32') })), [1 / r, 2 / r, 6 / r, 8 / r], 1e-6);
    expect(nn.rmsNorm(np.astype(x, 'bfloat16')).dtype).toBe('bfloat16');
  });
});
