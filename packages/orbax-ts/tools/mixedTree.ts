/**
 * The tree of non-array leaves and containers that both sides of the Orbax check write
 * (check_orbax.py's `mixed_tree`): booleans, strings, numbers, a list holding an array and a
 * dict, a pair (a Python tuple, a list here), None, an empty dict and an empty list.
 */
import { type Array, np } from '@tpukit/core';

export const mixedTree = (): Record<string, unknown> => ({
  flags: { on: true, off: false },
  name: 'tiny-gpt',
  layers: [np.arange(3).astype('float32'), { k: np.ones([2, 2], 'int32'), tag: 'l1' }],
  pair: [np.array(2.5, 'float32'), 4],
  none: null,
  empty_d: {},
  empty_l: [],
  n: -3,
  x: 1e-3,
});

/** Python's type name for a leaf orbax-ts restored (as check_orbax.py's `describe` tags it). */
const pyType = (x: unknown): string => (typeof x === 'boolean' ? 'bool' : typeof x === 'string' ? 'str' : Number.isInteger(x) ? 'int' : 'float');

/** A restored tree as check_orbax.py's `describe` writes Orbax's: type-tagged JSON. */
export function describeTree(x: unknown): unknown {
  if (x === null) return { none: null };
  if (globalThis.Array.isArray(x)) return { list: x.map(describeTree) };
  if (typeof x === 'object' && x !== null && 'dtype' in x && 'shape' in x) {
    const a = x as Array;
    return { array: { dtype: a.dtype, shape: a.shape, values: globalThis.Array.from(a.dataSync() as ArrayLike<number>) } };
  }
  if (typeof x === 'object') return { dict: Object.fromEntries(Object.entries(x as object).map(([k, v]) => [k, describeTree(v)])) };
  return { [pyType(x)]: x };
}
