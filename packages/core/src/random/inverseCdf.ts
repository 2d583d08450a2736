/**
 * Samplers that push one uniform draw through an inverse CDF, as jax/_src/random.py writes
 * them: exponential (-log1p(-u)), laplace (sign(u) log1p(-|u|) on (-1, 1)), logistic
 * (log(u) - log1p(-u) on [tiny, 1)), pareto (exp(exponential / b)) and weibullMin. Same bits, same float ops
 * in the same dtype as JAX, so their values follow jax.random's like uniform's do.
 */
import { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import { type DType, finfo } from '../dtype';
import * as lax from '../lax/ops';
import { broadcastTo } from '../numpy/promote';
import { floatDType, shapeArg, uniformCore } from './distributions';
import { checkKey, full, type PRNGKeyArray } from './prng';

type DTypeOpt = { dtype?: DType };

/** `jax.random.exponential(key, shape, dtype)`: rate-1 exponential floats. */
export function exponential(k: PRNGKeyArray, shape: readonly number[] = [], opts: DTypeOpt = {}): Array {
  checkKey('exponential', k);
  const dtype = floatDType('exponential', opts.dtype);
  const s = shapeArg('exponential', shape);
  const u = uniformCore(k, s, dtype, 0, 1, 'exponential');
  // 1 - u moves log's domain to (0, 1].
  return lax.neg(lax.log1p(lax.neg(u)));
}

/** `jax.random.laplace(key, shape, dtype)`: standard Laplace floats (density e^-|x| / 2). */
export function laplace(k: PRNGKeyArray, shape: readonly number[] = [], opts: DTypeOpt = {}): Array {
  checkKey('laplace', k);
  const dtype = floatDType('laplace', opts.dtype);
  const s = shapeArg('laplace', shape);
  const epsneg = finfo(dtype).eps / 2;
  const u = uniformCore(k, s, dtype, -1 + epsneg, 1, 'laplace');
  return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))));
}

/** `jax.random.logistic(key, shape, dtype)`: standard logistic floats. */
export function logistic(k: PRNGKeyArray, shape: readonly number[] = [], opts: DTypeOpt = {}): Array {
  checkKey('logistic', k);
  const dtype = floatDType('logistic', opts.dtype);
  const s = shapeArg('logistic', shape);
  const x = uniformCore(k, s, dtype, finfo(dtype).tiny, 1, 'logistic');
  return lax.sub(lax.log(x), lax.log1p(lax.neg(x)));
}

/**
 * `jax.random.pareto(key, b, shape, dtype)`: Pareto floats with shape parameter `b` on [1, inf),
 * exp(exponential / b). `shape` defaults to b's shape; b must broadcast to it.
 */
export function pareto(k: PRNGKeyArray, b: ArrayLike, shape?: readonly number[], opts: DTypeOpt = {}): Array {
  checkKey('pareto', k);
  const dtype = floatDType('pareto', opts.dtype);
  const b0 = b instanceof Array ? b : asArray(b, { op: 'random.pareto' });
  const s = shape === undefined ? [...b0.shape] : shapeArg('pareto', shape);
  const bb = broadcastTo(lax.convertElementType(b0, dtype), s, 'random.pareto');
  return lax.exp(lax.div(exponential(k, s, { dtype }), bb));
}

/**
 * `jax.random.weibull_min(key, scale, concentration, shape, dtype)`: Weibull floats,
 * (-log1p(-u)) ** (1 / concentration) * scale.
 */
export function weibullMin(k: PRNGKeyArray, scale: ArrayLike, concentration: ArrayLike, shape: readonly number[] = [], opts: DTypeOpt = {}): Array {
  checkKey('weibullMin', k);
  const dtype = floatDType('weibullMin', opts.dtype);
  const s = shapeArg('weibullMin', shape);
  const param = (v: ArrayLike): Array =>
    broadcastTo(lax.convertElementType(v instanceof Array ? v : asArray(v, { op: 'random.weibullMin' }), dtype), s, 'random.weibullMin');
  const sc = param(scale);
  const conc = param(concentration);
  const u = uniformCore(k, s, dtype, 0, 1, 'weibullMin');
  const e = lax.neg(lax.log1p(lax.neg(u)));
  return lax.mul(lax.pow(e, lax.div(full(1, dtype, s), conc)), sc);
}
