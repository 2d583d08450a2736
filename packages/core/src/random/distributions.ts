/**
 * The samplers: uniform, normal, truncatedNormal, bernoulli, gumbel, categorical, randint,
 * permutation and choice. Each follows the corresponding function of jax/_src/random.py step for
 * step (same bits drawn from the same keys, same float arithmetic in the same dtype, same
 * number of shuffle rounds), written with lax ops so that the transformations can trace them.
 * Run eagerly on the reference kernels, most of them hand their bits to fused.ts, which computes
 * the same values in one loop instead of materialising every intermediate of the chain.
 */
import { Array } from '../array';
import * as bf16 from '../bf16';
import { asArray, type ArrayLike } from '../convert';
import { type DType, allocStorage, checkDType, finfo, intRange, isFloat, isInteger } from '../dtype';
import * as f16 from '../f16';
import * as lax from '../lax/ops';
import { LineSorter } from '../lax/radixSort';
import { broadcastTo } from '../numpy/promote';
import { broadcastShapes, checkShape, fmt, normalizeAxis, shapesEqual, sizeOf } from '../shape';
import { constant, erfInvLikeXla } from './erfinv';
import { canFuse, flushesSubnormals, gumbelFloat32, normal16, normalFloat32, randintInto, truncatedNormalFloat32, uniformFloat32, unitFloat32 } from './fused';
import { checkKey, full, randomBits, split, type PRNGKeyArray } from './prng';
import { takeInBounds } from './takeInBounds';

const NMANT: Partial<Record<DType, number>> = { float32: 23, bfloat16: 7, float16: 10 };
const NBITS: Partial<Record<DType, number>> = { float32: 32, bfloat16: 16, float16: 16 };

export function floatDType(op: string, dtype: DType | undefined): DType {
  const d = checkDType(dtype ?? 'float32', `random.${op}`);
  if (!isFloat(d)) throw new TypeError(`random.${op}: dtype must be a float dtype (float32, bfloat16, float16); got ${d}`);
  return d;
}

export function shapeArg(op: string, shape: readonly number[] | number | undefined): number[] {
  if (shape === undefined) return [];
  return checkShape(typeof shape === 'number' ? [shape] : shape, `random.${op}`);
}

/** A parameter that must broadcast into `shape` without enlarging it (JAX's `_check_shape`). */
function checkParamShape(op: string, name: string, param: readonly number[], shape: readonly number[]): void {
  let out: number[];
  try {
    out = broadcastShapes(`random.${op}`, shape, param);
  } catch {
    out = [];
  }
  if (!shapesEqual(out, shape)) {
    throw new Error(`random.${op}: ${name} of shape ${fmt(param)} must be broadcast-compatible with shape ${fmt(shape)} and broadcast to exactly ${fmt(shape)}`);
  }
}

/** A float parameter converted to `dtype` and broadcast to `shape`. */
export function floatParam(op: string, name: string, v: ArrayLike, dtype: DType, shape: readonly number[]): Array {
  let a: Array;
  if (v instanceof Array) a = v.dtype === dtype ? v : lax.convertElementType(v, dtype);
  else a = lax.convertElementType(asArray(v, { op: `random.${op}` }), dtype);
  checkParamShape(op, name, a.shape, shape);
  return broadcastTo(a, shape, `random.${op}`);
}

/** The random bits JAX's `_uniform` draws for `dtype`: 8 for bfloat16 (7 mantissa bits), 16 for float16, 32 for float32. */
function uniformBits(k: PRNGKeyArray, shape: readonly number[], dtype: DType, op: string): Array {
  const nmant = NMANT[dtype]!;
  return randomBits(k, (nmant < 8 ? 8 : NBITS[dtype]!) as 8 | 16 | 32, shape, op);
}

/** The floats of JAX's `_uniform` before scaling: m * 2^-nmant in [0, 1) from the random bits `b`. */
function unitFloats(b: Array, shape: readonly number[], dtype: DType): Array {
  if (dtype === 'float32' && canFuse(b)) return Array._fromStorage(unitFloat32(b._storage() as Uint32Array), shape, 'float32');
  const nmant = NMANT[dtype]!;
  const rngBits = nmant < 8 ? 8 : NBITS[dtype]!;
  const m = lax.shiftRightLogical(b, full(rngBits - nmant, 'uint32', shape));
  // JAX ors m into the mantissa of 1.0 and subtracts 1.0: exactly m * 2^-nmant.
  return lax.mul(lax.convertElementType(m, dtype), full(2 ** -nmant, dtype, shape));
}

/** JAX's `_uniform` from its random bits `b`, the parameters being arrays of the output shape and dtype. */
function uniformFromBits(b: Array, shape: readonly number[], dtype: DType, minv: Array, maxv: Array): Array {
  const floats = unitFloats(b, shape, dtype);
  return lax.max(minv, lax.add(lax.mul(floats, lax.sub(maxv, minv)), minv));
}

/**
 * JAX's `_uniform` once the parameters are arrays of the output shape and dtype, or numbers
 * (constants of the dtype; fused into one loop for float32 when eager on the reference kernels).
 */
export function uniformCore(k: PRNGKeyArray, shape: readonly number[], dtype: DType, minv: Array | number, maxv: Array | number, op: string): Array {
  const b = uniformBits(k, shape, dtype, op);
  if (typeof minv === 'number' && typeof maxv === 'number' && fusesFloat32(b, dtype)) {
    return Array._fromStorage(uniformFloat32(b._storage() as Uint32Array, Math.fround(minv), Math.fround(maxv)), shape, 'float32');
  }
  const lo = typeof minv === 'number' ? full(minv, dtype, shape) : minv;
  const hi = typeof maxv === 'number' ? full(maxv, dtype, shape) : maxv;
  return uniformFromBits(b, shape, dtype, lo, hi);
}

/** Whether fused.ts may compute a whole float32 sampler from its bits `b` (eager, on the reference kernels). */
function fusesFloat32(b: Array, dtype: DType): boolean {
  return dtype === 'float32' && canFuse(b);
}

export interface UniformOptions {
  dtype?: DType;
  minval?: ArrayLike;
  maxval?: ArrayLike;
}

/**
 * `jax.random.uniform(key, shape, dtype, minval, maxval)`: floats in [minval, maxval). As in
 * JAX, minval >= maxval is not an error (the result is then minval where it wins the max).
 */
export function uniform(k: PRNGKeyArray, shape: readonly number[] = [], opts: UniformOptions = {}): Array {
  checkKey('uniform', k);
  const dtype = floatDType('uniform', opts.dtype);
  const s = shapeArg('uniform', shape);
  const lo = opts.minval ?? 0;
  const hi = opts.maxval ?? 1;
  if (lo === 0 && hi === 1) {
    // On [0, 1) the affine step f * (1 - 0) + 0 and the max with 0 are exact identities for
    // f in [0, 1): skipping them gives the same bits, faster.
    return unitFloats(uniformBits(k, s, dtype, 'uniform'), s, dtype);
  }
  if (typeof lo === 'number' && typeof hi === 'number') {
    // Scalar bounds: converted exactly as floatParam converts them, without the broadcast.
    const bound = (v: number): Array => lax.convertElementType(asArray(v, { op: 'random.uniform' }), dtype);
    const [minv, maxv] = [bound(lo), bound(hi)];
    const b = uniformBits(k, s, dtype, 'uniform');
    if (fusesFloat32(b, dtype) && canFuse(minv, maxv)) {
      return Array._fromStorage(uniformFloat32(b._storage() as Uint32Array, minv._storage()[0], maxv._storage()[0]), s, 'float32');
    }
    return uniformFromBits(b, s, dtype, broadcastTo(minv, s, 'random.uniform'), broadcastTo(maxv, s, 'random.uniform'));
  }
  const minv = floatParam('uniform', 'minval', lo, dtype, s);
  const maxv = floatParam('uniform', 'maxval', hi, dtype, s);
  return uniformCore(k, s, dtype, minv, maxv, 'uniform');
}

/** `nextafter(-1, 0)` in each float dtype: the open lower end JAX's normal draws from. */
export const MINUS_ONE_UP: Partial<Record<DType, number>> = { float32: -(1 - 2 ** -24), bfloat16: -(1 - 2 ** -8), float16: -(1 - 2 ** -11) };

/** `jax.random.normal`: standard normal floats, sqrt(2) * erfinv(u) with u uniform on (-1, 1). */
export function normal(k: PRNGKeyArray, shape: readonly number[] = [], opts: { dtype?: DType } = {}): Array {
  checkKey('normal', k);
  const dtype = floatDType('normal', opts.dtype);
  const s = shapeArg('normal', shape);
  const b = uniformBits(k, s, dtype, 'normal');
  if (fusesFloat32(b, dtype)) return Array._fromStorage(normalFloat32(b._storage() as Uint32Array), s, 'float32');
  if ((dtype === 'bfloat16' || dtype === 'float16') && canFuse(b) && !flushesSubnormals()) {
    return Array._fromStorage(normal16(b._storage() as Uint32Array, dtype, MINUS_ONE_UP[dtype]!), s, dtype);
  }
  return normalFromBits(b, s, dtype);
}

/**
 * `normal`'s lax chain from its uniform bits `b` (as `uniformBits` draws them). Exported, not
 * re-exported, so that the tests can run it on every possible draw.
 */
export function normalFromBits(b: Array, s: readonly number[], dtype: DType): Array {
  const u = uniformFromBits(b, s, dtype, full(MINUS_ONE_UP[dtype]!, dtype, s), full(1, dtype, s));
  return lax.mul(constant(Math.SQRT2, u), erfInvLikeXla(u));
}

/** The next representable value of each element towards +inf (dir 1) or -inf (dir -1). */
function nextToward(x: Array, dir: 1 | -1, op: string): Array {
  if (x.dtype === 'float32') return lax.nextafter(x, full(dir * Infinity, 'float32', x.shape));
  if (x._trace !== null) {
    throw new Error(`random.${op}: ${x.dtype} bounds must be concrete here (core's lax.nextafter is float32-only so far)`);
  }
  const src = x._storage() as Uint16Array;
  const out = new Uint16Array(src.length);
  const nan = x.dtype === 'bfloat16' ? (b: number) => Number.isNaN(bf16.toFloat32(b)) : (b: number) => Number.isNaN(f16.toFloat32(b));
  const inf = x.dtype === 'bfloat16' ? 0x7f80 : 0x7c00;
  for (let i = 0; i < src.length; i++) {
    const b = src[i];
    const neg = (b & 0x8000) !== 0;
    const mag = b & 0x7fff;
    if (nan(b) || (mag === inf && neg === (dir < 0))) out[i] = b;
    else if (mag === 0) out[i] = dir > 0 ? 0x0001 : 0x8001;
    else out[i] = neg === (dir > 0) ? b - 1 : b + 1;
  }
  return Array._fromStorage(out, x.shape, x.dtype);
}

/**
 * `jax.random.truncatedNormal(key, lower, upper, shape, dtype)`: normal floats restricted to the
 * open interval (lower, upper), by inverting the CDF between erf(lower/sqrt2) and erf(upper/sqrt2).
 */
export function truncatedNormal(
  k: PRNGKeyArray,
  lower: ArrayLike,
  upper: ArrayLike,
  shape?: readonly number[],
  opts: { dtype?: DType } = {},
): Array {
  checkKey('truncatedNormal', k);
  const dtype = floatDType('truncatedNormal', opts.dtype);
  const lo0 = lower instanceof Array ? lower : asArray(lower, { op: 'random.truncatedNormal' });
  const hi0 = upper instanceof Array ? upper : asArray(upper, { op: 'random.truncatedNormal' });
  const s = shape === undefined ? broadcastShapes('random.truncatedNormal', lo0.shape, hi0.shape) : shapeArg('truncatedNormal', shape);
  const bits = uniformBits(k, s, dtype, 'truncatedNormal');
  if (lo0.ndim === 0 && hi0.ndim === 0 && fusesFloat32(bits, dtype) && canFuse(lo0, hi0)) {
    // Scalar bounds: the same ops on the scalars (elementwise, so the same values as on their
    // broadcasts), then one fused loop over the bits.
    const lo = floatParam('truncatedNormal', 'lower', lo0, dtype, []);
    const hi = floatParam('truncatedNormal', 'upper', hi0, dtype, []);
    const sqrt2 = constant(Math.SQRT2, lo);
    const scalar = (x: Array): number => x._storage()[0];
    const a = scalar(lax.erf(lax.div(lo, sqrt2)));
    const b = scalar(lax.erf(lax.div(hi, sqrt2)));
    const out = truncatedNormalFloat32(bits._storage() as Uint32Array, a, b, scalar(nextToward(lo, 1, 'truncatedNormal')), scalar(nextToward(hi, -1, 'truncatedNormal')));
    return Array._fromStorage(out, s, 'float32');
  }
  const lo = floatParam('truncatedNormal', 'lower', lo0, dtype, s);
  const hi = floatParam('truncatedNormal', 'upper', hi0, dtype, s);
  const sqrt2 = constant(Math.SQRT2, lo);
  const a = lax.erf(lax.div(lo, sqrt2));
  const b = lax.erf(lax.div(hi, sqrt2));
  const u = uniformFromBits(bits, s, dtype, a, b);
  const out = lax.mul(sqrt2, erfInvLikeXla(u));
  return lax.min(lax.max(out, nextToward(lo, 1, 'truncatedNormal')), nextToward(hi, -1, 'truncatedNormal'));
}

/** `jax.random.bernoulli(key, p, shape)`: booleans that are true with probability p. */
export function bernoulli(k: PRNGKeyArray, p: ArrayLike = 0.5, shape?: readonly number[]): Array {
  checkKey('bernoulli', k);
  const pa = p instanceof Array ? p : typeof p === 'number' ? asArray(p, { dtype: 'float32' }) : asArray(p, { op: 'random.bernoulli' });
  if (!isFloat(pa.dtype)) throw new TypeError(`random.bernoulli: probability p must have a floating dtype; got ${pa.dtype}`);
  const s = shape === undefined ? [...pa.shape] : shapeArg('bernoulli', shape);
  checkParamShape('bernoulli', 'p', pa.shape, s);
  const u = uniformCore(k, s, pa.dtype, 0, 1, 'bernoulli');
  return lax.lt(u, broadcastTo(lax.convertElementType(pa, pa.dtype, false), s, 'random.bernoulli'));
}

/** `jax.random.gumbel(key, shape, dtype)` (mode "low"): -log(-log(u)), u uniform on [tiny, 1). */
export function gumbel(k: PRNGKeyArray, shape: readonly number[] = [], opts: { dtype?: DType } = {}): Array {
  checkKey('gumbel', k);
  const dtype = floatDType('gumbel', opts.dtype);
  const s = shapeArg('gumbel', shape);
  const b = uniformBits(k, s, dtype, 'gumbel');
  if (fusesFloat32(b, dtype)) return Array._fromStorage(gumbelFloat32(b._storage() as Uint32Array), s, 'float32');
  const u = uniformFromBits(b, s, dtype, full(finfo(dtype).tiny, dtype, s), full(1, dtype, s));
  return lax.neg(lax.log(lax.neg(lax.log(u))));
}

/**
 * `jax.random.categorical(key, logits, axis, shape)`: indices drawn with probabilities
 * softmax(logits) along `axis`, by the Gumbel-max trick. `shape` must end with the batch shape
 * (logits' shape without `axis`); leading extra dimensions draw more samples.
 */
export function categorical(k: PRNGKeyArray, logits: ArrayLike, opts: { axis?: number; shape?: readonly number[] } = {}): Array {
  checkKey('categorical', k);
  const lg = logits instanceof Array ? logits : asArray(logits, { op: 'random.categorical' });
  if (!isFloat(lg.dtype)) throw new TypeError(`random.categorical: logits must have a floating dtype; got ${lg.dtype}`);
  if (lg.ndim === 0) throw new Error('random.categorical: logits must have at least one dimension (the categories)');
  const nd = lg.ndim;
  const axisPos = normalizeAxis(opts.axis ?? -1, nd, 'random.categorical');
  const batchShape = lg.shape.filter((_, i) => i !== axisPos);
  let s: number[];
  if (opts.shape === undefined) s = [...batchShape];
  else {
    s = shapeArg('categorical', opts.shape);
    checkParamShape('categorical', 'the batch shape of logits (logits.shape without axis)', batchShape, s);
  }
  const prefix = s.slice(0, s.length - batchShape.length);
  const logitsShape = s.slice(s.length - batchShape.length);
  logitsShape.splice(axisPos, 0, lg.shape[axisPos]);
  const gShape = [...prefix, ...logitsShape];
  const g = gumbel(k, gShape, { dtype: lg.dtype });
  const expanded = lax.reshape(lg, [...prefix.map(() => 1), ...lg.shape]);
  return lax.argmax(lax.add(g, broadcastTo(expanded, gShape, 'random.categorical')), prefix.length + axisPos, 'int32');
}

// ---------------------------------------------------------------------------------------------
// Integers

const INT_DTYPES: readonly DType[] = ['int8', 'uint8', 'int32', 'uint32'];

/** JAX's `_convert_and_clip_integer`: clip to the range both dtypes can hold, then convert. */
function convertAndClip(x: Array, dtype: DType): Array {
  const [xl, xh] = intRange(x.dtype);
  const [dl, dh] = intRange(dtype);
  const lo = Math.max(xl, dl);
  const hi = Math.min(xh, dh);
  const clipped = lax.min(lax.max(x, full(lo, x.dtype, x.shape)), full(hi, x.dtype, x.shape));
  return lax.convertElementType(clipped, dtype);
}

function intParam(op: string, name: string, v: ArrayLike): Array {
  let a = v instanceof Array ? v : asArray(typeof v === 'number' ? Math.trunc(v) : v, { op: `random.${op}` });
  if (isFloat(a.dtype) || a.dtype === 'bool') a = lax.convertElementType(a, 'int32');
  if (!isInteger(a.dtype)) throw new TypeError(`random.${op}: ${name} must be an integer; got dtype ${a.dtype}`);
  return a;
}

/**
 * `jax.random.randint(key, shape, minval, maxval, dtype)`: integers in [minval, maxval), drawn as
 * JAX does from two independent bit streams (split keys) combined modulo the span, so the bias for
 * spans that are not powers of two is as small as JAX's. maxval <= minval gives minval, as in JAX.
 */
export function randint(k: PRNGKeyArray, shape: readonly number[], minval: ArrayLike, maxval: ArrayLike, dtype: DType = 'int32'): Array {
  checkKey('randint', k);
  const d = checkDType(dtype, 'random.randint');
  if (!INT_DTYPES.includes(d)) throw new TypeError(`random.randint: dtype must be an integer dtype (${INT_DTYPES.join(', ')}); got ${d}`);
  const s = shapeArg('randint', shape);
  const lo0 = intParam('randint', 'minval', minval);
  const hi0 = intParam('randint', 'maxval', maxval);
  if (d === 'int8' || d === 'uint8') {
    // As jax.random.randint does for dtypes narrower than 32 bits (to keep the modulo bias
    // small): the bounds become int32 clipped to [min, max] and [min, max + 1] of the dtype, the
    // draw is made in int32, and the result is converted.
    const [dl, dh] = intRange(d);
    const clip32 = (x: Array, hi: number): Array => {
      const x32 = lax.convertElementType(x, 'int32');
      return lax.min(lax.max(x32, full(dl, 'int32', x.shape)), full(hi, 'int32', x.shape));
    };
    return lax.convertElementType(randint(k, s, clip32(lo0, dh), clip32(hi0, dh + 1), 'int32'), d);
  }
  checkParamShape('randint', 'minval', lo0.shape, s);
  checkParamShape('randint', 'maxval', hi0.shape, s);
  // Where maxval exceeds the dtype's maximum (randint(k, s, 0, 2 ** 31, 'int32')), the span grows by one.
  // The span and multiplier are elementwise in the parameters, so they are computed at the
  // parameters' (usually scalar) broadcast shape and only then broadcast to the output shape.
  const ps = broadcastShapes('random.randint', lo0.shape, hi0.shape);
  const pb = (x: Array): Array => broadcastTo(x, ps, 'random.randint');
  const dmax = convertAndClip(asArray(intRange(d)[1], { dtype: d }), hi0.dtype);
  const outOfRange = pb(lax.gt(hi0, broadcastTo(dmax, hi0.shape)));
  const lo = pb(convertAndClip(lo0, d));
  const hi = pb(convertAndClip(hi0, d));
  // Only int32 / uint32 reach this point: the draw is made from 32-bit words in uint32.
  const nbits = 32;
  const ud: DType = 'uint32';
  const keys = split(k);
  const [k1, k2] = [takeInBounds(keys, asArray(0, { dtype: 'int32' }), 0), takeInBounds(keys, asArray(1, { dtype: 'int32' }), 0)];
  const higher = randomBits(k1, nbits, s, 'randint');
  const lower = randomBits(k2, nbits, s, 'randint');
  const one = full(1, ud, ps);
  let span = lax.convertElementType(lax.sub(hi, lo), ud);
  span = lax.select(lax.le(hi, lo), one, span);
  span = lax.select(lax.bitwiseAnd(outOfRange, lax.gt(hi, lo)), lax.add(span, one), span);
  // multiplier = 2^nbits mod span, computed in the unsigned dtype exactly as JAX does.
  let mult = lax.rem(full(2 ** (nbits / 2), ud, ps), span);
  mult = lax.rem(lax.mul(mult, mult), span);
  if (ps.length === 0 && canFuse(higher, lower, span, mult, lo)) {
    const out = allocStorage(d, sizeOf(s)) as Int32Array | Uint32Array;
    const scalar = (x: Array): number => x._storage()[0];
    randintInto(out, higher._storage() as Uint32Array, lower._storage() as Uint32Array, scalar(span), scalar(mult), scalar(lo), -1);
    return Array._fromStorage(out, s, d);
  }
  const spanS = broadcastTo(span, s, 'random.randint');
  const multS = broadcastTo(mult, s, 'random.randint');
  let offset = lax.add(lax.mul(lax.rem(higher, spanS), multS), lax.rem(lower, spanS));
  offset = lax.rem(offset, spanS);
  return lax.add(broadcastTo(lo, s, 'random.randint'), lax.convertElementType(offset, d));
}

// ---------------------------------------------------------------------------------------------
// Shuffles and choices

/** JAX's `_shuffle`: rounds of stable sorts keyed by fresh 32-bit random bits. */
function shuffle(k: PRNGKeyArray, x: Array, axis: number): Array {
  const exponent = 3;
  const uint32max = 2 ** 32 - 1;
  const rounds = Math.ceil((exponent * Math.log(Math.max(1, x.size))) / Math.log(uint32max));
  let key = k;
  let out = x;
  for (let r = 0; r < rounds; r++) {
    const keys = split(key);
    key = takeInBounds(keys, asArray(0, { dtype: 'int32' }), 0);
    const subkey = takeInBounds(keys, asArray(1, { dtype: 'int32' }), 0);
    const sortKeys = randomBits(subkey, 32, out.shape, 'permutation');
    // One line: its stable order straight from the sort kernel's radix sorter, then one gather.
    if (out.ndim === 1 && canFuse(sortKeys, out)) out = gather1d(out, new LineSorter(out.size).sortLine([sortKeys._storage() as Uint32Array], 0, 1));
    else out = lax.sortKeyVal(sortKeys, out, axis)[1];
  }
  return out;
}

/**
 * `out[perm]` for a concrete 1-d array, on its storage: with `perm` the stable argsort of the
 * sort keys, this is what the stable `sortKeyVal(keys, out)` returns (the value half).
 */
function gather1d(x: Array, perm: Int32Array): Array {
  const src = x._storage();
  const dst = new (src.constructor as new (n: number) => typeof src)(perm.length);
  for (let i = 0; i < perm.length; i++) dst[i] = src[perm[i]];
  return Array._fromStorage(dst, x.shape, x.dtype, x.weakType);
}

/**
 * `jax.random.permutation(key, x, axis, independent)`: a shuffled copy of `x` along `axis`, or of
 * `arange(x)` when `x` is an integer. With `independent`, each slice along `axis` is shuffled
 * with its own order.
 */
export function permutation(k: PRNGKeyArray, x: ArrayLike, opts: { axis?: number; independent?: boolean } = {}): Array {
  checkKey('permutation', k);
  if (typeof x === 'number') {
    if (!Number.isInteger(x) || x < 0) throw new TypeError(`random.permutation: x must be a non-negative integer or an array of rank >= 1; got ${x}`);
    normalizeAxis(opts.axis ?? 0, 1, 'random.permutation');
    return shuffle(k, lax.iota('int32', x), 0);
  }
  const arr = x instanceof Array ? x : asArray(x, { op: 'random.permutation' });
  if (arr.ndim === 0) {
    if (!isInteger(arr.dtype)) throw new TypeError(`random.permutation: x must be an integer or at least 1-dimensional; got a ${arr.dtype} scalar`);
    return permutation(k, Number(arr.item()), opts);
  }
  const axis = normalizeAxis(opts.axis ?? 0, arr.ndim, 'random.permutation');
  if (opts.independent || arr.ndim === 1) return shuffle(k, arr, axis);
  const ind = shuffle(k, lax.iota('int32', arr.shape[axis]), 0);
  return takeInBounds(arr, ind, axis);
}

export interface ChoiceOptions {
  shape?: readonly number[];
  replace?: boolean;
  p?: ArrayLike;
  axis?: number;
}

/**
 * `jax.random.choice(key, a, shape, replace, p, axis)`: samples from `a` (or `arange(a)` for an
 * integer), uniformly or with probabilities `p`, with or without replacement.
 */
export function choice(k: PRNGKeyArray, a: ArrayLike, opts: ChoiceOptions = {}): Array {
  checkKey('choice', k);
  const shape = shapeArg('choice', opts.shape ?? []);
  const replace = opts.replace ?? true;
  const arr = a instanceof Array ? a : asArray(a, { op: 'random.choice' });
  let nInputs: number;
  let axis = 0;
  if (arr.ndim === 0) {
    if (!isInteger(arr.dtype)) throw new TypeError(`random.choice: a must be an integer or an array; got a ${arr.dtype} scalar`);
    nInputs = Number(arr.item());
  } else {
    axis = normalizeAxis(opts.axis ?? 0, arr.ndim, 'random.choice');
    nInputs = arr.shape[axis];
  }
  const nDraws = sizeOf(shape);
  const outShape = arr.ndim === 0 ? shape : [...arr.shape.slice(0, axis), ...shape, ...arr.shape.slice(axis + 1)];
  if (nDraws === 0) return lax.broadcastInDim(lax.convertElementType(asArray(0), arr.ndim === 0 ? 'int32' : arr.dtype), outShape, []);
  if (nInputs <= 0) throw new RangeError(`random.choice: a must be greater than 0 unless no samples are taken; got a population of ${nInputs}`);
  if (!replace && nDraws > nInputs) {
    throw new RangeError(`random.choice: cannot take a larger sample (size ${nDraws}) than the population (size ${nInputs}) when replace is false`);
  }
  let ind: Array;
  if (opts.p === undefined) {
    if (replace) {
      ind = randint(k, shape, 0, nInputs);
      return arr.ndim === 0 ? ind : takeInBounds(arr, ind, axis);
    }
    const perm = permutation(k, arr.ndim === 0 ? nInputs : arr, { axis });
    const first = takeInBounds(perm, lax.iota('int32', nDraws), arr.ndim === 0 ? 0 : axis);
    return lax.reshape(first, outShape);
  }
  let pa = opts.p instanceof Array ? opts.p : asArray(opts.p, { op: 'random.choice' });
  if (!isFloat(pa.dtype)) pa = lax.convertElementType(pa, 'float32');
  if (!shapesEqual(pa.shape, [nInputs])) {
    throw new Error(`random.choice: p must be a 1-d vector with the same size as a.shape[axis]; p has shape ${fmt(pa.shape)} and a.shape[axis] is ${nInputs}`);
  }
  if (replace) {
    const cum = lax.cumsum(pa, 0);
    const total = takeInBounds(cum, asArray(nInputs - 1, { dtype: 'int32' }), 0);
    const u = uniform(k, shape, { dtype: pa.dtype });
    const r = lax.mul(broadcastTo(total, shape), lax.sub(full(1, pa.dtype, shape), u));
    // searchsorted(cum, r, side='left'): the number of cumulative sums strictly below r.
    const wide = [...shape, nInputs];
    const below = lax.lt(lax.broadcastInDim(cum, wide, [shape.length]), lax.broadcastInDim(r, wide, shape.map((_, i) => i)));
    ind = lax.reduceSum(lax.convertElementType(below, 'int32'), [shape.length]);
  } else {
    // Gumbel top-k: the n_draws smallest of -gumbel - log p, in order.
    const g = lax.sub(lax.neg(gumbel(k, [nInputs], { dtype: pa.dtype })), lax.log(pa));
    const order = lax.sortKeyVal(g, lax.iota('int32', nInputs), 0)[1];
    ind = takeInBounds(order, lax.iota('int32', nDraws), 0);
  }
  const picked = arr.ndim === 0 ? ind : takeInBounds(arr, lax.reshape(ind, [nDraws]), axis);
  return lax.reshape(picked, outShape);
}
