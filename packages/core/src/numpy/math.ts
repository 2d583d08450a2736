/**
 * jax.numpy elementwise math and comparisons: promote, broadcast, bind. Float-only functions
 * (exp, sin, ...) turn integer inputs into float32 as jnp does; `divide` is true division and
 * `floorDivide` floors, as in NumPy.
 */
import type { Array } from '../array';
import { type ArrayLike, asArray, typeOf } from '../convert';
import { isFloat, isInteger, isUnsigned, resultType } from '../dtype';
import * as lax from '../lax/ops';
import { broadcastShapes } from '../shape';
import { fullLike } from './creation';
import { broadcastTo, promoteArgs, promoteInexact } from './promote';

type U = (x: ArrayLike) => Array;
type B = (x: ArrayLike, y: ArrayLike) => Array;

const inexactUnary = (name: string, f: (x: Array) => Array): U => (x) => f(promoteInexact(name, [x])[0]);
const unary = (name: string, f: (x: Array) => Array): U => (x) => f(promoteArgs(name, [x])[0]);
const binary = (name: string, f: (x: Array, y: Array) => Array): B => (x, y) => {
  const [a, b] = promoteArgs(name, [x, y]);
  return f(a, b);
};

export const add: B = binary('add', lax.add);
export const subtract: B = binary('subtract', lax.sub);
export const multiply: B = binary('multiply', lax.mul);
export const maximum: B = binary('maximum', lax.max);
export const minimum: B = binary('minimum', lax.min);
export const equal: B = binary('equal', lax.eq);
export const notEqual: B = binary('not_equal', lax.ne);
export const less: B = binary('less', lax.lt);
export const lessEqual: B = binary('less_equal', lax.le);
export const greater: B = binary('greater', lax.gt);
export const greaterEqual: B = binary('greater_equal', lax.ge);
export const bitwiseAnd: B = binary('bitwise_and', lax.bitwiseAnd);
export const bitwiseOr: B = binary('bitwise_or', lax.bitwiseOr);
export const bitwiseXor: B = binary('bitwise_xor', lax.bitwiseXor);
export const leftShift: B = binary('left_shift', lax.shiftLeft);
export const rightShift: B = binary('right_shift', (a, b) => (isUnsigned(a.dtype) ? lax.shiftRightLogical(a, b) : lax.shiftRightArithmetic(a, b)));
const logical = (name: string, f: (x: Array, y: Array) => Array): B => (x, y) => {
  const [a, b] = promoteShapes(name, [asBool(x, name), asBool(y, name)]);
  return f(a, b);
};
export const logicalAnd: B = logical('logical_and', lax.bitwiseAnd);
export const logicalOr: B = logical('logical_or', lax.bitwiseOr);
export const logicalXor: B = logical('logical_xor', lax.bitwiseXor);
export const logicalNot: U = (x) => lax.bitwiseNot(asBool(x, 'logical_not'));
export const invert: U = unary('invert', lax.bitwiseNot);
export const bitwiseNot = invert;

function asBool(x: ArrayLike, op: string): Array {
  const a = asArray(x, { op });
  return a.dtype === 'bool' ? a : lax.ne(a, 0);
}

/** True division: integers are converted to float32 first. */
export const divide: B = (x, y) => {
  const [a, b] = promoteInexact('divide', [x, y]);
  return lax.div(a, b);
};
export const trueDivide = divide;

export const floorDivide: B = (x, y) => {
  const [a, b] = promoteArgs('floor_divide', [x, y]);
  if (isFloat(a.dtype)) return lax.floor(lax.div(a, b));
  if (isUnsigned(a.dtype) || a.dtype === 'bool') return lax.div(a, b);
  // Signed integers: truncating division, minus one where the signs differ and it is inexact
  // (signs compared with sign(), as jnp does, so x // 0 is -2 for x != 0, as in JAX).
  const q = lax.div(a, b);
  const inexact = lax.ne(lax.rem(a, b), 0);
  const signsDiffer = lax.ne(lax.sign(a), lax.sign(b));
  return lax.select(lax.bitwiseAnd(inexact, signsDiffer), lax.sub(q, 1), q);
};

/** NumPy remainder: the result has the sign of the divisor. */
export const remainder: B = (x, y) => {
  const [a, b] = promoteArgs('remainder', [x, y]);
  const r = lax.rem(a, b);
  if (isUnsigned(a.dtype)) return r;
  const fix = lax.bitwiseAnd(lax.ne(r, 0), lax.ne(lax.lt(r, 0), lax.lt(b, 0)));
  return lax.select(fix, lax.add(r, b), r);
};
export const mod = remainder;
export const fmod: B = binary('fmod', lax.rem);

export const power: B = (x, y) => {
  const ty = typeOf(y);
  if (typeof y === 'number' && Number.isInteger(y) && !(y < 0 && isInteger(resultType(typeOf(x), ty).dtype))) {
    const [a] = promoteArgs('power', [x, y]);
    return lax.integerPow(a, y);
  }
  const [a, b] = promoteArgs('power', [x, y]);
  return lax.pow(a, b);
};
export const pow = power;
export const arctan2: B = (x, y) => {
  const [a, b] = promoteInexact('arctan2', [x, y]);
  return lax.atan2(a, b);
};
/** `jnp.hypot`, scaled as jnp does so that large inputs do not overflow: max * sqrt(1 + (min/max)^2). */
export const hypot: B = (x, y) => {
  const [a0, b0] = promoteInexact('hypot', [x, y]);
  const a = lax.abs(a0);
  const b = lax.abs(b0);
  const isInf = lax.bitwiseOr(lax.eq(a, Infinity), lax.eq(b, Infinity));
  const hi = lax.max(a, b);
  const lo = lax.min(a, b);
  const zero = lax.eq(hi, 0);
  const ratio = lax.div(lo, lax.select(zero, fullLike(hi, 1), hi));
  const r = lax.select(zero, hi, lax.mul(hi, lax.sqrt(lax.add(lax.mul(ratio, ratio), 1))));
  return lax.select(isInf, fullLike(hi, Infinity), r);
};
export const nextafter: B = (x, y) => {
  const [a, b] = promoteInexact('nextafter', [x, y]);
  return lax.nextafter(a, b);
};
export const logaddexp: B = (x, y) => {
  const [a, b] = promoteInexact('logaddexp', [x, y]);
  const m = lax.max(a, b);
  const safeM = lax.select(lax.isFinite(m), m, lax.mul(m, 0));
  const s = lax.add(lax.exp(lax.sub(a, safeM)), lax.exp(lax.sub(b, safeM)));
  return lax.select(lax.isFinite(m), lax.add(lax.log(s), safeM), m);
};

export const negative: U = unary('negative', lax.neg);
export const positive: U = unary('positive', (x) => x);
export const abs: U = unary('abs', (x) => (isUnsigned(x.dtype) || x.dtype === 'bool' ? x : lax.abs(x)));
export const absolute = abs;
export const sign: U = unary('sign', (x) => (x.dtype === 'bool' ? x : lax.sign(x)));
export const square: U = unary('square', lax.square);
export const floor: U = unary('floor', (x) => (isFloat(x.dtype) ? lax.floor(x) : x));
export const ceil: U = unary('ceil', (x) => (isFloat(x.dtype) ? lax.ceil(x) : x));
export const trunc: U = unary('trunc', (x) => (isFloat(x.dtype) ? lax.select(lax.lt(x, 0), lax.ceil(x), lax.floor(x)) : x));
/** `jnp.round`: to nearest even, with `decimals`. */
export function round(x: ArrayLike, decimals = 0): Array {
  const [a] = promoteArgs('round', [x]);
  if (!isFloat(a.dtype)) return a;
  if (decimals === 0) return lax.round(a, 1);
  const f = 10 ** decimals;
  return lax.div(lax.round(lax.mul(a, f), 1), f);
}
export const rint: U = (x) => round(x, 0);

export const exp: U = inexactUnary('exp', lax.exp);
export const exp2: U = inexactUnary('exp2', lax.exp2);
export const expm1: U = inexactUnary('expm1', lax.expm1);
export const log: U = inexactUnary('log', lax.log);
export const log1p: U = inexactUnary('log1p', lax.log1p);
export const log2: U = inexactUnary('log2', (x) => lax.div(lax.log(x), Math.LN2));
export const log10: U = inexactUnary('log10', (x) => lax.div(lax.log(x), Math.LN10));
export const sqrt: U = inexactUnary('sqrt', lax.sqrt);
export const cbrt: U = inexactUnary('cbrt', lax.cbrt);
export const reciprocal: U = inexactUnary('reciprocal', (x) => lax.div(1, x));
export const sin: U = inexactUnary('sin', lax.sin);
export const cos: U = inexactUnary('cos', lax.cos);
export const tan: U = inexactUnary('tan', lax.tan);
export const arcsin: U = inexactUnary('arcsin', lax.asin);
export const arccos: U = inexactUnary('arccos', lax.acos);
export const arctan: U = inexactUnary('arctan', lax.atan);
export const sinh: U = inexactUnary('sinh', lax.sinh);
export const cosh: U = inexactUnary('cosh', lax.cosh);
export const tanh: U = inexactUnary('tanh', lax.tanh);
export const arcsinh: U = inexactUnary('arcsinh', lax.asinh);
export const arccosh: U = inexactUnary('arccosh', lax.acosh);
export const arctanh: U = inexactUnary('arctanh', lax.atanh);
export const isfinite: U = (x) => {
  const a = asArray(x, { op: 'isfinite' });
  return isFloat(a.dtype) ? lax.isFinite(a) : lax.eq(a, a);
};
export const isnan: U = (x) => {
  const a = asArray(x, { op: 'isnan' });
  return lax.ne(a, a);
};
export const isinf: U = (x) => {
  const a = asArray(x, { op: 'isinf' });
  if (!isFloat(a.dtype)) return lax.ne(a, a);
  return lax.eq(lax.abs(a), Infinity);
};

/** `jnp.where(cond, x, y)`: elementwise choice with broadcasting and promotion of x and y. */
export function where(condition: ArrayLike, x: ArrayLike, y: ArrayLike): Array {
  const [a, b] = promoteArgs('where', [x, y]);
  const c = asBool(condition, 'where');
  const [cc, aa, bb] = promoteShapes('where', [c, a, b]);
  return lax.select(cc, aa, bb);
}

function promoteShapes(op: string, xs: Array[]): Array[] {
  const target = broadcastShapes(op, ...xs.map((a) => a.shape));
  return xs.map((a) => broadcastTo(a, target, op));
}

/** `jnp.clip(x, min, max)`; either bound may be null. */
export function clip(x: ArrayLike, min: ArrayLike | null = null, max: ArrayLike | null = null): Array {
  let a = asArray(x, { op: 'clip' });
  if (min !== null) a = maximum(a, min);
  if (max !== null) a = minimum(a, max);
  return a;
}
