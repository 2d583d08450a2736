/**
 * Keys and raw bits: `key` / `PRNGKey`, `split`, `foldIn`, `bits`, and `randomBits`, all built on
 * the `threefry2x32` primitive exactly the way JAX's default `threefry2x32` PRNG builds them
 * (jax/_src/prng.py), so the same seed and shape give the same bits as jax.random.
 *
 * A key is what `jax.random.PRNGKey` returns: a uint32 Array of shape [2] (the "raw" key
 * representation; there is no separate key dtype). `split` returns shape [...shape, 2].
 *
 * Two counter layouts exist in JAX, chosen by the `jax_threefry_partitionable` flag. It is on by
 * default since JAX 0.5.0 and so it is here; `setThreefryPartitionable(false)` gives the layout
 * of older JAX versions:
 * - partitionable: element i of an output of shape S enciphers the 64-bit counter i, split in
 *   (hi, lo) words; `bits` are word0 ^ word1, and `split` keys are (word0, word1) at counter i.
 * - original: the counters 0..m-1 are cut into two halves that are enciphered pairwise
 *   (x[i], x[i + m/2]) and the outputs concatenated; 8- and 16-bit values are sliced out of
 *   32-bit words, low bits first.
 * `foldIn(key, d)` enciphers the counter (0, d) in both modes, so with the flag on
 * `foldIn(key, i)` equals `split(key, n)[i]` (a property JAX's own tests check).
 */
import { Array } from '../array';
import { asArray, type ArrayLike } from '../convert';
import { type DType, isInteger } from '../dtype';
import * as lax from '../lax/ops';
import { checkShape, fmt, sizeOf } from '../shape';
import { canFuse, iotaBits, iotaKeys } from './fused';
import { threefry2x32 } from './threefry';
import { takeInBounds } from './takeInBounds';
import { showValue } from '../describe';
import { checkArrayBytes } from '../sizeGuard';

/** A PRNG key: a uint32 Array of shape [2], as `jax.random.PRNGKey` makes. */
export type PRNGKeyArray = Array;

let partitionable = true;

/**
 * Chooses JAX's `jax_threefry_partitionable` counter layout (default true, as in JAX >= 0.5).
 * Returns the previous setting. `false` reproduces the streams of JAX < 0.5.
 */
export function setThreefryPartitionable(on: boolean): boolean {
  const prev = partitionable;
  partitionable = on;
  return prev;
}

export function threefryPartitionable(): boolean {
  return partitionable;
}

/** Runs `fn` with the given counter layout, restoring the previous one afterwards. */
export function withThreefryPartitionable<T>(on: boolean, fn: () => T): T {
  const prev = setThreefryPartitionable(on);
  try {
    return fn();
  } finally {
    partitionable = prev;
  }
}

// ---------------------------------------------------------------------------------------------
// Small array helpers (all through lax, so they trace)

export function full(v: number, dtype: DType, shape: readonly number[]): Array {
  return lax.broadcastInDim(asArray(v, { dtype }), shape, []);
}

/** Stacks two arrays of equal shape along a new last axis (`jnp.stack(..., axis=-1)`). */
function stackLast(a: Array, b: Array): Array {
  const shape = [...a.shape, 2];
  const dims = a.shape.map((_, i) => i);
  const first = lax.eq(lax.broadcastedIota('int32', shape, a.ndim), full(0, 'int32', shape));
  return lax.select(first, lax.broadcastInDim(a, shape, dims), lax.broadcastInDim(b, shape, dims));
}

/** Concatenates two 1-d arrays of equal length. */
function concat1d(a: Array, b: Array): Array {
  const h = a.shape[0];
  const shape = [2, h];
  const first = lax.eq(lax.broadcastedIota('int32', shape, 0), full(0, 'int32', shape));
  return lax.reshape(lax.select(first, lax.broadcastInDim(a, shape, [1]), lax.broadcastInDim(b, shape, [1])), [2 * h]);
}

// ---------------------------------------------------------------------------------------------
// Keys

/** Validates a key argument; `op` names the calling function in the error. */
export function checkKey(op: string, key: unknown): Array {
  if (!(key instanceof Array)) {
    const what = key === null ? 'null' : globalThis.Array.isArray(key) ? 'a JS array' : typeof key;
    throw new TypeError(`random.${op}: key must be a uint32 Array of shape [2] (from random.key or random.split); got ${what}`);
  }
  if (key.dtype !== 'uint32' || key.ndim !== 1 || key.shape[0] !== 2) {
    const batched = key.dtype === 'uint32' && key.ndim > 1 && key.shape[key.ndim - 1] === 2;
    throw new TypeError(
      `random.${op}: key must be a single uint32 key of shape [2] (from random.key or random.split); got ${key.dtype}${fmt(key.shape)}` +
        (batched ? '; this is a batch of keys: pick one (e.g. from split) or map over them' : ''),
    );
  }
  return key;
}

/** The two uint32 words of a key, as scalars. */
export function keyWords(key: Array): [Array, Array] {
  return [takeInBounds(key, asArray(0, { dtype: 'int32' }), 0), takeInBounds(key, asArray(1, { dtype: 'int32' }), 0)];
}

/**
 * `jax.random.PRNGKey(seed)` / `jax.random.key(seed)` with JAX's default x64-disabled behaviour:
 * the seed is taken modulo 2^32 and the key is [0, seed mod 2^32] (so key(-1) is
 * [0, 4294967295]). `seed` is an integer JS number or an integer scalar Array.
 */
export function key(seed: number | Array): PRNGKeyArray {
  if (seed instanceof Array) {
    if (seed.ndim !== 0) throw new TypeError(`random.key: seed must be a scalar; got an array of shape ${fmt(seed.shape)} (use vmap for batches)`);
    if (!isInteger(seed.dtype)) throw new TypeError(`random.key: seed must be an integer; got dtype ${seed.dtype}`);
    const lo = lax.convertElementType(seed, 'uint32');
    return stackLast(asArray(0, { dtype: 'uint32' }), lo);
  }
  if (typeof seed !== 'number' || !Number.isInteger(seed)) {
    throw new TypeError(`random.key: seed must be an integer; got ${typeof seed === 'number' ? seed : typeof seed}`);
  }
  if (!Number.isSafeInteger(seed)) throw new RangeError(`random.key: seed ${seed} is not a safe integer (|seed| < 2^53)`);
  const lo = ((seed % 2 ** 32) + 2 ** 32) % 2 ** 32;
  return asArray(Uint32Array.of(0, lo));
}

/** Alias of `key`: tpukit keys are always raw uint32 [2] arrays, as PRNGKey's are. */
export const PRNGKey = key;

/** `jax.random.key_data`: the uint32 words of a key (a key already is its data here). */
export function keyData(k: PRNGKeyArray): Array {
  return checkKey('keyData', k);
}

/** `jax.random.wrap_key_data`: checks that `data` is a uint32 [2] array and returns it as a key. */
export function wrapKeyData(data: ArrayLike): PRNGKeyArray {
  const a = data instanceof Array ? data : asArray(data, { dtype: 'uint32', op: 'random.wrapKeyData' });
  return checkKey('wrapKeyData', a);
}

function checkNum(op: string, num: number | readonly number[]): number[] {
  const shape = typeof num === 'number' ? [num] : [...num];
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) {
      throw new RangeError(`random.${op}: num must be a non-negative integer (or a shape of them); got ${showValue(num)}`);
    }
  }
  return checkShape(shape, `random.${op}`, 'num');
}

/**
 * Enciphers the counters 0..m-1 the original (non-partitionable) way: the halves
 * x[0..h) and x[h..2h) (padded with a 0 when m is odd) go through Threefry pairwise and the two
 * outputs are concatenated, dropping the padding. Returns uint32[m].
 */
function threefryIotaOriginal(k1: Array, k2: Array, m: number): Array {
  const h = Math.ceil(m / 2);
  const x0 = lax.iota('uint32', h);
  let x1 = lax.add(lax.iota('uint32', h), full(h, 'uint32', [h]));
  if (m % 2 === 1) x1 = lax.select(lax.eq(x0, full(h - 1, 'uint32', [h])), full(0, 'uint32', [h]), x1);
  const [o0, o1] = threefry2x32(k1, k2, x0, x1);
  const both = concat1d(o0, o1);
  return m % 2 === 1 ? takeInBounds(both, lax.iota('int32', m), 0) : both;
}

/** The number of 64-bit counters a `shape` needs; JAX's 32-bit counters limit it to 2^32. */
function counterCount(shape: readonly number[]): number {
  const n = sizeOf(shape);
  if (n > 2 ** 32) throw new RangeError(`random: more than 2^32 elements requested (shape ${fmt(shape)})`);
  return n;
}

/** The (hi, lo) uint32 words of a row-major 64-bit iota of `shape` (`iota_2x32_shape`). */
function iota2x32(shape: readonly number[]): [Array, Array] {
  const n = counterCount(shape);
  return [full(0, 'uint32', shape), lax.reshape(lax.iota('uint32', n), shape)];
}

/**
 * `jax.random.split(key, num)`: `num` new keys (or a `num`-shaped array of keys) as a uint32
 * array of shape [...num, 2].
 */
export function split(k: PRNGKeyArray, num: number | readonly number[] = 2): Array {
  checkKey('split', k);
  const shape = checkNum('split', num);
  checkArrayBytes('random.split', [...shape, 2], 'uint32');
  const [k1, k2] = keyWords(k);
  if (partitionable) {
    if (canFuse(k1, k2)) {
      const kd = k._storage() as Uint32Array;
      return Array._fromStorage(iotaKeys(kd[0], kd[1], counterCount(shape)), [...shape, 2], 'uint32');
    }
    const [hi, lo] = iota2x32(shape);
    const [b1, b2] = threefry2x32(k1, k2, hi, lo);
    return stackLast(b1, b2);
  }
  return lax.reshape(threefryIotaOriginal(k1, k2, 2 * sizeOf(shape)), [...shape, 2]);
}

/**
 * `split` unpacked into separate keys: `const [key2, subkey] = random.splitKeys(key)` is JAX's
 * `key2, subkey = jax.random.split(key)` (JS cannot unpack an Array's rows). Same keys as `split`.
 */
export function splitKeys(k: PRNGKeyArray, num = 2): PRNGKeyArray[] {
  checkKey('splitKeys', k);
  const keys = split(k, checkNum('splitKeys', num));
  return globalThis.Array.from({ length: num }, (_, i) => takeInBounds(keys, asArray(i, { dtype: 'int32' }), 0));
}

/**
 * `jax.random.fold_in(key, data)`: a new key that is a deterministic function of `key` and the
 * 32-bit integer `data` (a JS integer in [0, 2^32) or an integer scalar Array, converted to
 * uint32 with wraparound as `jnp.uint32` does for arrays).
 */
export function foldIn(k: PRNGKeyArray, data: number | Array): PRNGKeyArray {
  checkKey('foldIn', k);
  let d: Array;
  if (data instanceof Array) {
    if (data.ndim !== 0) throw new TypeError(`random.foldIn: data must be a scalar; got an array of shape ${fmt(data.shape)} (use vmap for batches)`);
    if (!isInteger(data.dtype)) throw new TypeError(`random.foldIn: data must be an integer; got dtype ${data.dtype}`);
    d = lax.convertElementType(data, 'uint32');
  } else {
    if (typeof data !== 'number' || !Number.isInteger(data) || data < 0 || data >= 2 ** 32) {
      throw new RangeError(`random.foldIn: data must be an integer in [0, 2^32); got ${String(data)}`);
    }
    d = asArray(data, { dtype: 'uint32' });
  }
  const [k1, k2] = keyWords(k);
  const [a, b] = threefry2x32(k1, k2, asArray(0, { dtype: 'uint32' }), d);
  return stackLast(a, b);
}

/**
 * JAX's `_random_bits(key, bit_width, shape)`: uniform random bits of width 8, 16 or 32, held in
 * a uint32 array (tpukit has no uint16 dtype, so 16-bit values come back widened). Eagerly, in
 * the partitionable layout, fused.ts's `iotaBits` computes the same bits in one pass.
 */
export function randomBits(k: PRNGKeyArray, bitWidth: 8 | 16 | 32, shape: readonly number[], op = 'randomBits'): Array {
  checkKey(op, k);
  if (bitWidth !== 8 && bitWidth !== 16 && bitWidth !== 32) {
    throw new RangeError(`random.${op}: bit width must be 8, 16 or 32; got ${String(bitWidth)}`);
  }
  const s = checkShape(shape as number[], `random.${op}`);
  checkArrayBytes(`random.${op}`, s, 'uint32');
  const [k1, k2] = keyWords(k);
  const n = sizeOf(s);
  if (partitionable) {
    if (canFuse(k1, k2)) {
      const kd = k._storage() as Uint32Array;
      return Array._fromStorage(iotaBits(kd[0], kd[1], counterCount(s), bitWidth), s, 'uint32');
    }
    const [hi, lo] = iota2x32(s);
    const [b1, b2] = threefry2x32(k1, k2, hi, lo);
    const x = lax.bitwiseXor(b1, b2);
    return bitWidth === 32 ? x : lax.bitwiseAnd(x, full(2 ** bitWidth - 1, 'uint32', s));
  }
  const maxCount = Math.ceil((bitWidth * n) / 32);
  const words = threefryIotaOriginal(k1, k2, maxCount);
  if (bitWidth === 32) return lax.reshape(words, s);
  const per = 32 / bitWidth;
  const idx = new Int32Array(n);
  const shifts = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    idx[i] = Math.floor(i / per);
    shifts[i] = bitWidth * (i % per);
  }
  const picked = takeInBounds(words, asArray(idx), 0);
  const vals = lax.bitwiseAnd(lax.shiftRightLogical(picked, asArray(shifts)), full(2 ** bitWidth - 1, 'uint32', [n]));
  return lax.reshape(vals, s);
}

/**
 * `jax.random.bits(key, shape, dtype)`: uniform random unsigned integers. `dtype` is 'uint32'
 * (default) or 'uint8' (the unsigned dtypes tpukit has).
 */
export function bits(k: PRNGKeyArray, shape: readonly number[] = [], dtype: DType = 'uint32'): Array {
  if (dtype !== 'uint32' && dtype !== 'uint8') {
    throw new TypeError(`random.bits: dtype must be an unsigned integer dtype (uint8 or uint32); got ${String(dtype)}`);
  }
  const b = randomBits(k, dtype === 'uint8' ? 8 : 32, shape, 'bits');
  return dtype === 'uint8' ? lax.convertElementType(b, 'uint8') : b;
}
