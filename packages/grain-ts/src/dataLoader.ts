/**
 * `DataLoader` (Grain's `DataLoader`): a source, a sampler and a flat list of operations.
 * Records are read and transformed per step (in `workerCount` threads with a prefetch buffer,
 * or on the calling thread), then batched on the consuming thread, so the output is identical
 * for every worker count. The iterator's state is `{ version, nextIndex, sampler, source }`:
 * one step counter, plus descriptions that are checked on restore (as Grain checks reprs).
 */
import { collate } from './collate';
import { IndexSampler } from './indexSampler';
import { fillBatch } from './iterDataset';
import { DatasetIterator, END, type End, type JsonValue, badState, checkState } from './iterator';
import { describeSourceOf, makeLoaderDataset } from './loaderDataset';
import { MapDataset, type RandomAccessDataSource } from './mapDataset';
import { Batch, type Operation, operationKind } from './operations';
import type { WorkerSpec } from './workerPool';

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
    return new DataLoaderIterator<T>(it, (o.operations ?? []).slice(this.#perRecord), o.sampler.describe(), describeSourceOf(o.source));
  }

  [Symbol.iterator](): DataLoaderIterator<T> {
    return this.iterator();
  }
}

export class DataLoaderIterator<T> extends DatasetIterator<T> {
  readonly #stages: { batch?: Batch; map?: (x: unknown) => unknown }[];
  readonly #buf: unknown[] = [];

  constructor(readonly records: DatasetIterator<unknown>, post: readonly Operation[], readonly sampler: string, readonly source: string) {
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

  getState(): JsonValue {
    const inner = this.records.getState() as { nextIndex: number };
    return { version: 1, nextIndex: inner.nextIndex, sampler: this.sampler, source: this.source };
  }

  setState(state: JsonValue): void {
    const s = checkState('DataLoader', state, { version: 'number', nextIndex: 'number', sampler: 'string', source: 'string' });
    if (s.version !== 1) badState('DataLoader', 'unknown state version (expected 1)', state);
    if (s.sampler !== this.sampler) throw new Error(`DataLoader.setState: the state was saved with ${s.sampler} but this loader has ${this.sampler}`);
    if (s.source !== this.source) throw new Error(`DataLoader.setState: the state was saved with source ${s.source} but this loader reads ${this.source}`);
    this.records.setState({ nextIndex: s.nextIndex });
  }

  override close(): void {
    this.records.close();
  }
}
