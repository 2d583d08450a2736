/**
 * The jax.Array methods (`x.reshape(...)`, `x.sum()`, `x.T`, `x.astype(...)`, arithmetic) as
 * forwards to the `np` functions. Installed on the prototype here so that array.ts does not
 * depend on the numpy layer; their types are declared on the class in array.ts.
 */
import { Array } from './array';
import type { ArrayLike } from './convert';
import type { DType } from './dtype';
import * as np from './numpy/index';
import type { ReduceOptions } from './numpy/reductions';
import { IndexUpdateRef, type IndexItem, getItem } from './numpy/indexing';

const methods: Partial<Record<keyof Array, unknown>> & ThisType<Array> = {
  reshape(this: Array, shape: number | readonly number[]) { return np.reshape(this, shape); },
  transpose(this: Array, axes?: readonly number[]) { return np.transpose(this, axes); },
  astype(this: Array, dtype: DType) { return np.astype(this, dtype); },
  ravel(this: Array) { return np.ravel(this); },
  flatten(this: Array) { return np.ravel(this); },
  squeeze(this: Array, axis?: number | readonly number[]) { return np.squeeze(this, axis); },
  swapaxes(this: Array, a: number, b: number) { return np.swapaxes(this, a, b); },
  sum(this: Array, opts?: ReduceOptions) { return np.sum(this, opts); },
  mean(this: Array, opts?: ReduceOptions) { return np.mean(this, opts); },
  prod(this: Array, opts?: ReduceOptions) { return np.prod(this, opts); },
  max(this: Array, opts?: ReduceOptions) { return np.max(this, opts); },
  min(this: Array, opts?: ReduceOptions) { return np.min(this, opts); },
  argmax(this: Array, opts?: { axis?: number | null; keepdims?: boolean }) { return np.argmax(this, opts); },
  argmin(this: Array, opts?: { axis?: number | null; keepdims?: boolean }) { return np.argmin(this, opts); },
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
