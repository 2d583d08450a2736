/**
 * Checkpoint arguments, as Orbax's `ocp.args`: each names what one item of a step holds and
 * which handler writes it. `StandardSave(pytree)` / `StandardRestore(target?)` for pytrees of
 * arrays (Zarr arrays plus `_METADATA`), `JsonSave(obj)` / `JsonRestore()` for small JSON state
 * such as a data iterator's (anything `Checkpointable` is saved through `getState()` and restored
 * through `setState()`), and `Composite({ name: arg, ... })` for several named items in a step.
 */
import { type Checkpointable, type DType, type Sharding, isCheckpointable } from '@tpukit/core';

/** An abstract array for restore targets (jax.ShapeDtypeStruct): shape, dtype and where to put it. */
export class ShapeDtypeStruct {
  readonly shape: readonly number[];
  constructor(
    shape: readonly number[],
    readonly dtype: DType,
    readonly sharding?: Sharding,
  ) {
    this.shape = Object.freeze(shape.slice());
  }
}

export class StandardSave {
  readonly kind = 'standard-save' as const;
  constructor(readonly item: unknown) {}
}

export interface StandardRestoreOptions {
  /** Restore only the target's leaves; leaves in the checkpoint but not in the target are skipped (listed in `skipped`). */
  partial?: boolean;
}

export class StandardRestore {
  readonly kind = 'standard-restore' as const;
  /** After a restore with `partial: true`: the checkpoint's leaf paths that were not restored. */
  skipped: string[] = [];
  constructor(
    readonly item?: unknown,
    readonly options: StandardRestoreOptions = {},
  ) {}
}

export class JsonSave {
  readonly kind = 'json-save' as const;
  readonly item: unknown;
  constructor(item: unknown) {
    this.item = isCheckpointable(item) ? item.getState() : item;
  }
}

export class JsonRestore {
  readonly kind = 'json-restore' as const;
  /** When given, the restored state is also passed to `into.setState`. */
  constructor(readonly into?: Checkpointable) {}
}

export type SaveArg = StandardSave | JsonSave;
export type RestoreArg = StandardRestore | JsonRestore;

export class Composite<A extends SaveArg | RestoreArg = SaveArg | RestoreArg> {
  readonly kind = 'composite' as const;
  readonly items: Readonly<Record<string, A>>;
  constructor(items: Record<string, A>) {
    this.items = { ...items };
  }
}

export const isSaveArg = (x: unknown): x is SaveArg => x instanceof StandardSave || x instanceof JsonSave;
export const isRestoreArg = (x: unknown): x is RestoreArg => x instanceof StandardRestore || x instanceof JsonRestore;

/** Orbax-style factories: `args.StandardSave(tree)`, `args.Composite({ state: ..., iter: ... })`. */
export const args = {
  StandardSave: (item: unknown): StandardSave => new StandardSave(item),
  StandardRestore: (item?: unknown, options?: StandardRestoreOptions): StandardRestore => new StandardRestore(item, options),
  JsonSave: (item: unknown): JsonSave => new JsonSave(item),
  JsonRestore: (into?: Checkpointable): JsonRestore => new JsonRestore(into),
  Composite: <A extends SaveArg | RestoreArg>(items: Record<string, A>): Composite<A> => new Composite(items),
};
