/**
 * Elementwise primitives: unary math, binary arithmetic, comparisons, bitwise ops, select_n,
 * convert_element_type and bitcast_convert_type. As in lax, operands must already agree in
 * shape and dtype (jax.numpy broadcasts and promotes before it binds). Floating kernels compute
 * in float64, round to float32, then (for bfloat16/float16) round once more to the stored dtype:
 * the TPU vector unit computes bf16 math in f32 and rounds the result. The loops themselves
 * live in elementwiseKernels.ts, one typed-array loop per (op, kind).
 */
import { type DType, type StorageArray, allocStorage, isFloat, isInteger, itemsize } from '../dtype';
import { type HostArray, type Primitive, type ShapedArray, definePrimitive } from '../primitive';
import { fmt, shapesEqual } from '../shape';
import * as K from './elementwiseKernels';

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

// ---------------------------------------------------------------------------------------------
// Unary

/** The loops of a unary op per kind (see elementwiseKernels.ts); absent kinds are rejected by its shape rule. */
interface UnaryLoops {
  float?: K.FloatUnaryKernel;
  predicate?: K.FloatPredicateKernel;
  int?: K.NumUnaryKernel;
  bool?: K.NumUnaryKernel;
}

function runUnary(name: string, loops: UnaryLoops, x: HostArray, outDtype: DType, p = 0): StorageArray {
  const d = x.dtype;
  if (isFloat(d)) {
    if (loops.predicate) return K.runFloatPredicate(loops.predicate, x.data, d);
    return K.runFloatUnary(loops.float!, x.data, d, p);
  }
  const k = d === 'bool' ? loops.bool : loops.int;
  if (k === undefined) throw new TypeError(`${name}: no kernel for dtype ${d}`);
  return K.runNumUnary(k, x.data, d, outDtype, p);
}

function unary(name: string, kinds: readonly Kind[], outDtype?: DType): Primitive<Record<string, never>> {
  const loops: UnaryLoops = {
    float: K.FLOAT_UNARY[name],
    predicate: K.FLOAT_PREDICATE[name],
    int: K.INT_UNARY[name],
    bool: K.BOOL_UNARY[name],
  };
  return definePrimitive<Record<string, never>>({
    name,
    elementwise: { arity: 1, transcendental: TRANSCENDENTAL.has(name) },
    abstractEval([x]) {
      checkKinds(name, [x], kinds);
      return [{ shape: x.shape, dtype: outDtype ?? x.dtype, weakType: outDtype ? false : x.weakType }];
    },
    impl([x], _p, [o]) {
      return [runUnary(name, loops, x, o.dtype)];
    },
  });
}

/**
 * Elementwise primitives cost analysis counts as transcendentals (XLA's HloCostAnalysis counts
 * its transcendental opcodes; erfc, erf_inv, lgamma and digamma, which XLA expands into
 * polynomials, are counted too).
 */
const TRANSCENDENTAL = new Set(['exp', 'log', 'tanh', 'logistic', 'sin', 'cos', 'tan', 'sqrt', 'rsqrt', 'pow', 'erf', 'erfc', 'log1p', 'expm1', 'atan2', 'erf_inv', 'lgamma', 'digamma']);

const F: readonly Kind[] = ['float'];
const FI: readonly Kind[] = ['float', 'int'];
const IB: readonly Kind[] = ['int', 'bool'];

export const neg = unary('neg', FI);
export const sign = unary('sign', FI);
export const abs = unary('abs', FI);
export const floor = unary('floor', F);
export const ceil = unary('ceil', F);
export const roundAway = unary('round', F);
export const roundEven = unary('round_nearest_even', F);
export const isFinite = unary('is_finite', F, 'bool');
export const exp = unary('exp', F);
export const exp2 = unary('exp2', F);
export const log = unary('log', F);
export const log1p = unary('log1p', F);
export const expm1 = unary('expm1', F);
export const tanh = unary('tanh', F);
export const logistic = unary('logistic', F);
export const sin = unary('sin', F);
export const cos = unary('cos', F);
export const tan = unary('tan', F);
export const asin = unary('asin', F);
export const acos = unary('acos', F);
export const atan = unary('atan', F);
export const sinh = unary('sinh', F);
export const cosh = unary('cosh', F);
export const asinh = unary('asinh', F);
export const acosh = unary('acosh', F);
export const atanh = unary('atanh', F);
export const sqrt = unary('sqrt', F);
export const rsqrt = unary('rsqrt', F);
export const cbrt = unary('cbrt', F);
export const erf = unary('erf', F);
export const erfc = unary('erfc', F);
export const erfInv = unary('erf_inv', F);
export const lgamma = unary('lgamma', F);
export const digamma = unary('digamma', F);
export const square = unary('square', FI);
export const not = unary('not', IB);

const POW_LOOPS: UnaryLoops = { float: K.floatIntegerPow, int: K.intIntegerPow };

export const integerPow = definePrimitive<{ y: number }>({
  name: 'integer_pow',
  elementwise: { arity: 1, transcendental: false },
  abstractEval([x], { y }) {
    checkKinds('integer_pow', [x], FI);
    if (!Number.isInteger(y)) throw new TypeError(`integer_pow: exponent y must be an integer; got ${y}`);
    if (isInteger(x.dtype) && y < 0) throw new TypeError(`integer_pow: negative exponent ${y} for integer dtype ${x.dtype}`);
    return [x];
  },
  impl([x], { y }, [o]) {
    return [runUnary('integer_pow', POW_LOOPS, x, o.dtype, y)];
  },
});

// ---------------------------------------------------------------------------------------------
// Binary

function binary(name: string, kinds: readonly Kind[], outDtype?: DType): Primitive<Record<string, never>> {
  const float = K.FLOAT_BINARY[name];
  const compare = K.FLOAT_COMPARE[name];
  const int = K.INT_BINARY[name];
  const bool = K.BOOL_BINARY[name];
  const int32 = K.INT32_BINARY[name];
  const int32Compare = K.INT32_COMPARE[name];
  return definePrimitive<Record<string, never>>({
    name,
    elementwise: { arity: 2, transcendental: TRANSCENDENTAL.has(name) },
    abstractEval(avals) {
      if (avals.length !== 2) throw new Error(`${name}: takes 2 operands; got ${avals.length}`);
      sameShapeDtype(name, avals);
      checkKinds(name, avals, kinds);
      return [{ shape: avals[0].shape, dtype: outDtype ?? avals[0].dtype, weakType: outDtype ? false : allWeak(avals) }];
    },
    impl([x, y], _p, [o]) {
      const d = x.dtype;
      if (isFloat(d)) {
        if (compare !== undefined) return [K.runFloatCompare(compare, x.data, y.data, d)];
        if (name === 'nextafter' && d !== 'float32' && x.data.length > 0) throw new TypeError(`nextafter: only float32 is supported; got ${d}`);
        return [K.runFloatBinary(float, x.data, y.data, d)];
      }
      const n = x.data.length;
      if (d === 'int32' && int32Compare !== undefined) {
        const out = new Uint8Array(n);
        int32Compare(x.data as Int32Array, y.data as Int32Array, out, n);
        return [out];
      }
      if (d === 'int32' && int32 !== undefined) {
        const out = new Int32Array(n);
        int32(x.data as Int32Array, y.data as Int32Array, out, n);
        return [out];
      }
      const k = d === 'bool' ? bool : int;
      if (k === undefined) throw new TypeError(`${name}: no kernel for dtype ${d}`);
      return [K.runNumBinary(k, x.data, y.data, d, o.dtype)];
    },
  });
}

const ALL: readonly Kind[] = ['float', 'int', 'bool'];

export const add = binary('add', FI.concat(['bool']));
export const sub = binary('sub', FI);
export const mul = binary('mul', FI.concat(['bool']));
export const div = binary('div', FI);
export const rem = binary('rem', FI);
export const pow = binary('pow', FI);
export const max = binary('max', ALL);
export const min = binary('min', ALL);
export const atan2 = binary('atan2', F);
export const nextafter = binary('nextafter', F);
export const and = binary('and', IB);
export const or = binary('or', IB);
export const xor = binary('xor', IB);
export const shiftLeft = binary('shift_left', ['int']);
export const shiftRightArithmetic = binary('shift_right_arithmetic', ['int']);
export const shiftRightLogical = binary('shift_right_logical', ['int']);

export const eq = binary('eq', ALL, 'bool');
export const ne = binary('ne', ALL, 'bool');
export const lt = binary('lt', ALL, 'bool');
export const le = binary('le', ALL, 'bool');
export const gt = binary('gt', ALL, 'bool');
export const ge = binary('ge', ALL, 'bool');

// ---------------------------------------------------------------------------------------------
// select_n, conversions

/** `lax.select_n(which, *cases)`: cases[which[i]][i]. `which` is bool (2 cases) or int32. */
export const selectN = definePrimitive<Record<string, never>>({
  name: 'select_n',
  elementwise: { arity: 3, transcendental: false },
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
    return [K.runSelect(which.data, which.shape.length === 0, cases.map((c) => c.data), o.dtype)];
  },
});

export const convertElementType = definePrimitive<{ newDtype: DType; weakType: boolean }>({
  name: 'convert_element_type',
  elementwise: { arity: 1, transcendental: false },
  abstractEval([x], { newDtype, weakType }) {
    return [{ shape: x.shape, dtype: newDtype, weakType }];
  },
  impl([x], { newDtype }) {
    return [K.runConvert(x.data, x.dtype, newDtype)];
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

