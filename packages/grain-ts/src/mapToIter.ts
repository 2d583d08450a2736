/**
 * `MapDataset.toIterDataset()`: the stream over a random-access dataset, in index order,
 * skipping filtered elements. With `workerCount = 0` elements are computed on the calling
 * thread; with `workerCount > 0` chunk `c` of indices goes to worker `c mod workerCount` and
 * results are read back in order, so the stream is the same for any worker count. Either way
 * the state is `{ nextIndex }`: a state saved with one worker count restores under another.
 */
import { IterDataset } from './iterDataset';
import { DatasetIterator, END, type End, type JsonValue, checkState } from './iterator';
import type { IndexedDataset, ToIterOptions } from './datasetTypes';
import { type Reply, type WorkerJob, WorkerPool, warnIfOversubscribed } from './workerPool';

export interface ParallelOptions extends ToIterOptions {
  /** @internal What workers build (default: the `worker` spec as a dataset). */
  job?: WorkerJob;
}

function checkNextIndex(op: string, state: JsonValue, length: number): number {
  const s = checkState(op, state, { nextIndex: 'number' });
  const n = s.nextIndex;
  if (!Number.isSafeInteger(n) || n < 0 || n > length) badIndex(op, n, length);
  return n;
}

function badIndex(op: string, n: number, length: number): never {
  throw new RangeError(`${op}.setState: nextIndex must be an integer in [0, ${length}]; got ${n}`);
}

/**
 * A stream over a MapDataset in index order: the state is `{ nextIndex }` (the next index to
 * read), the same for the sequential and the parallel stream, so either restores the other's.
 */
abstract class IndexOrderIterator<T> extends DatasetIterator<T> {
  protected nextIndex = 0;
  constructor(readonly ds: IndexedDataset<T>) {
    super();
  }
  override describe(): string {
    return this.ds.describe();
  }
  innerState(): JsonValue {
    return { nextIndex: this.nextIndex };
  }
  setInnerState(state: JsonValue): void {
    this.nextIndex = checkNextIndex('MapDataset.iterator', state, this.ds.length);
  }
}

class SequentialIterator<T> extends IndexOrderIterator<T> {
  nextOrEnd(): T | End {
    const n = this.ds.length;
    while (this.nextIndex < n) {
      const v = this.ds.get(this.nextIndex++);
      if (v !== undefined) return v;
    }
    return END;
  }
}

class ParallelIterator<T> extends IndexOrderIterator<T> {
  #gen = 0;
  #pool: WorkerPool | null = null;
  /** Index of the first element of the next chunk to request, and of the chunk being read. */
  #requested = 0;
  #chunk: unknown[] | null = null;
  #chunkStart = 0;
  #chunkIndex = 0; // chunk number (relative to the current generation's start) of `#chunk`
  #base = 0; // first index of the current generation
  readonly #chunkSize: number;
  readonly #ahead: number;

  constructor(ds: IndexedDataset<T>, readonly options: ParallelOptions & { workerCount: number }) {
    super(ds);
    this.#chunkSize = options.chunkSize ?? 16;
    const prefetch = options.prefetch ?? 4 * this.#chunkSize;
    if (!Number.isSafeInteger(prefetch) || prefetch < 1) throw new RangeError(`toIterDataset: prefetch must be an integer >= 1; got ${prefetch}`);
    this.#ahead = Math.max(1, Math.ceil(prefetch / this.#chunkSize));
  }

  #start(): void {
    const job = this.options.job ?? { kind: 'dataset' as const, spec: this.options.worker! };
    this.#pool = new WorkerPool(job, this.options.workerCount);
    // Check every worker built the same dataset as this thread.
    for (let w = 0; w < this.options.workerCount; w++) this.#pool.probe(w, this.#gen);
    const mine = this.ds.describe();
    for (let w = 0; w < this.options.workerCount; w++) {
      const r = this.#reply(w);
      if (r.length !== this.ds.length || (r.describe && r.describe !== mine && `source(${r.describe})` !== mine)) {
        this.close();
        throw new Error(`toIterDataset: worker ${w} built a different dataset (length ${r.length}, ${r.describe}) than this thread (length ${this.ds.length}, ${mine}); the worker module must build the same pipeline`);
      }
    }
    this.#restart();
  }

  #reply(w: number): Reply {
    for (;;) {
      const r = this.#pool!.receive(w);
      if (r.gen !== this.#gen) continue; // a stale answer from before setState
      if (r.error) {
        this.close();
        throw new Error(r.error);
      }
      return r;
    }
  }

  /** Starts requesting from `nextIndex` under a new generation. */
  #restart(): void {
    this.#gen++;
    this.#base = this.nextIndex;
    this.#requested = this.nextIndex;
    this.#chunk = null;
    this.#chunkIndex = -1;
    const W = this.options.workerCount;
    for (let k = 0; k < W * this.#ahead; k++) this.#requestOne();
  }

  #requestOne(): void {
    const n = this.ds.length;
    if (this.#requested >= n) return;
    const count = Math.min(this.#chunkSize, n - this.#requested);
    const c = (this.#requested - this.#base) / this.#chunkSize;
    this.#pool!.request(c % this.options.workerCount, this.#gen, this.#requested, count);
    this.#requested += count;
  }

  nextOrEnd(): T | End {
    const n = this.ds.length;
    if (this.#pool === null && this.nextIndex < n) this.#start();
    while (this.nextIndex < n) {
      if (this.#chunk === null || this.nextIndex >= this.#chunkStart + this.#chunk.length) {
        this.#chunkIndex++;
        const r = this.#reply(this.#chunkIndex % this.options.workerCount);
        this.#chunk = WorkerPool.values(r);
        this.#chunkStart = r.start;
        this.#requestOne();
      }
      const v = this.#chunk[this.nextIndex - this.#chunkStart] as T | undefined;
      this.nextIndex++;
      if (v !== undefined) return v;
    }
    return END;
  }

  override setInnerState(state: JsonValue): void {
    super.setInnerState(state);
    if (this.#pool !== null) this.#restart();
  }

  override close(): void {
    this.#pool?.close();
  }
}

export class MapToIterDataset<T> extends IterDataset<T> {
  constructor(readonly ds: IndexedDataset<T>, readonly options: ParallelOptions) {
    super();
    const w = options.workerCount ?? 0;
    if (!Number.isSafeInteger(w) || w < 0) throw new RangeError(`toIterDataset: workerCount must be an integer >= 0; got ${w}`);
    if (w > 0 && !options.worker && !options.job) {
      throw new TypeError('toIterDataset: workerCount > 0 needs `worker: { module, exportName?, args? }`: each worker thread rebuilds this dataset by calling that module export (functions cannot be sent to a thread)');
    }
    // A DataLoader passes its own `job` and has warned under its own name already.
    if (!options.job) warnIfOversubscribed('toIterDataset', w);
    const c = options.chunkSize ?? 16;
    if (!Number.isSafeInteger(c) || c < 1) throw new RangeError(`toIterDataset: chunkSize must be an integer >= 1; got ${c}`);
  }
  iterator(): DatasetIterator<T> {
    const w = this.options.workerCount ?? 0;
    return w === 0 ? new SequentialIterator(this.ds) : new ParallelIterator(this.ds, { ...this.options, workerCount: w });
  }
}

