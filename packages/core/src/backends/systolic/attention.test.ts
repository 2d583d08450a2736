// The fused attention (nn.dotProductAttention implementation 'fused') on the systolic backend's
// wasm kernels: equal to the composite ('xla') within bf16 tolerance, forward and gradients,
// over random shapes (odd head dims, T != S, grouped-query heads, both dtypes); against a plain-JS
// reference with the MXU's roundings; vmap and jit; 1 vs 2 threads; bad inputs; the cost ledger.
// With a boolean mask (random, segment, rows that see no key, broadcast over heads or batch) the
// same laws against the composite, vmap over a batched mask, and bad masks. At the end, a plain-JS
// reference that rounds where the kernels say (bf16 operands, bf16 logits and dP with bf16
// inputs, f32 sums in the kernels' order) held bit for bit against forward and backward.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Array, defaultMatmulPrecision, grad, jit, jvp, makeJaxpr, nn, np, random, vmap } from '../../index';
import type { DType } from '../../dtype';
import { onBackend } from '../../../test/backend';
import { canRunDroppedEngines, runDroppedEnginesScript } from '../../../test/droppedEngines';
import { setNumThreads } from '../../threads';
import { attentionBwdSystolic, attentionFwdSystolic, attentionScratchBytes, attentionStats, attentionStorageFits, attentionTesting } from './attention';
import { type AttentionKernels, QB, attentionModule } from './attentionModule';
import { wasmFeatures } from '../../wasm/features';
import { holdWorkers } from '../../wasm/workerPool';
import { WA } from '../../wasm/webassemblyTypes';
import { type ArenaHost, getBackend, registerBackend, withBackend } from '../../backend';
import { MASKED_LOGIT, attention, attentionBwdP, attentionFwdP, attentionOptions, attentionP } from '../../lax/attention';
import { evalPrimitive, evalPrimitiveIntoAll } from '../../trace';
import { fromStorage, toStorage } from '../../storage';
import { configure, withLedger } from './index';
import { SystolicBackend } from './backend';

onBackend('systolic');

/** Whether the systolic backend has an arena host here (a shared GEMM memory needs WebAssembly threads): tests of in-place operands run only then, and show as skipped elsewhere. */
const sharedMemory = wasmFeatures().threads;
/** The systolic backend's arena host (call inside a test that runs only with `sharedMemory`). */
function arenaHostOf(): ArenaHost & { holds(v: ArrayBufferView): boolean } {
  const host = getBackend().arenaHost?.() ?? null;
  if (host === null || host.holds === undefined) throw new Error('the systolic backend has no arena host that holds views, though this runtime has shared memory');
  return host as ArenaHost & { holds(v: ArrayBufferView): boolean };
}

const f32 = (a: Array): Float32Array => Float32Array.from(np.astype(a, 'float32').dataSync() as Float32Array);
const ceil = (x: number, m: number): number => Math.ceil(x / m) * m;
const maxAbs = (a: Float32Array): number => a.reduce((m, x) => Math.max(m, Math.abs(x)), 0);

/** |a - b| <= tol * max(1, max|b|) elementwise. */
function close(a: Array, b: Array, tol: number, what: string): void {
  expect(a.shape).toEqual(b.shape);
  const [x, y] = [f32(a), f32(b)];
  const lim = tol * Math.max(1, maxAbs(y));
  let worst = 0;
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
  expect(worst, `${what}: max |diff| ${worst} > ${lim}`).toBeLessThanOrEqual(lim);
}

const bf16Scratch = new Float32Array(1);
const bf16Bits = new Uint32Array(bf16Scratch.buffer);
/** x rounded to bf16, nearest even (finite values). */
const bf16 = (x: number): number => {
  bf16Scratch[0] = x;
  const u = bf16Bits[0];
  bf16Bits[0] = (u + 0x7fff + ((u >>> 16) & 1)) & 0xffff0000;
  return bf16Scratch[0];
};

/** Plain-JS forward with the MXU's roundings: q, k, v and P rounded to bf16, f32 softmax (float64 sums). */
function naiveMxu(q: Array, k: Array, v: Array, causal: boolean, scale: number): Float32Array {
  const [B, T, N, H] = q.shape;
  const [, S, K] = k.shape;
  const [qd, kd, vd] = [q, k, v].map((a) => f32(a).map(bf16));
  const out = new Float32Array(B * T * N * H);
  for (let b = 0; b < B; b++)
    for (let t = 0; t < T; t++)
      for (let n = 0; n < N; n++) {
        const kh = Math.floor(n / (N / K));
        const l: number[] = [];
        for (let s = 0; s < S; s++) {
          let d = 0;
          for (let h = 0; h < H; h++) d += qd[((b * T + t) * N + n) * H + h] * kd[((b * S + s) * K + kh) * H + h];
          l.push(causal && s > t ? -Infinity : Math.fround(d) * scale);
        }
        const m = Math.max(...l);
        const e = l.map((x) => Math.exp(x - m));
        const z = e.reduce((x, y) => x + y, 0);
        for (let h = 0; h < H; h++) {
          let acc = 0;
          for (let s = 0; s < S; s++) acc += bf16(e[s] / z) * vd[((b * S + s) * K + kh) * H + h];
          out[((b * T + t) * N + n) * H + h] = acc;
        }
      }
  return out;
}

interface Case {
  b: number;
  t: number;
  s: number;
  k: number;
  g: number;
  h: number;
  causal: boolean;
  dtype: DType;
  seed: number;
}

const caseArb: fc.Arbitrary<Case> = fc.record({
  b: fc.integer({ min: 1, max: 2 }),
  t: fc.integer({ min: 1, max: 13 }),
  s: fc.integer({ min: 1, max: 13 }),
  k: fc.integer({ min: 1, max: 2 }),
  g: fc.integer({ min: 1, max: 3 }),
  h: fc.integer({ min: 1, max: 11 }),
  causal: fc.boolean(),
  dtype: fc.constantFrom<DType>('float32', 'bfloat16'),
  seed: fc.integer({ min: 0, max: 1 << 20 }),
});

function operands(c: Case): [Array, Array, Array, Array] {
  const mk = (i: number, shape: number[]) => np.astype(random.normal(random.key(4 * c.seed + i), shape), c.dtype);
  return [mk(0, [c.b, c.t, c.k * c.g, c.h]), mk(1, [c.b, c.s, c.k, c.h]), mk(2, [c.b, c.s, c.k, c.h]), mk(3, [c.b, c.t, c.k * c.g, c.h])];
}

/** Case c's operands (w is dOut), with a random mask when `masked`, the forward's inputs and the params that keep P (the kept-P laws). */
function keptCase(c: Case, masked: boolean) {
  const [q, k, v, w] = operands(c);
  const mask = masked ? maskOf([c.b, 1, c.t, c.s], c.seed, 0.5) : undefined;
  const kept = { scale: 1 / Math.sqrt(c.h), isCausal: c.causal, saveProbs: true };
  return { q, k, v, w, mask, kept, xs: mask ? [q, k, v, mask] : [q, k, v] };
}

/** Case c's operands (w is dOut), params, and the backend's forward [out, lse] and backward [dq, dk, dv]: what direct calls are held against. */
function evaluated(c: Case) {
  const params = { scale: 1 / Math.sqrt(c.h), isCausal: c.causal };
  const [q, k, v, w] = operands(c);
  const [out, lse] = evalPrimitive(attentionFwdP, [q, k, v], params);
  const grads = evalPrimitive(attentionBwdP, [q, k, v, lse, w], params);
  return { params, q, k, v, w, out, lse, grads };
}

/** Expects a forward's [out, lse] and a backward's [dq, dk, dv] (arrays, or float32 storage) to have `want`'s bits. */
function expectBits(fwd: readonly (Array | ArrayLike<number>)[], bwd: readonly (Array | ArrayLike<number>)[], want: { out: Array; lse: Array; grads: Array[] }, where = ''): void {
  const bits = (x: Array | ArrayLike<number>): number[] => [...new Uint32Array((ArrayBuffer.isView(x) ? (x as Float32Array) : f32(x as Array)).slice().buffer)];
  expect(fwd.length, `forward results${where}`).toBeGreaterThanOrEqual(2);
  expect(bwd, `backward results${where}`).toHaveLength(3);
  expect(bits(fwd[0]), `out${where}`).toEqual(bits(want.out));
  expect(bits(fwd[1]), `lse${where}`).toEqual(bits(want.lse));
  bwd.forEach((g, i) => expect(bits(g), `d${'qkv'[i]}${where}`).toEqual(bits(want.grads[i])));
}

/** `f()` with core's thread count set to n, then back to the default. */
function withThreads<T>(n: number, f: () => T): T {
  setNumThreads(n);
  try {
    return f();
  } finally {
    setNumThreads(null);
  }
}

/** Runs `f` with the attention pool's test hooks set as given, restoring their defaults after. */
function withHooks<T>(hooks: Partial<typeof attentionTesting>, f: () => T): T {
  const was = { ...attentionTesting };
  Object.assign(attentionTesting, hooks);
  try {
    return f();
  } finally {
    Object.assign(attentionTesting, was);
  }
}

/** `f()` with P kept for the backward up to `limit` elements (B N T S) per call. */
function withProbsLimit<T>(limit: number, f: () => T): T {
  const was = attentionOptions.saveProbsMaxElements;
  attentionOptions.saveProbsMaxElements = limit;
  try {
    return f();
  } finally {
    attentionOptions.saveProbsMaxElements = was;
  }
}

/** `f()` with the jvp keeping P for the backward (`kept`, the default for these sizes) or recomputing it (the O(T)-memory residual). */
function withProbsKept<T>(kept: boolean, f: () => T): T {
  return withProbsLimit(kept ? 2 ** 24 : 0, f);
}

/** The fused attention's output and the gradients of sum(out^2) on `n` threads, as plain numbers. */
const fusedAndGrads = (q: Array, k: Array, v: Array) => {
  const gl = (a: Array, b: Array, d: Array) => np.sum(np.square(attend('fused', true)(a, b, d)));
  return (n: number) => withThreads(n, () => [attend('fused', true)(q, k, v), ...(grad(gl, { argnums: [0, 1, 2] })(q, k, v) as Array[])].map((x) => [...f32(x)]));
};

const attend = (impl: 'fused' | 'xla', causal: boolean) => (q: Array, k: Array, v: Array): Array => nn.dotProductAttention(q, k, v, { isCausal: causal, implementation: impl });

describe('fused attention on the systolic backend', () => {
  it('is the default there (one fused primitive in the jaxpr) and matches the composite on the reference GPT shape', () => {
    const c: Case = { b: 2, t: 128, s: 128, k: 4, g: 1, h: 32, causal: true, dtype: 'float32', seed: 7 };
    const [q, k, v] = operands(c);
    const text = String(makeJaxpr((a: Array, b: Array, d: Array) => nn.dotProductAttention(a, b, d, { isCausal: true }))(q, k, v));
    expect(text).toContain('dot_product_attention[');
    expect(text).not.toContain('dot_general');
    close(attend('fused', true)(q, k, v), attend('xla', true)(q, k, v), 1e-2, 'forward');
  });

  it('law: forward and gradients equal the composite within bf16 tolerance (odd dims, T != S, GQA, both dtypes; P kept or recomputed)', () => {
    fc.assert(
      fc.property(caseArb, fc.boolean(), (c, kept) => withProbsKept(kept, () => {
        const [q, k, v, w] = operands(c);
        const tol = c.dtype === 'bfloat16' ? 5e-2 : 2e-2;
        close(attend('fused', c.causal)(q, k, v), attend('xla', c.causal)(q, k, v), tol, `forward ${JSON.stringify(c)}`);
        const loss = (impl: 'fused' | 'xla') => (a: Array, b: Array, d: Array) => np.sum(np.multiply(np.astype(attend(impl, c.causal)(a, b, d), 'float32'), np.astype(w, 'float32')));
        const gf = grad(loss('fused'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
        const gc = grad(loss('xla'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
        gf.forEach((g, i) => close(g, gc[i], tol * 2, `d${'qkv'[i]} ${JSON.stringify(c)}, P kept: ${kept}`));
      })),
      { numRuns: 30 },
    );
  });

  it('law: the kept P is the softmax (the reference kernel\'s within bf16 operand rounding; exactly 0 at hidden keys), and the backward reads it: gradients from it equal the recomputed ones, and doubling it doubles dV exactly', () => {
    fc.assert(
      fc.property(caseArb, fc.boolean(), (c, masked) => {
        const { q, k, v, w, mask, kept, xs } = keptCase(c, masked);
        const [, lse, probs] = evalPrimitive(attentionFwdP, xs, kept);
        expect(probs.shape).toEqual([c.b, c.k * c.g, c.t, c.s]);
        const want = withBackend('reference', () => evalPrimitive(attentionFwdP, xs, kept)[2]);
        close(probs, want, 2e-2, `probs ${JSON.stringify(c)}`);
        const [p, pw] = [f32(probs), f32(want)];
        for (let i = 0; i < p.length; i++) if (pw[i] === 0) expect(p[i], `probs[${i}] of a hidden key`).toBe(0);
        const wm = mask ? [mask] : [];
        const fromP = evalPrimitive(attentionBwdP, [q, k, v, lse, w, ...wm, probs], kept).map((x) => [...f32(x)]);
        const fromLse = evalPrimitive(attentionBwdP, [q, k, v, lse, w, ...wm], { scale: kept.scale, isCausal: c.causal }).map((x) => [...f32(x)]);
        // (P from exp(s - lse) and the forward's e / sum may differ in an ulp, which can flip a bf16
        // rounding of P or dS: a few 2^-8 of one term)
        const tol = c.dtype === 'bfloat16' ? 3e-2 : 1e-2;
        fromP.forEach((g, i) => {
          const lim = tol * Math.max(1, g.reduce((m, x) => Math.max(m, Math.abs(x)), 0));
          g.forEach((x, j) => expect(Math.abs(x - fromLse[i][j]), `d${'qkv'[i]}[${j}] ${JSON.stringify(c)}`).toBeLessThanOrEqual(lim));
        });
        const twice = evalPrimitive(attentionBwdP, [q, k, v, lse, w, ...wm, np.multiply(probs, 2)], kept);
        expect([...f32(twice[2])]).toEqual(fromP[2].map((x) => 2 * x));
      }),
      { numRuns: 25 },
    );
  });

  it('law: with probsVisibleOnly (the jvp\'s residual) the forward\'s out, lse and P at every key it writes are those with zeros at hidden keys; the backward from a P with NaN at the keys it may leave unwritten (systolic: causal blocks\' keys past their last visible key\'s 8-key panel, unless a row of the block sees no key; reference: every hidden key of a row that sees one, mask-hidden keys included), and the systolic backward from the forward\'s own P, are bit for bit the one from the zeroed P', () => {
    fc.assert(
      fc.property(caseArb, fc.boolean(), (c, masked) => {
        const { q, k, v, w, mask, kept, xs } = keptCase(c, masked);
        const vis = { ...kept, probsVisibleOnly: true };
        // (visible-only first: its unwritten keys keep what the arena held, not the zeros the full call would leave there)
        const got = evalPrimitive(attentionFwdP, xs, vis);
        const full = evalPrimitive(attentionFwdP, xs, kept);
        expect([...f32(got[0])]).toEqual([...f32(full[0])]);
        expect([...f32(got[1])]).toEqual([...f32(full[1])]);
        // key s of row t (batch row b): visible, a row that sees none, and written by each backend's forward
        const [T, S, N] = [c.t, c.s, c.k * c.g];
        const m = mask ? Uint8Array.from(mask.dataSync() as ArrayLike<number>) : undefined;
        const visible = (b: number, t: number, s: number): boolean => (!c.causal || s <= t) && (m === undefined || m[(b * T + t) * S + s] !== 0);
        const none = (b: number, t: number): boolean => {
          for (let s = 0; s < S; s++) if (visible(b, t, s)) return false;
          return true;
        };
        // (systolic: a causal block of 4 rows is written up to its last visible key's 8-key panel, or to S when a row of it sees no key)
        const panelEnd = (t: number): number => Math.min(Math.ceil(Math.min(S, (t & ~3) + 4) / 8) * 8, S);
        const blockHasNone = (b: number, t: number): boolean => {
          for (let r = t & ~3; r < Math.min((t & ~3) + 4, T); r++) if (none(b, r)) return true;
          return false;
        };
        const written = {
          systolic: (b: number, t: number, s: number): boolean => !c.causal || s < panelEnd(t) || (masked && blockHasNone(b, t)),
          reference: (b: number, t: number, s: number): boolean => none(b, t) || visible(b, t, s),
        };
        const at = (i: number): [number, number, number] => [Math.floor(i / (N * T * S)), Math.floor(i / S) % T, i % S];
        const [p, pf] = [f32(got[2]), f32(full[2])];
        for (let i = 0; i < p.length; i++) if (written.systolic(...at(i))) expect(p[i], `probs[${i}] ${JSON.stringify(c)}`).toBe(pf[i]);
        const wm = mask ? [mask] : [];
        const bwd = (pr: Array): number[][] => evalPrimitive(attentionBwdP, [q, k, v, full[1], w, ...wm, pr], vis).map((x) => [...f32(x)]);
        for (const backend of ['systolic', 'reference'] as const) {
          const poisoned = np.reshape(np.array([...pf].map((x, i) => (written[backend](...at(i)) ? x : Number.NaN)), 'float32'), full[2].shape);
          const [fromFull, fromVis] = withBackend(backend, () => [full[2], poisoned].map(bwd));
          expect(fromVis, `${backend} ${JSON.stringify(c)}`).toEqual(fromFull);
          // (the forward's own P, whatever it left at the keys it does not write)
          if (backend === 'systolic') expect(bwd(got[2]), `systolic from the forward's own P ${JSON.stringify(c)}`).toEqual(fromFull);
        }
      }),
      { numRuns: 40 },
    );
  });

  it('an empty head dimension (H = 0, T and S > 0): the scores are 0, so each row\'s softmax is uniform over its visible keys (lse = log of their count, probs 1 / count), as on the reference backend; S = 0: lse -inf', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 11 }), fc.integer({ min: 0, max: 11 }), fc.integer({ min: 1, max: 3 }), fc.boolean(), fc.boolean(), fc.constantFrom<DType>('float32', 'bfloat16'), fc.integer({ min: 0, max: 1 << 20 }), (b, t, s, n, causal, masked, dtype, seed) => {
        const mk = (i: number, len: number) => np.astype(random.normal(random.key(seed + i), [b, len, n, 0]), dtype);
        const [q, k, v] = [mk(0, t), mk(1, s), mk(2, s)];
        const mask = masked ? maskOf([b, 1, t, s], seed, 0.5) : undefined;
        const params = { scale: 0.5, isCausal: causal, saveProbs: true };
        const xs = mask ? [q, k, v, mask] : [q, k, v];
        const got = evalPrimitive(attentionFwdP, xs, params).map(f32);
        const want = withBackend('reference', () => evalPrimitive(attentionFwdP, xs, params)).map(f32);
        // (2 threads: the same bits)
        expect(withThreads(2, () => evalPrimitive(attentionFwdP, xs, params).map((x) => [...f32(x)]))).toEqual(got.map((x) => [...x]));
        expect(got[0].length).toBe(0);
        // (row t sees keys 0..t under causality: log(t + 1); a row that sees none is uniform over all S)
        expect([...got[1]], `lse ${JSON.stringify({ b, t, s, n, causal, masked })}`).toEqual([...want[1]]);
        expect(got[2].length).toBe(want[2].length);
        got[2].forEach((x, i) => expect(Math.abs(x - want[2][i]), `probs[${i}]`).toBeLessThanOrEqual(2 ** -24 * want[2][i]));
      }),
      { numRuns: 40 },
    );
    // a causal head with T = S = 4, no mask: row t sees t + 1 keys, lse log 1, log 2, log 3, log 4
    const z = (len: number) => np.zeros([1, len, 1, 0]);
    const [, lse] = evalPrimitive(attentionFwdP, [z(4), z(4), z(4)], { scale: 1, isCausal: true });
    expect([...f32(lse)]).toEqual([1, 2, 3, 4].map((c) => Math.fround(Math.log(c))));
  });

  it('the inference primitive ignores saveProbs (it has no probs output): the same bits as without it (told to keep P, its kernel writes past the memory: out of bounds)', () => {
    const c: Case = { b: 2, t: 9, s: 9, k: 2, g: 1, h: 8, causal: true, dtype: 'float32', seed: 11 };
    const [q, k, v] = operands(c);
    const params = { scale: 1 / Math.sqrt(c.h), isCausal: true };
    const [want] = evalPrimitive(attentionP, [q, k, v], params);
    const [got] = evalPrimitive(attentionP, [q, k, v], { ...params, saveProbs: true });
    expect([...new Uint32Array(f32(got).buffer)]).toEqual([...new Uint32Array(f32(want).buffer)]);
    // (a forward told to keep P with no storage for it would write P over whatever follows its output)
    const [again] = evalPrimitive(attentionP, [q, k, v], params);
    expect([...new Uint32Array(f32(again).buffer)]).toEqual([...new Uint32Array(f32(want).buffer)]);
  });
  it('bad residuals and params: the backward names probs or lse and the shape it needs; probsVisibleOnly needs saveProbs', () => {
    const c: Case = { b: 2, t: 4, s: 5, k: 1, g: 2, h: 3, causal: false, dtype: 'float32', seed: 1 };
    const [q, k, v, w] = operands(c);
    const [, lse, probs] = evalPrimitive(attentionFwdP, [q, k, v], { scale: 1, isCausal: false, saveProbs: true });
    const kept = { scale: 1, isCausal: false, saveProbs: true };
    expect(() => evalPrimitive(attentionBwdP, [q, k, v, lse, w, lse], kept)).toThrow('dot_product_attention_bwd: probs must be float32 [2,2,4,5]; got float32[2,2,4]');
    expect(() => evalPrimitive(attentionBwdP, [q, k, v, lse, w], kept)).toThrow('dot_product_attention_bwd: expected 6 or 7 operands (query, key, value, lse, dOut[, mask], probs); got 5');
    expect(() => evalPrimitive(attentionBwdP, [q, k, v, probs, w], { scale: 1, isCausal: false })).toThrow('dot_product_attention_bwd: lse must be float32 [2,2,4]; got float32[2,2,4,5]');
    expect(() => evalPrimitive(attentionBwdP, [q, k, v, lse, w, probs, probs, probs], kept)).toThrow('dot_product_attention_bwd: expected 6 or 7 operands (query, key, value, lse, dOut[, mask], probs); got 8');
    expect(() => evalPrimitive(attentionFwdP, [q, k, v], { scale: 1, isCausal: false, saveProbs: 1 as never })).toThrow('dot_product_attention_fwd: saveProbs must be a boolean when given; got 1');
    for (const saveProbs of [undefined, false]) {
      const vis = { scale: 1, isCausal: true, probsVisibleOnly: true, ...(saveProbs === undefined ? {} : { saveProbs }) };
      const want = (op: string): string => `${op}: probsVisibleOnly: true needs saveProbs: true (it says which keys of the kept probs a forward writes); got saveProbs ${String(saveProbs)}`;
      expect(() => evalPrimitive(attentionFwdP, [q, k, v], vis)).toThrow(want('dot_product_attention_fwd'));
      expect(() => evalPrimitive(attentionP, [q, k, v], vis)).toThrow(want('dot_product_attention'));
      expect(() => evalPrimitive(attentionBwdP, [q, k, v, lse, w], vis)).toThrow(want('dot_product_attention_bwd'));
    }
    expect(() => evalPrimitive(attentionFwdP, [q, k, v], { scale: 1, isCausal: false, saveProbs: true, probsVisibleOnly: 'yes' as never })).toThrow('dot_product_attention_fwd: probsVisibleOnly must be a boolean when given; got yes');
  });

  it('law: forward equals a plain-JS reference with the MXU roundings', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const [q, k, v] = operands({ ...c, dtype: 'float32' });
        const got = f32(attend('fused', c.causal)(q, k, v));
        const want = naiveMxu(q, k, v, c.causal, 1 / Math.sqrt(c.h));
        const lim = 2e-2 * Math.max(1, maxAbs(want)); // an exp ulp can flip one P to its bf16 neighbour (2^-8 relative)
        got.forEach((x, i) => expect(Math.abs(x - want[i])).toBeLessThanOrEqual(lim));
      }),
      { numRuns: 15 },
    );
  });

  it('causal: a row sees exactly its keys 0..t for every T mod 8 (later keys changed: earlier rows and their dq bit-identical, later rows not)', () => {
    for (let T = 2; T <= 19; T++) {
      const c: Case = { b: 1, t: T, s: T, k: 1, g: 2, h: 5, causal: true, dtype: 'float32', seed: 40 + T };
      const [q, k, v, w] = operands(c);
      const split = Math.floor(T / 2);
      const later = np.less(np.arange(T).reshape([1, T, 1, 1]), split);
      const big = (x: Array) => np.where(later, x, np.multiply(x, 50));
      const loss = (b: Array, d: Array) => (a: Array) => np.sum(np.multiply(attend('fused', true)(a, b, d), w));
      const [o1, o2] = [attend('fused', true)(q, k, v), attend('fused', true)(q, big(k), big(v))];
      const [g1, g2] = [grad(loss(k, v))(q), grad(loss(big(k), big(v)))(q)];
      const rows = 2 * 5 * split; // elements of rows t < split
      for (const [a, b, what] of [[o1, o2, 'out'], [g1, g2, 'dq']] as const) {
        const [x, y] = [f32(a), f32(b)];
        expect([...x.subarray(0, rows)], `${what} rows < ${split}, T = ${T}`).toEqual([...y.subarray(0, rows)]);
        expect([...x.subarray(rows)], `${what} rows >= ${split}, T = ${T}`).not.toEqual([...y.subarray(rows)]);
      }
    }
  });

  it.each([true, false])('vmap equals a loop; jit equals eager (P kept: %s)', (kept) => withProbsKept(kept, () => {
    const c: Case = { b: 1, t: 6, s: 6, k: 1, g: 2, h: 5, causal: true, dtype: 'float32', seed: 3 };
    const xs = [0, 1, 2].map((i) => operands({ ...c, seed: 10 + i }));
    const stack = (j: number) => np.stack(xs.map((x) => x[j]));
    const f = attend('fused', true);
    const batched = vmap(f)(stack(0), stack(1), stack(2));
    xs.forEach((x, i) => expect([...f32(batched.get(i))]).toEqual([...f32(f(x[0], x[1], x[2]))]));
    const gl = (a: Array, b: Array, d: Array) => np.sum(np.square(f(a, b, d)));
    const gv = vmap(grad(gl))(stack(0), stack(1), stack(2));
    xs.forEach((x, i) => expect([...f32(gv.get(i))]).toEqual([...f32(grad(gl)(x[0], x[1], x[2]))]));
    const [q, k, v] = xs[0];
    expect([...f32(jit(f)(q, k, v))]).toEqual([...f32(f(q, k, v))]);
    expect([...f32(jit(grad(gl))(q, k, v))]).toEqual([...f32(grad(gl)(q, k, v))]);
  }));

  it('P is kept up to saveProbsMaxElements elements (B N T S) inclusive, recomputed past it', () => {
    const c: Case = { b: 2, t: 5, s: 5, k: 1, g: 3, h: 4, causal: true, dtype: 'float32', seed: 4 };
    const [q, k, v] = operands(c);
    const el = 2 * 3 * 5 * 5; // B N T S
    const gl = (a: Array, b: Array, d: Array) => np.sum(np.square(attend('fused', true)(a, b, d)));
    const kept = (limit: number): boolean => withProbsLimit(limit, () => /save_?[Pp]robs=True|saveProbs: ?true/.test(String(makeJaxpr(grad(gl))(q, k, v))));
    expect(kept(el)).toBe(true);
    expect(kept(el - 1)).toBe(false);
  });

  it('1 and 2 threads give bit-identical results, and the worker thread computes items', () => {
    const c: Case = { b: 3, t: 37, s: 37, k: 2, g: 2, h: 12, causal: true, dtype: 'float32', seed: 5 };
    const [q, k, v] = operands(c);
    const run = fusedAndGrads(q, k, v);
    const one = run(1);
    expect(run(2)).toEqual(one);
    withProbsKept(false, () => expect(run(2)).toEqual(run(1)));
    if (typeof SharedArrayBuffer !== 'undefined') {
      // Which thread takes an item is up to the scheduler; with the calling thread taking none,
      // the worker must compute every item of every pooled job, and the results must not change.
      const before = attentionStats();
      const two = withHooks({ callerTakesItems: false }, () => run(2));
      const after = attentionStats();
      expect(two).toEqual(one);
      expect(after.pooled - before.pooled).toBeGreaterThanOrEqual(2);
      expect(after.workerItems).toBeGreaterThan(before.workerItems);
    }
  });

  it('a worker that wakes after the calling thread computed every item is not waited for, and joins the next job', () => {
    if (typeof SharedArrayBuffer === 'undefined') return;
    const c: Case = { b: 2, t: 19, s: 19, k: 2, g: 1, h: 8, causal: true, dtype: 'float32', seed: 7 };
    const [q, k, v] = operands(c);
    const run = fusedAndGrads(q, k, v);
    const one = run(1);
    run(2); // the worker exists (and has the module)
    // Held workers cannot join: calls that waited for them would never return.
    const before = attentionStats();
    holdWorkers(true); // (core's hold: woken workers wait before they look at a job)
    let held: ReturnType<typeof run>;
    try {
      held = run(2);
    } finally {
      holdWorkers(false);
    }
    const mid = attentionStats();
    expect(held).toEqual(one);
    expect(mid.pooled - before.pooled).toBeGreaterThanOrEqual(2);
    expect(mid.workerItems).toBe(before.workerItems);
    // Released, the worker leaves the closed jobs alone and computes the next one's items.
    const after = withHooks({ callerTakesItems: false }, () => run(2));
    expect(after).toEqual(one);
    expect(attentionStats().workerItems).toBeGreaterThan(mid.workerItems);
  });

  it('a worker that fails to build its module takes and counts the items: the call raises (not waits forever), and the next call works', () => {
    if (typeof SharedArrayBuffer === 'undefined') return;
    const c: Case = { b: 2, t: 23, s: 23, k: 2, g: 1, h: 8, causal: false, dtype: 'float32', seed: 9 };
    const [q, k, v] = operands(c);
    const run = (n: number) => withThreads(n, () => [...f32(attend('fused', true)(q, k, v))]);
    const one = run(1);
    // The caller takes no items, so only the failing worker can count them (it used to take none).
    withHooks({ callerTakesItems: false, breakModule: true }, () => expect(() => run(2)).toThrow(/dot_product_attention \(systolic\): a worker thread failed/));
    withHooks({ callerTakesItems: false }, () => expect(run(2)).toEqual(one));
  });

  it('falls back to the composite where the fused kernel does not apply; explicit fused rejects it', () => {
    const [q, k, v] = operands({ b: 1, t: 4, s: 4, k: 1, g: 1, h: 3, causal: true, dtype: 'float32', seed: 1 });
    const mask = np.tri(4, 4, 0, 'bool');
    const jaxpr = (f: (a: Array) => Array) => String(makeJaxpr(f)(q));
    expect(jaxpr((a) => nn.dotProductAttention(a, k, v, { mask }))).toContain('dot_product_attention[');
    expect(jaxpr((a) => nn.dotProductAttention(a, k, v, { bias: np.zeros([4, 4]) }))).not.toContain('dot_product_attention');
    expect(jaxpr((a) => nn.dotProductAttention(np.astype(a, 'float16'), np.astype(k, 'float16'), np.astype(v, 'float16')))).not.toContain('dot_product_attention');
    close(nn.dotProductAttention(q, k, v, { mask }), attend('fused', true)(q, k, v), 1e-2, 'mask = causal');
    // a default matmul precision above one bf16 pass keeps the composite (its dots follow it)
    expect(defaultMatmulPrecision('highest', () => jaxpr((a) => nn.dotProductAttention(a, k, v, { isCausal: true })))).not.toContain('dot_product_attention');
    expect(defaultMatmulPrecision('default', () => jaxpr((a) => nn.dotProductAttention(a, k, v, { isCausal: true })))).toContain('dot_product_attention[');
    expect(() => nn.dotProductAttention(q, k, v, { bias: np.zeros([4, 4]), implementation: 'fused' })).toThrow("implementation 'fused' does not support a bias");
    expect(() => nn.dotProductAttention(q, np.astype(k, 'bfloat16'), v, { implementation: 'fused' })).toThrow("implementation 'fused' does not support dtypes float32, bfloat16, float32 (need one of float32, bfloat16 for all three)");
    expect(() => nn.dotProductAttention(q, k, v, { implementation: 'cudnn' as never })).toThrow('dot_product_attention: unknown implementation "cudnn"; valid: xla, fused or undefined');
    expect(() => nn.dotProductAttention(q, k, v, { scale: Number.NaN })).toThrow('dot_product_attention: scale must be a finite number; got NaN');
    expect(() => jvp((a: Array) => attend('fused', true)(a, k, v), [q], [q])).toThrow("dot_product_attention_lin: forward-mode differentiation (jvp, jacfwd) of the fused attention is not supported; use nn.dotProductAttention's implementation 'xla'");
  });
});

describe('fused attention into caller storage (Backend.executeIntoAll)', () => {
  const c: Case = { b: 2, t: 11, s: 11, k: 2, g: 2, h: 7, causal: true, dtype: 'float32', seed: 9 };
  const params = { scale: 1 / Math.sqrt(c.h), isCausal: true };
  const stale = (n: number): Float32Array => new Float32Array(n).fill(Number.NaN);

  it('writes every result into the given storage (stale contents overwritten), bit-identical to fresh results', () => {
    const [q, k, v, w] = operands(c);
    const [out, lse] = evalPrimitive(attentionFwdP, [q, k, v], params);
    const into = [stale(out.size), stale(lse.size)];
    const got = evalPrimitiveIntoAll(attentionFwdP, [q, k, v], params, into)!;
    got.forEach((g, i) => expect(toStorage(g)).toBe(into[i]));
    expect([...f32(got[0])]).toEqual([...f32(out)]);
    expect([...f32(got[1])]).toEqual([...f32(lse)]);
    const grads = evalPrimitive(attentionBwdP, [q, k, v, lse, w], params);
    const gInto = grads.map((g) => stale(g.size));
    const gGot = evalPrimitiveIntoAll(attentionBwdP, [q, k, v, lse, w], params, gInto)!;
    gGot.forEach((g, i) => {
      expect(toStorage(g)).toBe(gInto[i]);
      expect([...f32(g)]).toEqual([...f32(grads[i])]);
    });
  });

  it('with P kept: probs (hidden keys included) and the gradients from it overwrite stale storage, bit-identical to fresh results', () => {
    const [q, k, v, w] = operands(c);
    const kept = { ...params, saveProbs: true };
    const fresh = evalPrimitive(attentionFwdP, [q, k, v], kept);
    const into = fresh.map((x) => stale(x.size));
    const got = evalPrimitiveIntoAll(attentionFwdP, [q, k, v], kept, into)!;
    got.forEach((g, i) => {
      expect(toStorage(g)).toBe(into[i]);
      expect([...f32(g)]).toEqual([...f32(fresh[i])]);
    });
    const grads = evalPrimitive(attentionBwdP, [q, k, v, fresh[1], w, fresh[2]], kept);
    const gInto = grads.map((g) => stale(g.size));
    const gGot = evalPrimitiveIntoAll(attentionBwdP, [q, k, v, fresh[1], w, fresh[2]], kept, gInto)!;
    gGot.forEach((g, i) => expect([...f32(g)]).toEqual([...f32(grads[i])]));
  });

  it('declines storage of the wrong type (null: the caller runs it fresh) and rejects wrong lengths naming the primitive', () => {
    const [q, k, v] = operands(c);
    const n = q.size;
    const rows = c.b * c.k * c.g * c.t;
    expect(evalPrimitiveIntoAll(attentionFwdP, [q, k, v], params, [new Uint16Array(n), new Float32Array(rows)])).toBeNull();
    expect(() => evalPrimitiveIntoAll(attentionFwdP, [q, k, v], params, [new Float32Array(n)])).toThrow('evalPrimitiveIntoAll(dot_product_attention_fwd): the primitive has 2 results but 1 destinations were given');
    expect(() => evalPrimitiveIntoAll(attentionFwdP, [q, k, v], params, [new Float32Array(n), new Float32Array(rows - 1)])).toThrow(`evalPrimitiveIntoAll(dot_product_attention_fwd): result 1 has ${rows} elements (float32[${c.b},${c.k * c.g},${c.t}]) but its destination holds ${rows - 1}`);
  });

  it('the backend itself declines storage of the wrong length (its callers need not check it): nothing written, no truncated result', () => {
    const [q, k, v] = operands(c);
    const backend = getBackend();
    const avals = [q, k, v].map((a) => a.aval);
    const outAvals = attentionFwdP.abstractEval(avals, params);
    const bufs = [q, k, v].map((a) => a._bufferOn(backend));
    const [n, rows] = [q.size, c.b * c.k * c.g * c.t];
    for (const outs of [
      [new Float32Array(n - 1), new Float32Array(rows)],
      [new Float32Array(n), new Float32Array(rows + 1)],
      [new Float32Array(n + 7), new Float32Array(rows)],
    ]) {
      expect(attentionStorageFits(outAvals, outs)).toBe(false);
      expect(backend.executeIntoAll!(attentionFwdP, bufs, avals, params, outAvals, outs)).toBe(false);
      expect(outs.every((o) => o.every((x) => x === 0))).toBe(true);
    }
    expect(attentionStorageFits(outAvals, [new Float32Array(n), new Float32Array(rows)])).toBe(true);
  });
});

describe('fused attention in the backend\'s memory (operands and results read and written in place)', () => {
  const c: Case = { b: 2, t: 11, s: 11, k: 2, g: 2, h: 7, causal: true, dtype: 'float32', seed: 21 };

  it.runIf(sharedMemory)('operands and results in reserved regions of the arena host are used in place, bit-identical to copies; a result sharing bytes with an operand is copied', () => {
    const host = arenaHostOf();
    const want = evaluated(c);
    const { params, q, k, v, w, out, lse, grads } = want;
    const sizes = [q.size, k.size, v.size, w.size, lse.size, out.size, lse.size, q.size, k.size, v.size];
    const addr = host.reserve(4 * sizes.reduce((x, y) => x + ceil(y, 16), 0));
    try {
      let at = addr;
      const views = sizes.map((n) => {
        const x = new Float32Array(host.buffer(), at, n).fill(Number.NaN);
        at += 4 * ceil(n, 16);
        return x;
      });
      const [qv, kv, vv, wv, lv] = [q, k, v, w, lse].map((a, i) => {
        views[i].set(f32(a));
        return fromStorage(views[i], a.shape, 'float32');
      });
      const s0 = attentionStats();
      const fwd = evalPrimitiveIntoAll(attentionFwdP, [qv, kv, vv], params, [views[5], views[6]])!;
      const bwd = evalPrimitiveIntoAll(attentionBwdP, [qv, kv, vv, lv, wv], params, views.slice(7))!;
      const s1 = attentionStats();
      expect(s1.copiedBytes - s0.copiedBytes, 'bytes copied in or out').toBe(0);
      expect(s1.inPlaceBytes - s0.inPlaceBytes).toBe(4 * (3 * q.size + 3 * k.size + 3 * v.size + 2 * lse.size + w.size + out.size));
      expectBits(fwd, bwd, want);
      // dq written over dO's own storage: copied out after the kernels read dO, so still the same dq
      const s2 = attentionStats();
      const over = evalPrimitiveIntoAll(attentionBwdP, [qv, kv, vv, lv, wv], params, [views[3], views[8], views[9]])!;
      expect(attentionStats().copiedBytes - s2.copiedBytes).toBe(4 * q.size);
      expect([...f32(over[0])]).toEqual([...f32(grads[0])]);
      // The same overlap through a view taken after the memory grew (a new buffer object over the same bytes)
      const big = host.reserve(64 << 20);
      try {
        const dqAfterGrow = new Float32Array(host.buffer(), views[3].byteOffset, views[3].length);
        expect(dqAfterGrow.buffer === views[3].buffer, 'the memory grew: a new buffer object').toBe(false);
        dqAfterGrow.set(f32(w)); // dO again (the call above wrote dq over it)
        const s3 = attentionStats();
        const grown = evalPrimitiveIntoAll(attentionBwdP, [qv, kv, vv, lv, wv], params, [dqAfterGrow, views[8], views[9]])!;
        expect(attentionStats().copiedBytes - s3.copiedBytes).toBe(4 * q.size);
        expect([...f32(grown[0])]).toEqual([...f32(grads[0])]);
      } finally {
        host.release(big);
      }
    } finally {
      host.release(addr);
    }
  });

  it.runIf(sharedMemory)('the kernels touch the next item\'s rows only inside its operands and results: each one in turn placed last in a memory that cannot grow (a read past it traps), forward and backward, causal or not, rows in one cache line or several, P kept or not (read in place or copied by the backward), 1 thread, 2 threads, and 2 threads with the worker computing every item (its hints the items below, from the back), bit-identical to copies', () => {
    // (odd sizes: rows of H floats, not 64-byte aligned (H = 17: a row over two cache lines); T != S; grouped heads;
    // S = 16 a multiple of 8 and T = 13 not of 4: the backward reads the kept P in place, except the last block's)
    const [B, T, K, G] = [3, 13, 2, 2];
    const N = K * G;
    const relaxed = wasmFeatures().relaxedSimd;
    const hostArr = (data: Float32Array, shape: number[]) => ({ data, shape, dtype: 'float32' }) as never;
    const rnd = (n: number, seed: number): Float32Array => Float32Array.from({ length: n }, (_, i) => Math.sin(seed * 1000 + i * 0.7));
    const bits = (x: Float32Array): number[] => [...new Uint32Array(x.slice().buffer)];
    // One memory that cannot grow and one host over it for every case (one arena, one pool); each
    // case lays its regions out from the memory's top down and the jobs' regions from 64 up to them.
    const pages = 64;
    const end = pages * 65536;
    const memory = new WA.Memory({ initial: pages, maximum: pages, shared: true });
    let top = end;
    let bump = 64;
    const held = new Map<number, number>();
    const host: ArenaHost & { holds(v: ArrayBufferView): boolean } = {
      memory,
      maxPages: pages,
      reserve(bytes) {
        const a = Math.ceil(bump / 64) * 64;
        if (a + bytes > top) return -1;
        held.set(a, bytes);
        bump = a + bytes;
        return a;
      },
      release(a) {
        held.delete(a);
        bump = held.size === 0 ? 64 : Math.max(...[...held].map(([x, n]) => x + n));
      },
      buffer: () => memory.buffer,
      holds: (v) => v.buffer === memory.buffer && v.byteOffset >= top,
    };
    const modes = [
      { threads: 1, callerTakesItems: true },
      { threads: 2, callerTakesItems: true },
      { threads: 2, callerTakesItems: false },
    ];
    const cases: { causal: boolean; h: number; saveProbs: boolean; s: number; visibleOnly?: boolean }[] = [
      ...[true, false].flatMap((causal) => [7, 17].map((h) => ({ causal, h, saveProbs: true, s: 10 }))),
      { causal: false, h: 17, saveProbs: false, s: 10 },
      ...[true, false].map((causal) => ({ causal, h: 7, saveProbs: true, s: 16 })),
      // (P left unwritten past each block's panel: the NaN the view was filled with stays there, and the backward reads none of it;
      // S = 16 read in place, S = 10 copied by loadRows, whose last blocks' panel (cols 16) ends past S)
      ...[16, 10].map((s) => ({ causal: true, h: 7, saveProbs: true, s, visibleOnly: true })),
    ];
    for (const { causal, h: H, saveProbs, s: S, visibleOnly } of cases) {
      const params = { scale: 1 / Math.sqrt(H), isCausal: causal, saveProbs, ...(visibleOnly ? { probsVisibleOnly: true } : {}) };
      const [nq, nk, np2, nl] = [B * T * N * H, B * S * K * H, B * N * T * S, B * N * T];
      const ins = [rnd(nq, 1), rnd(nk, 2), rnd(nk, 3), rnd(nq, 4)]; // q, k, v, dO
      const qs = [B, T, N, H], ks = [B, S, K, H];
      const fwdAvals = [{ shape: qs, dtype: 'float32' }, { shape: [B, N, T], dtype: 'float32' }, ...(saveProbs ? [{ shape: [B, N, T, S], dtype: 'float32' }] : [])] as never;
      const bwdAvals = [{ shape: qs, dtype: 'float32' }, { shape: ks, dtype: 'float32' }, { shape: ks, dtype: 'float32' }] as never;
      // the reference: plain storage (copied in and out)
      const ref = attentionFwdSystolic([hostArr(ins[0], qs), hostArr(ins[1], ks), hostArr(ins[2], ks)], params, fwdAvals, relaxed) as Float32Array[];
      const refBwd = attentionBwdSystolic([hostArr(ins[0], qs), hostArr(ins[1], ks), hostArr(ins[2], ks), hostArr(ref[1], [B, N, T]), hostArr(ins[3], qs), ...(saveProbs ? [hostArr(ref[2], [B, N, T, S])] : [])], params, bwdAvals, relaxed) as Float32Array[];
      // regions: q, k, v, dO, out, lse, [probs,] dq, dk, dv
      const sizes = [nq, nk, nk, nq, nq, nl, ...(saveProbs ? [np2] : []), nq, nk, nk];
      const nf = ref.length; // forward results (regions 4 .. 4 + nf)
      for (const mode of modes) {
        for (let last = 0; last < sizes.length; last++) {
          const what = `causal ${causal}, H ${H}, S ${S}, P ${saveProbs ? 'kept' : 'recomputed'}${visibleOnly ? ' (visible only)' : ''}, region ${last} last, ${mode.threads} threads${mode.callerTakesItems ? '' : ' (worker only)'}`;
          // the regions from the top down, region `last` ending at the memory's end
          const order = [last, ...sizes.map((_, i) => i).filter((i) => i !== last)];
          const at: number[] = [];
          top = end;
          for (const i of order) {
            top = Math.floor((top - 4 * sizes[i]) / 4) * 4;
            at[i] = top;
          }
          expect(at[last] + 4 * sizes[last]).toBe(end);
          const views = sizes.map((n, i) => new Float32Array(memory.buffer, at[i], n));
          views.forEach((x, i) => (i < 4 ? x.set(ins[i]) : x.fill(Number.NaN)));
          const [fwdOuts, bwdOuts] = [views.slice(4, 4 + nf), views.slice(4 + nf)];
          const s0 = attentionStats();
          setNumThreads(mode.threads);
          try {
            withHooks({ callerTakesItems: mode.callerTakesItems }, () => {
              attentionFwdSystolic([hostArr(views[0], qs), hostArr(views[1], ks), hostArr(views[2], ks)], params, fwdAvals, relaxed, fwdOuts, host);
              attentionBwdSystolic([hostArr(views[0], qs), hostArr(views[1], ks), hostArr(views[2], ks), hostArr(views[5], [B, N, T]), hostArr(views[3], qs), ...(saveProbs ? [hostArr(views[6], [B, N, T, S])] : [])], params, bwdAvals, relaxed, bwdOuts, host);
            });
          } finally {
            setNumThreads(null);
          }
          const s1 = attentionStats();
          expect(s1.copiedBytes - s0.copiedBytes, `all in place, ${what}`).toBe(0);
          expect(s1.ownMemoryFallbacks - s0.ownMemoryFallbacks).toBe(0);
          // (items: one per batch row and key/value head, forward and backward)
          if (!mode.callerTakesItems) expect(s1.workerItems - s0.workerItems, `items the worker computed, ${what}`).toBe(2 * B * K);
          if (visibleOnly) {
            // (the copied reference's probs past the panels are the arena's stale bytes: compare where the in-place run wrote)
            const [pv, pr] = [views[6], ref[2]];
            const unwritten = pv.filter((x) => Number.isNaN(x)).length;
            expect(unwritten, `probs left unwritten, ${what}`).toBeGreaterThan(0);
            // (exactly the keys past each block of 4 rows' last visible key's 8-key panel)
            const panelEnd = (t: number): number => Math.min(ceil(Math.min(S, (t & ~3) + 4), 8), S);
            expect([...pv].map(Number.isNaN), `probs left unwritten, ${what}`).toEqual([...pv].map((_, i) => i % S >= panelEnd(Math.floor(i / S) % T)));
            pv.forEach((x, i) => Number.isNaN(x) || expect(x, `probs[${i}], ${what}`).toBe(pr[i]));
          }
          [...ref, ...refBwd].forEach((want, i) => visibleOnly && i === 2 || expect(bits(views[4 + i]), `result ${i}, ${what}`).toEqual(bits(want)));
        }
      }
    }
  });

  it.runIf(sharedMemory)('the arena host holds views inside reserved regions only, not in a released gap below the floor', () => {
    const host = arenaHostOf();
    const r1 = host.reserve(4096);
    const r2 = host.reserve(4096);
    try {
      const inR1 = new Float32Array(host.buffer(), r1, 16);
      expect(host.holds(inR1)).toBe(true);
      expect(host.holds(new Float32Array(host.buffer(), r1 + 4096 - 32, 16)), 'running past the region').toBe(false);
      host.release(r1);
      expect(host.holds(inR1), 'released').toBe(false);
      expect(host.holds(new Float32Array(host.buffer(), r2, 16))).toBe(true);
    } finally {
      host.release(r2);
    }
  });
});

describe('fused attention in a memory of its own (no arena host: a runtime without shared memory, direct calls)', () => {
  it('gives the same bits as in the backend\'s memory, forward and backward, on 1 and 2 threads', () => {
    const c: Case = { b: 2, t: 13, s: 13, k: 2, g: 2, h: 6, causal: true, dtype: 'float32', seed: 5 };
    const want = evaluated(c);
    const { params, q, k, v, w, out, lse, grads } = want;
    const relaxed = wasmFeatures().relaxedSimd;
    const host = (a: Array) => ({ data: toStorage(a), shape: a.shape, dtype: a.dtype });
    const av = (a: Array) => ({ shape: a.shape, dtype: a.dtype, weakType: false });
    for (const threads of [1, 2])
      withThreads(threads, () => {
        const fwd = attentionFwdSystolic([q, k, v].map(host), params, [av(out), av(lse)], relaxed);
        const bwd = attentionBwdSystolic([q, k, v, lse, w].map(host), params, grads.map(av), relaxed, undefined, null);
        expectBits(fwd, bwd, want, `, ${threads} threads`);
      });
  });
});

describe('fused attention when the backend makes a new engine (a relaxed-SIMD switch)', () => {
  it.runIf(wasmFeatures().relaxedSimd)('moves to the new engine\'s memory and back, giving the same bits as before the switches, on 2 threads', () => {
    const c: Case = { b: 2, t: 9, s: 9, k: 2, g: 1, h: 8, causal: true, dtype: 'float32', seed: 8 };
    const [q, k, v] = operands(c);
    const run = () => withThreads(2, () => f32(attend('fused', true)(q, k, v)));
    const before = run();
    try {
      configure({ relaxedSimd: false });
      const plain = run();
      expect(plain.length).toBe(before.length);
      // Without FMA only the rounding of the products changes: the same values within float32 noise.
      expect(maxAbs(plain.map((x, i) => x - before[i]))).toBeLessThanOrEqual(1e-5 * Math.max(1, maxAbs(before)));
    } finally {
      configure({ relaxedSimd: true });
    }
    expect([...run()]).toEqual([...before]);
  });
});

describe('fused attention when the backend\'s memory cannot hold the job (its reserve gives -1)', () => {
  it.runIf(sharedMemory)('runs in the attention\'s own memory instead, operands held by the host copied, the same bits as in place, forward and backward, on 1 and 2 threads', () => {
    const real = arenaHostOf();
    // A host over the same memory that holds the operands' views but has no room for a job.
    const full: ArenaHost = { memory: real.memory, maxPages: real.maxPages, reserve: () => -1, release: (a) => real.release(a), buffer: () => real.buffer(), holds: (v) => real.holds(v) };
    const c: Case = { b: 2, t: 10, s: 10, k: 1, g: 2, h: 8, causal: true, dtype: 'float32', seed: 13 };
    const want = evaluated(c);
    const { params, q, k, v, w, out, lse, grads } = want;
    const relaxed = wasmFeatures().relaxedSimd;
    const ops = [q, k, v, lse, w];
    const addr = real.reserve(4 * ops.reduce((n, a) => n + ceil(a.size, 16), 0));
    try {
      let at = addr;
      // The operands lie in reserved regions of the host (in place, were there room for the job).
      const held = ops.map((a) => {
        const x = new Float32Array(real.buffer(), at, a.size);
        x.set(f32(a));
        at += 4 * ceil(a.size, 16);
        return { data: x, shape: a.shape, dtype: a.dtype };
      });
      const av = (a: Array) => ({ shape: a.shape, dtype: a.dtype, weakType: false });
      for (const threads of [1, 2])
        withThreads(threads, () => {
          const s0 = attentionStats();
          const fwd = attentionFwdSystolic(held.slice(0, 3), params, [av(out), av(lse)], relaxed, undefined, full);
          const bwd = attentionBwdSystolic(held, params, grads.map(av), relaxed, undefined, full);
          const s1 = attentionStats();
          expect(s1.ownMemoryFallbacks - s0.ownMemoryFallbacks, 'jobs moved to the own memory').toBe(2);
          expect(s1.inPlaceBytes - s0.inPlaceBytes, 'nothing in place').toBe(0);
          expect(s1.copiedBytes - s0.copiedBytes).toBe(4 * (3 * q.size + 3 * k.size + 3 * v.size + 2 * lse.size + w.size + out.size));
          expectBits(fwd, bwd, want, `, ${threads} threads`);
        });
    } finally {
      real.release(addr);
    }
  });
});

describe('fused attention on two systolic backends in turn', () => {
  it.runIf(sharedMemory)('keeps one arena (and worker pool) per backend memory: alternating calls make no new one, and give each backend\'s bits on 2 threads', () => {
    const other = new SystolicBackend('systolic-attention-second');
    registerBackend(other);
    const c: Case = { b: 2, t: 9, s: 9, k: 2, g: 1, h: 8, causal: true, dtype: 'float32', seed: 17 };
    const [q, k, v] = operands(c);
    const run = (name: string) => withBackend(name, () => withThreads(2, () => [...f32(attend('fused', true)(q, k, v))]));
    const want = run('systolic');
    expect(run('systolic-attention-second')).toEqual(want);
    const a0 = attentionStats().arenas;
    for (let i = 0; i < 3; i++) {
      expect(run('systolic')).toEqual(want);
      expect(run('systolic-attention-second')).toEqual(want);
    }
    expect(attentionStats().arenas - a0, 'arenas made while alternating').toBe(0);
  });
});

// A child process makes 4 engines in turn, runs an attention on 2 threads over each (a pool of
// the crew's one worker per engine's memory), drops them, collects them and prints how many
// threads it started, how many pools the worker held and how many it dropped.
const DROPPED_ENGINES_SCRIPT = `
const { GemmEngine } = await import(dir + '/gemmEngine.ts');
const { attentionFwdSystolic } = await import(dir + '/attention.ts');
const { setNumThreads } = await import(dir + '/../../threads.ts');
setNumThreads(2);
const q = { data: Float32Array.from({ length: 512 }, (_, i) => Math.sin(i)), shape: [2, 16, 2, 8], dtype: 'float32' };
const av = (shape) => ({ shape, dtype: 'float32', weakType: false });
const t0 = crewWorkers();
// The engines are kept until the pools are counted, then dropped: a collection that came earlier
// (any allocation can start one, e.g. the GEMM kernel's tuning) would drop pools before the count.
let engines = [];
// (In a function: a suspended top-level frame would keep its last engine in a register.)
const makeAndRun = () => {
  const engine = new GemmEngine({ relaxed: false });
  engines.push(engine);
  attentionFwdSystolic([q, q, q], { scale: 0.3, isCausal: true }, [av([2, 16, 2, 8]), av([2, 2, 16])], false, undefined, engine);
};
for (let i = 0; i < 4; i++) makeAndRun();
await heldReach(4);
const t1 = crewWorkers();
const h1 = poolsHeld();
engines = null;
console.log(JSON.stringify({ started: t1 - t0, held: h1, dropped: await droppedSince(h1, 4) }));
`;

describe('fused attention over engines that are dropped', () => {
  it.runIf(sharedMemory && canRunDroppedEngines)('drops the pool of a dropped engine\'s memory from the shared worker once the engine is collected (in a child process with --expose-gc)', () => {
    const { started, held, dropped } = runDroppedEnginesScript<{ started: number; held: number; dropped: number }>(DROPPED_ENGINES_SCRIPT);
    expect(held, 'a pool per engine\'s memory').toBe(4);
    expect(started, 'one worker for them all').toBe(1);
    expect(dropped, 'the pools left the worker after the engines were collected').toBe(4);
  });
});

describe('fused attention with NaN operands', () => {
  it('a NaN with any payload stays NaN through the bf16 operand rounding (as in the packing kernels), forward and backward', () => {
    const c: Case = { b: 1, t: 9, s: 9, k: 1, g: 2, h: 5, causal: true, dtype: 'float32', seed: 4 };
    const [q, k, v, w] = operands(c);
    // value[0, 0, 0, 0] a signalling NaN with a low payload (0x7f800001): a plain round-to-nearest
    // on the bits would carry it into the exponent's infinity
    const vd = Float32Array.from(toStorage(v) as Float32Array);
    new Uint32Array(vd.buffer)[0] = 0x7f800001;
    const vn = fromStorage(vd, v.shape, 'float32');
    const params = { scale: 1 / Math.sqrt(c.h), isCausal: true };
    const [out, lse] = evalPrimitive(attentionFwdP, [q, k, vn], params);
    const o = f32(out);
    const [, T, N, H] = q.shape;
    // every row sees key 0, so head dim 0 of every output row is NaN (the composite's too), never inf
    for (let t = 0; t < T; t++) for (let n = 0; n < N; n++) expect(o[(t * N + n) * H]).toBeNaN();
    const composite = f32(attend('xla', true)(q, k, vn));
    for (let t = 0; t < T; t++) for (let n = 0; n < N; n++) expect(composite[(t * N + n) * H]).toBeNaN();
    // backward: dO . v^T over the NaN value row poisons dS of key 0; dv of key 0 gets P^T dO (finite)
    const [dq, , dv] = evalPrimitive(attentionBwdP, [q, k, vn, lse, w], params).map(f32);
    for (let i = 0; i < dq.length; i++) expect(dq[i]).toBeNaN();
    expect(dv.slice(0, H).every((x) => Number.isFinite(x))).toBe(true);
    expect([...dq].some((x) => x === Infinity || x === -Infinity)).toBe(false);
  });
});

describe('fused attention in the cost ledger', () => {
  it('costs what the cycle model gives the composite\'s matmuls: the forward exactly, the backward too with P kept, plus a recomputed Q K^T without', () => {
    const c: Case = { b: 2, t: 16, s: 24, k: 2, g: 1, h: 8, causal: true, dtype: 'float32', seed: 2 };
    const [q, k, v] = operands(c);
    const mxu = (impl: 'fused' | 'xla', withGrad: boolean) => {
      const f = attend(impl, true);
      const l = withLedger(() => (withGrad ? grad((a: Array, b: Array, d: Array) => np.sum(f(a, b, d)), { argnums: [0, 1, 2] })(q, k, v) : f(q, k, v))).ledger;
      return l.entries.filter((e) => e.unit === 'mxu');
    };
    const sum = (es: { flops: number; computeCycles: number }[]) => es.reduce((a, e) => ({ flops: a.flops + e.flops, computeCycles: a.computeCycles + e.computeCycles }), { flops: 0, computeCycles: 0 });
    const compositeFwd = mxu('xla', false);
    const compositeAll = mxu('xla', true);
    expect(compositeFwd.map((e) => e.op)).toEqual(['dot_general', 'dot_general']);
    expect(compositeAll.length).toBe(6);
    const compositeBwd = sum(compositeAll.slice(2));
    for (const kept of [true, false]) {
      const [fwd, bwd] = withProbsKept(kept, () => mxu('fused', true));
      expect(fwd.op).toBe('dot_product_attention_fwd');
      expect(bwd.op).toBe('dot_product_attention_bwd');
      // forward: Q K^T and P V, as the composite's two dots
      expect({ flops: fwd.flops, computeCycles: fwd.computeCycles }).toEqual(sum(compositeFwd));
      // backward: the composite's four backward dots' FLOPs; cycles also recompute Q K^T unless P
      // was kept, and the transposed products (dS^T Q, P^T dO) are modelled as [S, T] x [T, H]
      // whatever orientation the composite's dots took
      expect(bwd.flops).toBe(compositeBwd.flops);
      const rest = bwd.computeCycles - (kept ? 0 : compositeFwd[0].computeCycles);
      expect(rest / compositeBwd.computeCycles, `P kept: ${kept}`).toBeGreaterThan(0.95);
      expect(rest / compositeBwd.computeCycles, `P kept: ${kept}`).toBeLessThan(1.05);
      expect(bwd.seconds).toBeGreaterThan(0);
    }
  });
});

/** A mask [mb, mn, t, s] from a seed: each row sees no key with probability 1/4, else each key with probability `density`. */
function maskOf(shape: number[], seed: number, density: number): Array {
  let x = seed * 2654435761 + 12345;
  const rnd = (): number => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return x / 2 ** 32;
  };
  const s = shape[3];
  const bits: boolean[] = [];
  for (let r = 0; r < shape[0] * shape[1] * shape[2]; r++) {
    const none = rnd() < 0.25;
    for (let j = 0; j < s; j++) bits.push(!none && rnd() < density);
  }
  return np.reshape(np.array(bits, 'bool'), shape);
}

/** A segment mask [B, 1, T, T]: a token attends only within its segment (MaxText's packed sequences). */
function segmentMask(ids: number[][]): Array {
  const t = ids[0].length;
  return np.array(ids.map((row) => [row.map((a) => row.map((b) => a === b && a !== 0))]).flat(), 'bool').reshape([ids.length, 1, t, t]);
}

const attendMasked = (impl: 'fused' | 'xla', causal: boolean, mask: Array) => (q: Array, k: Array, v: Array): Array => nn.dotProductAttention(q, k, v, { mask, isCausal: causal, implementation: impl });

describe('fused attention with a mask', () => {
  const maskCase = fc.record({ c: caseArb, mb: fc.boolean(), mn: fc.boolean(), density: fc.constantFrom(0, 0.2, 0.7, 1) });

  it('law: forward and gradients equal the composite (random masks, rows that see no key, broadcast over batch or heads)', () => {
    fc.assert(
      fc.property(maskCase, fc.boolean(), ({ c, mb, mn, density }, kept) => withProbsKept(kept, () => {
        const [q, k, v, w] = operands(c);
        const mask = maskOf([mb ? c.b : 1, mn ? c.k * c.g : 1, c.t, c.s], c.seed, density);
        const tol = c.dtype === 'bfloat16' ? 5e-2 : 2e-2;
        const what = JSON.stringify({ c, mb, mn, density, kept });
        close(attendMasked('fused', c.causal, mask)(q, k, v), attendMasked('xla', c.causal, mask)(q, k, v), tol, `forward ${what}`);
        const loss = (impl: 'fused' | 'xla') => (a: Array, b: Array, d: Array) => np.sum(np.multiply(np.astype(attendMasked(impl, c.causal, mask)(a, b, d), 'float32'), np.astype(w, 'float32')));
        const gf = grad(loss('fused'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
        const gc = grad(loss('xla'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
        gf.forEach((g, i) => close(g, gc[i], tol * 2, `d${'qkv'[i]} ${what}`));
      })),
      { numRuns: 30 },
    );
  });

  it('segment masks with isCausal (the MaxText case, a padding segment 0 whose rows see no key) equal the composite, and stay one fused primitive', () => {
    const c: Case = { b: 2, t: 37, s: 37, k: 2, g: 2, h: 16, causal: true, dtype: 'float32', seed: 9 };
    const [q, k, v, w] = operands(c);
    const ids = [globalThis.Array.from({ length: 37 }, (_, i) => (i < 11 ? 1 : i < 30 ? 2 : 0)), globalThis.Array.from({ length: 37 }, (_, i) => 1 + Math.floor(i / 5))];
    const mask = segmentMask(ids);
    close(attendMasked('fused', true, mask)(q, k, v), attendMasked('xla', true, mask)(q, k, v), 1e-2, 'forward');
    const loss = (impl: 'fused' | 'xla') => (a: Array, b: Array, d: Array) => np.sum(np.multiply(attendMasked(impl, true, mask)(a, b, d), w));
    const gf = grad(loss('fused'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
    const gc = grad(loss('xla'), { argnums: [0, 1, 2] })(q, k, v) as Array[];
    gf.forEach((g, i) => close(g, gc[i], 2e-2, `d${'qkv'[i]}`));
    // the rows of segment 0 see no key: uniform softmax over all keys, no gradient to their queries
    const dq = f32(gf[0]);
    for (let t = 30; t < 37; t++) for (let j = 0; j < 4 * 16; j++) expect(dq[t * 64 + j]).toBe(0);
    const text = String(makeJaxpr(grad(loss('fused'), { argnums: [0, 1, 2] }))(q, k, v));
    expect(text).toContain('dot_product_attention_fwd[');
    expect(text).toContain('dot_product_attention_bwd[');
    expect(text).not.toContain('dot_general');
    // by default (no implementation named) a mask no longer sends it to the composite
    expect(String(makeJaxpr((a: Array) => nn.dotProductAttention(a, k, v, { mask, isCausal: true }))(q))).toContain('dot_product_attention[');
  });

  it('a mask of lower rank or with T/S dims of 1 broadcasts as in the composite', () => {
    const c: Case = { b: 2, t: 5, s: 7, k: 1, g: 2, h: 4, causal: false, dtype: 'float32', seed: 4 };
    const [q, k, v] = operands(c);
    for (const mask of [np.array([true, false, true, true, false, true, false], 'bool'), maskOf([2, 1, 5, 1], 3, 0.5), np.reshape(maskOf([1, 1, 5, 7], 5, 0.5), [1, 5, 7])]) {
      close(attendMasked('fused', false, mask)(q, k, v), attendMasked('xla', false, mask)(q, k, v), 1e-2, `mask [${mask.shape}]`);
    }
  });

  it.each([true, false])('vmap over a batched mask equals a loop (mask batch 1 or B, mapped or not); jit equals eager (P kept: %s)', (kept) => withProbsKept(kept, () => {
    const c: Case = { b: 2, t: 9, s: 9, k: 1, g: 2, h: 5, causal: true, dtype: 'float32', seed: 6 };
    const xs = [0, 1, 2].map((i) => operands({ ...c, seed: 20 + i }));
    const stack = (j: number) => np.stack(xs.map((x) => x[j]));
    for (const mb of [1, 2]) {
      const masks = [0, 1, 2].map((i) => maskOf([mb, 2, 9, 9], 30 + i, 0.5));
      const f = (q: Array, k: Array, v: Array, m: Array) => attendMasked('fused', true, m)(q, k, v);
      const gl = (q: Array, k: Array, v: Array, m: Array) => np.sum(np.square(f(q, k, v, m)));
      const batched = vmap(f)(stack(0), stack(1), stack(2), np.stack(masks));
      const gv = vmap(grad(gl, { argnums: [0, 1, 2] }))(stack(0), stack(1), stack(2), np.stack(masks)) as Array[];
      xs.forEach((x, i) => {
        expect([...f32(batched.get(i))]).toEqual([...f32(f(x[0], x[1], x[2], masks[i]))]);
        const gi = grad(gl, { argnums: [0, 1, 2] })(x[0], x[1], x[2], masks[i]) as Array[];
        gi.forEach((g, j) => expect([...f32(gv[j].get(i))]).toEqual([...f32(g)]));
      });
      // an unmapped mask serves every mapped item
      const shared = vmap((q: Array, k: Array, v: Array) => f(q, k, v, masks[0]))(stack(0), stack(1), stack(2));
      xs.forEach((x, i) => expect([...f32(shared.get(i))]).toEqual([...f32(f(x[0], x[1], x[2], masks[0]))]));
      const [q, k, v] = xs[0];
      expect([...f32(jit(f)(q, k, v, masks[0]))]).toEqual([...f32(f(q, k, v, masks[0]))]);
      const jg = jit(grad(gl, { argnums: [0, 1, 2] }))(q, k, v, masks[0]) as Array[];
      const eg = grad(gl, { argnums: [0, 1, 2] })(q, k, v, masks[0]) as Array[];
      jg.forEach((g, j) => expect([...f32(g)]).toEqual([...f32(eg[j])]));
    }
  }));

  it('1 and 2 threads give bit-identical results with a mask', () => {
    const c: Case = { b: 3, t: 37, s: 37, k: 2, g: 2, h: 12, causal: true, dtype: 'bfloat16', seed: 8 };
    const [q, k, v] = operands(c);
    const mask = maskOf([3, 1, 37, 37], 8, 0.6);
    const gl = (a: Array, b: Array, d: Array) => np.sum(np.square(np.astype(attendMasked('fused', true, mask)(a, b, d), 'float32')));
    const run = (n: number) => withThreads(n, () => [attendMasked('fused', true, mask)(q, k, v), ...(grad(gl, { argnums: [0, 1, 2] })(q, k, v) as Array[])].map((x) => [...f32(x)]));
    expect(run(2)).toEqual(run(1));
    withProbsKept(false, () => expect(run(2)).toEqual(run(1)));
  });

  it('bad masks: clear errors naming the operation, the argument and the shapes or dtype', () => {
    const [q, k, v] = operands({ b: 2, t: 4, s: 5, k: 1, g: 2, h: 3, causal: false, dtype: 'float32', seed: 1 });
    expect(() => attendMasked('fused', false, np.ones([3, 1, 4, 5], 'bool'))(q, k, v)).toThrow('dot_product_attention: mask [3,1,4,5] is not broadcastable to [B, N, T, S] = [2,2,4,5]');
    expect(() => attendMasked('fused', false, np.ones([4, 4], 'bool'))(q, k, v)).toThrow('dot_product_attention: mask [4,4] is not broadcastable to [B, N, T, S] = [2,2,4,5]');
    expect(() => attendMasked('fused', false, np.ones([1, 2, 2, 4, 5], 'bool'))(q, k, v)).toThrow('dot_product_attention: mask [1,2,2,4,5] is not broadcastable');
    const p = { scale: 1, isCausal: false };
    expect(() => attention(q, k, v, p, np.ones([2, 2, 4, 5], 'float32'))).toThrow('dot_product_attention: mask must be bool; got float32');
    expect(() => attention(q, k, v, p, np.ones([2, 2, 4, 1], 'bool'))).toThrow('dot_product_attention: mask must be bool [2|1, 2|1, 4, 5] ([B|1, N|1, T, S]); got [2,2,4,1]');
    expect(() => attention(q, k, v, p, np.ones([2, 3, 4, 5], 'bool'))).toThrow('got [2,3,4,5]');
  });
});

describe('fused attention on long sequences (scratch per thread)', () => {

  it('law: one thread\'s scratch is O((T + S) H), not O(T S): the backward\'s dS and P chunks hold QB query rows', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 32768 }), fc.integer({ min: 1, max: 32768 }), fc.integer({ min: 1, max: 256 }), (t, s, h) => {
        const [tp, sp, hp] = [ceil(t, 4), ceil(s, 8), ceil(h, 8)];
        const [fwd, bwd] = [attentionScratchBytes(t, s, h, false), attentionScratchBytes(t, s, h, true)];
        // 4 bytes x (Q, dO, dQ: tp hp; K twice, V, dK, dV: sp hp; the dS and P chunks: 2 QB sp) + alignment
        const bound = 4 * (3 * tp * hp + 5 * sp * hp + 2 * QB * sp + 16) + 13 * 64;
        expect(bwd).toBeLessThanOrEqual(bound);
        expect(bwd).toBeLessThanOrEqual(4 * 48 * (tp + sp) * hp + 13 * 64);
        // the forward has none of the backward's regions (and its rows' (max, sum) pairs)
        expect(fwd).toBeLessThanOrEqual(4 * (2 * tp * hp + 2 * sp * hp + 8 * sp + 2 * tp) + 13 * 64);
      }),
    );
    // the sizes the reviewer's failures had: T = S = 16384 (1 GiB of memory at most) now takes 20 MiB a thread
    expect(attentionScratchBytes(16384, 16384, 8, true)).toBeLessThan(32 * 2 ** 20);
  });

  it('T = S = 8192 runs forward and backward on 1 and 2 threads (in the backend\'s memory: scratch O((T + S) H) per thread), bit-identical, and the gradients match a short prefix', () => {
    const [b, t, h] = [2, 8192, 8];
    const mk = (i: number) => random.normal(random.key(40 + i), [b, t, 1, h]);
    const [q, k, v, w] = [0, 1, 2, 3].map(mk);
    const params = { scale: 1 / Math.sqrt(h), isCausal: true };
    const run = (n: number) =>
      withThreads(n, () => {
        const [out, lse] = evalPrimitive(attentionFwdP, [q, k, v], params);
        return [out, lse, ...evalPrimitive(attentionBwdP, [q, k, v, lse, w], params)].map((x) => f32(x));
      });
    const one = run(1);
    const two = run(2);
    two.forEach((x, i) => expect(x.every((y, j) => Object.is(y, one[i][j])), `result ${i}`).toBe(true));
    // causal: the first 40 rows see only the first 40 keys, so their forward and dQ equal a 40-long problem's
    const p = 40;
    const pre = (a: Array) => {
      const x = f32(a);
      return fromStorage(Float32Array.from([0, 1].flatMap((i) => [...x.subarray(i * t * h, (i * t + p) * h)])), [b, p, 1, h], 'float32');
    };
    const [out, lse] = evalPrimitive(attentionFwdP, [pre(q), pre(k), pre(v)], params);
    const [dq] = evalPrimitive(attentionBwdP, [pre(q), pre(k), pre(v), lse, pre(w)], params);
    const rows = (x: Float32Array, n: number) => [0, 1].flatMap((i) => [...x.subarray(i * t * n, (i * t + p) * n)]);
    expect(rows(one[0], h)).toEqual([...f32(out)]);
    expect(rows(one[2], h)).toEqual([...f32(dq)]);
  }, 120_000);

  it('one module per head dim and padded key count: query lengths do not compile new modules, forward or backward', () => {
    const mk = (i: number, t: number) => random.normal(random.key(60 + i), [1, t, 2, 5]);
    const [k, v] = [mk(1, 24), mk(2, 24)];
    const params = { scale: 0.5, isCausal: false };
    const go = (t: number) => {
      const q = mk(0, t);
      const [, lse] = evalPrimitive(attentionFwdP, [q, k, v], params);
      evalPrimitive(attentionBwdP, [q, k, v, lse, q], params);
    };
    go(3);
    const before = attentionStats().modules;
    for (const t of [1, 7, 24, 131, 300]) go(t);
    expect(attentionStats().modules).toBe(before);
  });
});

describe('the row kernels\' exp (softmax forward, P in the backward)', () => {
  const ulp = (y: number): number => {
    const e = Math.floor(Math.log2(Math.abs(y)));
    return 2 ** (Math.max(e, -126) - 23);
  };
  for (const relaxed of [false, true]) {
    it.skipIf(relaxed && !wasmFeatures().relaxedSimd)(`is within 2 ulp of Math.exp on [-87.3, 88.3], 0 at and below -88 and for NaN, ${relaxed ? 'relaxed (FMA)' : 'plain'} SIMD`, () => {
      const memory = new WA.Memory({ initial: 32 });
      const k = new WA.Instance(attentionModule(8, 8, relaxed, false).module, { env: { mem: memory } }).exports as unknown as AttentionKernels;
      const xs: number[] = [];
      for (let x = -90; x <= 90; x += 0.0137) xs.push(Math.fround(x));
      // (a fixed-seed stream, so a failure replays: x = -u1 * u2 * 90)
      let seed = 12345;
      const u = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
      for (let i = 0; i < 20000; i++) xs.push(Math.fround(-u() * u() * 90));
      xs.push(0, -0, 1e-30, -1e-30, -88, -88.5, -87.3, -Infinity, Infinity, NaN, 88.3, 88.7, -1000, 1000);
      while (xs.length % 4 !== 0) xs.push(0);
      xs.forEach((x, i) => (xs[i] = Math.fround(x))); // (the values the kernel sees)
      const f32 = new Float32Array(memory.buffer);
      const n = xs.length;
      f32.set(xs, 0);
      for (const upper of [0, 1]) {
        k.expv(0, n * 4, n / 4, upper);
        const ys = f32.subarray(n, 2 * n);
        let worst = 0;
        for (let i = 0; i < n; i++) {
          const [x, y] = [xs[i], ys[i]];
          if (Number.isNaN(x) || x <= -88) expect(y, `exp(${x})`).toBe(0);
          else if (x < -87.3) expect(y >= 0 && y <= 2 ** -125, `exp(${x}) = ${y}`).toBe(true);
          else if (x <= 88.3 && (upper || x <= 0)) worst = Math.max(worst, Math.abs(y - Math.exp(x)) / ulp(Math.exp(x)));
          else if (upper) expect(Math.abs(y - Math.exp(Math.fround(88.3))) / ulp(y), `exp(${x}) clamped to exp(88.3)`).toBeLessThanOrEqual(2);
        }
        expect(worst, `worst error in ulp (upper clamp ${upper})`).toBeLessThanOrEqual(2);
      }
    });
  }
});

describe('the forward\'s logsumexp (lseRows: max + log(sum) in f64, rounded once)', () => {
  it('equals Math.fround(max + Math.log(sum)) for sums 0 and 1..2^20 and any max; sum 0 gives max - inf', () => {
    const memory = new WA.Memory({ initial: 4 });
    const k = new WA.Instance(attentionModule(8, 8, false, false).module, { env: { mem: memory } }).exports as unknown as AttentionKernels;
    const f32 = new Float32Array(memory.buffer);
    const pairs: [number, number][] = [[0, 1], [3, 1], [-2.5, Math.SQRT2], [1e6, 7], [-Infinity, 0], [Infinity, 0], [5, 0], [-1e-3, 2 ** 20], [0, 2 ** 24 - 1]];
    fc.assert(
      fc.property(fc.float({ min: -1e4, max: 1e4, noNaN: true }), fc.float({ min: 1, max: 2 ** 20, noNaN: true }), (mx, sum) => {
        pairs.push([mx, sum]);
      }),
      { numRuns: 5000 },
    );
    for (let s = 1; s < 3; s += 1 / 512) pairs.push([0.25, s]); // (both sides of sqrt 2)
    const n = pairs.length;
    pairs.forEach(([mx, sum], i) => f32.set([mx, sum], 2 * i));
    k.lseRows(0, 8 * n, n);
    let differ = 0;
    pairs.forEach(([mx, sum], i) => {
      const [want, got] = [Math.fround(Math.fround(mx) + Math.log(Math.fround(sum))), f32[2 * n + i]];
      if (Object.is(want, got)) return;
      // only a tie of the f32 rounding may go the other way: then the two are neighbours
      differ++;
      expect(Math.abs(got - want), `lse(${mx}, ${sum}) = ${got}, want ${want}`).toBeLessThanOrEqual(Math.abs(want) * 2 ** -23);
    });
    expect(differ, 'rows that differ from Math.log by an ulp').toBeLessThanOrEqual(2);
    expect(f32[2 * n + 4]).toBe(-Infinity);
    expect(f32[2 * n + 5]).toBeNaN();
  });

  it('4 rows at a time (f64x2) equal the rows one at a time (scalar f64), bit for bit, for any row count', () => {
    const memory = new WA.Memory({ initial: 4 });
    const k = new WA.Instance(attentionModule(8, 8, false, false).module, { env: { mem: memory } }).exports as unknown as AttentionKernels;
    const f32 = new Float32Array(memory.buffer);
    const edge = fc.constantFrom(0, 1, Math.SQRT2, Math.fround(Math.SQRT2), 2 ** 24, Infinity, -Infinity, NaN, -0);
    const pair = fc.tuple(fc.oneof(fc.float({ noNaN: true }), edge), fc.oneof(fc.float({ min: 1, max: 2 ** 30, noNaN: true }), edge));
    fc.assert(
      fc.property(fc.array(pair, { minLength: 1, maxLength: 41 }), (pairs) => {
        const n = pairs.length;
        pairs.forEach(([mx, sum], i) => f32.set([mx, sum], 2 * i));
        const [all, one] = [2 * n, 3 * n];
        k.lseRows(0, 4 * all, n);
        for (let i = 0; i < n; i++) k.lseRows(8 * i, 4 * (one + i), 1);
        for (let i = 0; i < n; i++) expect(Object.is(f32[all + i], f32[one + i]), `row ${i} of ${n}: (${pairs[i]}) gives ${f32[all + i]}, one at a time ${f32[one + i]}`).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

/** The row kernels' exp (`expv`, upper clamp or not) and logsumexp (`lseRows`) from a module instance over a memory of its own: each has its own accuracy law above. */
function kernelMath(relaxed: boolean): { exp(xs: number[], upper: boolean): Float32Array; lse(mx: number, sum: number): number } {
  const memory = new WA.Memory({ initial: 2 });
  const k = new WA.Instance(attentionModule(8, 8, relaxed, false).module, { env: { mem: memory } }).exports as unknown as AttentionKernels;
  const at = 64 * 1024; // (results from this byte on; rows of up to 16,384 floats)
  return {
    exp(xs, upper) {
      const n = ceil(xs.length, 4);
      const f = new Float32Array(memory.buffer);
      f.fill(0, 0, n);
      f.set(xs, 0);
      k.expv(0, at, n / 4, upper ? 1 : 0);
      return f.slice(at / 4, at / 4 + xs.length);
    },
    lse(mx, sum) {
      const f = new Float32Array(memory.buffer);
      f.set([mx, sum], 0);
      k.lseRows(0, at, 1);
      return f[at / 4];
    },
  };
}

/**
 * Plain-JS fused attention with the rounding points the kernels claim (attentionModule.ts's
 * header, core README): q, k, v and dO rounded to bf16 as operands; every product of two bf16
 * values is exact in f32, so each matmul is an f32 sum in key (or query) order; with bf16
 * operands the logits (Q K^T) and dP (dO V^T) rounded to bf16, as the composite's bf16 matmul
 * results are; logits times the f32 scale, the mask's -0.7 f32max or causality's -inf in place;
 * row max, e = exp(logit - max), sum in 4 lanes (column mod 4) added lane 0 + 1 + 2 + 3, P =
 * e / sum (kept f32) and bf16(P) into P V; backward: P kept or exp(logit - lse) (clamped above),
 * D = sum P dP (f32 products, 4 lanes), dS = bf16((dP - D) P scale) (scale 0 for a row that sees
 * no key), dq = dS K, dk += dS^T q and dv += bf16(P)^T dO over t ascending and the group's query
 * heads in order. Results rounded to the dtype. Every step here rounds to f32 (Math.fround), so
 * the kernels must give these bits exactly.
 */
function fusedReference(c: Case, q: Array, k: Array, v: Array, w: Array, mask: Array | undefined, kept: boolean, math: ReturnType<typeof kernelMath>) {
  const { b: B, t: T, s: S, h: H, causal } = c;
  const [K, G, N] = [c.k, c.g, c.k * c.g];
  const bf = c.dtype === 'bfloat16';
  const fr = Math.fround;
  const scale = fr(1 / Math.sqrt(c.h));
  const [qd, kd, vd, wd] = [q, k, v, w].map((a) => f32(a).map(bf16));
  const md = mask ? f32(np.astype(mask, 'float32')) : null;
  const [mb, mn] = mask ? [mask.shape[0], mask.shape[1]] : [1, 1];
  const qi = (b: number, t: number, n: number, h: number): number => ((b * T + t) * N + n) * H + h;
  const ki = (b: number, s: number, kh: number, h: number): number => ((b * S + s) * K + kh) * H + h;
  const dot = (x: Float32Array, xi: number, y: Float32Array, yi: number): number => {
    let acc = 0;
    for (let h = 0; h < H; h++) acc = fr(acc + x[xi + h] * y[yi + h]);
    return acc;
  };
  const lanes = (xs: number[]): number => {
    const l = [0, 0, 0, 0];
    xs.forEach((x, s) => (l[s % 4] = fr(l[s % 4] + x)));
    return fr(fr(fr(l[0] + l[1]) + l[2]) + l[3]);
  };
  const round = (x: number): number => (bf ? bf16(x) : x);
  /** Row t of head n's logits and whether the row sees no key (then all 0: uniform P). */
  const logits = (b: number, n: number, t: number): { l: number[]; none: boolean } => {
    const kh = Math.floor(n / G);
    const c1 = causal ? Math.min(S, t + 1) : S;
    const mrow = md ? (((mb === 1 ? 0 : b) * mn + (mn === 1 ? 0 : n)) * T + t) * S : -1;
    const none = md !== null && md.subarray(mrow, mrow + c1).every((x) => x === 0);
    const l: number[] = [];
    for (let s = 0; s < S; s++) {
      if (none) l.push(0);
      else if (s >= c1) l.push(-Infinity);
      else if (md && md[mrow + s] === 0) l.push(MASKED_LOGIT);
      else l.push(fr(round(dot(qd, qi(b, t, n, 0), kd, ki(b, s, kh, 0))) * scale));
    }
    return { l, none };
  };
  const out = new Float32Array(B * T * N * H);
  const lse = new Float32Array(B * N * T);
  const probs = new Float32Array(B * N * T * S);
  for (let b = 0; b < B; b++)
    for (let n = 0; n < N; n++)
      for (let t = 0; t < T; t++) {
        const kh = Math.floor(n / G);
        const { l } = logits(b, n, t);
        const mx = l.reduce((x, y) => Math.max(x, y), -Infinity);
        const e = math.exp(l.map((x) => fr(x - mx)), false);
        const sum = lanes([...e]);
        const row = (b * N + n) * T + t;
        lse[row] = math.lse(mx, sum);
        for (let s = 0; s < S; s++) probs[row * S + s] = fr(e[s] / sum);
        for (let h = 0; h < H; h++) {
          let acc = 0;
          for (let s = 0; s < S; s++) acc = fr(acc + bf16(probs[row * S + s]) * vd[ki(b, s, kh, h)]);
          out[qi(b, t, n, h)] = acc;
        }
      }
  const dq = new Float32Array(B * T * N * H);
  const [dk, dv] = [new Float32Array(B * S * K * H), new Float32Array(B * S * K * H)];
  for (let b = 0; b < B; b++)
    for (let n = 0; n < N; n++)
      for (let t = 0; t < T; t++) {
        const kh = Math.floor(n / G);
        const row = (b * N + n) * T + t;
        const { l, none } = logits(b, n, t);
        const p = kept ? [...probs.subarray(row * S, (row + 1) * S)] : [...math.exp(l.map((x) => fr(x - lse[row])), true)];
        const dp = p.map((_, s) => round(dot(wd, qi(b, t, n, 0), vd, ki(b, s, kh, 0))));
        const D = lanes(p.map((x, s) => fr(x * dp[s])));
        const ds = p.map((x, s) => bf16(fr(fr(fr(dp[s] - D) * x) * (none ? 0 : scale))));
        for (let h = 0; h < H; h++) {
          let acc = 0;
          for (let s = 0; s < S; s++) acc = fr(acc + ds[s] * kd[ki(b, s, kh, h)]);
          dq[qi(b, t, n, h)] = acc;
        }
        for (let s = 0; s < S; s++)
          for (let h = 0; h < H; h++) {
            const j = ki(b, s, kh, h);
            dk[j] = fr(dk[j] + ds[s] * qd[qi(b, t, n, h)]);
            dv[j] = fr(dv[j] + bf16(p[s]) * wd[qi(b, t, n, h)]);
          }
      }
  const res = (x: Float32Array): Float32Array => (bf ? x.map(bf16) : x);
  return { out: res(out), lse, probs, dq: res(dq), dk: res(dk), dv: res(dv) };
}

describe('the fused attention\'s rounding points (a plain-JS reference that rounds where the kernels say)', () => {
  const bitsOf = (x: ArrayLike<number>): number[] => [...new Uint32Array(Float32Array.from(x).buffer)];
  const expectSame = (got: Array | Float32Array, want: Float32Array, what: string): void => {
    const [g, w] = [bitsOf(got instanceof Float32Array ? got : f32(got)), bitsOf(want)];
    const first = g.findIndex((x, i) => x !== w[i]);
    expect(first, `${what}: first differing element ${first} (got ${new Float32Array(new Uint32Array(g).buffer)[first]}, want ${want[first]})`).toBe(-1);
    expect(g.length, `${what}: length`).toBe(w.length);
  };
  const lawCase = fc.record({ c: caseArb, kept: fc.boolean(), masked: fc.boolean(), mb: fc.boolean(), mn: fc.boolean(), density: fc.constantFrom(0, 0.3, 0.8, 1) });

  for (const relaxed of [true, false]) {
    it.runIf(!relaxed || wasmFeatures().relaxedSimd)(`law: forward (out, lse, kept P) and backward (dq, dk, dv), P kept or recomputed, causal or masked, GQA, bf16 and f32 operands: the reference's bits exactly (${relaxed ? 'relaxed SIMD: FMA' : 'plain SIMD'})`, () => {
      configure({ relaxedSimd: relaxed });
      try {
        expect((getBackend() as SystolicBackend).usesRelaxedSimd).toBe(relaxed);
        const math = kernelMath(relaxed);
        let bfCases = 0;
        fc.assert(
          fc.property(lawCase, ({ c, kept, masked, mb, mn, density }) => {
            const [q, k, v, w] = operands(c);
            const mask = masked ? maskOf([mb ? c.b : 1, mn ? c.k * c.g : 1, c.t, c.s], c.seed, density) : undefined;
            const params = { scale: 1 / Math.sqrt(c.h), isCausal: c.causal, saveProbs: kept };
            const xs = mask ? [q, k, v, mask] : [q, k, v];
            const [out, lse, probs] = evalPrimitive(attentionFwdP, xs, params);
            const grads = evalPrimitive(attentionBwdP, [q, k, v, lse, w, ...(mask ? [mask] : []), ...(kept ? [probs] : [])], params);
            const want = fusedReference(c, q, k, v, w, mask, kept, math);
            const what = JSON.stringify({ c, kept, masked, mb, mn, density });
            expectSame(out, want.out, `out ${what}`);
            expectSame(lse, want.lse, `lse ${what}`);
            if (kept) expectSame(probs, want.probs, `probs ${what}`);
            grads.forEach((g, i) => expectSame(g, [want.dq, want.dk, want.dv][i], `d${'qkv'[i]} ${what}`));
            if (c.dtype === 'bfloat16') bfCases++;
          }),
          { numRuns: 50 },
        );
        expect(bfCases, 'cases with bf16 operands').toBeGreaterThan(5);
      } finally {
        configure({ relaxedSimd: true });
      }
    });
  }

  it('on the reference GPT\'s head shape over more than one chunk of query rows (T = S = 133, H = 32, causal, GQA, bf16), P kept and recomputed', () => {
    const math = kernelMath((getBackend() as SystolicBackend).usesRelaxedSimd);
    const c: Case = { b: 1, t: QB + 5, s: QB + 5, k: 1, g: 2, h: 32, causal: true, dtype: 'bfloat16', seed: 77 };
    const [q, k, v, w] = operands(c);
    for (const kept of [true, false]) {
      const params = { scale: 1 / Math.sqrt(c.h), isCausal: true, saveProbs: kept };
      const [out, lse, probs] = evalPrimitive(attentionFwdP, [q, k, v], params);
      const grads = evalPrimitive(attentionBwdP, [q, k, v, lse, w, ...(kept ? [probs] : [])], params);
      const want = fusedReference(c, q, k, v, w, undefined, kept, math);
      expectSame(out, want.out, 'out');
      expectSame(lse, want.lse, 'lse');
      grads.forEach((g, i) => expectSame(g, [want.dq, want.dk, want.dv][i], `d${'qkv'[i]}, P kept: ${kept}`));
    }
  });

  it('with masks over more than one chunk of query rows (T = 133, S = 131, GQA, bf16): blocks at a chunk end that mix rows seeing no key with other rows, P kept and recomputed', () => {
    const math = kernelMath((getBackend() as SystolicBackend).usesRelaxedSimd);
    const combos = [
      { causal: false, density: 0.3, mb: true, mn: false },
      { causal: true, density: 0.03, mb: false, mn: true },
      { causal: false, density: 0.02, mb: true, mn: true },
    ];
    for (const [n, { causal, density, mb, mn }] of combos.entries()) {
      const c: Case = { b: 2, t: QB + 5, s: QB + 3, k: 1, g: 2, h: 16, causal, dtype: 'bfloat16', seed: 90 + n };
      const [q, k, v, w] = operands(c);
      const mask = maskOf([mb ? c.b : 1, mn ? c.k * c.g : 1, c.t, c.s], c.seed, density);
      for (const kept of [true, false]) {
        const params = { scale: 1 / Math.sqrt(c.h), isCausal: causal, saveProbs: kept };
        const [out, lse, probs] = evalPrimitive(attentionFwdP, [q, k, v, mask], params);
        const grads = evalPrimitive(attentionBwdP, [q, k, v, lse, w, mask, ...(kept ? [probs] : [])], params);
        const want = fusedReference(c, q, k, v, w, mask, kept, math);
        const what = JSON.stringify({ causal, density, mb, mn, kept });
        expectSame(out, want.out, `out ${what}`);
        expectSame(lse, want.lse, `lse ${what}`);
        if (kept) expectSame(probs, want.probs, `probs ${what}`);
        grads.forEach((g, i) => expectSame(g, [want.dq, want.dk, want.dv][i], `d${'qkv'[i]} ${what}`));
      }
    }
  });
});
