// Test helpers: temp directories under os.tmpdir() (removed after each test) and a small
// test-only Sharding (rows split over N virtual devices, each group with R replicas), standing
// in for @tpukit/mesh's NamedSharding.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach } from 'vitest';
import type { Device, Index, Sharding } from '@tpukit/core';

const dirs: string[] = [];
export function tmpDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'orbax-ts-test-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  while (dirs.length) fs.rmSync(dirs.pop()!, { recursive: true, force: true });
});

/** A deterministic generator of numbers in [0, 1) (mulberry32): test schedules that repeat. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const devs = new Map<number, Device>();
export const dev = (id: number): Device => {
  if (!devs.has(id)) devs.set(id, { id, deviceKind: 'virtual', platform: 'cpu', processIndex: 0 });
  return devs.get(id)!;
};

/** Axis `axis` split into `parts` near-equal ranges (ceil), each held by `replicas` devices. */
export class SplitSharding implements Sharding {
  readonly deviceSet: Device[];
  readonly isFullyReplicated: boolean;
  constructor(readonly parts: number, readonly replicas = 1, readonly axis = 0) {
    this.deviceSet = Array.from({ length: parts * replicas }, (_, i) => dev(i));
    this.isFullyReplicated = parts === 1;
  }
  devicesIndicesMap(shape: readonly number[]): Map<Device, Index> {
    const n = shape[this.axis];
    const per = Math.ceil(n / this.parts);
    const m = new Map<Device, Index>();
    this.deviceSet.forEach((d, i) => {
      const p = Math.floor(i / this.replicas);
      m.set(d, shape.map((s, ax) => (ax === this.axis ? ([Math.min(p * per, n), Math.min((p + 1) * per, n)] as const) : ([0, s] as const))));
    });
    return m;
  }
  shardShape(shape: readonly number[]): number[] {
    return shape.map((s, ax) => (ax === this.axis ? Math.ceil(s / this.parts) : s));
  }
  toString(): string {
    return `SplitSharding(axis=${this.axis}, parts=${this.parts}, replicas=${this.replicas})`;
  }
}
