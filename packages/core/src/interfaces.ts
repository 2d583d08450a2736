/**
 * The shared interfaces other packages meet core through (see shared/DESIGN.md): devices and
 * shardings (implemented by @tpukit/mesh, saved by @tpukit/orbax-ts) and `Checkpointable`
 * (implemented by grain-ts iterators, optimiser schedules and the trainer; saved by orbax-ts).
 */
import type { Shape } from './shape';

export interface Device {
  /** Unique within the process. */
  readonly id: number;
  /** e.g. 'cpu' or 'TPU v5e (simulated)'. */
  readonly deviceKind: string;
  readonly platform: string;
  readonly processIndex: number;
}

/** Per-dimension half-open ranges `[start, stop)` of the global array that one shard holds. */
export type Index = ReadonlyArray<readonly [number, number]>;

export interface Sharding {
  readonly deviceSet: readonly Device[];
  /** Which index ranges of a `shape`d array each device holds. */
  devicesIndicesMap(shape: Shape): Map<Device, Index>;
  /** The shape of one shard of a `shape`d array. */
  shardShape(shape: Shape): number[];
  /** True when every device holds the whole array. */
  readonly isFullyReplicated: boolean;
  /** A short description, e.g. `NamedSharding(mesh={x:2}, spec=P('x', null))`. */
  toString(): string;
}

/** Something whose progress can be saved as small JSON and restored exactly. */
export interface Checkpointable<S = unknown> {
  getState(): S;
  setState(state: S): void;
}

export function isCheckpointable(x: unknown): x is Checkpointable {
  return typeof x === 'object' && x !== null && typeof (x as Checkpointable).getState === 'function'
    && typeof (x as Checkpointable).setState === 'function';
}
