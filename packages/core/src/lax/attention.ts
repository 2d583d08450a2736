/**
 * The fused dot-product attention primitives behind `nn.dotProductAttention`'s fused
 * implementation (jax.nn.dot_product_attention with `implementation='cudnn'` is JAX's
 * counterpart: one kernel per direction instead of the composite's matmuls, mask and softmax).
 *
 * - `dot_product_attention`: query [B, T, N, H], key and value [B, S, K, H] (N a multiple of K,
 *   grouped-query attention) -> out [B, T, N, H]: what `nn.dotProductAttention` binds.
 * - `dot_product_attention_fwd`: the same with the per-row logsumexp of the scaled logits, lse
 *   [B, N, T] float32 (the residual the backward pass recomputes P from); what its jvp binds.
 *   With `saveProbs` it also returns P itself, probs [B, N, T, S] float32 (the softmax, 0 at
 *   hidden keys; with `probsVisibleOnly`, set by the jvp, unspecified at the causally hidden
 *   keys of a row that sees a key), a last operand of `_lin` and `_bwd` then (it must be the
 *   probs a forward with the same params returned: the systolic backward reads each block of 4
 *   rows' keys up to its last visible key's 8-key panel, every key when not causal or when a row
 *   of the block sees no key, hidden ones included; the reference one each row's visible keys,
 *   every key of a row that sees none), and a kernel may read P from it
 *   instead of recomputing it from lse (the systolic one does: no Q K^T, no exp; the StableHLO
 *   export still recomputes): the jvp sets it while P has at most
 *   `attentionOptions.saveProbsMaxElements` elements (the composite keeps the same P as its
 *   residual; past the limit the fused attention keeps only its O(T) residual).
 * - `dot_product_attention_lin`: the linear map (tq, tk, tv) -> tOut at (q, k, v, lse[, probs]);
 *   only transposed (to `dot_product_attention_bwd`), never evaluated: forward-mode
 *   differentiation (jvp, jacfwd) of the fused attention is an error, as for JAX's cuDNN attention.
 * - `dot_product_attention_bwd`: (query, key, value, lse, dOut[, mask][, probs]) -> (dQuery, dKey,
 *   dValue) (probs, last, with `saveProbs`).
 *
 * So reverse mode is jvp + partial evaluation + transpose like every other primitive, and the
 * staged program holds plain primitives with plain parameters (no functions: it can be sent to
 * device threads and exported). Parameters: `scale` (applied to the float32 logits) and
 * `isCausal` (key s is visible to query t when s <= t, as `np.tri(T, S)`). Every primitive takes an
 * optional last operand, a boolean `mask` [B|1, N|1, T, S] (true = attend; non-differentiable, so
 * it is no linear input of `_lin` and gets no cotangent). With the composite's semantics exactly:
 * the logits of keys hidden by the mask or by causality are replaced by -0.7 * float32 max (so they
 * get probability 0 and no gradient), and a row whose keys are all hidden gets the uniform softmax
 * over all S keys (as in JAX) and a zero logit gradient; its lse residual is then log(S) (the
 * logsumexp of zero logits, which the backward pass recomputes P from). The reference kernels
 * here are plain float64 loops (exact products, like the reference backend's dot_general); the
 * systolic backend runs generated WebAssembly instead (backends/systolic/attention.ts) with the
 * MXU's numerics: q, k, v and P rounded to bf16 as matmul operands, f32 accumulation and f32
 * softmax. vmap folds the mapped axis into the batch. The fwd and bwd primitives have no jvp
 * rules: grad of grad is an error naming the primitive it meets.
 */
import { envSwitch } from '../env';
import type { Array } from '../array';
import { numbersToStorage, storageToNumbers } from '../array';
import type { StorageArray } from '../dtype';
import { type BatchRule, definePrimitive, type HostArray, isUndef, NON_LINEAR, type Primitive, type ShapedArray, type TransposeRule } from '../primitive';
import { bind } from '../trace';
import { broadcastInDim, moveBdim, reshape, zerosOf } from './structural';

export interface AttentionParams {
  readonly scale: number;
  readonly isCausal: boolean;
  /** The forward also returns P (probs), a last operand of the backward and `_lin` (see the file comment); set by the jvp rule, absent = false. */
  readonly saveProbs?: boolean;
  /**
   * With `saveProbs`: probs' values at causally hidden keys (s > t, in a row that sees a key) are
   * unspecified: the systolic forward leaves those past each block of 4 rows' last visible key's
   * 8-key panel unwritten (about half of P's memory traffic) and its backward reads no further;
   * the reference backward reads visible keys only. Set by the jvp rule, whose probs only its
   * backward reads; absent = false (0 at every hidden key). True without `saveProbs` is an error.
   */
  readonly probsVisibleOnly?: boolean;
}

/**
 * The largest P (B N T S elements) the jvp keeps from the forward pass for the backward; larger
 * ones are recomputed from the logsumexp. 0 always recomputes (the O(T)-memory residual), as
 * `TPUKIT_ATTENTION_SAVE_PROBS=0` in the environment at load time does (for A/B runs; `1` or
 * unset keeps, anything else throws). The limit is checked on the traced call's shapes: under
 * `vmap` the kept P is the mapped size times that (the batching rules fold the batch into B).
 */
export const attentionOptions = { saveProbsMaxElements: envSwitch('TPUKIT_ATTENTION_SAVE_PROBS', true) ? 2 ** 24 : 0 };

/** Whether the jvp saves P for query [B,T,N,H] and key [B,S,K,H] (see `attentionOptions`). */
export function savesProbs(q: readonly number[], k: readonly number[]): boolean {
  return q[0] * q[2] * q[1] * k[1] <= attentionOptions.saveProbsMaxElements;
}

/** The sizes of an attention call, read from query [B,T,N,H] and key [B,S,K,H]. */
export interface AttentionDims {
  b: number;
  t: number;
  n: number;
  h: number;
  s: number;
  k: number;
  /** Query heads per key/value head. */
  g: number;
}

export const attentionDims = (q: readonly number[], k: readonly number[]): AttentionDims => ({ b: q[0], t: q[1], n: q[2], h: q[3], s: k[1], k: k[2], g: q[2] / k[2] });

/**
 * Checks the shapes of query [B, T, N, H], key and value [B, S, K, H] (N a multiple of K): what
 * both `nn.dotProductAttention` implementations and the fused primitives require; throws naming
 * the operation and the shapes.
 */
export function checkAttentionShapes(op: string, q: readonly number[], k: readonly number[], v: readonly number[]): void {
  if (q.length !== 4 || k.length !== 4 || v.length !== 4) throw new TypeError(`${op}: query, key and value must be rank 4 [B, T|S, N|K, H]; got [${q}], [${k}], [${v}]`);
  if (k.join() !== v.join()) throw new TypeError(`${op}: key [${k}] and value [${v}] must have the same shape`);
  if (k[0] !== q[0] || k[3] !== q[3] || k[2] === 0 || q[2] % k[2] !== 0) {
    throw new TypeError(`${op}: key [${k}] does not fit query [${q}]: need the same batch and head dim, and query heads (${q[2]}) a multiple of key heads (${k[2]})`);
  }
}

/** Checks the operands of the fused attention (dtypes, then `checkAttentionShapes`); throws naming the primitive, the argument and the shapes. */
export function checkAttentionOperands(op: string, avals: readonly ShapedArray[], names: readonly string[]): void {
  avals.forEach((a, i) => {
    if (a.dtype !== 'float32' && a.dtype !== 'bfloat16') throw new TypeError(`${op}: ${names[i]} must be float32 or bfloat16; got ${a.dtype}`);
  });
  const [q, k, v] = avals;
  if (q.shape.length === 4 && k.shape.length === 4 && v.shape.length === 4 && (q.dtype !== k.dtype || q.dtype !== v.dtype)) {
    throw new TypeError(`${op}: query, key and value must have one dtype; got ${q.dtype}, ${k.dtype}, ${v.dtype}`);
  }
  checkAttentionShapes(op, q.shape, k.shape, v.shape);
}

function checkParams(op: string, p: AttentionParams): void {
  if (typeof p.scale !== 'number' || !Number.isFinite(p.scale)) throw new TypeError(`${op}: scale must be a finite number; got ${String(p.scale)}`);
  if (typeof p.isCausal !== 'boolean') throw new TypeError(`${op}: isCausal must be a boolean; got ${String(p.isCausal)}`);
  if (p.saveProbs !== undefined && typeof p.saveProbs !== 'boolean') throw new TypeError(`${op}: saveProbs must be a boolean when given; got ${String(p.saveProbs)}`);
  if (p.probsVisibleOnly !== undefined && typeof p.probsVisibleOnly !== 'boolean') throw new TypeError(`${op}: probsVisibleOnly must be a boolean when given; got ${String(p.probsVisibleOnly)}`);
  if (p.probsVisibleOnly === true && p.saveProbs !== true) throw new TypeError(`${op}: probsVisibleOnly: true needs saveProbs: true (it says which keys of the kept probs a forward writes); got saveProbs ${String(p.saveProbs)}`);
}

/** Checks a residual operand: lse float32 [B, N, T], or probs float32 [B, N, T, S]. */
function checkResidual(op: string, name: 'lse' | 'probs', res: ShapedArray | undefined, q: readonly number[], k: readonly number[]): void {
  const [b, t, n] = q;
  const want = name === 'probs' ? [b, n, t, k[1]] : [b, n, t];
  if (res === undefined || res.dtype !== 'float32' || res.shape.join() !== want.join()) throw new TypeError(`${op}: ${name} must be float32 [${want}]; got ${res === undefined ? 'none' : `${res.dtype}[${res.shape}]`}`);
}

/**
 * The operands of `_bwd` or `_lin` (`fixed` of them before the optional mask) split: with
 * `saveProbs` the last is probs, and a mask is there when one more operand is left.
 */
function splitKept<T>(op: string, xs: readonly T[], fixed: number, p: AttentionParams, what: string): { xs: T[]; mask: T | undefined; probs: T | undefined } {
  const kept = p.saveProbs === true ? 1 : 0;
  const n = xs.length - kept;
  if (n !== fixed && n !== fixed + 1) throw new TypeError(`${op}: expected ${fixed + kept} or ${fixed + kept + 1} operands (${what}[, mask]${kept ? ', probs' : ''}); got ${xs.length}`);
  return { xs: xs.slice(0, fixed), mask: n > fixed ? xs[fixed] : undefined, probs: kept ? xs[xs.length - 1] : undefined };
}

/** The backward's operands (query, key, value, lse, dOut[, mask][, probs]) split (see `splitKept`). */
export const splitBwd = <T>(xs: readonly T[], p: AttentionParams): { xs: T[]; mask: T | undefined; probs: T | undefined } => splitKept(BWD, xs, 5, p, 'query, key, value, lse, dOut');

/** The composite's stand-in for a hidden logit (nn.ts: -0.7 * float32 max), as float32. */
export const MASKED_LOGIT = Math.fround(-0.7 * 3.4028234663852886e38);

/** Checks the optional mask operand (rank 4 bool [B|1, N|1, T, S]) against query [B,T,N,H] and key [B,S,K,H]. */
export function checkMask(op: string, mask: ShapedArray | undefined, q: readonly number[], k: readonly number[]): void {
  if (mask === undefined) return;
  const [b, t, n] = q;
  const s = k[1];
  const m = mask.shape;
  if (mask.dtype !== 'bool') throw new TypeError(`${op}: mask must be bool; got ${mask.dtype}`);
  if (m.length !== 4 || (m[0] !== b && m[0] !== 1) || (m[1] !== n && m[1] !== 1) || m[2] !== t || m[3] !== s) {
    throw new TypeError(`${op}: mask must be bool [${b}|1, ${n}|1, ${t}, ${s}] ([B|1, N|1, T, S]); got [${m}]`);
  }
}

const FWD = 'dot_product_attention_fwd';
const BWD = 'dot_product_attention_bwd';

/** Folds a vmapped axis into the batch: every operand to [n*B, ...], run, every result back to [n, B, ...]. */
function foldBatch(prim: () => Primitive<AttentionParams>, arity: number): BatchRule {
  return (vals, dims, params, size) => {
    const b = vals[0].shape[dims[0] === 0 ? 1 : 0];
    const xs = vals.map((v, i) => {
      // (the operand after the fixed ones is the mask when it is bool; a kept probs may follow)
      const isMask = i === arity && v.dtype === 'bool';
      // an unmapped mask with batch 1 serves every folded item as it is
      if (isMask && dims[i] === null && v.shape[0] === 1) return v;
      let m = moveBdim(v, dims[i], 0, size);
      // a mapped mask with batch 1 is broadcast to the query's batch before folding
      if (isMask && m.shape[1] !== b) m = broadcastInDim(m, [size, b, ...m.shape.slice(2)], [0, 1, 2, 3, 4]);
      return reshape(m, [size * m.shape[1], ...m.shape.slice(2)]);
    });
    const outs = bind(prim(), xs, params);
    return [outs.map((o) => reshape(o, [size, o.shape[0] / size, ...o.shape.slice(1)])), outs.map(() => 0)];
  };
}

/**
 * Which keys query row (b, n, t) sees, over the optional mask host array (bool [B|1, N|1, T, S])
 * and causality: after `at(b, n, t)`, `vis(s)`, and `none` when it sees none (the uniform-softmax
 * row). One per call, moved from row to row (no allocation per row).
 */
class RowVisibility {
  none = false;
  private o = -1;
  private t = 0;

  constructor(
    private readonly mask: HostArray | undefined,
    private readonly causal: boolean,
    private readonly T: number,
    private readonly S: number,
  ) {}

  at(b: number, n: number, t: number): this {
    const m = this.mask;
    this.o = m === undefined ? -1 : (((m.shape[0] === 1 ? 0 : b) * m.shape[1] + (m.shape[1] === 1 ? 0 : n)) * this.T + t) * this.S;
    this.t = t;
    let none = true;
    for (let s = 0; s < this.S && none; s++) none = !this.vis(s);
    this.none = none;
    return this;
  }

  vis(s: number): boolean {
    return (!this.causal || s <= this.t) && (this.o < 0 || this.mask!.data[this.o + s] !== 0);
  }
}

/**
 * The reference kernels' walk over the query rows (b, n, t) in that order: `fn(b, kh, qo, r)`
 * after `row.at(b, n, t)`, with kh the row's key/value head, qo its first element in q
 * [B, T, N, H] and r = (b N + n) T + t its row of lse and probs.
 */
function eachQueryRow(d: AttentionDims, row: RowVisibility, fn: (b: number, kh: number, qo: number, r: number) => void): void {
  const { b: B, t: T, n: N, h: H, g: G } = d;
  for (let b = 0; b < B; b++)
    for (let n = 0; n < N; n++) {
      const kh = Math.floor(n / G);
      for (let t = 0; t < T; t++) {
        row.at(b, n, t);
        fn(b, kh, ((b * T + t) * N + n) * H, (b * N + n) * T + t);
      }
    }
}

/** The reference forward kernel: float64 loops, exact products. */
function referenceFwd(inputs: HostArray[], p: AttentionParams): StorageArray[] {
  const [qa, ka, va, ma] = inputs;
  const d = attentionDims(qa.shape, ka.shape);
  const { b: B, t: T, n: N, h: H, s: S, k: K } = d;
  const [q, k, v] = [qa, ka, va].map((a) => storageToNumbers(a.data, a.dtype));
  const row = new RowVisibility(ma, p.isCausal, T, S);
  const out = new Float64Array(B * T * N * H);
  const lse = new Float32Array(B * N * T);
  const probs = p.saveProbs === true ? new Float32Array(B * N * T * S) : null;
  const e = new Float64Array(S);
  eachQueryRow(d, row, (b, kh, qo, r) => {
    const none = row.none;
    let m = -Infinity;
    for (let s = 0; s < S; s++) {
      let dot = 0;
      const ko = ((b * S + s) * K + kh) * H;
      for (let h = 0; h < H; h++) dot += q[qo + h] * k[ko + h];
      e[s] = none ? 0 : row.vis(s) ? Math.fround(dot) * p.scale : -Infinity;
      m = Math.max(m, e[s]);
    }
    let z = 0;
    for (let s = 0; s < S; s++) z += e[s] = m === -Infinity ? 0 : Math.exp(e[s] - m);
    lse[r] = m + Math.log(z);
    for (let s = 0; s < S; s++) {
      if (e[s] === 0) continue;
      const w = e[s] / z;
      if (probs) probs[r * S + s] = w;
      const vo = ((b * S + s) * K + kh) * H;
      for (let h = 0; h < H; h++) out[qo + h] += w * v[vo + h];
    }
  });
  const res: StorageArray[] = [numbersToStorage(Float32Array.from(out), qa.dtype), lse];
  return probs ? [...res, probs] : res;
}

/** The reference backward kernel (recomputes P from q, k and lse, or reads the kept probs; dS = P (dP - rowsum(P dP))). */
function referenceBwd(inputs: HostArray[], p: AttentionParams): StorageArray[] {
  const { xs: [qa, ka, va, la, da], mask: ma, probs: pa } = splitBwd(inputs, p);
  const d = attentionDims(qa.shape, ka.shape);
  const { t: T, h: H, s: S, k: K } = d;
  const [q, k, v, lse, dout] = [qa, ka, va, la, da].map((a) => storageToNumbers(a.data, a.dtype));
  const probs = pa === undefined ? null : storageToNumbers(pa.data, pa.dtype);
  const row = new RowVisibility(ma, p.isCausal, T, S);
  const [dq, dk, dv] = [new Float64Array(q.length), new Float64Array(k.length), new Float64Array(v.length)];
  const P = new Float64Array(S);
  const dP = new Float64Array(S);
  eachQueryRow(d, row, (b, kh, qo, r) => {
    const l = lse[r];
    const none = row.none;
    let D = 0;
    for (let s = 0; s < S; s++) {
      const ko = ((b * S + s) * K + kh) * H;
      let dot = 0;
      let g = 0;
      for (let h = 0; h < H; h++) {
        dot += q[qo + h] * k[ko + h];
        g += dout[qo + h] * v[ko + h];
      }
      // (kept P read at visible keys only: its values at hidden keys may be unspecified, `probsVisibleOnly`)
      P[s] = !none && !row.vis(s) ? 0 : probs ? probs[r * S + s] : none ? Math.exp(-l) : Math.exp(Math.fround(dot) * p.scale - l);
      dP[s] = g;
      D += P[s] * g;
    }
    for (let s = 0; s < S; s++) {
      if (P[s] === 0) continue;
      // (a row that sees no key has constant logits: no gradient reaches q or k)
      const ds = none ? 0 : P[s] * (dP[s] - D) * p.scale;
      const ko = ((b * S + s) * K + kh) * H;
      for (let h = 0; h < H; h++) {
        dq[qo + h] += ds * k[ko + h];
        dk[ko + h] += ds * q[qo + h];
        dv[ko + h] += P[s] * dout[qo + h];
      }
    }
  });
  return [dq, dk, dv].map((x) => numbersToStorage(Float32Array.from(x), qa.dtype));
}

export const attentionFwdP: Primitive<AttentionParams> = definePrimitive<AttentionParams>({
  name: FWD,
  abstractEval: (avals, p) => forwardAvals(FWD, avals, p),
  impl: (inputs, p) => referenceFwd(inputs, p),
  rules: { batch: foldBatch(() => attentionFwdP, 3), transpose: NON_LINEAR },
});

export const attentionBwdP: Primitive<AttentionParams> = definePrimitive<AttentionParams>({
  name: BWD,
  abstractEval(avals, p) {
    checkParams(BWD, p);
    const { xs: [q, k, v, lse, dout], mask, probs } = splitBwd(avals, p);
    checkAttentionOperands(BWD, [q, k, v], ['query', 'key', 'value']);
    checkMask(BWD, mask, q.shape, k.shape);
    checkResidual(BWD, 'lse', lse, q.shape, k.shape);
    if (p.saveProbs === true) checkResidual(BWD, 'probs', probs, q.shape, k.shape);
    if (dout.dtype !== q.dtype || dout.shape.join() !== q.shape.join()) throw new TypeError(`${BWD}: dOut must be ${q.dtype}[${q.shape}] like the output; got ${dout.dtype}[${dout.shape}]`);
    return [q, k, v].map((a) => ({ shape: a.shape, dtype: a.dtype, weakType: false }));
  },
  impl: (inputs, p) => referenceBwd(inputs, p),
  rules: { batch: foldBatch(() => attentionBwdP, 5), transpose: NON_LINEAR },
});

const LIN = 'dot_product_attention_lin';

/** Output avals of the forward primitives (out; lse) after checking the operands. */
function forwardAvals(op: string, avals: ShapedArray[], p: AttentionParams): ShapedArray[] {
  if (avals.length !== 3 && avals.length !== 4) throw new TypeError(`${op}: expected 3 or 4 operands (query, key, value[, mask]); got ${avals.length}`);
  checkParams(op, p);
  checkAttentionOperands(op, avals.slice(0, 3), ['query', 'key', 'value']);
  const [q, k, , mask] = avals;
  checkMask(op, mask, q.shape, k.shape);
  const [b, t, n] = q.shape;
  const outs: ShapedArray[] = [
    { shape: q.shape, dtype: q.dtype, weakType: false },
    { shape: [b, n, t], dtype: 'float32', weakType: false },
  ];
  if (p.saveProbs === true) outs.push({ shape: [b, n, t, k.shape[1]], dtype: 'float32', weakType: false });
  return outs;
}

export const attentionLinP: Primitive<AttentionParams> = definePrimitive<AttentionParams>({
  name: LIN,
  abstractEval(avals, p) {
    checkParams(LIN, p);
    const { xs, mask, probs } = splitKept(LIN, avals, 7, p, 'query, key, value, lse, their three tangents');
    checkAttentionOperands(LIN, [...xs.slice(0, 3), ...xs.slice(4, 7)], ['query', 'key', 'value', 'query tangent', 'key tangent', 'value tangent']);
    checkMask(LIN, mask, xs[0].shape, xs[1].shape);
    checkResidual(LIN, 'lse', xs[3], xs[0].shape, xs[1].shape);
    if (p.saveProbs === true) checkResidual(LIN, 'probs', probs, xs[0].shape, xs[1].shape);
    return [{ shape: avals[0].shape, dtype: avals[0].dtype, weakType: false }];
  },
  impl() {
    throw new Error(`${LIN}: forward-mode differentiation (jvp, jacfwd) of the fused attention is not supported; use nn.dotProductAttention's implementation 'xla'`);
  },
  rules: (self) => ({
    transpose: (([ct], args, p) => {
      const { xs, mask, probs } = splitKept(LIN, args as Array[], 7, p, 'query, key, value, lse, their three tangents');
      const [q, k, v, lse] = xs;
      if (xs.slice(0, 4).some(isUndef) || (mask !== undefined && isUndef(mask)) || (probs !== undefined && isUndef(probs)) || ct === null) return args.map(() => null);
      const [dq, dk, dv] = attentionBwd(q, k, v, lse, ct, p, mask, probs);
      return [null, null, null, null, ...[dq, dk, dv].map((d, i) => (isUndef(args[4 + i]) ? d : null)), ...args.slice(7).map(() => null)];
    }) satisfies TransposeRule,
    batch: foldBatch(() => self, 7),
  }),
});

export const attentionP: Primitive<AttentionParams> = definePrimitive<AttentionParams>({
  name: 'dot_product_attention',
  abstractEval: (avals, p) => forwardAvals('dot_product_attention', avals, p).slice(0, 1),
  impl: (inputs, p) => referenceFwd(inputs, p).slice(0, 1),
  rules: (self) => ({
    jvp: (primals, tangents, p) => {
      const [q, k, v, mask] = primals;
      if (tangents.slice(0, 3).every((t) => t === null)) return [[attentionFwd(q, k, v, p, mask)[0]], [null]];
      // (the residual: P when it is small enough, else the logsumexp to recompute P from)
      // (its probs go to its backward only: P at visible keys is all it reads)
      const keep = savesProbs(q.shape, k.shape);
      const lp: AttentionParams = keep ? { ...p, saveProbs: true, probsVisibleOnly: true } : { ...p, saveProbs: false };
      const [out, lse, probs] = attentionFwd(q, k, v, lp, mask);
      const ts = tangents.slice(0, 3).map((t, i) => t ?? zerosOf(primals[i].aval));
      return [[out], [bind(attentionLinP, [q, k, v, lse, ...ts, ...primals.slice(3), ...(probs === undefined ? [] : [probs])], lp)[0]]];
    },
    transpose: NON_LINEAR,
    batch: foldBatch(() => self, 3),
  }),
});

const withMask = (xs: Array[], mask: Array | undefined): Array[] => (mask === undefined ? xs : [...xs, mask]);

/** Binds the attention primitive: out (mask: optional bool [B|1, N|1, T, S], true = attend). */
export const attention = (q: Array, k: Array, v: Array, params: AttentionParams, mask?: Array): Array => bind(attentionP, withMask([q, k, v], mask), params)[0];

/** Binds the forward primitive: [out, lse], and probs with `saveProbs`. */
export const attentionFwd = (q: Array, k: Array, v: Array, params: AttentionParams, mask?: Array): Array[] => bind(attentionFwdP, withMask([q, k, v], mask), params);

/** Binds the backward primitive: [dq, dk, dv] (`probs`: the forward's kept P, with `saveProbs`). */
export const attentionBwd = (q: Array, k: Array, v: Array, lse: Array, dout: Array, params: AttentionParams, mask?: Array, probs?: Array): Array[] =>
  bind(attentionBwdP, [...withMask([q, k, v, lse, dout], mask), ...(probs === undefined ? [] : [probs])], params);
