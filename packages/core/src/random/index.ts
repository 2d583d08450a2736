/**
 * The `random` namespace (jax.random): counter-based, splittable PRNG keys on Threefry-2x32 and
 * the samplers built on them, bit-for-bit with JAX's default implementation. Re-exports only.
 */
export {
  type PRNGKeyArray,
  PRNGKey,
  bits,
  foldIn,
  key,
  keyData,
  randomBits,
  setThreefryPartitionable,
  split,
  splitKeys,
  threefryPartitionable,
  withThreefryPartitionable,
  wrapKeyData,
} from './prng';
export { threefry2x32, threefry2x32P } from './threefry';
export {
  type ChoiceOptions,
  type UniformOptions,
  bernoulli,
  categorical,
  choice,
  gumbel,
  normal,
  permutation,
  randint,
  truncatedNormal,
  uniform,
} from './distributions';
export { exponential, laplace, logistic, pareto, weibullMin } from './inverseCdf';
