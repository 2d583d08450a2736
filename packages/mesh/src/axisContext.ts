/**
 * The mesh axes bound by the enclosing `shardMap` calls while their bodies run: for each axis
 * its size and the device's index along it (a value batched along that axis). Collectives look
 * their axis up here; a name no enclosing shardMap binds is a clear error.
 */
import type { Array } from '@tpukit/core';

export interface BoundAxis {
  readonly name: string;
  readonly size: number;
  /** int32 scalar: this device's coordinate along the axis. */
  readonly index: Array;
}

const frames: Map<string, BoundAxis>[] = [];

export function withAxes<T>(axes: readonly BoundAxis[], body: () => T): T {
  frames.push(new Map(axes.map((a) => [a.name, a])));
  try {
    return body();
  } finally {
    frames.pop();
  }
}

export function boundAxis(name: unknown, op: string): BoundAxis {
  if (typeof name !== 'string') throw new TypeError(`${op}: axisName must be a mesh axis name (a string); got ${JSON.stringify(name)}`);
  for (let i = frames.length - 1; i >= 0; i--) {
    const a = frames[i].get(name);
    if (a) return a;
  }
  const known = [...new Set(frames.flatMap((f) => [...f.keys()]))];
  throw new Error(`${op}: axis '${name}' is not bound here; collectives run inside shardMap over a mesh with that axis${known.length ? ` (bound axes: ${known.map((k) => `'${k}'`).join(', ')})` : ' (no shardMap is running)'}`);
}
