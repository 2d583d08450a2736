/**
 * The collectives a partitioned program needs, behind a small interface the SPMD executor
 * calls once per collective with every device's buffer (indexed by device position).
 * `InThreadCollectives` exchanges the buffers in this thread; @tpukit/mesh can back the same
 * interface with its worker-thread devices. Semantics follow XLA's: replica groups list device
 * positions; within a group, member order is the order of the gathered / scattered chunks.
 * Reductions combine the group's buffers in group order (member 0 first), so the result is
 * identical on every member and deterministic.
 */
import { type Array, np } from '@tpukit/core';
import { evalPrimitive, getPrimitive } from '@tpukit/core/internal';

export type ReduceOp = 'add' | 'max' | 'min' | 'mul' | 'and' | 'or';

export interface CollectiveRuntime {
  /** Every member of a group gets the reduction of the group's buffers. */
  allReduce(values: readonly Array[], groups: readonly (readonly number[])[], op: ReduceOp): Array[];
  /** Every member gets the group's buffers concatenated along `dim`, in group order. */
  allGather(values: readonly Array[], groups: readonly (readonly number[])[], dim: number): Array[];
  /** The group's reduction, split along `dim` into one chunk per member (member k gets chunk k). */
  reduceScatter(values: readonly Array[], groups: readonly (readonly number[])[], dim: number, op: ReduceOp): Array[];
  /** Member j splits its buffer along `splitDim` into |group| chunks and sends chunk k to member k; each concatenates what it received along `concatDim` in group order. */
  allToAll(values: readonly Array[], groups: readonly (readonly number[])[], splitDim: number, concatDim: number): Array[];
  /** `out[target] = values[source]` for each pair; a device no pair targets gets zeros. */
  collectivePermute(values: readonly Array[], pairs: readonly (readonly [number, number])[]): Array[];
}

const prim = (name: string) => getPrimitive(name);
const run1 = (name: string, args: Array[], params: unknown): Array => evalPrimitive(prim(name), args, params)[0];

export function concat(parts: readonly Array[], dim: number): Array {
  return parts.length === 1 ? parts[0] : run1('concatenate', [...parts], { dimension: dim });
}

/** `x[..., start:stop, ...]` along `dim`. */
export function sliceDim(x: Array, dim: number, start: number, stop: number): Array {
  if (start === 0 && stop === x.shape[dim]) return x;
  return sliceBox(x, x.shape.map((n, d): [number, number] => (d === dim ? [start, stop] : [0, n])));
}

/** The sub-box `[start, stop)` per dimension of `x`. */
export function sliceBox(x: Array, box: ReadonlyArray<readonly [number, number]>): Array {
  if (box.every(([s, e], d) => s === 0 && e === x.shape[d])) return x;
  return run1('slice', [x], { startIndices: box.map(([s]) => s), limitIndices: box.map(([, e]) => e), strides: null });
}

function reduceAll(parts: readonly Array[], op: ReduceOp): Array {
  let acc = parts[0];
  for (let k = 1; k < parts.length; k++) acc = run1(op, [acc, parts[k]], {});
  return acc;
}

function checkGroups(what: string, n: number, groups: readonly (readonly number[])[]): void {
  const seen = new Set<number>();
  for (const g of groups) for (const d of g) {
    if (!Number.isInteger(d) || d < 0 || d >= n || seen.has(d)) throw new Error(`${what}: replica groups ${JSON.stringify(groups)} must list each of the ${n} device positions at most once`);
    seen.add(d);
  }
}

/** Runs `f` once per replica group (after checking the groups); devices in no group keep their value. */
function perGroup(what: string, values: readonly Array[], groups: readonly (readonly number[])[], f: (g: readonly number[], out: Array[]) => void): Array[] {
  checkGroups(what, values.length, groups);
  const out = [...values];
  for (const g of groups) f(g, out);
  return out;
}

export class InThreadCollectives implements CollectiveRuntime {
  allReduce(values: readonly Array[], groups: readonly (readonly number[])[], op: ReduceOp): Array[] {
    return perGroup('all-reduce', values, groups, (g, out) => {
      const r = reduceAll(g.map((d) => values[d]), op);
      for (const d of g) out[d] = r;
    });
  }

  allGather(values: readonly Array[], groups: readonly (readonly number[])[], dim: number): Array[] {
    return perGroup('all-gather', values, groups, (g, out) => {
      const r = concat(g.map((d) => values[d]), dim);
      for (const d of g) out[d] = r;
    });
  }

  reduceScatter(values: readonly Array[], groups: readonly (readonly number[])[], dim: number, op: ReduceOp): Array[] {
    return perGroup('reduce-scatter', values, groups, (g, out) => {
      const r = reduceAll(g.map((d) => values[d]), op);
      const w = r.shape[dim] / g.length;
      g.forEach((d, k) => (out[d] = sliceDim(r, dim, k * w, (k + 1) * w)));
    });
  }

  allToAll(values: readonly Array[], groups: readonly (readonly number[])[], splitDim: number, concatDim: number): Array[] {
    return perGroup('all-to-all', values, groups, (g, out) => {
      const w = values[g[0]].shape[splitDim] / g.length;
      g.forEach((d, k) => (out[d] = concat(g.map((s) => sliceDim(values[s], splitDim, k * w, (k + 1) * w)), concatDim)));
    });
  }

  collectivePermute(values: readonly Array[], pairs: readonly (readonly [number, number])[]): Array[] {
    const out: (Array | null)[] = values.map(() => null);
    for (const [s, t] of pairs) {
      if (out[t] !== null) throw new Error(`collective-permute: device ${t} is the target of two pairs in ${JSON.stringify(pairs)}`);
      out[t] = values[s];
    }
    return out.map((o, d) => o ?? np.zerosLike(values[d]));
  }
}

let current: CollectiveRuntime = new InThreadCollectives();

/**
 * The runtime sharded programs compiled from now on use for their collectives (null: back to
 * `InThreadCollectives`). @tpukit/mesh installs its worker-thread devices' runtime here.
 */
export function setCollectiveRuntime(rt: CollectiveRuntime | null): void {
  current = rt ?? new InThreadCollectives();
}

export function getCollectiveRuntime(): CollectiveRuntime {
  return current;
}
