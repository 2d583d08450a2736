/**
 * The per-element operations a `DataLoader` applies, as in Grain's `transforms`: objects with a
 * `map`, `randomMap` or `filter` method, and `Batch`. Classes or plain objects both work:
 * `{ map: (x) => ... }`. Operations before the first `Batch` run per record (in worker threads
 * when `workerCount > 0`); `Batch` and anything after it run on the consuming thread.
 */
import type { Rng } from './rng';

export interface MapTransform<I = any, O = any> {
  map(element: I): O;
}
export interface RandomMapTransform<I = any, O = any> {
  randomMap(element: I, rng: Rng): O;
}
export interface FilterTransform<I = any> {
  filter(element: I): boolean;
}

/** Stacks `batchSize` consecutive elements (see `collate`); `dropRemainder` drops a short last batch. */
export class Batch {
  readonly batchSize: number;
  readonly dropRemainder: boolean;
  readonly batchFn: ((xs: any[]) => unknown) | undefined;
  constructor(options: { batchSize: number; dropRemainder?: boolean; batchFn?: (xs: any[]) => unknown }) {
    const b = options?.batchSize;
    if (!Number.isSafeInteger(b) || b < 1) throw new RangeError(`Batch: batchSize must be an integer >= 1; got ${b}`);
    this.batchSize = b;
    this.dropRemainder = options.dropRemainder ?? false;
    this.batchFn = options.batchFn;
  }
}

export type Operation = MapTransform | RandomMapTransform | FilterTransform | Batch;

export type OperationKind = 'map' | 'randomMap' | 'filter' | 'batch';

export function operationKind(op: unknown, i: number): OperationKind {
  if (op instanceof Batch) return 'batch';
  const o = op as Record<string, unknown>;
  if (o && typeof o === 'object') {
    const kinds = (['map', 'randomMap', 'filter'] as const).filter((k) => typeof o[k] === 'function');
    if (kinds.length === 1) return kinds[0];
    if (kinds.length > 1) throw new TypeError(`DataLoader: operations[${i}] has several of map / randomMap / filter (${kinds.join(', ')}); give each operation exactly one`);
  }
  throw new TypeError(`DataLoader: operations[${i}] must be an object with a map, randomMap or filter method, or a Batch; got ${op === null ? 'null' : typeof op}`);
}
