/**
 * The typed-array elementwise loops (elementwiseKernels.ts) against the per-element formulas
 * they replaced, kept here as a simple reference: decode the whole operand to numbers, call a
 * `(value, dtype) => number` closure per element, store into a float32 (or integer) array, then
 * round to the 16-bit dtype or normalise bools. Every primitive, every dtype it accepts, random
 * storage bit patterns (NaN with payloads, -0, infinities, integer extremes) and sizes that
 * straddle the kernels' block boundary: the outputs must be the same bits.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as bf16 from '../bf16';
import { type DType, type StorageArray, allocStorage, isFloat, isInteger, itemsize } from '../dtype';
import * as f16 from '../f16';
import { type HostArray, getPrimitive } from '../primitive';
import * as sp from '../special';
import './index';
import { BLOCK } from './elementwiseKernels';

// ---------------------------------------------------------------------------------------------
// The reference: the per-element implementation as it was before the typed-array loops.

type Fn1 = (x: number, d: DType) => number;
type Fn2 = (a: number, b: number, d: DType) => number;

function decoded(data: StorageArray, d: DType): ArrayLike<number> {
  if (d === 'bfloat16') return bf16.decode(data as Uint16Array);
  if (d === 'float16') return f16.decode(data as Uint16Array);
  return data;
}
function floatOut(n: number, d: DType): Float32Array | StorageArray {
  return isFloat(d) ? new Float32Array(n) : allocStorage(d, n);
}
function finish(out: Float32Array | StorageArray, d: DType): StorageArray {
  if (d === 'bfloat16') return bf16.encode(out as Float32Array);
  if (d === 'float16') return f16.encode(out as Float32Array);
  if (d === 'bool') for (let i = 0; i < out.length; i++) out[i] = out[i] ? 1 : 0;
  return out;
}
function refUnary(fn: Fn1, x: StorageArray, d: DType, od: DType): StorageArray {
  const src = decoded(x, d);
  const out = floatOut(src.length, od);
  for (let i = 0; i < src.length; i++) out[i] = fn(src[i], d);
  return finish(out, od);
}
function refBinary(fn: Fn2, x: StorageArray, y: StorageArray, d: DType, od: DType): StorageArray {
  const a = decoded(x, d);
  const b = decoded(y, d);
  const out = floatOut(a.length, od);
  for (let i = 0; i < a.length; i++) out[i] = fn(a[i], b[i], d);
  return finish(out, od);
}

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
function cpow(a: number, b: number): number {
  if (a === 1) return 1;
  if (a === -1 && (b === Infinity || b === -Infinity)) return 1;
  return a ** b;
}
const nf32 = new Float32Array(1);
const nu32 = new Uint32Array(nf32.buffer);
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
const bitsOf = (d: DType): number => itemsize(d) * 8;
const asSigned = (x: number, d: DType): number => (bitsOf(d) === 8 ? (x << 24) >> 24 : x | 0);

const F = ['float32', 'bfloat16', 'float16'] as const;
const I = ['int8', 'uint8', 'int32', 'uint32'] as const;
const FI: DType[] = [...F, ...I];
const IB: DType[] = [...I, 'bool'];
const ALL: DType[] = [...F, ...I, 'bool'];

const UNARY: [string, DType[], Fn1][] = [
  ['neg', FI, (x) => -x],
  ['sign', FI, (x) => (Number.isNaN(x) ? NaN : x > 0 ? 1 : x < 0 ? -1 : x)],
  ['abs', FI, (x) => Math.abs(x)],
  ['floor', [...F], Math.floor],
  ['ceil', [...F], Math.ceil],
  ['round', [...F], (x) => (x < 0 ? -Math.round(-x) : Math.round(x))],
  ['round_nearest_even', [...F], (x) => (Math.abs(x % 1) === 0.5 ? 2 * Math.round(x / 2) : Math.round(x))],
  ['is_finite', [...F], (x) => (Number.isFinite(x) ? 1 : 0)],
  ['exp', [...F], Math.exp],
  ['exp2', [...F], (x) => 2 ** x],
  ['log', [...F], Math.log],
  ['log1p', [...F], Math.log1p],
  ['expm1', [...F], Math.expm1],
  ['tanh', [...F], Math.tanh],
  ['logistic', [...F], (x) => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)))],
  ['sin', [...F], Math.sin],
  ['cos', [...F], Math.cos],
  ['tan', [...F], Math.tan],
  ['asin', [...F], Math.asin],
  ['acos', [...F], Math.acos],
  ['atan', [...F], Math.atan],
  ['sinh', [...F], Math.sinh],
  ['cosh', [...F], Math.cosh],
  ['asinh', [...F], Math.asinh],
  ['acosh', [...F], Math.acosh],
  ['atanh', [...F], Math.atanh],
  ['sqrt', [...F], Math.sqrt],
  ['rsqrt', [...F], (x) => 1 / Math.sqrt(x)],
  ['cbrt', [...F], Math.cbrt],
  ['erf', [...F], sp.erf],
  ['erfc', [...F], sp.erfc],
  ['erf_inv', [...F], sp.erfinv],
  ['lgamma', [...F], sp.lgamma],
  ['digamma', [...F], sp.digamma],
  ['square', FI, (x, d) => (isInteger(d) ? Math.imul(x, x) : x * x)],
  ['not', IB, (x, d) => (d === 'bool' ? (x ? 0 : 1) : ~x)],
];

const BINARY: [string, DType[], Fn2][] = [
  ['add', [...FI, 'bool'], (a, b, d) => (d === 'bool' ? a | b : a + b)],
  ['sub', FI, (a, b) => a - b],
  ['mul', [...FI, 'bool'], (a, b, d) => (isInteger(d) ? Math.imul(a, b) : d === 'bool' ? a & b : a * b)],
  ['div', FI, (a, b, d) => (!isInteger(d) ? a / b : b === 0 ? -1 : Math.trunc(a / b))],
  // Float rem's NaNs are canonical (0x7fc00000): V8's `%` NaN bits depend on the JIT tier.
  ['rem', FI, (a, b, d) => (isInteger(d) ? (b === 0 ? a : a % b) : Number.isNaN(a % b) ? NaN : a % b)],
  ['pow', FI, (a, b, d) => (isInteger(d) ? (b < 0 ? (a === 1 ? 1 : a === -1 ? (b % 2 ? -1 : 1) : 0) : ipowInt(a, b)) : cpow(a, b))],
  ['max', ALL, (a, b) => Math.max(a, b)],
  ['min', ALL, (a, b) => Math.min(a, b)],
  ['atan2', [...F], Math.atan2],
  ['nextafter', ['float32'], (a, b) => nextAfter32(a, b)],
  ['and', IB, (a, b) => a & b],
  ['or', IB, (a, b) => a | b],
  ['xor', IB, (a, b) => a ^ b],
  ['shift_left', [...I], (a, b, d) => (b < 0 || b >= bitsOf(d) ? 0 : a << b)],
  ['shift_right_arithmetic', [...I], (a, b, d) => {
    const s = asSigned(a, d);
    return b < 0 || b >= bitsOf(d) ? (s < 0 ? -1 : 0) : s >> b;
  }],
  ['shift_right_logical', [...I], (a, b, d) => (b < 0 || b >= bitsOf(d) ? 0 : (bitsOf(d) === 8 ? a & 0xff : a >>> 0) >>> b)],
  ['eq', ALL, (a, b) => (a === b ? 1 : 0)],
  ['ne', ALL, (a, b) => (a !== b ? 1 : 0)],
  ['lt', ALL, (a, b) => (a < b ? 1 : 0)],
  ['le', ALL, (a, b) => (a <= b ? 1 : 0)],
  ['gt', ALL, (a, b) => (a > b ? 1 : 0)],
  ['ge', ALL, (a, b) => (a >= b ? 1 : 0)],
];

function refConvert(x: StorageArray, from: DType, to: DType): StorageArray {
  if (from === to) return x.slice();
  const src = decoded(x, from);
  const n = src.length;
  if (isFloat(to)) {
    const f = new Float32Array(n);
    // Float32Array -> Float32Array is a byte copy; going through a JS number would let V8 quiet a
    // signalling NaN (0x7f81 as bfloat16) in optimised code and not in the interpreter.
    if (src instanceof Float32Array) f.set(src);
    else for (let i = 0; i < n; i++) f[i] = src[i];
    return to === 'float32' ? f : finish(f, to);
  }
  const out = allocStorage(to, n);
  const clamp: Record<string, [number, number]> = { int8: [-128, 127], uint8: [0, 255], int32: [-2147483648, 2147483647], uint32: [0, 4294967295] };
  if (to === 'bool') for (let i = 0; i < n; i++) out[i] = src[i] !== 0 ? 1 : 0;
  else if (isFloat(from)) {
    for (let i = 0; i < n; i++) {
      const v = src[i];
      out[i] = Number.isNaN(v) ? 0 : Math.min(clamp[to][1], Math.max(clamp[to][0], Math.trunc(v)));
    }
  } else for (let i = 0; i < n; i++) out[i] = src[i];
  return out;
}

/**
 * select_n's reference copies the chosen element's bits. The old kernel copied float32 values
 * through JS numbers, which quiets a signalling NaN; the new one copies bits, as XLA's select
 * does, so this reference is the old formula on bit views (identical bits for every other value).
 */
function refSelect(which: StorageArray, scalar: boolean, cases: StorageArray[], d: DType): StorageArray {
  const out = allocStorage(d, cases[0].length);
  const bits = (x: StorageArray): StorageArray => (x instanceof Float32Array ? new Uint32Array(x.buffer, x.byteOffset, x.length) : x);
  const o = bits(out);
  const cs = cases.map(bits);
  const last = cases.length - 1;
  for (let i = 0; i < out.length; i++) o[i] = cs[Math.min(Math.max(scalar ? which[0] : which[i], 0), last)][i];
  return out;
}

// ---------------------------------------------------------------------------------------------
// Random storage and comparison

const SPECIAL_F32 = [0, -0, Infinity, -Infinity, NaN, 1, -1, 0.5, -0.5, 1.5, 2.5, 3.4e38, -3.4e38, 1e-45, 65504, 65520, 0.1];

/** n storage elements of dtype `d`: raw random patterns (NaNs with payloads included) mixed with specials. */
function smallStorageArb(d: DType, n: number): fc.Arbitrary<StorageArray> {
  let elem: fc.Arbitrary<number>;
  if (d === 'float32') {
    const specials = fc.constantFrom(...SPECIAL_F32).map((v) => new Uint32Array(new Float32Array([v]).buffer)[0]);
    elem = fc.oneof(fc.integer({ min: 0, max: 0xffffffff }), specials, fc.integer({ min: -40, max: 40 }).map((v) => new Uint32Array(new Float32Array([v]).buffer)[0]));
    return fc.array(elem, { minLength: n, maxLength: n }).map((v) => new Float32Array(Uint32Array.from(v).buffer));
  }
  if (d === 'bfloat16' || d === 'float16') {
    const enc = (v: number): number => (d === 'bfloat16' ? bf16.fromFloat32(v) : f16.fromFloat32(v));
    elem = fc.oneof(fc.integer({ min: 0, max: 0xffff }), fc.constantFrom(...SPECIAL_F32).map(enc), fc.integer({ min: -40, max: 40 }).map(enc));
    return fc.array(elem, { minLength: n, maxLength: n }).map((v) => Uint16Array.from(v));
  }
  if (d === 'bool') return fc.array(fc.integer({ min: 0, max: 1 }), { minLength: n, maxLength: n }).map((v) => Uint8Array.from(v));
  const bits = itemsize(d) * 8;
  const hi = 2 ** bits;
  const extremes = fc.constantFrom(0, 1, 2, 3, 7, 8, 31, 32, 33, hi / 2 - 1, hi / 2, hi / 2 + 1, hi - 1, hi - 2);
  elem = fc.oneof(fc.integer({ min: 0, max: hi - 1 }), extremes, fc.integer({ min: 0, max: 9 }));
  const Ctor = allocStorage(d, 0).constructor as new (xs: ArrayLike<number>) => StorageArray;
  return fc.array(elem, { minLength: n, maxLength: n }).map((v) => new Ctor(v));
}

/**
 * Storage of `n` elements. Sizes past the kernels' block are a random 61-element pattern tiled
 * (cheap to generate, and the block boundary and tail still see varied values).
 */
function storageArb(d: DType, n: number): fc.Arbitrary<StorageArray> {
  if (n <= 64) return smallStorageArb(d, n);
  return smallStorageArb(d, 61).map((pat) => {
    const out = allocStorage(d, n);
    for (let i = 0; i < n; i++) out[i] = pat[i % 61];
    return out;
  });
}

/** Same length and same bytes (float32 compared as bit patterns). */
function expectSameBits(got: StorageArray, want: StorageArray, what: string): void {
  expect(got.constructor).toBe(want.constructor);
  expect(got.length).toBe(want.length);
  const g = new Uint8Array(got.buffer, got.byteOffset, got.byteLength);
  const w = new Uint8Array(want.buffer, want.byteOffset, want.byteLength);
  const step = got.BYTES_PER_ELEMENT;
  for (let i = 0; i < g.length; i++) {
    if (g[i] !== w[i]) expect.fail(`${what}: element ${Math.floor(i / step)}: got ${got[Math.floor(i / step)]}, want ${want[Math.floor(i / step)]}`);
  }
}

const host = (data: StorageArray, dtype: DType): HostArray => ({ data, shape: [data.length], dtype });

function runPrim(name: string, inputs: HostArray[], params: unknown = {}): StorageArray {
  const p = getPrimitive(name);
  const outAvals = p.abstractEval(inputs.map((x) => ({ shape: x.shape, dtype: x.dtype, weakType: false })), params);
  return p.impl(inputs, params, outAvals)[0];
}

/** Small random sizes, plus sizes around the block boundary so the blocked paths see a tail. */
const sizeArb = fc.oneof(fc.integer({ min: 0, max: 24 }), fc.constantFrom(BLOCK - 1, BLOCK + 3));
const RUNS = { numRuns: 10 };

// ---------------------------------------------------------------------------------------------

describe('elementwise kernels: same bits as the per-element formulas', () => {
  for (const [name, dtypes, fn] of UNARY) {
    it.each(dtypes)(`${name} on %s`, (d) => {
      const od = name === 'is_finite' ? 'bool' : d;
      fc.assert(
        fc.property(sizeArb.chain((n) => storageArb(d, n)), (x) => {
          expectSameBits(runPrim(name, [host(x, d)]), refUnary(fn, x, d, od), `${name}(${d})`);
        }),
        RUNS,
      );
    });
  }

  it.each(FI)('integer_pow on %s', (d) => {
    const yArb = isInteger(d) ? fc.integer({ min: 0, max: 9 }) : fc.integer({ min: -4, max: 4 });
    fc.assert(
      fc.property(sizeArb.chain((n) => storageArb(d, n)), yArb, (x, y) => {
        const fn: Fn1 = (v) => (isInteger(d) ? ipowInt(v, y) : v ** y);
        expectSameBits(runPrim('integer_pow', [host(x, d)], { y }), refUnary(fn, x, d, d), `integer_pow(${d}, ${y})`);
      }),
      RUNS,
    );
  });

  for (const [name, dtypes, fn] of BINARY) {
    it.each(dtypes)(`${name} on %s`, (d) => {
      const od = ['eq', 'ne', 'lt', 'le', 'gt', 'ge'].includes(name) ? 'bool' : d;
      const pair = sizeArb.chain((n) => fc.tuple(storageArb(d, n), storageArb(d, n)));
      fc.assert(
        fc.property(pair, ([x, y]) => {
          expectSameBits(runPrim(name, [host(x, d), host(y, d)]), refBinary(fn, x, y, d, od), `${name}(${d})`);
        }),
        RUNS,
      );
    });
  }

  it('rem on float32: every NaN it produces has the canonical bits 0x7fc00000, cold and warm', () => {
    // x % 0, inf % y, and NaN operands of either sign and any payload, repeated so that V8
    // optimises the loop (its optimised `%` makes different NaNs than the interpreter's).
    const bits = (xs: number[]): Float32Array => new Float32Array(Uint32Array.from(xs).buffer);
    const one = 0x3f800000;
    const inf = 0x7f800000;
    const a = bits([one, inf, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f812345, 0xffd23456, one, 0]);
    const b = bits([0, one, one, one, one, one, one, 0xffe00001, 0x80000000]);
    for (let rep = 0; rep < 2000; rep++) {
      const out = new Uint32Array(runPrim('rem', [host(a, 'float32'), host(b, 'float32')]).buffer);
      for (let i = 0; i < out.length; i++) {
        if (out[i] !== 0x7fc00000) expect.fail(`rem: element ${i} on repetition ${rep}: bits 0x${out[i].toString(16)}, want 0x7fc00000`);
      }
    }
  });

  it('nextafter still rejects 16-bit floats', () => {
    const x = new Uint16Array([0x3f80]);
    expect(() => runPrim('nextafter', [host(x, 'bfloat16'), host(x, 'bfloat16')])).toThrow(/nextafter: only float32 is supported; got bfloat16/);
  });

  it.each(ALL)('convert_element_type from %s to every dtype', (from) => {
    fc.assert(
      fc.property(sizeArb.chain((n) => storageArb(from, n)), fc.constantFrom(...ALL), (x, to) => {
        expectSameBits(runPrim('convert_element_type', [host(x, from)], { newDtype: to, weakType: false }), refConvert(x, from, to), `convert ${from} -> ${to}`);
      }),
      RUNS,
    );
  });

  it.each(ALL)('select_n on %s cases (bool and int32 which, scalar which)', (d) => {
    const arb = fc.tuple(sizeArb, fc.integer({ min: 1, max: 3 }), fc.boolean(), fc.boolean()).chain(([n, k, boolWhich, scalar]) => {
      const cases = fc.array(storageArb(d, n), { minLength: boolWhich ? Math.min(k, 2) : k, maxLength: boolWhich ? Math.min(k, 2) : k });
      const m = scalar ? 1 : n;
      const which = boolWhich
        ? fc.array(fc.integer({ min: 0, max: 1 }), { minLength: m, maxLength: m }).map((v) => Uint8Array.from(v) as StorageArray)
        : fc.array(fc.integer({ min: -2, max: 4 }), { minLength: m, maxLength: m }).map((v) => Int32Array.from(v) as StorageArray);
      return fc.tuple(fc.constant(boolWhich), fc.constant(scalar), which, cases);
    });
    fc.assert(
      fc.property(arb, ([boolWhich, scalar, which, cases]) => {
        const n = cases[0].length;
        const w: HostArray = { data: which, shape: scalar ? [] : [n], dtype: boolWhich ? 'bool' : 'int32' };
        const got = runPrim('select_n', [w, ...cases.map((c) => host(c, d))]);
        expectSameBits(got, refSelect(which, scalar, cases, d), `select_n(${d})`);
      }),
      RUNS,
    );
  });
});
