/**
 * `createDeviceMesh(shape, { topology })` (jax.experimental.mesh_utils.create_device_mesh): lays
 * a logical mesh onto a physical chip grid so that the axes that communicate most get the best
 * links. As in JAX, the logical axes are taken innermost first (the last axis carries the most
 * traffic) and each is mapped onto the set of still-free physical dimensions, preferring three,
 * then two, then one of them, whose sizes multiply to the axis size; the device grid is then the
 * physical grid transposed into that order. Device k of `devices()` is chip k, numbered
 * row-major over the topology's dimensions (the last fastest).
 *
 * The topology is one of `topology.ts`'s records (v4 / v5p 3D tori, v5e / v6e 2D, user-defined)
 * or any `{ dims, wraparound?, name? }`: only the chip grid matters here.
 */
import type { Device } from '@tpukit/core';
import { devices as allDevices } from './devices';
import { type Nested, nestDevices } from './mesh';
import type { Topology } from './topology';

/** What createDeviceMesh needs of a topology (a `Topology` record has it): the chip grid. */
export type TopologyLike = Pick<Topology, 'dims'> & Partial<Pick<Topology, 'name' | 'wraparound'>>;


/** For each logical axis, the physical dimensions it is laid on (JAX's assignment). */
export function assignAxes(shape: readonly number[], dims: readonly number[]): number[][] {
  const free = dims.slice();
  const assignment: number[][] = shape.map(() => []);
  const subsets = (k: number, from = 0): number[][] =>
    k === 0 ? [[]] : free.flatMap((_, i) => (i < from ? [] : subsets(k - 1, i + 1).map((rest) => [i, ...rest])));
  for (let a = shape.length - 1; a >= 0; a--) {
    found: for (let k = Math.min(3, free.length); k >= 1; k--) {
      for (const subset of subsets(k)) {
        if (subset.reduce((p, i) => p * free[i], 1) === shape[a]) {
          assignment[a] = subset;
          for (const i of subset) free[i] = 0;
          break found;
        }
      }
    }
    if (assignment[a].length === 0 && shape[a] > 1) {
      throw new Error(`createDeviceMesh: no set of free physical dimensions of [${dims.join(',')}] (free: [${free.join(',')}]) multiplies to ${shape[a]}, the size of logical axis ${a} of [${shape.join(',')}]`);
    }
  }
  return assignment;
}

export function createDeviceMesh(shape: readonly number[], opts: { topology?: TopologyLike; devices?: readonly Device[] } = {}): Nested[] {
  if (!globalThis.Array.isArray(shape) || shape.length === 0 || shape.some((s) => !Number.isInteger(s) || s < 1)) {
    throw new RangeError(`createDeviceMesh: shape must be a non-empty list of positive integers; got ${JSON.stringify(shape)}`);
  }
  const n = shape.reduce((a, b) => a * b, 1);
  const dims = opts.topology?.dims ?? [n];
  if (!dims.length || dims.some((d) => !Number.isInteger(d) || d < 1)) throw new RangeError(`createDeviceMesh: topology dims ${JSON.stringify(dims)} must be positive integers`);
  const chips = dims.reduce((a, b) => a * b, 1);
  if (chips !== n) throw new Error(`createDeviceMesh: the mesh [${shape.join(',')}] has ${n} devices but the topology ${opts.topology?.name ?? ''}[${dims.join(',')}] has ${chips} chips`);
  const pool = opts.devices ?? allDevices();
  if (pool.length < n) throw new Error(`createDeviceMesh: [${shape.join(',')}] needs ${n} devices but ${pool.length} are available (setCpuDeviceCount(n) or TPUKIT_CPU_DEVICES=n)`);
  // Without a topology (CPU devices) there are no links to prefer: row-major, as JAX does.
  if (!opts.topology) return nestDevices(pool.slice(0, n), shape);
  const assignment = assignAxes(shape, dims);
  // The physical dimensions in logical order (unassigned ones, all of size 1, last).
  const order = assignment.flat();
  dims.forEach((_, i) => {
    if (!order.includes(i)) order.push(i);
  });
  const strides = dims.map((_, i) => dims.slice(i + 1).reduce((a, b) => a * b, 1));
  const permDims = order.map((i) => dims[i]);
  // Walk the transposed physical grid row-major: the k-th entry is chip sum(coord_i * stride_i).
  const flat: Device[] = [];
  const coord = permDims.map(() => 0);
  for (let k = 0; k < n; k++) {
    flat.push(pool[order.reduce((acc, phys, j) => acc + coord[j] * strides[phys], 0)]);
    for (let j = permDims.length - 1; j >= 0; j--) {
      if (++coord[j] < permDims[j]) break;
      coord[j] = 0;
    }
  }
  return nestDevices(flat, shape);
}
