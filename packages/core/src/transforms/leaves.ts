/**
 * The leaves of a pytree argument of a transformation, each an Array (grad, vjp, jvp, vmap,
 * jacfwd / jacrev, the control-flow primitives). In its own file so that grad.ts and
 * batching.ts, which both need it, do not import each other.
 */
import { Array } from '../array';
import { asArray } from '../convert';
import * as tree from '../tree';
import { describeValue } from '../describe';

/** Flattens a pytree whose leaves must be Arrays (JS numbers become weakly typed scalars). */
export function arrayLeaves(x: unknown, what: string): [Array[], tree.TreeDef] {
  const [leaves, def] = tree.flatten(x, { isLeaf: (v) => v instanceof Array });
  return [
    leaves.map((l, i) => {
      if (l instanceof Array) return l;
      if (typeof l === 'number' || typeof l === 'boolean') return asArray(l);
      throw new TypeError(`${what}: leaf ${i} of the pytree is ${describeValue(l)}; expected an Array`);
    }),
    def,
  ];
}
