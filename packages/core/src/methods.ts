/**
 * The jax.Array methods (`x.reshape(...)`, `x.sum()`, `x.T`, `x.astype(...)`, arithmetic) as
 * forwards to the `np` functions. Installed on the prototype here so that array.ts does not
 * depend on the numpy layer; their types are declared on the class in array.ts.
 */
import { Array } from './array';
import type { ArrayLike } from './convert';
import type { DType } from './dtype';
import * as np from './numpy/index';
import { IndexUpdateRef, type IndexItem, getItem } from './numpy/indexing';

/** The parameters of an np function after the array: what the method forwards. */
export type Tail<F extends (...args: never[]) => unknown> = Parameters<F> extends [unknown, ...infer R] ? R : never;

const methods: Partial<Record<keyof Array, unknown>> & ThisType<Array> = {
  reshape(this: Array, shape: number | readonly number[]) { return np.reshape(this, shape); },
  transpose(this: Array, axes?: readonly number[]) { return np.transpose(this, axes); },
  astype(this: Array, dtype: DType) { return np.astype(this, dtype); },
  ravel(this: Array) { return np.ravel(this); },
  flatten(this: Array) { return np.ravel(this); },
  squeeze(this: Array, axis?: number | readonly number[]) { return np.squeeze(this, axis); },
  swapaxes(this: Array, a: number, b: number) { return np.swapaxes(this, a, b); },
  // Reductions take what the np functions take: (axis?, options?) or (options?).
  sum(this: Array, ...args: Tail<typeof np.sum>) { return np.sum(this, ...args); },
  mean(this: Array, ...args: Tail<typeof np.sum>) { return np.mean(this, ...args); },
  prod(this: Array, ...args: Tail<typeof np.sum>) { return np.prod(this, ...args); },
  max(this: Array, ...args: Tail<typeof np.max>) { return np.max(this, ...args); },
  min(this: Array, ...args: Tail<typeof np.max>) { return np.min(this, ...args); },
  any(this: Array, ...args: Tail<typeof np.max>) { return np.any(this, ...args); },
  all(this: Array, ...args: Tail<typeof np.max>) { return np.all(this, ...args); },
  var(this: Array, ...args: Tail<typeof np.variance>) { return np.variance(this, ...args); },
  std(this: Array, ...args: Tail<typeof np.std>) { return np.std(this, ...args); },
  argmax(this: Array, ...args: Tail<typeof np.argmax>) { return np.argmax(this, ...args); },
  argmin(this: Array, ...args: Tail<typeof np.argmax>) { return np.argmin(this, ...args); },
  cumsum(this: Array, ...args: Tail<typeof np.cumsum>) { return np.cumsum(this, ...args); },
  cumprod(this: Array, ...args: Tail<typeof np.cumprod>) { return np.cumprod(this, ...args); },
  sort(this: Array, ...args: Tail<typeof np.sort>) { return np.sort(this, ...args); },
  argsort(this: Array, ...args: Tail<typeof np.argsort>) { return np.argsort(this, ...args); },
  add(this: Array, y: ArrayLike) { return np.add(this, y); },
  sub(this: Array, y: ArrayLike) { return np.subtract(this, y); },
  mul(this: Array, y: ArrayLike) { return np.multiply(this, y); },
  div(this: Array, y: ArrayLike) { return np.divide(this, y); },
  pow(this: Array, y: ArrayLike) { return np.power(this, y); },
  neg(this: Array) { return np.negative(this); },
  matmul(this: Array, y: ArrayLike) { return np.matmul(this, y); },
  get(this: Array, ...indices: IndexItem[]) { return getItem(this, indices); },
  at(this: Array, ...indices: IndexItem[]) { return new IndexUpdateRef(this, indices); },
};

for (const [name, fn] of Object.entries(methods)) {
  Object.defineProperty(Array.prototype, name, { value: fn, writable: true, configurable: true, enumerable: false });
}
Object.defineProperty(Array.prototype, 'T', {
  get(this: Array) { return np.transpose(this); },
  configurable: true,
  enumerable: false,
});
