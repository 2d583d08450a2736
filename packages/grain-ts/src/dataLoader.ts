/**
 * `DataLoader` (Grain's `DataLoader`): a source, a sampler and a flat list of operations.
 * Records are read and transformed per step (in `workerCount` threads with a prefetch buffer,
 * or on the calling thread), then batched on the consuming thread, so the output is identical
 * for every worker count. The iterator's state is `{ pipeline, state: { nextIndex } }`: one step
 * counter, fingerprinted with a description of the source, the sampler (its seed included) and
 * the operations, checked on restore (as Grain checks reprs). The worker count is not part of
 * it: a state saved with one count restores under another.
 */
import { collate } from './collate';
import { IndexSampler } from './indexSampler';
import { fillBatch } from './iterDataset';
import { DatasetIterator, END, type End, type JsonValue, checkState, describeCall } from './iterator';
import { describeSourceOf, makeLoaderDataset } from './loaderDataset';
import type { RandomAccessDataSource } from './datasetTypes';
import { MapDataset } from './mapDataset';
import { Batch, type Operation, operationKind } from './operations';

function describeOperation(op: Operation, i: number): string {
  return op instanceof Batch ? describeCall('batch', { size: op.batchSize, dropRemainder: op.dropRemainder }) : operationKind(op, i);
}
import { type WorkerSpec, warnIfOversubscribed } from './workerPool';

export interface DataLoaderOptions {
  source: RandomAccessDataSource<any>;
  sampler: IndexSampler;
  operations?: readonly Operation[];
  /** Threads for the per-record operations (0: the calling thread). */
  workerCount?: number;
  /** Records computed ahead per worker. */
  prefetch?: number;
  /**
   * Needed when `workerCount > 0`: a module whose export returns `{ source, operations }`
   * (the same as given here); the sampler is sent to workers as data.
   */
  worker?: WorkerSpec;
}

export class DataLoader<T = unknown> {
  readonly options: DataLoaderOptions;
  readonly #perRecord: number;

  constructor(options: DataLoaderOptions) {
    if (!options || typeof options !== 'object') throw new TypeError('DataLoader: expected { source, sampler, operations?, workerCount?, prefetch?, worker? }');
    if (!(options.sampler instanceof IndexSampler)) throw new TypeError('DataLoader: sampler must be an IndexSampler');
    const ops = options.operations ?? [];
    const kinds = ops.map((op, i) => operationKind(op, i));
    const firstBatch = kinds.indexOf('batch');
    this.#perRecord = firstBatch < 0 ? ops.length : firstBatch;
    for (let i = this.#perRecord + 1; i < ops.length; i++) {
      if (kinds[i] !== 'map') {
        throw new TypeError(`DataLoader: operations[${i}] (${kinds[i]}) comes after a Batch; only map operations may follow the (single) Batch`);
      }
    }
    const w = options.workerCount ?? 0;
    if (!Number.isSafeInteger(w) || w < 0) throw new RangeError(`DataLoader: workerCount must be an integer >= 0; got ${w}`);
    if (w > 0 && !options.worker) {
      throw new TypeError('DataLoader: workerCount > 0 needs `worker: { module, exportName?, args? }` whose export returns { source, operations }: worker threads rebuild them from that module (functions cannot be sent to a thread)');
    }
    warnIfOversubscribed('DataLoader', w);
    this.options = options;
    makeLoaderDataset({ source: options.source, operations: ops }, options.sampler, this.#perRecord); // validates
  }

  iterator(): DataLoaderIterator<T> {
    const o = this.options;
    const records = makeLoaderDataset({ source: o.source, operations: o.operations }, o.sampler, this.#perRecord);
    const ds = MapDataset.source(records);
    const workerCount = o.workerCount ?? 0;
    const it = ds.toIterDataset({
      workerCount,
      prefetch: o.prefetch,
      worker: o.worker,
      job: workerCount > 0 ? { kind: 'loader', spec: o.worker!, loader: { sampler: o.sampler.options as unknown as JsonValue, perRecord: this.#perRecord } } : undefined,
    } as never).iterator();
    const ops = o.operations ?? [];
    const pipeline = `DataLoader(source=${describeSourceOf(o.source)}, sampler=${o.sampler.describe()}, operations=[${ops.map(describeOperation).join(', ')}])`;
    return new DataLoaderIterator<T>(it, ops.slice(this.#perRecord), pipeline);
  }

  [Symbol.iterator](): DataLoaderIterator<T> {
    return this.iterator();
  }
}

export class DataLoaderIterator<T> extends DatasetIterator<T> {
  readonly #stages: { batch?: Batch; map?: (x: unknown) => unknown }[];
  readonly #buf: unknown[] = [];

  constructor(readonly records: DatasetIterator<unknown>, post: readonly Operation[], readonly pipeline: string) {
    super();
    this.#stages = post.map((op) => (op instanceof Batch ? { batch: op } : { map: (x: unknown) => (op as { map(x: unknown): unknown }).map(x) }));
  }

  nextOrEnd(): T | End {
    const stages = this.#stages;
    let x: unknown;
    let s = 0;
    if (stages.length > 0 && stages[0].batch) {
      const b = stages[0].batch;
      const buf = this.#buf;
      if (!fillBatch(this.records, buf, b.batchSize, b.dropRemainder)) return END;
      x = b.batchFn ? b.batchFn(buf.slice()) : collate(buf);
      s = 1;
    } else {
      const r = this.records.nextOrEnd();
      if (r === END) return END;
      x = r;
    }
    for (; s < stages.length; s++) {
      const st = stages[s];
      if (st.map) x = st.map(x);
      else throw new TypeError('DataLoader: only one Batch is supported (Grain allows one too)');
    }
    return x as T;
  }

  override describe(): string {
    return this.pipeline;
  }

  protected override get stateOp(): string {
    return 'DataLoader';
  }

  innerState(): JsonValue {
    return this.records.innerState();
  }

  setInnerState(state: JsonValue): void {
    // `{ nextIndex }`; an old `{ version: 1, nextIndex, sampler, source }` wrapped by hand in
    // `{ pipeline, state }` reads too (its extra fields are ignored).
    const s = checkState('DataLoader', state, { nextIndex: 'number' });
    this.records.setInnerState({ nextIndex: s.nextIndex });
  }

  override close(): void {
    this.records.close();
  }
}
