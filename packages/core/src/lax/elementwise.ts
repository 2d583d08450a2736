/**
 * Elementwise primitives: unary math, binary arithmetic, comparisons, bitwise ops, select_n,
 * convert_element_type and bitcast_convert_type. As in lax, operands must already agree in
 * shape and dtype (jax.numpy broadcasts and promotes before it binds). Floating kernels compute
 * in float64, round to float32, then (for bfloat16/float16) round once more to the stored dtype:
 * the TPU vector unit computes bf16 math in f32 and rounds the result.
 */
import { numbersToStorage, storageToNumbers } from '../array';
import { type DType, type StorageArray, allocStorage, is16BitFloat, isFloat, isInteger, itemsize } from '../dtype';
import { type Primitive, type ShapedArray, definePrimitive } from '../primitive';
import { fmt, shapesEqual } from '../shape';
import * as sp from '../special';

type Kind = 'float' | 'int' | 'bool';
const kindOf = (d: DType): Kind => (isFloat(d) ? 'float' : d === 'bool' ? 'bool' : 'int');

function checkKinds(name: string, avals: ShapedArray[], allowed: readonly Kind[]): void {
  for (const a of avals) {
    if (!allowed.includes(kindOf(a.dtype))) {
      throw new TypeError(`${name}: does not accept dtype ${a.dtype} (accepts ${allowed.join('/')} dtypes)`);
    }
  }
}

/** Operands of an n-ary elementwise primitive must share shape and dtype. */
export function sameShapeDtype(name: string, avals: ShapedArray[]): void {
  const [a] = avals;
  for (let i = 1; i < avals.length; i++) {
    const b = avals[i];
    if (!shapesEqual(a.shape, b.shape)) {
      throw new Error(`${name}: operand shapes must be equal; got ${avals.map((v) => fmt(v.shape)).join(' and ')}`);
    }
    if (a.dtype !== b.dtype) {
      throw new TypeError(`${name}: operand dtypes must be equal; got ${avals.map((v) => v.dtype).join(' and ')}`);
    }
  }
}

const allWeak = (avals: ShapedArray[]): boolean => avals.every((a) => a.weakType);

function floatOut(n: number, dtype: DType): Float32Array | StorageArray {
  return dtype === 'float32' || is16BitFloat(dtype) ? new Float32Array(n) : allocStorage(dtype, n);
}

function finish(out: Float32Array | StorageArray, dtype: DType): StorageArray {
  if (is16BitFloat(dtype)) return numbersToStorage(out as Float32Array, dtype);
  if (dtype === 'bool') for (let i = 0; i < out.length; i++) out[i] = out[i] ? 1 : 0;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Unary

function unary(name: string, kinds: readonly Kind[], fn: (x: number, dtype: DType) => number, outDtype?: DType): Primitive<Record<string, never>> {
  return definePrimitive<Record<string, never>>({
    name,
    abstractEval([x]) {
      checkKinds(name, [x], kinds);
      return [{ shape: x.shape, dtype: outDtype ?? x.dtype, weakType: outDtype ? false : x.weakType }];
    },
    impl([x], _p, [o]) {
      const src = storageToNumbers(x.data, x.dtype);
      const out = floatOut(src.length, o.dtype);
      const dt = x.dtype;
      for (let i = 0; i < src.length; i++) out[i] = fn(src[i], dt);
      return [finish(out, o.dtype)];
    },
  });
}

const F: readonly Kind[] = ['float'];
const FI: readonly Kind[] = ['float', 'int'];
const IB: readonly Kind[] = ['int', 'bool'];

export const neg = unary('neg', FI, (x) => -x);
export const sign = unary('sign', FI, (x) => (Number.isNaN(x) ? NaN : x > 0 ? 1 : x < 0 ? -1 : x));
export const abs = unary('abs', FI, (x) => Math.abs(x));
export const floor = unary('floor', F, Math.floor);
export const ceil = unary('ceil', F, Math.ceil);
export const roundAway = unary('round', F, (x) => (x < 0 ? -Math.round(-x) : Math.round(x)));
export const roundEven = unary('round_nearest_even', F, (x) => {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 ? 2 * Math.round(x / 2) : r;
});
export const isFinite = unary('is_finite', F, (x) => (Number.isFinite(x) ? 1 : 0), 'bool');
export const exp = unary('exp', F, Math.exp);
export const exp2 = unary('exp2', F, (x) => 2 ** x);
export const log = unary('log', F, Math.log);
export const log1p = unary('log1p', F, Math.log1p);
export const expm1 = unary('expm1', F, Math.expm1);
export const tanh = unary('tanh', F, Math.tanh);
export const logistic = unary('logistic', F, (x) => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x))));
export const sin = unary('sin', F, Math.sin);
export const cos = unary('cos', F, Math.cos);
export const tan = unary('tan', F, Math.tan);
export const asin = unary('asin', F, Math.asin);
export const acos = unary('acos', F, Math.acos);
export const atan = unary('atan', F, Math.atan);
export const sinh = unary('sinh', F, Math.sinh);
export const cosh = unary('cosh', F, Math.cosh);
export const asinh = unary('asinh', F, Math.asinh);
export const acosh = unary('acosh', F, Math.acosh);
export const atanh = unary('atanh', F, Math.atanh);
export const sqrt = unary('sqrt', F, Math.sqrt);
export const rsqrt = unary('rsqrt', F, (x) => 1 / Math.sqrt(x));
export const cbrt = unary('cbrt', F, Math.cbrt);
export const erf = unary('erf', F, sp.erf);
export const erfc = unary('erfc', F, sp.erfc);
export const erfInv = unary('erf_inv', F, sp.erfinv);
export const lgamma = unary('lgamma', F, sp.lgamma);
export const digamma = unary('digamma', F, sp.digamma);
export const square = unary('square', FI, (x, d) => (isInteger(d) ? Math.imul(x, x) : x * x));
export const not = unary('not', IB, (x, d) => (d === 'bool' ? (x ? 0 : 1) : ~x));

export const integerPow = definePrimitive<{ y: number }>({
  name: 'integer_pow',
  abstractEval([x], { y }) {
    checkKinds('integer_pow', [x], FI);
    if (!Number.isInteger(y)) throw new TypeError(`integer_pow: exponent y must be an integer; got ${y}`);
    if (isInteger(x.dtype) && y < 0) throw new TypeError(`integer_pow: negative exponent ${y} for integer dtype ${x.dtype}`);
    return [x];
  },
  impl([x], { y }, [o]) {
    const src = storageToNumbers(x.data, x.dtype);
    const out = floatOut(src.length, o.dtype);
    const int = isInteger(x.dtype);
    for (let i = 0; i < src.length; i++) out[i] = int ? ipowInt(src[i], y) : src[i] ** y;
    return [finish(out, o.dtype)];
  },
});

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

// ---------------------------------------------------------------------------------------------
// Binary

function binary(
  name: string,
  kinds: readonly Kind[],
  fn: (a: number, b: number, dtype: DType) => number,
  outDtype?: DType,
): Primitive<Record<string, never>> {
  return definePrimitive<Record<string, never>>({
    name,
    abstractEval(avals) {
      if (avals.length !== 2) throw new Error(`${name}: takes 2 operands; got ${avals.length}`);
      sameShapeDtype(name, avals);
      checkKinds(name, avals, kinds);
      return [{ shape: avals[0].shape, dtype: outDtype ?? avals[0].dtype, weakType: outDtype ? false : allWeak(avals) }];
    },
    impl([x, y], _p, [o]) {
      const a = storageToNumbers(x.data, x.dtype);
      const b = storageToNumbers(y.data, y.dtype);
      const out = floatOut(a.length, o.dtype);
      const dt = x.dtype;
      for (let i = 0; i < a.length; i++) out[i] = fn(a[i], b[i], dt);
      return [finish(out, o.dtype)];
    },
  });
}

const ALL: readonly Kind[] = ['float', 'int', 'bool'];
const bitsOf = (d: DType): number => itemsize(d) * 8;
/** Reinterprets a value of an integer dtype as signed of the same width. */
const asSigned = (x: number, d: DType): number => (bitsOf(d) === 8 ? (x << 24) >> 24 : x | 0);

export const add = binary('add', FI.concat(['bool']), (a, b, d) => (d === 'bool' ? a | b : a + b));
export const sub = binary('sub', FI, (a, b) => a - b);
export const mul = binary('mul', FI.concat(['bool']), (a, b, d) => (isInteger(d) ? Math.imul(a, b) : d === 'bool' ? a & b : a * b));
export const div = binary('div', FI, (a, b, d) => {
  if (!isInteger(d)) return a / b;
  if (b === 0) return -1; // XLA: integer division by zero gives all ones
  return Math.trunc(a / b);
});
export const rem = binary('rem', FI, (a, b, d) => (isInteger(d) && b === 0 ? a : a % b));
export const pow = binary('pow', FI, (a, b, d) => (isInteger(d) ? (b < 0 ? (a === 1 ? 1 : a === -1 ? (b % 2 ? -1 : 1) : 0) : ipowInt(a, b)) : cpow(a, b)));

/** C's pow (what XLA calls): unlike JS `**`, 1 ** NaN and (-1) ** ±Infinity are 1. */
function cpow(a: number, b: number): number {
  if (a === 1) return 1;
  if (a === -1 && (b === Infinity || b === -Infinity)) return 1;
  return a ** b;
}
export const max = binary('max', ALL, (a, b) => Math.max(a, b));
export const min = binary('min', ALL, (a, b) => Math.min(a, b));
export const atan2 = binary('atan2', F, Math.atan2);
export const nextafter = binary('nextafter', F, (a, b, d) => nextAfter32(a, b, d));
export const and = binary('and', IB, (a, b) => a & b);
export const or = binary('or', IB, (a, b) => a | b);
export const xor = binary('xor', IB, (a, b) => a ^ b);
export const shiftLeft = binary('shift_left', ['int'], (a, b, d) => (b < 0 || b >= bitsOf(d) ? 0 : a << b));
export const shiftRightArithmetic = binary('shift_right_arithmetic', ['int'], (a, b, d) => {
  const s = asSigned(a, d);
  return b < 0 || b >= bitsOf(d) ? (s < 0 ? -1 : 0) : s >> b;
});
export const shiftRightLogical = binary('shift_right_logical', ['int'], (a, b, d) => {
  if (b < 0 || b >= bitsOf(d)) return 0;
  const u = bitsOf(d) === 8 ? a & 0xff : a >>> 0;
  return u >>> b;
});

export const eq = binary('eq', ALL, (a, b) => (a === b ? 1 : 0), 'bool');
export const ne = binary('ne', ALL, (a, b) => (a !== b ? 1 : 0), 'bool');
export const lt = binary('lt', ALL, (a, b) => (a < b ? 1 : 0), 'bool');
export const le = binary('le', ALL, (a, b) => (a <= b ? 1 : 0), 'bool');
export const gt = binary('gt', ALL, (a, b) => (a > b ? 1 : 0), 'bool');
export const ge = binary('ge', ALL, (a, b) => (a >= b ? 1 : 0), 'bool');

const nf32 = new Float32Array(1);
const nu32 = new Uint32Array(nf32.buffer);
function nextAfter32(a: number, b: number, d: DType): number {
  if (d !== 'float32') throw new TypeError(`nextafter: only float32 is supported; got ${d}`);
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

// ---------------------------------------------------------------------------------------------
// select_n, conversions

/** `lax.select_n(which, *cases)`: cases[which[i]][i]. `which` is bool (2 cases) or int32. */
export const selectN = definePrimitive<Record<string, never>>({
  name: 'select_n',
  abstractEval([which, ...cases]) {
    if (cases.length === 0) throw new Error('select_n: needs at least one case');
    sameShapeDtype('select_n', cases);
    if (which.dtype !== 'bool' && which.dtype !== 'int32') {
      throw new TypeError(`select_n: which must be bool or int32; got ${which.dtype}`);
    }
    if (which.dtype === 'bool' && cases.length > 2) throw new Error(`select_n: a bool predicate selects between at most 2 cases; got ${cases.length}`);
    if (which.shape.length !== 0 && !shapesEqual(which.shape, cases[0].shape)) {
      throw new Error(`select_n: which shape ${fmt(which.shape)} must be scalar or equal to the case shape ${fmt(cases[0].shape)}`);
    }
    return [{ shape: cases[0].shape, dtype: cases[0].dtype, weakType: allWeak(cases) }];
  },
  impl([which, ...cases], _p, [o]) {
    const out = allocStorage(o.dtype, cases[0].data.length);
    const w = which.data;
    const scalar = which.shape.length === 0;
    const last = cases.length - 1;
    for (let i = 0; i < out.length; i++) {
      const k = Math.min(Math.max(scalar ? w[0] : w[i], 0), last);
      out[i] = cases[k].data[i];
    }
    return [out];
  },
});

/** The value float input `v` takes in integer dtype `d`: truncation, NaN to 0, saturation. */
function floatToInt(v: number, d: DType): number {
  if (Number.isNaN(v)) return 0;
  const t = Math.trunc(v);
  switch (d) {
    case 'int8': return Math.min(127, Math.max(-128, t));
    case 'uint8': return Math.min(255, Math.max(0, t));
    case 'int32': return Math.min(2147483647, Math.max(-2147483648, t));
    case 'uint32': return Math.min(4294967295, Math.max(0, t));
    default: return t;
  }
}

export const convertElementType = definePrimitive<{ newDtype: DType; weakType: boolean }>({
  name: 'convert_element_type',
  abstractEval([x], { newDtype, weakType }) {
    return [{ shape: x.shape, dtype: newDtype, weakType }];
  },
  impl([x], { newDtype }) {
    if (x.dtype === newDtype) return [x.data.slice()];
    const src = storageToNumbers(x.data, x.dtype);
    const n = src.length;
    if (isFloat(newDtype)) {
      const f = new Float32Array(n);
      for (let i = 0; i < n; i++) f[i] = src[i];
      return [newDtype === 'float32' ? f : numbersToStorage(f, newDtype)];
    }
    const out = allocStorage(newDtype, n);
    if (newDtype === 'bool') for (let i = 0; i < n; i++) out[i] = src[i] !== 0 ? 1 : 0;
    else if (isFloat(x.dtype)) for (let i = 0; i < n; i++) out[i] = floatToInt(src[i], newDtype);
    else for (let i = 0; i < n; i++) out[i] = src[i]; // integer to integer: wraps, as XLA does
    return [out];
  },
});

/** Reinterprets the bits of each element as another dtype of the same width. */
export const bitcastConvertType = definePrimitive<{ newDtype: DType }>({
  name: 'bitcast_convert_type',
  abstractEval([x], { newDtype }) {
    if (itemsize(x.dtype) !== itemsize(newDtype)) {
      throw new TypeError(`bitcast_convert_type: ${x.dtype} (${itemsize(x.dtype)} bytes) and ${newDtype} (${itemsize(newDtype)} bytes) differ in width`);
    }
    return [{ shape: x.shape, dtype: newDtype, weakType: false }];
  },
  impl([x], { newDtype }) {
    const bytes = new Uint8Array(x.data.buffer, x.data.byteOffset, x.data.byteLength).slice();
    const Ctor = allocStorage(newDtype, 0).constructor as new (b: ArrayBuffer) => StorageArray;
    const out = new Ctor(bytes.buffer);
    if (newDtype === 'bool') for (let i = 0; i < out.length; i++) out[i] = out[i] ? 1 : 0;
    return [out];
  },
});

