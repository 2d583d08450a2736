/**
 * The jax.Array methods (`x.reshape(...)`, `x.sum()`, `x.T`, `x.astype(...)`, arithmetic) as
 * forwards to the `np` functions. Installed on the prototype here so that array.ts does not
 * depend on the numpy layer; their types are declared on the class in array.ts (with the
 * argument types of methodArgs.ts), and each implementation below is checked against them.
 */
import { Array, type ArrayLike, type IndexItem } from './array';
import type { DType } from './dtype';
import * as np from './numpy/index';
import { IndexUpdateRef, getItem } from './numpy/indexing';

/** The implementation of the method `K` declared on Array: the same signature, called on an Array. */
type Impl<K extends keyof Array> = Array[K] extends (...args: infer A) => infer R ? (this: Array, ...args: A) => R : never;
type Args<K extends keyof Array> = Parameters<Impl<K>>;

const methods = {
  reshape(this: Array, shape: number | readonly number[]) { return np.reshape(this, shape); },
  transpose(this: Array, axes?: readonly number[]) { return np.transpose(this, axes); },
  astype(this: Array, dtype: DType) { return np.astype(this, dtype); },
  ravel(this: Array) { return np.ravel(this); },
  flatten(this: Array) { return np.ravel(this); },
  squeeze(this: Array, axis?: number | readonly number[]) { return np.squeeze(this, axis); },
  swapaxes(this: Array, a: number, b: number) { return np.swapaxes(this, a, b); },
  // Reductions, sorts and scans take what the np functions take: (axis?, options?) or (options?).
  sum(this: Array, ...args: Args<'sum'>) { return np.sum(this, ...args); },
  mean(this: Array, ...args: Args<'mean'>) { return np.mean(this, ...args); },
  prod(this: Array, ...args: Args<'prod'>) { return np.prod(this, ...args); },
  max(this: Array, ...args: Args<'max'>) { return np.max(this, ...args); },
  min(this: Array, ...args: Args<'min'>) { return np.min(this, ...args); },
  any(this: Array, ...args: Args<'any'>) { return np.any(this, ...args); },
  all(this: Array, ...args: Args<'all'>) { return np.all(this, ...args); },
  var(this: Array, ...args: Args<'var'>) { return np.variance(this, ...args); },
  std(this: Array, ...args: Args<'std'>) { return np.std(this, ...args); },
  argmax(this: Array, ...args: Args<'argmax'>) { return np.argmax(this, ...args); },
  argmin(this: Array, ...args: Args<'argmin'>) { return np.argmin(this, ...args); },
  cumsum(this: Array, ...args: Args<'cumsum'>) { return np.cumsum(this, ...args); },
  cumprod(this: Array, ...args: Args<'cumprod'>) { return np.cumprod(this, ...args); },
  sort(this: Array, ...args: Args<'sort'>) { return np.sort(this, ...args); },
  argsort(this: Array, ...args: Args<'argsort'>) { return np.argsort(this, ...args); },
  add(this: Array, y: ArrayLike) { return np.add(this, y); },
  sub(this: Array, y: ArrayLike) { return np.subtract(this, y); },
  mul(this: Array, y: ArrayLike) { return np.multiply(this, y); },
  div(this: Array, y: ArrayLike) { return np.divide(this, y); },
  pow(this: Array, y: ArrayLike) { return np.power(this, y); },
  neg(this: Array) { return np.negative(this); },
  matmul(this: Array, y: ArrayLike) { return np.matmul(this, y); },
  get(this: Array, ...indices: IndexItem[]) { return getItem(this, indices); },
  at(this: Array, ...indices: IndexItem[]) { return new IndexUpdateRef(this, indices); },
} satisfies { [K in keyof Array]?: Impl<K> };

for (const [name, fn] of Object.entries(methods)) {
  Object.defineProperty(Array.prototype, name, { value: fn, writable: true, configurable: true, enumerable: false });
}
Object.defineProperty(Array.prototype, 'T', {
  get(this: Array) { return np.transpose(this); },
  configurable: true,
  enumerable: false,
});
