/**
 * `NamedSharding(mesh, spec)`: core's `Sharding` for an array laid out over a mesh by a
 * PartitionSpec. Dimension k named by axes (a1, a2, ...) is cut into size(a1)*size(a2)*...
 * equal blocks, a1 major; the device at mesh coordinates c holds block
 * (c[a1]*size(a2) + c[a2]) ... of it, and devices that differ only along axes the spec does not
 * name hold the same block (replicas).
 */
import type { Device, Index, Sharding } from '@tpukit/core';
import type { Mesh } from './mesh';
import { PartitionSpec } from './partitionSpec';

const fmtShape = (s: readonly number[]) => `[${s.join(',')}]`;

export class NamedSharding implements Sharding {
  readonly deviceSet: readonly Device[];
  readonly isFullyReplicated: boolean;
  readonly #axisIndex: Map<string, number>;

  constructor(readonly mesh: Mesh, readonly spec: PartitionSpec) {
    if (!(spec instanceof PartitionSpec)) throw new TypeError(`NamedSharding: spec must be a PartitionSpec (P(...)); got ${JSON.stringify(spec)}`);
    this.#axisIndex = new Map(mesh.axisNames.map((a, i) => [a, i]));
    const used = new Set<string>();
    for (const a of spec.axes()) {
      if (!this.#axisIndex.has(a)) {
        throw new Error(`NamedSharding: spec ${spec} names axis '${a}', which ${mesh} does not have (its axes: ${mesh.axisNames.map((x) => `'${x}'`).join(', ')})`);
      }
      if (used.has(a)) throw new Error(`NamedSharding: spec ${spec} uses mesh axis '${a}' twice; each axis can split at most one dimension once`);
      used.add(a);
    }
    this.deviceSet = mesh.devices;
    this.isFullyReplicated = spec.axes().every((a) => mesh.axisSize(a) === 1);
  }

  /** Checks `shape` against the spec: rank, and every split dimension divisible by its axes' product. */
  check(shape: readonly number[], what = 'NamedSharding'): void {
    if (this.spec.length > shape.length) {
      throw new Error(`${what}: spec ${this.spec} has ${this.spec.length} entries but the array ${fmtShape(shape)} has only ${shape.length} dimensions`);
    }
    shape.forEach((d, k) => {
      const n = this.partsOf(k);
      if (d % n !== 0) {
        const axes = this.spec.axesOf(k);
        throw new Error(`${what}: dimension ${k} of ${fmtShape(shape)} (size ${d}) is not divisible by ${axes.map((a) => `'${a}'`).join('*')} = ${n} of ${this.mesh} (spec ${this.spec})`);
      }
    });
  }

  /** How many blocks dimension k is cut into. */
  partsOf(k: number): number {
    return this.spec.axesOf(k).reduce((p, a) => p * this.mesh.axisSize(a), 1);
  }

  shardShape(shape: readonly number[]): number[] {
    this.check(shape);
    return shape.map((d, k) => d / this.partsOf(k));
  }

  /** The block index along dimension k held by the device at mesh coordinates `coords`. */
  blockOf(k: number, coords: readonly number[]): number {
    let b = 0;
    for (const a of this.spec.axesOf(k)) {
      const i = this.#axisIndex.get(a)!;
      b = b * this.mesh.axisSizes[i] + coords[i];
    }
    return b;
  }

  devicesIndicesMap(shape: readonly number[]): Map<Device, Index> {
    const block = this.shardShape(shape);
    const out = new Map<Device, Index>();
    this.mesh.devices.forEach((dev, k) => {
      const c = this.mesh.coords(k);
      out.set(dev, block.map((b, dim) => {
        const s = this.blockOf(dim, c) * b;
        return [s, s + b] as const;
      }));
    });
    return out;
  }

  /** Same mesh and equivalent spec (trailing nulls do not matter). */
  equals(other: Sharding): boolean {
    return other instanceof NamedSharding && this.mesh.equals(other.mesh) && this.spec.equals(other.spec);
  }

  toString(): string {
    return `NamedSharding(mesh={${this.mesh.axisNames.map((a, i) => `${a}:${this.mesh.axisSizes[i]}`).join(', ')}}, spec=${this.spec})`;
  }
}
