/**
 * Elementwise primitives: unary math, binary arithmetic, comparisons, bitwise ops, select_n,
 * convert_element_type and bitcast_convert_type. As in lax, operands must already agree in
 * shape and dtype (jax.numpy broadcasts and promotes before it binds). Floating kernels compute
 * in float64, round to float32, then (for bfloat16/float16) round once more to the stored dtype:
 * the TPU vector unit computes bf16 math in f32 and rounds the result. The loops themselves
 * live in elementwiseKernels.ts, one typed-array loop per (op, kind). Each primitive is defined
 * with its rules (jvp, transpose, batching: the elementwise batching rule for all of them) and
 * its lax op (re-exported by ops.ts); the rules use the ops of this module and structural.ts.
 */
import type { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { type DType, type StorageArray, allocStorage, checkDType, isFloat, isInteger, itemsize } from '../dtype';
import { type BatchRule, type ElementwiseDescriptor, type HostArray, NON_LINEAR, NOT_DIFFERENTIABLE, type Primitive, type PrimitiveRules, type ShapedArray, definePrimitive, isUndef, type UndefPrimal } from '../primitive';
import { fmt, shapesEqual } from '../shape';
import { bind1 } from '../trace';
import * as K from './elementwiseKernels';
import { jvpFrom, lin1, p1 } from './ruleKit';
import { broadcastInDim, fullLike, instantiate, isDifferentiable, moveBdim, operands, zerosOf } from './structural';

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

/** A primitive's own rules, from the primitive (the factories below add the batching rule, and NON_LINEAR unless given). */
type OwnRules = (self: Primitive) => PrimitiveRules;

/** Elementwise batching: batch dims to the front, unbatched operands broadcast. */
function elementwiseBatch(prim: Primitive): BatchRule {
  return (vals, dims, params, n) => [[p1(prim, vals.map((v, i) => moveBdim(v, dims[i], 0, n)), params)], [0]];
}

const withDefaults = (own: OwnRules) => (self: Primitive): PrimitiveRules => ({ transpose: NON_LINEAR, batch: elementwiseBatch(self), ...own(self) });

/** How an elementwise op is typed and lowered: its output dtype when fixed, and what `ElementwiseDescriptor` / `Primitive` say for compilers. */
interface OpInfo {
  out?: DType;
  transcendental?: boolean;
  compare?: ElementwiseDescriptor['compare'];
  hlo?: string;
  stablehlo?: string;
}

function unary(name: string, kinds: readonly Kind[], info: OpInfo, own: OwnRules): Primitive<Record<string, never>> {
  const outDtype = info.out;
  const loops: UnaryLoops = {
    float: K.FLOAT_UNARY[name],
    predicate: K.FLOAT_PREDICATE[name],
    int: K.INT_UNARY[name],
    bool: K.BOOL_UNARY[name],
  };
  return definePrimitive<Record<string, never>>({
    name,
    elementwise: { arity: 1, transcendental: info.transcendental === true },
    hlo: info.hlo,
    stablehlo: info.stablehlo,
    rules: withDefaults(own),
    abstractEval([x]) {
      checkKinds(name, [x], kinds);
      return [{ shape: x.shape, dtype: outDtype ?? x.dtype, weakType: outDtype ? false : x.weakType }];
    },
    impl([x], _p, [o]) {
      return [runUnary(name, loops, x, o.dtype)];
    },
  });
}

// `transcendental: true`: counted as a transcendental by cost analysis (XLA's HloCostAnalysis
// counts its transcendental opcodes; erfc, erf_inv, lgamma and digamma, which XLA expands into
// polynomials, are counted too).
const F: readonly Kind[] = ['float'];
const FI: readonly Kind[] = ['float', 'int'];
const IB: readonly Kind[] = ['int', 'bool'];

/** Rules of an op with zero derivative (comparisons, rounding, integer ops). */
const flat: OwnRules = () => ({ jvp: NOT_DIFFERENTIABLE });
/** Rules from a tangent formula (`y` is the primal output). */
const tangent = (f: (x: Array[], t: (Array | null)[], y: Array, params: any) => Array | null): OwnRules => (self) => ({ jvp: jvpFrom(self, f) });
/** Rules of a unary op from its derivative `d(x, y)`: the tangent is t * d. */
const deriv = (d: (x: Array, y: Array) => Array): OwnRules => tangent(([x], [t], y) => mul(t!, d(x, y)));

const sq = (x: Array) => mul(x, x);
const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);

export const negP = unary('neg', FI, { hlo: 'negate', stablehlo: 'negate' }, (self) => ({ jvp: jvpFrom(self, ([_x], [t]) => neg(t!)), transpose: lin1((ct) => neg(ct)) }));
export const signP = unary('sign', FI, { stablehlo: 'sign' }, flat);
export const absP = unary('abs', FI, { stablehlo: 'abs' }, deriv((x) => sign(x)));
export const floorP = unary('floor', F, { stablehlo: 'floor' }, flat);
export const ceilP = unary('ceil', F, { stablehlo: 'ceil' }, flat);
export const roundAwayP = unary('round', F, {}, flat);
export const roundEvenP = unary('round_nearest_even', F, {}, flat);
export const isFiniteP = unary('is_finite', F, { out: 'bool' }, flat);
export const expP = unary('exp', F, { transcendental: true, hlo: 'exponential', stablehlo: 'exponential' }, deriv((_x, y) => y));
export const exp2P = unary('exp2', F, {}, deriv((_x, y) => mul(y, Math.LN2)));
export const logP = unary('log', F, { transcendental: true, stablehlo: 'log' }, tangent(([x], [t]) => div(t!, x)));
export const log1pP = unary('log1p', F, { transcendental: true, hlo: 'log-plus-one', stablehlo: 'log_plus_one' }, tangent(([x], [t]) => div(t!, add(x, 1))));
export const expm1P = unary('expm1', F, { transcendental: true, hlo: 'exponential-minus-one', stablehlo: 'exponential_minus_one' }, deriv((_x, y) => add(y, 1)));
export const tanhP = unary('tanh', F, { transcendental: true, stablehlo: 'tanh' }, deriv((_x, y) => sub(1, sq(y))));
export const logisticP = unary('logistic', F, { transcendental: true, stablehlo: 'logistic' }, deriv((_x, y) => mul(y, sub(1, y))));
export const sinP = unary('sin', F, { transcendental: true, stablehlo: 'sine' }, deriv((x) => cos(x)));
export const cosP = unary('cos', F, { transcendental: true, stablehlo: 'cosine' }, deriv((x) => neg(sin(x))));
export const tanP = unary('tan', F, { transcendental: true, stablehlo: 'tan' }, deriv((_x, y) => add(1, sq(y))));
export const asinP = unary('asin', F, {}, deriv((x) => rsqrt(sub(1, sq(x)))));
export const acosP = unary('acos', F, {}, deriv((x) => neg(rsqrt(sub(1, sq(x))))));
export const atanP = unary('atan', F, {}, tangent(([x], [t]) => div(t!, add(1, sq(x)))));
export const sinhP = unary('sinh', F, {}, deriv((x) => cosh(x)));
export const coshP = unary('cosh', F, {}, deriv((x) => sinh(x)));
export const asinhP = unary('asinh', F, {}, deriv((x) => rsqrt(add(sq(x), 1))));
export const acoshP = unary('acosh', F, {}, deriv((x) => rsqrt(mul(sub(x, 1), add(x, 1)))));
export const atanhP = unary('atanh', F, {}, tangent(([x], [t]) => div(t!, sub(1, sq(x)))));
export const sqrtP = unary('sqrt', F, { transcendental: true, stablehlo: 'sqrt' }, tangent(([_x], [t], y) => div(t!, mul(y, 2))));
export const rsqrtP = unary('rsqrt', F, { transcendental: true, stablehlo: 'rsqrt' }, deriv((x, y) => mul(div(y, x), -0.5)));
export const cbrtP = unary('cbrt', F, { stablehlo: 'cbrt' }, deriv((x, y) => div(y, mul(x, 3))));
export const erfP = unary('erf', F, { transcendental: true }, deriv((x) => mul(exp(neg(sq(x))), TWO_OVER_SQRT_PI)));
export const erfcP = unary('erfc', F, { transcendental: true }, deriv((x) => mul(exp(neg(sq(x))), -TWO_OVER_SQRT_PI)));
export const erfInvP = unary('erf_inv', F, { transcendental: true }, deriv((_x, y) => mul(exp(sq(y)), 1 / TWO_OVER_SQRT_PI)));
export const lgammaP = unary('lgamma', F, { transcendental: true }, deriv((x) => digamma(x)));
/** No jvp rule (polygamma is not implemented): a documented gap, see transforms/rules.test.ts. */
export const digammaP = unary('digamma', F, { transcendental: true }, () => ({}));
export const squareP = unary('square', FI, {}, deriv((x) => mul(x, 2)));
export const notP = unary('not', IB, { stablehlo: 'not' }, flat);

const POW_LOOPS: UnaryLoops = { float: K.floatIntegerPow, int: K.intIntegerPow };

export const integerPowP = definePrimitive<{ y: number }>({
  name: 'integer_pow',
  elementwise: { arity: 1, transcendental: false },
  hlo: 'power',
  rules: withDefaults(tangent(([x], [t], _y, { y: n }) => (n === 0 ? null : mul(t!, n === 1 ? convertElementType(1, x.dtype) : mul(integerPow(x, n - 1), n))))),
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

function binary(name: string, kinds: readonly Kind[], info: OpInfo, own: OwnRules): Primitive<Record<string, never>> {
  const outDtype = info.out;
  const float = K.FLOAT_BINARY[name];
  const compare = K.FLOAT_COMPARE[name];
  const int = K.INT_BINARY[name];
  const bool = K.BOOL_BINARY[name];
  const int32 = K.INT32_BINARY[name];
  const int32Compare = K.INT32_COMPARE[name];
  return definePrimitive<Record<string, never>>({
    name,
    elementwise: { arity: 2, transcendental: info.transcendental === true, ...(info.compare ? { compare: info.compare } : {}) },
    hlo: info.hlo,
    stablehlo: info.stablehlo,
    rules: withDefaults(own),
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

export const addP = binary('add', FI.concat(['bool']), { stablehlo: 'add' }, (self) => ({
  jvp: jvpFrom(self, (_x, [ta, tb]) => addAny(ta, tb)),
  transpose: ([ct], [a, b]) => [isUndef(a) ? ct : null, isUndef(b) ? ct : null],
}));
export const subP = binary('sub', FI, { hlo: 'subtract', stablehlo: 'subtract' }, (self) => ({
  jvp: jvpFrom(self, (_x, [ta, tb]) => addAny(ta, tb === null ? null : neg(tb))),
  transpose: ([ct], [a, b]) => [isUndef(a) ? ct : null, isUndef(b) ? neg(ct!) : null],
}));
export const mulP = binary('mul', FI.concat(['bool']), { hlo: 'multiply', stablehlo: 'multiply' }, (self) => ({
  jvp: jvpFrom(self, ([a, b], [ta, tb]) => addAny(ta && mul(ta, b), tb && mul(a, tb))),
  transpose: ([ct], [a, b]) => {
    if (isUndef(a) && isUndef(b)) throw new Error('transpose: mul of two linear values is not linear');
    return [isUndef(a) ? mul(ct!, b as Array) : null, isUndef(b) ? mul(a as Array, ct!) : null];
  },
}));
export const divP = binary('div', FI, { hlo: 'divide', stablehlo: 'divide' }, (self) => ({
  jvp: jvpFrom(self, ([_a, b], [ta, tb], y) => {
    const num = addAny(ta, tb && neg(mul(tb, y)));
    return num && div(num, b);
  }),
  transpose: ([ct], [_a, b]) => {
    if (isUndef(b)) throw new Error('transpose: div is linear only in its numerator');
    return [div(ct!, b), null];
  },
}));
export const remP = binary('rem', FI, { hlo: 'remainder', stablehlo: 'remainder' }, tangent(([a, b], [ta, tb]) => {
  if (tb === null) return ta;
  const q = div(a, b);
  const trunc = select(lt(q, 0), ceil(q), floor(q));
  return addAny(ta, neg(mul(tb, trunc)));
}));
export const powP = binary('pow', FI, { transcendental: true, hlo: 'power', stablehlo: 'power' }, tangent(([a, b], [ta, tb], y) => {
  // d/da = b * a^(b-1) (0 where b == 0); d/db = log(a) * y (0 where a == 0).
  const da = ta && mul(ta, select(eq(b, 0), fullLike(0, b), mul(b, pow(a, sub(b, 1)))));
  const safeLog = select(eq(a, 0), fullLike(0, a), log(select(eq(a, 0), fullLike(1, a), a)));
  const db = tb && mul(tb, mul(safeLog, y));
  return addAny(da, db);
}));
export const maxP = binary('max', ALL, { hlo: 'maximum', stablehlo: 'maximum' }, tangent(([a, b], [ta, tb]) => minMaxTangent(gt(a, b), eq(a, b), a, ta, tb)));
export const minP = binary('min', ALL, { hlo: 'minimum', stablehlo: 'minimum' }, tangent(([a, b], [ta, tb]) => minMaxTangent(lt(a, b), eq(a, b), a, ta, tb)));
export const atan2P = binary('atan2', F, { transcendental: true, stablehlo: 'atan2' }, tangent(([a, b], [ta, tb]) => {
  const den = add(sq(a), sq(b));
  return addAny(ta && div(mul(ta, b), den), tb && neg(div(mul(tb, a), den)));
}));
export const nextafterP = binary('nextafter', F, {}, flat);
export const andP = binary('and', IB, { stablehlo: 'and' }, flat);
export const orP = binary('or', IB, { stablehlo: 'or' }, flat);
export const xorP = binary('xor', IB, { stablehlo: 'xor' }, flat);
export const shiftLeftP = binary('shift_left', ['int'], {}, flat);
export const shiftRightArithmeticP = binary('shift_right_arithmetic', ['int'], {}, flat);
export const shiftRightLogicalP = binary('shift_right_logical', ['int'], {}, flat);

export const eqP = binary('eq', ALL, { out: 'bool', hlo: 'compare', compare: 'EQ' }, flat);
export const neP = binary('ne', ALL, { out: 'bool', hlo: 'compare', compare: 'NE' }, flat);
export const ltP = binary('lt', ALL, { out: 'bool', hlo: 'compare', compare: 'LT' }, flat);
export const leP = binary('le', ALL, { out: 'bool', hlo: 'compare', compare: 'LE' }, flat);
export const gtP = binary('gt', ALL, { out: 'bool', hlo: 'compare', compare: 'GT' }, flat);
export const geP = binary('ge', ALL, { out: 'bool', hlo: 'compare', compare: 'GE' }, flat);

/** Tangent of max/min: the winning side's tangent, the average on ties (as JAX). */
function minMaxTangent(aWins: Array, tie: Array, a: Array, ta: Array | null, tb: Array | null): Array | null {
  const one = fullLike(1, a);
  const zero = fullLike(0, a);
  const half = mul(one, 0.5);
  const wa = select(tie, half, select(aWins, one, zero));
  const wb = sub(one, wa);
  return addAny(ta && mul(ta, wa), tb && mul(tb, wb));
}

// ---------------------------------------------------------------------------------------------
// select_n, conversions

/** `lax.select_n(which, *cases)`: cases[which[i]][i]. `which` is bool (2 cases) or int32. */
export const selectNP = definePrimitive<Record<string, never>>({
  name: 'select_n',
  elementwise: { arity: 3, transcendental: false },
  hlo: 'select',
  rules: (self) => ({
    jvp: jvpFrom(self, ([which, ...cases], [_tw, ...tcs]) => selectN(which, ...tcs.map((t, i) => instantiate(t, cases[i].aval)))),
    transpose: ([ct], [which, ...cases]) => {
      if (isUndef(which)) throw new Error('transpose: select_n predicate cannot be linear');
      const z = zerosOf(ct!.aval);
      return [null, ...cases.map((c, i) => (isUndef(c) ? selectN(which, ...cases.map((_, j) => (j === i ? ct! : z))) : null))];
    },
    batch: selectNBatch(self),
  }),
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

export const convertElementTypeP = definePrimitive<{ newDtype: DType; weakType: boolean }>({
  name: 'convert_element_type',
  elementwise: { arity: 1, transcendental: false },
  hlo: 'convert',
  stablehlo: 'convert',
  rules: (self) => ({
    jvp: jvpFrom(self, ([x], [t], y, params) => (isDifferentiable(x.aval) && isDifferentiable(y.aval) ? p1(self, [t!], params) : null)),
    transpose: ([ct], [x]) => [convertElementType(ct!, (x as UndefPrimal).aval.dtype, (x as UndefPrimal).aval.weakType)],
    batch: elementwiseBatch(self),
  }),
  abstractEval([x], { newDtype, weakType }) {
    return [{ shape: x.shape, dtype: newDtype, weakType }];
  },
  impl([x], { newDtype }) {
    return [K.runConvert(x.data, x.dtype, newDtype)];
  },
});

/** Reinterprets the bits of each element as another dtype of the same width. */
export const bitcastConvertTypeP = definePrimitive<{ newDtype: DType }>({
  name: 'bitcast_convert_type',
  rules: withDefaults(flat),
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


function selectNBatch(prim: Primitive): BatchRule {
  return ([which, ...cases], [wd, ...cds], params, n) => {
    const caseShape = cds[0] === null ? cases[0].shape : cases[0].shape.filter((_, i) => i !== cds[0]);
    let w = which;
    if (!(wd === null && which.ndim === 0)) {
      w = moveBdim(which, wd, 0, n);
      if (w.ndim === 1 && caseShape.length > 0) w = broadcastInDim(w, [n, ...caseShape], [0]);
    }
    return [[p1(prim, [w, ...cases.map((c, i) => moveBdim(c, cds[i], 0, n))], params)], [0]];
  };
}

/** Sum of two tangents or cotangents that may be symbolic zeros (null). */
export function addAny(a: Array | null, b: Array | null): Array | null {
  if (a === null) return b;
  if (b === null) return a;
  return add(a, b);
}

// ---------------------------------------------------------------------------------------------
// The lax ops (re-exported by ops.ts)

const NO_PARAMS = {};
const u = (p: Primitive) => (x: ArrayLike): Array => bind1(p, operands(p.name, [x]), NO_PARAMS);
const b = (p: Primitive) => (x: ArrayLike, y: ArrayLike): Array => bind1(p, operands(p.name, [x, y]), NO_PARAMS);

export const neg = u(negP);
export const sign = u(signP);
export const abs = u(absP);
export const floor = u(floorP);
export const ceil = u(ceilP);
/** `lax.round`; `roundingMethod` 0 = away from zero (default), 1 = to nearest even. */
export const round = (x: ArrayLike, roundingMethod: 0 | 1 = 0): Array => (roundingMethod === 1 ? u(roundEvenP)(x) : u(roundAwayP)(x));
export const isFinite = u(isFiniteP);
export const exp = u(expP);
export const exp2 = u(exp2P);
export const log = u(logP);
export const log1p = u(log1pP);
export const expm1 = u(expm1P);
export const tanh = u(tanhP);
export const logistic = u(logisticP);
export const sin = u(sinP);
export const cos = u(cosP);
export const tan = u(tanP);
export const asin = u(asinP);
export const acos = u(acosP);
export const atan = u(atanP);
export const sinh = u(sinhP);
export const cosh = u(coshP);
export const asinh = u(asinhP);
export const acosh = u(acoshP);
export const atanh = u(atanhP);
export const sqrt = u(sqrtP);
export const rsqrt = u(rsqrtP);
export const cbrt = u(cbrtP);
export const erf = u(erfP);
export const erfc = u(erfcP);
export const erfInv = u(erfInvP);
export const lgamma = u(lgammaP);
export const digamma = u(digammaP);
export const square = u(squareP);
export const bitwiseNot = u(notP);
export const integerPow = (x: ArrayLike, y: number): Array => bind1(integerPowP, operands('integer_pow', [x]), { y });

export const add = b(addP);
export const sub = b(subP);
export const mul = b(mulP);
export const div = b(divP);
export const rem = b(remP);
export const pow = b(powP);
export const max = b(maxP);
export const min = b(minP);
export const atan2 = b(atan2P);
export const nextafter = b(nextafterP);
export const bitwiseAnd = b(andP);
export const bitwiseOr = b(orP);
export const bitwiseXor = b(xorP);
export const shiftLeft = b(shiftLeftP);
export const shiftRightArithmetic = b(shiftRightArithmeticP);
export const shiftRightLogical = b(shiftRightLogicalP);
export const eq = b(eqP);
export const ne = b(neP);
export const lt = b(ltP);
export const le = b(leP);
export const gt = b(gtP);
export const ge = b(geP);

/** `lax.select(pred, onTrue, onFalse)`. */
export function select(pred: ArrayLike, onTrue: ArrayLike, onFalse: ArrayLike): Array {
  const [f, t] = operands('select', [onFalse, onTrue]);
  return bind1(selectNP, [asArray(pred, { op: 'select' }), f, t], NO_PARAMS);
}

/** `lax.select_n(which, ...cases)`. */
export function selectN(which: ArrayLike, ...cases: ArrayLike[]): Array {
  return bind1(selectNP, [asArray(which, { op: 'select_n' }), ...operands('select_n', cases)], NO_PARAMS);
}

export function clamp(lo: ArrayLike, x: ArrayLike, hi: ArrayLike): Array {
  const [xx, l, h] = operands('clamp', [x, lo, hi]);
  return min(max(xx, l), h);
}

export function convertElementType(x: ArrayLike, newDtype: DType, weakType = false): Array {
  checkDType(newDtype, 'convert_element_type', 'new_dtype');
  const a = asArray(x, { op: 'convert_element_type' });
  if (a.dtype === newDtype && a.weakType === weakType) return a;
  return bind1(convertElementTypeP, [a], { newDtype, weakType });
}

export function bitcastConvertType(x: ArrayLike, newDtype: DType): Array {
  checkDType(newDtype, 'bitcast_convert_type', 'new_dtype');
  return bind1(bitcastConvertTypeP, [asArray(x, { op: 'bitcast_convert_type' })], { newDtype });
}
