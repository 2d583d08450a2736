/**
 * The argument types of Array's jax.numpy methods (`x.sum(0)`, `x.sort({ descending: true })`,
 * `x.at(i).get({ mode })`), shared with the np functions they forward to. They sit below both
 * layers: array.ts declares the methods with them and numpy/ implements the functions with them,
 * so array.ts never imports the numpy layer. Types only.
 */
import type { DType } from './dtype';

/** One axis, several axes, or null (all axes / the flattened array). */
export type AxisArg = number | readonly number[] | null;

/**
 * What follows the array in a function that takes an axis: `(x, axis?, options?)` or
 * `(x, options?)`, as jnp takes them (`np.sum(x, 0, { keepdims: true })`, `np.sum(x, { axis: 0 })`).
 */
export type AxisArgs<O extends { axis?: unknown }> = [axisOrOptions?: O['axis'] | O, options?: Omit<O, 'axis'>];

/** sum, prod, mean. */
export interface ReduceOptions {
  axis?: AxisArg;
  keepdims?: boolean;
  dtype?: DType;
}
/** max, min, all, any. */
export type ExtremumOptions = Omit<ReduceOptions, 'dtype'>;
/** var, std. */
export type VarOptions = ReduceOptions & { ddof?: number };
/** argmax, argmin: one axis or the flattened array. */
export type ArgOptions = { axis?: number | null; keepdims?: boolean };
/** cumsum, cumprod: one axis or the flattened array. */
export type CumOptions = { axis?: number | null; dtype?: DType };

/** sort, argsort. */
export interface SortOptions {
  /** Default -1; null sorts the flattened array. */
  axis?: number | null;
  /** Default true (sorting is always stable here). */
  stable?: boolean;
  descending?: boolean;
}

/** Out-of-bounds handling of array indices in `x.at(...)` reads and updates. */
export type GetMode = 'clip' | 'fill' | 'drop' | 'promise_in_bounds';
export interface GetOptions {
  /** Out-of-bounds array indices: 'clip' (default) clamps; 'fill'/'drop' return `fillValue`. */
  mode?: GetMode;
  fillValue?: number | null;
}
export interface UpdateOptions {
  /** Out-of-bounds array indices: 'drop' (default, also 'fill') skips them; 'clip' clamps. */
  mode?: GetMode;
}
