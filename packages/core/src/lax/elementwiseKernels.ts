/**
 * The eager loops behind the elementwise primitives (elementwise.ts). Each (op, kind) pair has
 * its own function literal, so every loop V8 optimises sees one typed-array type and inlines one
 * formula: no closure call and no dtype test per element.
 *
 * - Float ops compute on Float32Array: float32 storage directly; bfloat16 / float16 storage is
 *   decoded into a float32 block, computed, and encoded back, block by block. The arithmetic is
 *   float64 (JS numbers) rounded to float32 on store, then to the 16-bit dtype by the codec: the
 *   same two roundings the TPU's vector unit makes.
 * - Integer and bool ops compute on Float64Array blocks: the storage is widened exactly with
 *   `TypedArray.set`, the formula runs in float64 (as JS numbers do), and the block is narrowed
 *   back with `set`, which wraps to the width exactly as an element store does.
 *
 * The only allocations are the result and one typed-array view per block of BLOCK elements.
 */
import * as bf16 from '../bf16';
import { type DType, type StorageArray, allocStorage, bitView, isFloat, itemsize } from '../dtype';
import * as f16 from '../f16';
import * as sp from '../special';

/** Elements per block on the converted paths (16-bit floats, integers): scratch stays in L2. */
export const BLOCK = 4096;

type F32 = Float32Array;
type F64 = Float64Array;
type U8 = Uint8Array;

/** Unary loops take one optional scalar parameter `p` (integer_pow's exponent). */
export type FloatUnaryKernel = (x: F32, o: F32, n: number, p: number) => void;
export type FloatPredicateKernel = (x: F32, o: U8, n: number) => void;
export type FloatBinaryKernel = (a: F32, b: F32, o: F32, n: number) => void;
export type FloatCompareKernel = (a: F32, b: F32, o: U8, n: number) => void;
/** Integer/bool kernels: `bits` is the storage width (8 or 32) for shifts and sign handling. */
export type NumUnaryKernel = (x: F64, o: F64, n: number, bits: number, p: number) => void;
export type NumBinaryKernel = (a: F64, b: F64, o: F64, n: number, bits: number) => void;

const SA = new Float32Array(BLOCK);
const SB = new Float32Array(BLOCK);
const SO = new Float32Array(BLOCK);
const DA = new Float64Array(BLOCK);
const DB = new Float64Array(BLOCK);
const DO = new Float64Array(BLOCK);

/** The first m elements of a scratch buffer (the buffer itself for a full block). */
function head<T extends F32 | F64>(buf: T, m: number): T {
  return (m === buf.length ? buf : buf.subarray(0, m)) as T;
}

function decodeBlock(dtype: DType, src: Uint16Array, s: number, m: number, dst: F32): void {
  const part = src.subarray(s, s + m);
  if (dtype === 'bfloat16') bf16.decode(part, dst);
  else f16.decode(part, dst);
}

function encodeBlock(dtype: DType, src: F32, m: number, dst: Uint16Array, s: number): void {
  const part = dst.subarray(s, s + m);
  if (dtype === 'bfloat16') bf16.encode(head(src, m), undefined, part);
  else f16.encode(head(src, m), part);
}

// ---------------------------------------------------------------------------------------------
// Drivers

/** A float unary op on float32 / bfloat16 / float16 storage. */
export function runFloatUnary(k: FloatUnaryKernel, x: StorageArray, dtype: DType, p = 0): StorageArray {
  const n = x.length;
  if (dtype === 'float32') {
    const o = new Float32Array(n);
    k(x as F32, o, n, p);
    return o;
  }
  const out = new Uint16Array(n);
  for (let s = 0; s < n; s += BLOCK) {
    const m = Math.min(BLOCK, n - s);
    decodeBlock(dtype, x as Uint16Array, s, m, SA);
    k(SA, SO, m, p);
    encodeBlock(dtype, SO, m, out, s);
  }
  return out;
}

/** A float predicate (bool result) on float storage. */
export function runFloatPredicate(k: FloatPredicateKernel, x: StorageArray, dtype: DType): Uint8Array {
  const n = x.length;
  const out = new Uint8Array(n);
  if (dtype === 'float32') {
    k(x as F32, out, n);
    return out;
  }
  for (let s = 0; s < n; s += BLOCK) {
    const m = Math.min(BLOCK, n - s);
    decodeBlock(dtype, x as Uint16Array, s, m, SA);
    k(SA, out.subarray(s, s + m), m);
  }
  return out;
}

/** A float binary op on two operands of the same float dtype and size. */
export function runFloatBinary(k: FloatBinaryKernel, a: StorageArray, b: StorageArray, dtype: DType): StorageArray {
  const n = a.length;
  if (dtype === 'float32') {
    const o = new Float32Array(n);
    k(a as F32, b as F32, o, n);
    return o;
  }
  const out = new Uint16Array(n);
  for (let s = 0; s < n; s += BLOCK) {
    const m = Math.min(BLOCK, n - s);
    decodeBlock(dtype, a as Uint16Array, s, m, SA);
    decodeBlock(dtype, b as Uint16Array, s, m, SB);
    k(SA, SB, SO, m);
    encodeBlock(dtype, SO, m, out, s);
  }
  return out;
}

/** A float comparison (bool result) on two operands of the same float dtype and size. */
export function runFloatCompare(k: FloatCompareKernel, a: StorageArray, b: StorageArray, dtype: DType): Uint8Array {
  const n = a.length;
  const out = new Uint8Array(n);
  if (dtype === 'float32') {
    k(a as F32, b as F32, out, n);
    return out;
  }
  for (let s = 0; s < n; s += BLOCK) {
    const m = Math.min(BLOCK, n - s);
    decodeBlock(dtype, a as Uint16Array, s, m, SA);
    decodeBlock(dtype, b as Uint16Array, s, m, SB);
    k(SA, SB, out.subarray(s, s + m), m);
  }
  return out;
}

/** An integer/bool unary op: storage widened to float64 blocks, result stored as `outDtype`. */
export function runNumUnary(k: NumUnaryKernel, x: StorageArray, dtype: DType, outDtype: DType, p = 0): StorageArray {
  const n = x.length;
  const out = allocStorage(outDtype, n);
  const bits = itemsize(dtype) * 8;
  for (let s = 0; s < n; s += BLOCK) {
    const m = Math.min(BLOCK, n - s);
    DA.set(x.subarray(s, s + m));
    k(DA, DO, m, bits, p);
    out.set(head(DO, m), s);
  }
  return out;
}

/** An integer/bool binary op on two operands of the same dtype and size. */
export function runNumBinary(k: NumBinaryKernel, a: StorageArray, b: StorageArray, dtype: DType, outDtype: DType): StorageArray {
  const n = a.length;
  const out = allocStorage(outDtype, n);
  const bits = itemsize(dtype) * 8;
  for (let s = 0; s < n; s += BLOCK) {
    const m = Math.min(BLOCK, n - s);
    DA.set(a.subarray(s, s + m));
    DB.set(b.subarray(s, s + m));
    k(DA, DB, DO, m, bits);
    out.set(head(DO, m), s);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Shared scalar formulas (called from the loops; small enough for V8 to inline)

/** Integer power by squaring with 32-bit wrap-around (exponent >= 0). */
function ipowInt(b: number, e: number): number {
  let r = 1;
  let base = b | 0;
  while (e > 0) {
    if (e & 1) r = Math.imul(r, base);
    base = Math.imul(base, base);
    e >>>= 1;
  }
  return r;
}

/** C's pow (what XLA calls): unlike JS `**`, 1 ** NaN and (-1) ** ±Infinity are 1. */
function cpow(a: number, b: number): number {
  if (a === 1) return 1;
  if (a === -1 && (b === Infinity || b === -Infinity)) return 1;
  return a ** b;
}

/** Integer pow of the lax `pow` primitive: negative exponents give 0 except for bases ±1. */
function ipowSigned(a: number, b: number): number {
  return b < 0 ? (a === 1 ? 1 : a === -1 ? (b % 2 ? -1 : 1) : 0) : ipowInt(a, b);
}

/**
 * Float remainder with one canonical NaN (float32 bits 0x7fc00000). V8 computes `%` on doubles
 * with different code per JIT tier (a C fmod call in the interpreter and baseline tiers, an x87
 * `fprem` loop in optimised code), and the NaNs they produce (`x % 0`, `inf % y`, a NaN operand)
 * differ in sign and payload: the same program gave different bits before and after warm-up.
 * XLA leaves a NaN's bits unspecified, so tpukit picks one.
 */
export function frem(a: number, b: number): number {
  const r = a % b;
  return r === r ? r : NaN;
}

function roundEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 ? 2 * Math.round(x / 2) : r;
}

function logistic(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

const nf32 = new Float32Array(1);
const nu32 = new Uint32Array(nf32.buffer);
/** The next float32 after `a` towards `b`. */
function nextAfter32(a: number, b: number): number {
  if (Number.isNaN(a) || Number.isNaN(b)) return NaN;
  if (a === b) return b;
  if (a === 0) {
    nu32[0] = 1;
    return b > 0 ? nf32[0] : -nf32[0];
  }
  nf32[0] = a;
  if (a < b === a > 0) nu32[0]++;
  else nu32[0]--;
  return nf32[0];
}

/** Reinterprets a value of an integer dtype as signed of the same width. */
const asSigned = (x: number, bits: number): number => (bits === 8 ? (x << 24) >> 24 : x | 0);

// ---------------------------------------------------------------------------------------------
// Unary kernels

export const FLOAT_UNARY: Record<string, FloatUnaryKernel> = {
  neg: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = -x[i]; },
  sign: (x, o, n) => { for (let i = 0; i < n; i++) { const v = x[i]; o[i] = v !== v ? NaN : v > 0 ? 1 : v < 0 ? -1 : v; } },
  abs: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.abs(x[i]); },
  floor: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.floor(x[i]); },
  ceil: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.ceil(x[i]); },
  round: (x, o, n) => { for (let i = 0; i < n; i++) { const v = x[i]; o[i] = v < 0 ? -Math.round(-v) : Math.round(v); } },
  round_nearest_even: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = roundEven(x[i]); },
  exp: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.exp(x[i]); },
  exp2: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = 2 ** x[i]; },
  log: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.log(x[i]); },
  log1p: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.log1p(x[i]); },
  expm1: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.expm1(x[i]); },
  tanh: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.tanh(x[i]); },
  logistic: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = logistic(x[i]); },
  sin: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.sin(x[i]); },
  cos: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.cos(x[i]); },
  tan: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.tan(x[i]); },
  asin: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.asin(x[i]); },
  acos: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.acos(x[i]); },
  atan: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.atan(x[i]); },
  sinh: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.sinh(x[i]); },
  cosh: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.cosh(x[i]); },
  asinh: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.asinh(x[i]); },
  acosh: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.acosh(x[i]); },
  atanh: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.atanh(x[i]); },
  sqrt: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.sqrt(x[i]); },
  rsqrt: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = 1 / Math.sqrt(x[i]); },
  cbrt: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.cbrt(x[i]); },
  erf: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = sp.erf(x[i]); },
  erfc: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = sp.erfc(x[i]); },
  erf_inv: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = sp.erfinv(x[i]); },
  lgamma: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = sp.lgamma(x[i]); },
  digamma: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = sp.digamma(x[i]); },
  square: (x, o, n) => { for (let i = 0; i < n; i++) { const v = x[i]; o[i] = v * v; } },
};

export const FLOAT_PREDICATE: Record<string, FloatPredicateKernel> = {
  is_finite: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Number.isFinite(x[i]) ? 1 : 0; },
};

export const INT_UNARY: Record<string, NumUnaryKernel> = {
  neg: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = -x[i]; },
  sign: (x, o, n) => { for (let i = 0; i < n; i++) { const v = x[i]; o[i] = v > 0 ? 1 : v < 0 ? -1 : v; } },
  abs: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.abs(x[i]); },
  square: (x, o, n) => { for (let i = 0; i < n; i++) { const v = x[i]; o[i] = Math.imul(v, v); } },
  not: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = ~x[i]; },
};

export const BOOL_UNARY: Record<string, NumUnaryKernel> = {
  not: (x, o, n) => { for (let i = 0; i < n; i++) o[i] = x[i] ? 0 : 1; },
};

/** integer_pow's loops: `p` is the exponent (non-negative for integers). */
export const floatIntegerPow: FloatUnaryKernel = (x, o, n, p) => { for (let i = 0; i < n; i++) o[i] = x[i] ** p; };
export const intIntegerPow: NumUnaryKernel = (x, o, n, _bits, p) => { for (let i = 0; i < n; i++) o[i] = ipowInt(x[i], p); };

// ---------------------------------------------------------------------------------------------
// Binary kernels

export const FLOAT_BINARY: Record<string, FloatBinaryKernel> = {
  add: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] + b[i]; },
  sub: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] - b[i]; },
  mul: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] * b[i]; },
  div: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] / b[i]; },
  rem: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = frem(a[i], b[i]); },
  pow: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = cpow(a[i], b[i]); },
  max: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.max(a[i], b[i]); },
  min: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.min(a[i], b[i]); },
  atan2: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.atan2(a[i], b[i]); },
  nextafter: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = nextAfter32(a[i], b[i]); },
};

export const FLOAT_COMPARE: Record<string, FloatCompareKernel> = {
  eq: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] === b[i] ? 1 : 0; },
  ne: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] !== b[i] ? 1 : 0; },
  lt: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] < b[i] ? 1 : 0; },
  le: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] <= b[i] ? 1 : 0; },
  gt: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] > b[i] ? 1 : 0; },
  ge: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] >= b[i] ? 1 : 0; },
};

/** Comparisons, max/min and the bitwise ops read the same on integers and bools. */
const NUM_SHARED: Record<string, NumBinaryKernel> = {
  max: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.max(a[i], b[i]); },
  min: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.min(a[i], b[i]); },
  and: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] & b[i]; },
  or: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] | b[i]; },
  xor: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] ^ b[i]; },
  eq: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] === b[i] ? 1 : 0; },
  ne: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] !== b[i] ? 1 : 0; },
  lt: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] < b[i] ? 1 : 0; },
  le: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] <= b[i] ? 1 : 0; },
  gt: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] > b[i] ? 1 : 0; },
  ge: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] >= b[i] ? 1 : 0; },
};

export const INT_BINARY: Record<string, NumBinaryKernel> = {
  ...NUM_SHARED,
  add: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] + b[i]; },
  sub: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] - b[i]; },
  mul: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.imul(a[i], b[i]); },
  // XLA: integer division by zero gives all ones (-1), and x % 0 gives x.
  div: (a, b, o, n) => { for (let i = 0; i < n; i++) { const d = b[i]; o[i] = d === 0 ? -1 : Math.trunc(a[i] / d); } },
  rem: (a, b, o, n) => { for (let i = 0; i < n; i++) { const d = b[i]; o[i] = d === 0 ? a[i] : a[i] % d; } },
  pow: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = ipowSigned(a[i], b[i]); },
  shift_left: (a, b, o, n, bits) => { for (let i = 0; i < n; i++) { const s = b[i]; o[i] = s < 0 || s >= bits ? 0 : a[i] << s; } },
  shift_right_arithmetic: (a, b, o, n, bits) => {
    for (let i = 0; i < n; i++) {
      const v = asSigned(a[i], bits);
      const s = b[i];
      o[i] = s < 0 || s >= bits ? (v < 0 ? -1 : 0) : v >> s;
    }
  },
  shift_right_logical: (a, b, o, n, bits) => {
    for (let i = 0; i < n; i++) {
      const s = b[i];
      o[i] = s < 0 || s >= bits ? 0 : (bits === 8 ? a[i] & 0xff : a[i] >>> 0) >>> s;
    }
  },
};

/**
 * int32, the common integer dtype, skips the float64 blocks: the loops read and write the
 * Int32Array storage directly (a store wraps the float64 result exactly as `set` does).
 */
export type Int32BinaryKernel = (a: Int32Array, b: Int32Array, o: Int32Array, n: number) => void;
export type Int32CompareKernel = (a: Int32Array, b: Int32Array, o: U8, n: number) => void;

export const INT32_BINARY: Record<string, Int32BinaryKernel> = {
  add: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] + b[i]; },
  sub: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] - b[i]; },
  mul: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.imul(a[i], b[i]); },
  div: (a, b, o, n) => { for (let i = 0; i < n; i++) { const d = b[i]; o[i] = d === 0 ? -1 : Math.trunc(a[i] / d); } },
  rem: (a, b, o, n) => { for (let i = 0; i < n; i++) { const d = b[i]; o[i] = d === 0 ? a[i] : a[i] % d; } },
  max: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.max(a[i], b[i]); },
  min: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = Math.min(a[i], b[i]); },
  and: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] & b[i]; },
  or: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] | b[i]; },
  xor: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] ^ b[i]; },
};

export const INT32_COMPARE: Record<string, Int32CompareKernel> = {
  eq: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] === b[i] ? 1 : 0; },
  ne: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] !== b[i] ? 1 : 0; },
  lt: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] < b[i] ? 1 : 0; },
  le: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] <= b[i] ? 1 : 0; },
  gt: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] > b[i] ? 1 : 0; },
  ge: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] >= b[i] ? 1 : 0; },
};

export const BOOL_BINARY: Record<string, NumBinaryKernel> = {
  ...NUM_SHARED,
  add: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] | b[i]; },
  mul: (a, b, o, n) => { for (let i = 0; i < n; i++) o[i] = a[i] & b[i]; },
};

// ---------------------------------------------------------------------------------------------
// select_n and convert_element_type

const select2x8 = (w: U8, f: Uint8Array, t: Uint8Array, o: Uint8Array, n: number): void => { for (let i = 0; i < n; i++) o[i] = w[i] ? t[i] : f[i]; };
const select2x16 = (w: U8, f: Uint16Array, t: Uint16Array, o: Uint16Array, n: number): void => { for (let i = 0; i < n; i++) o[i] = w[i] ? t[i] : f[i]; };
const select2x32 = (w: U8, f: Int32Array, t: Int32Array, o: Int32Array, n: number): void => { for (let i = 0; i < n; i++) o[i] = w[i] ? t[i] : f[i]; };

/** `cases[clamp(which[i], 0, last)][i]`, `which` bool or int32 (or a scalar of either). */
export function runSelect(which: StorageArray, scalarWhich: boolean, cases: StorageArray[], dtype: DType): StorageArray {
  const n = cases[0].length;
  const out = allocStorage(dtype, n);
  const last = cases.length - 1;
  if (scalarWhich) {
    const k = Math.min(Math.max(which[0], 0), last);
    out.set(cases[k] as never);
    return out;
  }
  // Through same-width integer views: select copies bits, so float NaN payloads pass unchanged.
  const o = bitView(out);
  const cs = cases.map(bitView);
  if (cases.length === 2 && which instanceof Uint8Array) {
    if (o instanceof Uint8Array) select2x8(which, cs[0] as Uint8Array, cs[1] as Uint8Array, o, n);
    else if (o instanceof Uint16Array) select2x16(which, cs[0] as Uint16Array, cs[1] as Uint16Array, o, n);
    else select2x32(which, cs[0] as Int32Array, cs[1] as Int32Array, o, n);
    return out;
  }
  for (let i = 0; i < n; i++) o[i] = cs[Math.min(Math.max(which[i], 0), last)][i];
  return out;
}

/** Float (decoded to float32) to integer: truncation toward zero, NaN to 0, saturation. */
const floatToIntBlock = (x: F32, o: F64, n: number, lo: number, hi: number): void => {
  for (let i = 0; i < n; i++) {
    const v = x[i];
    o[i] = v !== v ? 0 : Math.min(hi, Math.max(lo, Math.trunc(v)));
  }
};
const floatToInt32 = (x: F32, o: Int32Array, n: number): void => {
  for (let i = 0; i < n; i++) {
    const v = x[i];
    o[i] = v !== v ? 0 : Math.min(2147483647, Math.max(-2147483648, Math.trunc(v)));
  }
};
const floatToBool = (x: F32, o: U8, n: number): void => { for (let i = 0; i < n; i++) o[i] = x[i] !== 0 ? 1 : 0; };
const numToBool = (x: F64, o: F64, n: number): void => { for (let i = 0; i < n; i++) o[i] = x[i] !== 0 ? 1 : 0; };

const INT_LIMITS: Partial<Record<DType, [number, number]>> = {
  int8: [-128, 127],
  uint8: [0, 255],
  int32: [-2147483648, 2147483647],
  uint32: [0, 4294967295],
};

/** The float32 values of float storage (16-bit floats decoded; float32 returned as is). */
function asFloat32(x: StorageArray, dtype: DType): F32 {
  if (dtype === 'bfloat16') return bf16.decode(x as Uint16Array);
  if (dtype === 'float16') return f16.decode(x as Uint16Array);
  return x as F32;
}

/**
 * convert_element_type's kernel: floats round to nearest (even), floats to integers truncate
 * with NaN -> 0 and saturate, integers wrap to the narrower width, anything non-zero is true.
 */
export function runConvert(x: StorageArray, from: DType, to: DType): StorageArray {
  const n = x.length;
  if (from === to) return x.slice();
  if (isFloat(to)) {
    let f: F32;
    if (isFloat(from)) f = asFloat32(x, from);
    else {
      f = new Float32Array(n);
      f.set(x);
    }
    if (to === 'float32') return f;
    return to === 'bfloat16' ? bf16.encode(f) : f16.encode(f);
  }
  const out = allocStorage(to, n);
  if (isFloat(from)) {
    const f = asFloat32(x, from);
    if (to === 'bool') {
      floatToBool(f, out as U8, n);
      return out;
    }
    if (to === 'int32') {
      floatToInt32(f, out as Int32Array, n); // the common astype, without the float64 block
      return out;
    }
    const [lo, hi] = INT_LIMITS[to]!;
    for (let s = 0; s < n; s += BLOCK) {
      const m = Math.min(BLOCK, n - s);
      floatToIntBlock(f.subarray(s, s + m), DO, m, lo, hi);
      out.set(head(DO, m), s);
    }
    return out;
  }
  if (to === 'bool') return runNumUnary(numToBool, x, from, 'bool');
  out.set(x as never); // integer to integer: wraps, as XLA does
  return out;
}
