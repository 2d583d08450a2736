/**
 * A test-only mesh-like Sharding: devices 0..N-1 laid out row-major on a named grid, each
 * array dimension split over zero or more grid axes (as a PartitionSpec). Only core's
 * abstract `Sharding` interface is implemented: what @tpukit/mesh's NamedSharding provides.
 */
import { type Array as CoreArray, type Device, type Index, lax, makeArrayFromCallback, np, type Sharding } from '@tpukit/core';
import { expect } from 'vitest';

const DEVICES: Device[] = Array.from({ length: 64 }, (_, id) => Object.freeze({ id, deviceKind: 'test', platform: 'test', processIndex: 0 }));

export type Spec = readonly (string | readonly string[] | null)[];

export class GridSharding implements Sharding {
  readonly deviceSet: readonly Device[];
  private readonly names: string[];
  private readonly sizes: number[];
  constructor(
    readonly mesh: Readonly<Record<string, number>>,
    readonly spec: Spec,
    /** The device at each grid position (default: device k at position k). */
    order?: readonly number[],
  ) {
    this.names = Object.keys(mesh);
    this.sizes = this.names.map((k) => mesh[k]);
    const n = this.sizes.reduce((a, b) => a * b, 1);
    this.deviceSet = (order ?? [...Array(n).keys()]).map((k) => DEVICES[k]);
  }
  get isFullyReplicated(): boolean {
    return this.spec.every((s) => s === null || (Array.isArray(s) && s.length === 0));
  }
  private coords(dev: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (let k = this.names.length - 1; k >= 0; k--) {
      out[this.names[k]] = dev % this.sizes[k];
      dev = Math.floor(dev / this.sizes[k]);
    }
    return out;
  }
  devicesIndicesMap(shape: readonly number[]): Map<Device, Index> {
    const m = new Map<Device, Index>();
    this.deviceSet.forEach((d, i) => {
      const c = this.coords(i);
      m.set(
        d,
        shape.map((n, dim): [number, number] => {
          const s = this.spec[dim] ?? null;
          const axes = s === null ? [] : typeof s === 'string' ? [s] : s;
          let parts = 1;
          let idx = 0;
          for (const a of axes) {
            idx = idx * this.mesh[a] + c[a];
            parts *= this.mesh[a];
          }
          const w = n / parts;
          return [idx * w, (idx + 1) * w];
        }),
      );
    });
    return m;
  }
  shardShape(shape: readonly number[]): number[] {
    return [...this.devicesIndicesMap(shape).values()][0].map(([s, e]) => e - s);
  }
  toString(): string {
    return `GridSharding(${JSON.stringify(this.mesh)}, P(${this.spec.map((s) => JSON.stringify(s)).join(', ')}))`;
  }
}

export const P = (...spec: Spec): Spec => spec;

// ---- helpers the GSPMD tests share ----

export const M1 = { x: 2 };
export const M2 = { x: 2, y: 2 };
export const S = (mesh: Record<string, number>, ...spec: Spec) => new GridSharding(mesh, spec);

/** devicePut: a sharded CoreArray holding `x`'s value. */
export function put(x: CoreArray, s: Sharding): CoreArray {
  return makeArrayFromCallback(x.shape, x.dtype, s, (idx) => lax.slice(x, idx.map(([a]) => a), idx.map(([, b]) => b)));
}

export function close(a: CoreArray, e: CoreArray, rtol = 1e-5, atol = 1e-5): void {
  expect(a.shape).toEqual(e.shape);
  const x = a.dataSync();
  const y = e.dataSync();
  for (let i = 0; i < y.length; i++) {
    if (Math.abs(x[i] - y[i]) > atol + rtol * Math.abs(y[i])) expect.fail(`element ${i}: ${x[i]} vs ${y[i]}`);
  }
}

const count = (text: string, op: string): number => (text.match(new RegExp(` ${op}\\(`, 'g')) ?? []).length;
const COLLS = ['all-reduce', 'all-gather', 'reduce-scatter', 'all-to-all', 'collective-permute'];
export const collectives = (text: string): Record<string, number> => Object.fromEntries(COLLS.map((c) => [c, count(text, c)]).filter(([, n]) => (n as number) > 0));

export const rand = (shape: number[], seed: number): CoreArray => {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n);
  let s = seed * 7919 + 1;
  for (let i = 0; i < n; i++) {
    s = (s * 16807) % 2147483647;
    v[i] = (s / 2147483647) * 2 - 1;
  }
  return np.array(v).reshape(shape);
};
