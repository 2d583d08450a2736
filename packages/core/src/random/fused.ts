/**
 * Fused host kernels for `random`'s eager path. Every sampler is written as a chain of lax ops
 * so that the transformations (jaxpr tracing, vmap, jit) can trace it. Run eagerly on a large
 * shape, that chain materialises tens of full-size intermediates (about 75 for a float32
 * `normal`: broadcast constants, selects, one array per polynomial step) and runs each through
 * the generic elementwise kernels; that, not the Threefry kernel, is where the time went.
 *
 * When nothing is tracing (the key words came back concrete) and the current backend runs the
 * primitives' own `impl` kernels for these ops (the reference backend, or the systolic backend
 * while no cost ledger is collecting: its ledger must still see every op), the functions here
 * compute the same values in one typed-array loop each. They do the same float64 arithmetic
 * as those kernels and round to float32 (`Math.fround`) at exactly the points where the lax
 * chain stores a float32 intermediate, so the results are bit-identical to the lax chain;
 * `fused.test.ts` checks that against the chain on random keys and shapes.
 */
import type { Array } from '../array';
import { getBackend } from '../backend';
import * as bf16 from '../bf16';
import * as f16 from '../f16';
import { finfo } from '../dtype';
import { GE5, LT5 } from './erfinvCoefficients';
import { threefry2x32Block } from './threefry';

let enabled = true;

/**
 * Runs `fn` with the fused kernels on or off, restoring the previous setting afterwards.
 * Internal (not re-exported): the tests use it to compare the fused kernels with the lax chain.
 */
export function withFusedRandom<T>(on: boolean, fn: () => T): T {
  const prev = enabled;
  enabled = on;
  try {
    return fn();
  } finally {
    enabled = prev;
  }
}

/**
 * Whether the fused kernels may stand in for the lax chain on these operands: all concrete
 * (a dynamic trace turns every bound value into a tracer, so this also answers "is anything
 * tracing"), and the current backend lets host kernels stand in for its op-by-op execution
 * (its `hostKernels` capability).
 */
export function canFuse(...xs: Array[]): boolean {
  if (!enabled) return false;
  for (const x of xs) if (x._trace !== null) return false;
  return getBackend().hostKernels?.() != null;
}

/**
 * Whether the current backend flushes subnormals when it converts float32 to bfloat16 (the
 * systolic backend's TPU option, from its `hostKernels` capability): then the 16-bit fused
 * kernels, which round as the reference kernels do, are not used.
 */
export function flushesSubnormals(): boolean {
  return getBackend().hostKernels?.()?.flushSubnormals === true;
}

/**
 * `bits` in the partitionable layout: element i is word0 ^ word1 of Threefry(key, (0, i)),
 * masked to the low `width` bits: the `iota2x32` + `threefry2x32` + `xor` (+ `and`) chain of
 * prng.ts's `randomBits` in one pass, without the counter arrays.
 */
export function iotaBits(k0: number, k1: number, n: number, width: 8 | 16 | 32): Uint32Array {
  const out = new Uint32Array(n);
  const pair = new Uint32Array(2);
  const mask = width === 32 ? -1 : 2 ** width - 1;
  for (let i = 0; i < n; i++) {
    threefry2x32Block(k0, k1, 0, i, pair, 0);
    out[i] = (pair[0] ^ pair[1]) & mask;
  }
  return out;
}

/**
 * `split` in the partitionable layout: key i is (word0, word1) of Threefry(key, (0, i)), laid
 * out as the [n, 2] array `stackLast` builds.
 */
export function iotaKeys(k0: number, k1: number, n: number): Uint32Array {
  const out = new Uint32Array(2 * n);
  for (let i = 0; i < n; i++) threefry2x32Block(k0, k1, 0, i, out, 2 * i);
  return out;
}

/**
 * float32 `unitFloats`: (bits >>> 9) * 2^-23, the shift, uint32 -> float32 conversion and
 * scaling of distributions.ts (all exact in float32, so no rounding step is needed).
 */
export function unitFloat32(bits: Uint32Array): Float32Array {
  const n = bits.length;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (bits[i] >>> 9) * 2 ** -23;
  return out;
}

const f = Math.fround;

/**
 * float32 `uniformCore` for scalar bounds: max(lo, unit * (hi - lo) + lo), rounded to float32
 * after the subtraction, the product and the sum as the lax ops store them. `lo`/`hi` must
 * already be float32 values.
 */
function uniformScalar(b: number, lo: number, span: number): number {
  const u = f(f(((b >>> 9) * 2 ** -23) * span) + lo);
  return Math.max(lo, u);
}

/**
 * float32 `uniform` on [lo, hi) for scalar float32 bounds: `uniformCore` with the bounds
 * broadcast, in one pass.
 */
export function uniformFloat32(bits: Uint32Array, lo: number, hi: number): Float32Array {
  const n = bits.length;
  const out = new Float32Array(n);
  const span = f(hi - lo);
  for (let i = 0; i < n; i++) out[i] = uniformScalar(bits[i], lo, span);
  return out;
}

/** Giles' erfinv coefficients (erfinvCoefficients.ts), rounded to float32 as the broadcast constants are. */
const A = Float64Array.from(LT5, f);
const B = Float64Array.from(GE5, f);

/** One float32 erfinv, step for step as erfinv.ts's `erfInvF32` (each step rounded to float32). */
function erfInvScalar(x: number): number {
  const w0 = -f(Math.log1p(f(-x * x)));
  const lt = w0 < 5;
  const c = lt ? A : B;
  const w = lt ? f(w0 - 2.5) : f(f(Math.sqrt(w0)) - 3);
  let p = c[0];
  for (let k = 1; k < 9; k++) p = f(c[k] + f(p * w));
  return Math.abs(x) === 1 ? x * Infinity : f(p * x);
}

/** float32 erfinv of every element (as `erfInvF32`); exported for the equivalence tests. */
export function erfInvFloat32(x: Float32Array): Float32Array {
  const out = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = erfInvScalar(x[i]);
  return out;
}

/** nextafter(-1, 0) in float32: the open lower end of `normal`'s uniform draw. */
const NORMAL_LO = f(-(1 - 2 ** -24));
const NORMAL_SPAN = f(1 - NORMAL_LO);
const SQRT2 = f(Math.SQRT2);

/** float32 `normal` from 32-bit random bits: sqrt(2) * erfinv(uniform(nextafter(-1, 0), 1)). */
export function normalFloat32(bits: Uint32Array): Float32Array {
  const n = bits.length;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = SQRT2 * erfInvScalar(uniformScalar(bits[i], NORMAL_LO, NORMAL_SPAN));
  return out;
}

/**
 * float32 `truncatedNormal` from 32-bit random bits for scalar bounds: uniform on [a, b) (a, b
 * the erf of the bounds over sqrt 2), sqrt(2) * erfinv, clamped to [loUp, hiDown] (the
 * bounds' float32 neighbours inside the interval).
 */
export function truncatedNormalFloat32(bits: Uint32Array, a: number, b: number, loUp: number, hiDown: number): Float32Array {
  const n = bits.length;
  const out = new Float32Array(n);
  const span = f(b - a);
  for (let i = 0; i < n; i++) out[i] = Math.min(Math.max(f(SQRT2 * erfInvScalar(uniformScalar(bits[i], a, span))), loUp), hiDown);
  return out;
}

/**
 * One bfloat16 / float16 `normal` value from its mantissa draw m (0 <= m < 2^nmant), as the lax
 * chain computes it in the 16-bit dtype: every 16-bit op rounds its float64 result to float32 and
 * then to the dtype (`fromFloat32` does both, as the kernels' float32 buffer + encode do); erfinv
 * runs in float32 on the converted value and is converted back before the final multiply.
 * Returns the 16-bit pattern.
 */
function normal16Scalar(m: number, dtype: 'bfloat16' | 'float16', lo: number): number {
  const enc = dtype === 'bfloat16' ? bf16.fromFloat32 : f16.fromFloat32;
  const dec = dtype === 'bfloat16' ? bf16.toFloat32 : f16.toFloat32;
  const r = (x: number): number => dec(enc(x));
  const nmant = dtype === 'bfloat16' ? 7 : 10;
  const lo16 = r(lo);
  const span = r(1 - lo16);
  const sqrt2 = r(SQRT2);
  // m * 2^-nmant is exact in the dtype (m < 2^nmant).
  const unit = m * 2 ** -nmant;
  const u = Math.max(lo16, r(r(unit * span) + lo16));
  return enc(sqrt2 * r(erfInvScalar(u)));
}

/**
 * Every value `normal16` can produce, indexed by the mantissa draw: 2^7 entries for bfloat16,
 * 2^10 for float16, each computed by `normal16Scalar`. Built on first use per (dtype, lower
 * bound) and kept (256 bytes and 2 KiB).
 */
const NORMAL16_TABLES = new Map<string, Uint16Array>();

/** The table of `normal16` outputs for this dtype and lower bound. */
function normal16Table(dtype: 'bfloat16' | 'float16', lo: number): Uint16Array {
  const key = `${dtype}:${lo}`;
  let t = NORMAL16_TABLES.get(key);
  if (t === undefined) {
    t = new Uint16Array(2 ** (dtype === 'bfloat16' ? 7 : 10));
    for (let m = 0; m < t.length; m++) t[m] = normal16Scalar(m, dtype, lo);
    NORMAL16_TABLES.set(key, t);
  }
  return t;
}

/**
 * bfloat16 / float16 `normal` from its 8 / 16 random bits (each element below 2^8 / 2^16, as
 * `randomBits` masks them). Only the top nmant bits (7 / 10) are used, so the output takes at
 * most 128 / 1024 distinct values: they are computed once, step for step as the lax chain
 * (`normal16Scalar`), and each element is a table lookup. Returns the storage.
 */
export function normal16(bits: Uint32Array, dtype: 'bfloat16' | 'float16', lo: number): Uint16Array {
  const table = normal16Table(dtype, lo);
  const shift = dtype === 'bfloat16' ? 1 : 6; // random bit width (8 / 16) minus nmant (7 / 10)
  const n = bits.length;
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) out[i] = table[bits[i] >>> shift];
  return out;
}

const TINY = f(finfo('float32').tiny);
const GUMBEL_SPAN = f(1 - TINY);

/** float32 `gumbel` (mode "low") from 32-bit random bits: -log(-log(uniform(tiny, 1))). */
export function gumbelFloat32(bits: Uint32Array): Float32Array {
  const n = bits.length;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = -f(Math.log(-f(Math.log(uniformScalar(bits[i], TINY, GUMBEL_SPAN)))));
  return out;
}

/**
 * `randint`'s combination of two bit streams for scalar parameters, as distributions.ts writes
 * it in the unsigned dtype (mask 0xff for uint8, -1 for uint32) and then the output dtype:
 * lo + ((higher % span) * mult + lower % span) % span, with the integer kernels' wraparound and
 * their `x % 0 = x`. `out` is the output's storage (its typed array does the final wrap).
 */
export function randintInto(out: Int32Array | Uint32Array | Int8Array | Uint8Array, higher: Uint32Array | Uint8Array, lower: Uint32Array | Uint8Array, span: number, mult: number, lo: number, mask: number): void {
  // a % span for 0 <= a < 2^32 without the slow float modulo. a * (1/span) is within a
  // relative 2^-51 of a / span < 2^32, far less than the 1/span that separates a non-integer
  // a / span from the next integer: so its floor is the true quotient, or one less when a is a
  // multiple of span (the product may fall just short). q * span < 2^33 is exact, and one
  // correction step fixes the remainder. span 0 (x % 0 = x in the integer kernels) becomes
  // 2^53, which leaves every a < 2^32 unchanged.
  const sp = span === 0 ? 2 ** 53 : span;
  const inv = 1 / sp;
  const rem = (a: number): number => {
    const r = a - Math.floor(a * inv) * sp;
    return r >= sp ? r - sp : r;
  };
  for (let i = 0; i < out.length; i++) {
    // The product and the sum wrap in the unsigned dtype; wrapping once, after the sum, is the
    // same modulo 2^8 or 2^32 (and `&` reduces modulo 2^32 first).
    const t = Math.imul(rem(higher[i]), mult) + rem(lower[i]);
    out[i] = lo + rem((t & mask) >>> 0);
  }
}
