/**
 * `Mesh`: an n-d grid of devices with a name per axis (jax.sharding.Mesh), and `makeMesh`
 * (jax.make_mesh) which lays the first devices of `devices()` out in row-major order.
 */
import type { Device } from '@tpukit/core';
import { devices as allDevices } from './devices';

export type Nested = Device | readonly Nested[];

/** `flat` (row-major) as a nested array of `shape`. */
export function nestDevices(flat: readonly Device[], shape: readonly number[]): Nested[] {
  const build = (axis: number, offset: number): Nested[] => {
    const stride = shape.slice(axis + 1).reduce((a, b) => a * b, 1);
    return globalThis.Array.from({ length: shape[axis] }, (_, i) => (axis === shape.length - 1 ? flat[offset + i] : build(axis + 1, offset + i * stride)));
  };
  return build(0, 0);
}

function flatDevices(x: readonly Nested[]): Device[] {
  const out: Device[] = [];
  const walk = (v: Nested) => {
    if (globalThis.Array.isArray(v)) (v as readonly Nested[]).forEach(walk);
    else out.push(v as Device);
  };
  x.forEach(walk);
  return out;
}

function shapeOf(x: readonly Nested[], what: string): number[] {
  const shape: number[] = [];
  let cur: Nested = x;
  while (globalThis.Array.isArray(cur)) {
    shape.push((cur as readonly Nested[]).length);
    cur = (cur as readonly Nested[])[0];
  }
  const flat = flatDevices(x);
  const size = shape.reduce((a, b) => a * b, 1);
  if (flat.length !== size || flat.some((d) => globalThis.Array.isArray(d))) throw new Error(`${what}: the devices must form a rectangular nested array; got a ragged one`);
  return shape;
}

export class Mesh {
  /** The devices in row-major order over the mesh axes. */
  readonly devices: readonly Device[];
  readonly axisNames: readonly string[];
  /** The size of each axis, in axis order. */
  readonly axisSizes: readonly number[];

  /** `devices` is a nested array (one nesting level per axis) or a flat list with one axis name. */
  constructor(devices: readonly Nested[], axisNames: readonly string[]) {
    const sizes = shapeOf(devices, 'Mesh');
    if (!globalThis.Array.isArray(axisNames) || axisNames.some((a) => typeof a !== 'string' || a === '')) {
      throw new TypeError(`Mesh: axisNames must be non-empty strings; got ${JSON.stringify(axisNames)}`);
    }
    if (sizes.length !== axisNames.length) {
      throw new Error(`Mesh: the devices form a [${sizes.join(',')}] grid (${sizes.length} axes) but ${axisNames.length} axis names were given: ${JSON.stringify(axisNames)}`);
    }
    const dup = axisNames.find((a, i) => axisNames.indexOf(a) !== i);
    if (dup !== undefined) throw new Error(`Mesh: axis name '${dup}' appears twice in ${JSON.stringify(axisNames)}`);
    const flat = flatDevices(devices);
    const ids = new Set<Device>();
    for (const d of flat) {
      if (ids.has(d)) throw new Error(`Mesh: device ${d.id} appears twice`);
      ids.add(d);
    }
    if (flat.length === 0) throw new Error('Mesh: needs at least one device');
    this.devices = Object.freeze(flat);
    this.axisNames = Object.freeze([...axisNames]);
    this.axisSizes = Object.freeze(sizes);
  }

  /** `{ axisName: size }` in axis order (JAX's `mesh.shape`). */
  get shape(): Record<string, number> {
    return Object.fromEntries(this.axisNames.map((a, i) => [a, this.axisSizes[i]]));
  }

  get size(): number {
    return this.devices.length;
  }

  /** The size of axis `name`; an error naming the mesh's axes when it has none of that name. */
  axisSize(name: string, what = 'Mesh'): number {
    const i = this.axisNames.indexOf(name);
    if (i < 0) throw new Error(`${what}: axis '${name}' is not an axis of ${this}; its axes are ${this.axisNames.map((a) => `'${a}'`).join(', ')}`);
    return this.axisSizes[i];
  }

  /** The mesh coordinates of the k-th device (row-major). */
  coords(k: number): number[] {
    const out = new globalThis.Array<number>(this.axisSizes.length);
    for (let i = this.axisSizes.length - 1; i >= 0; i--) {
      out[i] = k % this.axisSizes[i];
      k = Math.floor(k / this.axisSizes[i]);
    }
    return out;
  }

  /** Same devices in the same layout under the same names. */
  equals(other: Mesh): boolean {
    return this === other || (this.axisNames.length === other.axisNames.length && this.axisNames.every((a, i) => a === other.axisNames[i] && this.axisSizes[i] === other.axisSizes[i])
      && this.devices.every((d, i) => d === other.devices[i]));
  }

  toString(): string {
    return `Mesh(${this.axisNames.map((a, i) => `${a}=${this.axisSizes[i]}`).join(', ')})`;
  }
}

/** A mesh of `shape` named `axisNames` over the first devices of `devices()` (or of `opts.devices`). */
export function makeMesh(shape: readonly number[], axisNames: readonly string[], opts: { devices?: readonly Device[] } = {}): Mesh {
  if (!globalThis.Array.isArray(shape) || shape.length === 0 || shape.some((s) => !Number.isInteger(s) || s < 1)) {
    throw new RangeError(`makeMesh: shape must be a non-empty list of positive integers; got ${JSON.stringify(shape)}`);
  }
  if (shape.length !== axisNames.length) throw new Error(`makeMesh: shape [${shape.join(',')}] has ${shape.length} axes but ${axisNames.length} axis names were given: ${JSON.stringify(axisNames)}`);
  const pool = opts.devices ?? allDevices();
  const n = shape.reduce((a, b) => a * b, 1);
  if (n > pool.length) {
    throw new Error(`makeMesh: shape [${shape.join(',')}] needs ${n} devices but ${pool.length} are available${opts.devices ? '' : ' (raise it with setCpuDeviceCount(n) or TPUKIT_CPU_DEVICES=n)'}`);
  }
  return new Mesh(nestDevices(pool.slice(0, n), shape), axisNames);
}
