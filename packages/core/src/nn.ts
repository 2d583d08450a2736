/** The `nn` namespace: the jax.nn functions a transformer needs, built from jnp ops. */
import { stopGradient } from './transforms/custom';
import { getBackend } from './backend';
import { MASKED_LOGIT, attention, checkAttentionShapes } from './lax/attention';
import { getDefaultMatmulPrecision } from './lax/precision';
import type { Array } from './array';
import { type ArrayLike, asArray } from './convert';
import { isFloat } from './dtype';
import * as lax from './lax/ops';
import * as np from './numpy/index';
import { normalizeAxes } from './shape';
import { type AxisArg, axisArgs, checkOptions } from './numpy/axisArgs';
import { promoteInexact } from './numpy/promote';

type AxisOpt = { axis?: AxisArg };
type LseOptions = AxisOpt & { keepdims?: boolean };
type StdOptions = AxisOpt & { epsilon?: number };
/** What follows the array: `(x, axis?, options?)` or `(x, options?)`, as jax.nn takes them. */
type Args<O extends AxisOpt> = [axisOrOptions?: AxisArg | O, options?: Omit<O, 'axis'>];

function floatArg(x: ArrayLike, op: string): Array {
  return promoteInexact(op, [x])[0];
}

export function relu(x: ArrayLike): Array {
  const a = asArray(x, { op: 'relu' });
  return np.maximum(a, 0);
}

export function relu6(x: ArrayLike): Array {
  return np.clip(x, 0, 6);
}

export function sigmoid(x: ArrayLike): Array {
  return lax.logistic(floatArg(x, 'sigmoid'));
}

export function silu(x: ArrayLike): Array {
  const a = floatArg(x, 'silu');
  return lax.mul(a, lax.logistic(a));
}
export const swish = silu;

export function softplus(x: ArrayLike): Array {
  return np.logaddexp(floatArg(x, 'softplus'), 0);
}

/** `jax.nn.gelu`; `approximate: true` (the default, as in JAX) uses the tanh form. */
export function gelu(x: ArrayLike, opts: { approximate?: boolean } = {}): Array {
  checkOptions('gelu', opts, ['approximate']);
  const a = floatArg(x, 'gelu');
  if (opts.approximate ?? true) {
    const c = Math.sqrt(2 / Math.PI);
    const inner = lax.mul(lax.add(a, lax.mul(lax.mul(lax.mul(a, a), a), 0.044715)), c);
    return lax.mul(lax.mul(a, 0.5), lax.add(lax.tanh(inner), 1));
  }
  return lax.mul(lax.mul(a, 0.5), lax.add(lax.erf(lax.mul(a, Math.SQRT1_2)), 1));
}

export function logSigmoid(x: ArrayLike): Array {
  return lax.neg(softplus(lax.neg(floatArg(x, 'log_sigmoid'))));
}

/** `jax.nn.logsumexp` over `axis` (all axes by default), stable for large inputs. */
export function logsumexp(x: ArrayLike, ..._: Args<LseOptions>): Array {
  const opts = axisArgs<LseOptions>('logsumexp', arguments, 1, ['axis', 'keepdims']);
  const a = floatArg(x, 'logsumexp');
  const axes = normalizeAxes(opts.axis ?? null, a.ndim, 'logsumexp');
  // The shift cancels mathematically; stopping its gradient (as JAX does) saves work in grad.
  const m = stopGradient(np.max(a, { axis: axes, keepdims: true }));
  const safe = lax.select(lax.isFinite(m), m, np.zerosLike(m));
  const s = np.sum(np.exp(np.subtract(a, safe)), { axis: axes, keepdims: true });
  const out = np.add(np.log(s), safe);
  return opts.keepdims ? out : np.squeeze(out, axes);
}

/** `jax.nn.softmax(x, axis=-1)`; `axis` may be a list of axes. */
export function softmax(x: ArrayLike, ..._: Args<AxisOpt>): Array {
  const opts = axisArgs<AxisOpt>('softmax', arguments, 1, ['axis']);
  const a = floatArg(x, 'softmax');
  const axis = opts.axis === undefined ? -1 : opts.axis;
  const m = stopGradient(np.max(a, { axis, keepdims: true }));
  const e = np.exp(np.subtract(a, m));
  return np.divide(e, np.sum(e, { axis, keepdims: true }));
}

export function logSoftmax(x: ArrayLike, ..._: Args<AxisOpt>): Array {
  const opts = axisArgs<AxisOpt>('log_softmax', arguments, 1, ['axis']);
  const a = floatArg(x, 'log_softmax');
  const axis = opts.axis === undefined ? -1 : opts.axis;
  const shifted = np.subtract(a, stopGradient(np.max(a, { axis, keepdims: true })));
  return np.subtract(shifted, np.log(np.sum(np.exp(shifted), { axis, keepdims: true })));
}

/** `jax.nn.one_hot(x, numClasses)`: float32 by default; out-of-range indices give all zeros. */
export function oneHot(x: ArrayLike, numClasses: number, opts: { dtype?: import('./dtype').DType; axis?: number } = {}): Array {
  checkOptions('one_hot', opts, ['dtype', 'axis']);
  if (!Number.isInteger(numClasses) || numClasses < 0) throw new RangeError(`one_hot: numClasses must be a non-negative integer; got ${numClasses}`);
  const a = asArray(x, { op: 'one_hot' });
  if (isFloat(a.dtype)) throw new TypeError(`one_hot: indices must be integers; got ${a.dtype}`);
  const axis = opts.axis === undefined ? -1 : opts.axis;
  const expanded = np.expandDims(a, axis);
  const rank = a.ndim + 1;
  const ax = axis < 0 ? axis + rank : axis;
  const shape = expanded.shape.slice();
  shape[ax] = numClasses;
  const classes = lax.broadcastedIota('int32', shape, ax);
  return np.astype(np.equal(np.broadcastTo(lax.convertElementType(expanded, 'int32'), shape), classes), opts.dtype ?? 'float32');
}

export function standardize(x: ArrayLike, ..._: Args<StdOptions>): Array {
  const opts = axisArgs<StdOptions>('standardize', arguments, 1, ['axis', 'epsilon']);
  const a = floatArg(x, 'standardize');
  const axis = opts.axis === undefined ? -1 : opts.axis;
  const mu = np.mean(a, { axis, keepdims: true });
  const v = np.variance(a, { axis, keepdims: true });
  return np.multiply(np.subtract(a, mu), lax.rsqrt(np.add(v, opts.epsilon ?? 1e-5)));
}

/**
 * RMS normalisation over `axis` (default last): `x / sqrt(mean(x^2) + epsilon) * scale`, computed
 * in float32 and returned in x's dtype (as Flax's RMSNorm and MaxText do; jax.nn has no rms_norm).
 */
export function rmsNorm(x: ArrayLike, opts: { scale?: ArrayLike; epsilon?: number; axis?: number | readonly number[] } = {}): Array {
  checkOptions('rms_norm', opts, ['scale', 'epsilon', 'axis']);
  const a = floatArg(x, 'rms_norm');
  const f = np.astype(a, 'float32');
  const ms = np.mean(np.square(f), { axis: opts.axis ?? -1, keepdims: true });
  const y = np.astype(np.multiply(f, lax.rsqrt(np.add(ms, opts.epsilon ?? 1e-6))), a.dtype);
  return opts.scale === undefined ? y : np.astype(np.multiply(y, opts.scale), a.dtype);
}

/** The implementations `nn.dotProductAttention` accepts (JAX: 'xla' | 'cudnn' | None). */
export type AttentionImplementation = 'xla' | 'fused';

export interface DotProductAttentionOptions {
  bias?: ArrayLike;
  mask?: ArrayLike;
  scale?: number;
  isCausal?: boolean;
  /**
   * 'xla': the composite (matmuls, mask, softmax); 'fused': one forward and one backward kernel
   * (FlashAttention style; `mask` and `isCausal` but no bias; float32 or bfloat16 operands of one
   * dtype). Undefined picks 'fused' where it applies on a backend that runs the fused kernels
   * (`Backend.fusedAttention`: the systolic backend) and the default matmul precision is one bf16
   * pass (the fused kernels' numerics), else 'xla'.
   */
  implementation?: AttentionImplementation;
}

const IMPLEMENTATIONS: readonly string[] = ['xla', 'fused'];

/**
 * `jax.nn.dot_product_attention`: query [B, T, N, H], key and value [B, S, K, H] with N a
 * multiple of K (grouped-query attention: query head n reads key/value head floor(n / (N / K))).
 * `bias` is added to and `mask` (true = attend) selects the logits, both broadcastable to
 * [B, N, T, S]; `isCausal` masks key positions after the query's. Logits and the softmax are
 * float32; the probabilities are cast to value's dtype for the second matmul, as JAX does.
 * Returns [B, T, N, H]. See `DotProductAttentionOptions.implementation` for the fused kernel.
 */
export function dotProductAttention(query: ArrayLike, key: ArrayLike, value: ArrayLike, opts: DotProductAttentionOptions = {}): Array {
  const op = 'dot_product_attention';
  checkOptions(op, opts, ['bias', 'mask', 'scale', 'isCausal', 'implementation']);
  const impl = opts.implementation;
  if (impl !== undefined && !IMPLEMENTATIONS.includes(impl)) throw new TypeError(`${op}: unknown implementation ${JSON.stringify(impl)}; valid: ${IMPLEMENTATIONS.join(', ')} or undefined`);
  const [q, k, v] = [asArray(query, { op }), asArray(key, { op }), asArray(value, { op })];
  checkAttentionShapes(op, q.shape, k.shape, v.shape);
  const [b, t, n, h] = q.shape;
  const [, s, kh] = k.shape;
  const scale = opts.scale ?? 1 / Math.sqrt(h);
  if (typeof scale !== 'number' || !Number.isFinite(scale)) throw new TypeError(`${op}: scale must be a finite number; got ${String(scale)}`);
  const fusable = opts.bias === undefined && (q.dtype === 'float32' || q.dtype === 'bfloat16') && q.dtype === k.dtype && q.dtype === v.dtype;
  if (impl === 'fused' && !fusable) {
    const why = opts.bias !== undefined ? 'a bias' : `dtypes ${q.dtype}, ${k.dtype}, ${v.dtype} (need one of float32, bfloat16 for all three)`;
    throw new TypeError(`${op}: implementation 'fused' does not support ${why}; use implementation 'xla'`);
  }
  // (the fused kernels' matmuls are one bf16 pass: a higher default matmul precision keeps the composite)
  const onePass = (getDefaultMatmulPrecision() ?? 'default') === 'default';
  if (impl === 'fused' || (impl === undefined && fusable && onePass && getBackend().fusedAttention?.() === true)) {
    const mask = opts.mask === undefined ? undefined : fusedMask(op, asArray(opts.mask, { op }), [b, n, t, s]);
    return attention(q, k, v, { scale, isCausal: opts.isCausal === true }, mask);
  }
  return compositeAttention(q, k, v, opts, scale, [b, t, n, h, s, kh]);
}

/**
 * A mask broadcastable to [B, N, T, S] as the fused primitives take it: bool [B|1, N|1, T, S]
 * (leading dims added, T and S broadcast; batch and head dims kept at 1 where they are, so the
 * kernels read one mask for every batch item or head).
 */
function fusedMask(op: string, mask: Array, [b, n, t, s]: number[]): Array {
  const m = mask.shape;
  const full = [b, n, t, s];
  if (m.length > 4 || m.some((d, i) => d !== 1 && d !== full[4 - m.length + i])) {
    throw new TypeError(`${op}: mask [${m}] is not broadcastable to [B, N, T, S] = [${full}]`);
  }
  const m4 = [...new globalThis.Array<number>(4 - m.length).fill(1), ...m];
  let x = np.reshape(np.astype(mask, 'bool'), m4);
  if (m4[2] !== t || m4[3] !== s) x = np.broadcastTo(x, [m4[0], m4[1], t, s]);
  return x;
}

/** The composite ('xla') implementation. */
function compositeAttention(q: Array, k: Array, v: Array, opts: DotProductAttentionOptions, scale: number, [b, t, n, h, s, kh]: number[]): Array {
  const g = n / kh;
  // [B, T, N, H] -> [B, K, G*T, H]: one batched matmul per key/value head serves its G query heads.
  const qg = np.reshape(np.transpose(np.reshape(q, [b, t, kh, g, h]), [0, 2, 3, 1, 4]), [b, kh, g * t, h]);
  const kt = np.transpose(k, [0, 2, 3, 1]); // [B, K, H, S]
  const vt = np.transpose(v, [0, 2, 1, 3]); // [B, K, S, H]
  let logits = np.multiply(np.astype(np.reshape(np.matmul(qg, kt), [b, n, t, s]), 'float32'), scale);
  if (opts.bias !== undefined) logits = np.add(logits, np.astype(opts.bias, 'float32'));
  let mask: Array | null = opts.mask === undefined ? null : np.astype(opts.mask, 'bool');
  if (opts.isCausal) {
    const causal = np.tri(t, s, 0, 'bool');
    mask = mask === null ? causal : np.logicalAnd(mask, causal);
  }
  if (mask !== null) logits = np.where(mask, logits, MASKED_LOGIT);
  const probs = np.astype(softmax(logits, { axis: -1 }), v.dtype);
  const out = np.matmul(np.reshape(probs, [b, kh, g * t, s]), vt); // [B, K, G*T, H]
  return np.reshape(np.transpose(np.reshape(out, [b, kh, g, t, h]), [0, 3, 1, 2, 4]), [b, t, n, h]);
}
