/**
 * `IterDataset`: a stream of elements read through a stateful, checkpointable iterator
 * (Grain's `IterDataset`). It is where many-to-one and stateful steps live: filtering that
 * changes counts, dense batching, weighted mixing of streams, packing and bucketing (installed
 * by packing.ts and padding.ts). Each operation's state is its parent's state plus a few
 * counters, so a whole chain saves as a small JSON tree.
 */
import { collate } from './collate';
import { DatasetIterator, END, type End, type JsonValue, checkState, describeCall } from './iterator';
import { MixSchedule } from './mixSchedule';
import type { BucketOptions, PackOptions, PackedRow, PadOptions, PaddingStats } from './datasetTypes';
import { Rng } from './rng';

export abstract class IterDataset<T> {
  /** A fresh iterator positioned at the start of the stream. */
  abstract iterator(): DatasetIterator<T>;

  [Symbol.iterator](): DatasetIterator<T> {
    return this.iterator();
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this.iterator()[Symbol.asyncIterator]();
  }

  map<U>(fn: (x: T) => U): IterDataset<U> {
    if (typeof fn !== 'function') throw new TypeError(`IterDataset.map: expected a function; got ${typeof fn}`);
    return new FnIterDataset(() => new MapIterator(this.iterator(), fn));
  }

  /**
   * `fn(x, rng)`: `rng` is the counter-based stream of `(seed, n)` where `n` counts the
   * elements this operation has seen, so results are reproducible and resumable.
   */
  randomMap<U>(fn: (x: T, rng: Rng, index: number) => U, options: { seed: number }): IterDataset<U> {
    const seed = options?.seed;
    if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`IterDataset.randomMap: seed must be a non-negative integer; got ${seed}`);
    return new FnIterDataset(() => new RandomMapIterator(this.iterator(), fn, seed));
  }

  filter(pred: (x: T) => boolean): IterDataset<T> {
    if (typeof pred !== 'function') throw new TypeError(`IterDataset.filter: expected a predicate; got ${typeof pred}`);
    return new FnIterDataset(() => new FilterIterator(this.iterator(), pred));
  }

  /** Dense batches of `batchSize` elements stacked by `collate` (or `batchFn`). */
  batch<U = unknown>(options: { batchSize: number; dropRemainder?: boolean; batchFn?: (xs: T[]) => U }): IterDataset<U> {
    const b = options?.batchSize;
    if (!Number.isSafeInteger(b) || b < 1) throw new RangeError(`IterDataset.batch: batchSize must be an integer >= 1; got ${b}`);
    const fn = options.batchFn ?? ((xs: T[]) => collate(xs) as U);
    return new FnIterDataset(() => new BatchIterator(this.iterator(), b, options.dropRemainder ?? false, fn));
  }

  /**
   * A stream from any re-creatable iterable (a generator function, a Set, ...). Its state is the
   * number of elements consumed; restoring re-creates the iterable and skips that many, so
   * `make` must yield the same sequence each time.
   */
  static fromIterable<T>(make: () => Iterable<T>): IterDataset<T> {
    if (typeof make !== 'function') throw new TypeError(`IterDataset.fromIterable: expected a function returning an iterable; got ${typeof make}`);
    return new FnIterDataset(() => new FromIterableIterator(make));
  }

  /**
   * Interleaves streams in proportion to `weights` with the deterministic schedule of
   * `MapDataset.mix`; ends when the stream it should draw from next is exhausted.
   */
  static mix<T>(datasets: readonly IterDataset<T>[], weights?: readonly number[]): IterDataset<T> {
    if (!Array.isArray(datasets) || datasets.length === 0) throw new RangeError('IterDataset.mix: needs at least one dataset');
    const w = weights ?? datasets.map(() => 1);
    if (w.length !== datasets.length) throw new RangeError(`IterDataset.mix: got ${datasets.length} datasets but ${w.length} weights`);
    const schedule = new MixSchedule(w, 'IterDataset.mix');
    return new FnIterDataset(() => new MixIterator(datasets.map((d) => d.iterator()), schedule, w.slice()));
  }

  /** First-fit packing into rows of `length` tokens (installed by packing.ts). */
  declare pack: (options: PackOptions) => PaddedDataset<PackedRow>;
  /** Each sequence padded (or truncated) to `length` as a row with segment ids and positions (padding.ts). */
  declare padToLength: (length: number, options?: PadOptions) => PaddedDataset<PackedRow>;
  /** Batches of similar-length sequences padded to their bucket boundary: a fixed set of shapes (padding.ts). */
  declare bucketBySequenceLength: (options: BucketOptions) => PaddedDataset<any>;

  /** Every element of the stream (for small datasets and tests). */
  toArray(): T[] {
    return [...this.iterator()];
  }
}

/** A dataset whose iterators count real and pad tokens (`stats`). */
export interface PaddedDataset<T> extends IterDataset<T> {
  iterator(): DatasetIterator<T> & { readonly stats: PaddingStats };
}

/** An IterDataset defined by an iterator factory (how operations are built). */
export class FnIterDataset<T> extends IterDataset<T> {
  constructor(readonly make: () => DatasetIterator<T>) {
    super();
  }
  iterator(): DatasetIterator<T> {
    return this.make();
  }
}

/** Base for an operation with one parent: state and close forward to it. */
export abstract class ChildIterator<P, T> extends DatasetIterator<T> {
  constructor(readonly parent: DatasetIterator<P>) {
    super();
  }
  /** This operation's part of the description, e.g. `batch(size=4, dropRemainder=false)`. */
  protected abstract step(): string;
  override describe(): string {
    return `${this.parent.describe()}.${this.step()}`;
  }
  innerState(): JsonValue {
    return this.parent.innerState();
  }
  setInnerState(state: JsonValue): void {
    this.parent.setInnerState(state);
  }
  override lastIndex(): number {
    return this.parent.lastIndex();
  }
  override root(): DatasetIterator<unknown> {
    return this.parent.root();
  }
  override close(): void {
    this.parent.close();
  }
}

class MapIterator<P, T> extends ChildIterator<P, T> {
  constructor(parent: DatasetIterator<P>, readonly fn: (x: P) => T) {
    super(parent);
  }
  protected step(): string {
    return 'map';
  }
  nextOrEnd(): T | End {
    const x = this.parent.nextOrEnd();
    return x === END ? END : this.fn(x);
  }
}

class FilterIterator<T> extends ChildIterator<T, T> {
  constructor(parent: DatasetIterator<T>, readonly pred: (x: T) => boolean) {
    super(parent);
  }
  protected step(): string {
    return 'filter';
  }
  nextOrEnd(): T | End {
    for (;;) {
      const x = this.parent.nextOrEnd();
      if (x === END || this.pred(x)) return x;
    }
  }
}

class RandomMapIterator<P, T> extends ChildIterator<P, T> {
  #count = 0;
  readonly #rng = new Rng();
  constructor(parent: DatasetIterator<P>, readonly fn: (x: P, rng: Rng, index: number) => T, readonly seed: number) {
    super(parent);
  }
  protected step(): string {
    return `randomMap(seed=${this.seed})`;
  }
  nextOrEnd(): T | End {
    const x = this.parent.nextOrEnd();
    if (x === END) return END;
    const i = this.#count++;
    // Over an elastic shard the stream is keyed by the record's global index, so it does not
    // depend on the shard layout; otherwise by the position in this stream.
    const g = this.parent.lastIndex();
    const key = Number.isNaN(g) ? i : g;
    return this.fn(x, this.#rng.reset(this.seed, key), key);
  }
  override innerState(): JsonValue {
    return { parent: this.parent.innerState(), count: this.#count };
  }
  override setInnerState(state: JsonValue): void {
    if (Array.isArray(state) || (state && typeof state === 'object' && 'reshard' in state)) {
      // Resuming under a new shard count (elastic parent): positions restart.
      this.parent.setInnerState(state);
      this.#count = 0;
      return;
    }
    const s = checkState('randomMap', state, { parent: 'any', count: 'number' });
    this.parent.setInnerState(s.parent);
    this.#count = s.count;
  }
}

/**
 * Fills `buf` (emptied first) with up to `batchSize` elements of `it`. False when there is no
 * batch to make: the stream has ended, or only a remainder is left and `dropRemainder` drops it
 * (Grain's rule). Shared by `batch` and the DataLoader's Batch operation; allocates nothing.
 */
export function fillBatch<P>(it: DatasetIterator<P>, buf: P[], batchSize: number, dropRemainder: boolean): boolean {
  buf.length = 0;
  while (buf.length < batchSize) {
    const x = it.nextOrEnd();
    if (x === END) break;
    buf.push(x);
  }
  return !(buf.length === 0 || (buf.length < batchSize && dropRemainder));
}

class BatchIterator<P, T> extends ChildIterator<P, T> {
  readonly #buf: P[] = [];
  constructor(parent: DatasetIterator<P>, readonly batchSize: number, readonly dropRemainder: boolean, readonly fn: (xs: P[]) => T) {
    super(parent);
  }
  protected step(): string {
    return describeCall('batch', { size: this.batchSize, dropRemainder: this.dropRemainder });
  }
  nextOrEnd(): T | End {
    if (!fillBatch(this.parent, this.#buf, this.batchSize, this.dropRemainder)) return END;
    return this.fn(this.#buf.slice());
  }
}

class MixIterator<T> extends DatasetIterator<T> {
  #pos = 0;
  #done = false;
  constructor(readonly parents: DatasetIterator<T>[], readonly schedule: MixSchedule, readonly weights: readonly number[]) {
    super();
  }
  override describe(): string {
    return `IterDataset.mix([${this.parents.map((p) => p.describe()).join(', ')}], [${this.weights.join(', ')}])`;
  }
  nextOrEnd(): T | End {
    if (this.#done) return END;
    const x = this.parents[this.schedule.component(this.#pos)].nextOrEnd();
    if (x === END) {
      this.#done = true;
      return END;
    }
    this.#pos++;
    return x;
  }
  innerState(): JsonValue {
    return { pos: this.#pos, done: this.#done, parents: this.parents.map((p) => p.innerState()) };
  }
  setInnerState(state: JsonValue): void {
    const s = checkState('IterDataset.mix', state, { pos: 'number', done: 'boolean', parents: 'object' });
    if (!Array.isArray(s.parents) || s.parents.length !== this.parents.length) {
      throw new Error(`IterDataset.mix.setState: state has ${Array.isArray(s.parents) ? s.parents.length : 'no'} component states but the mixture has ${this.parents.length} datasets`);
    }
    this.parents.forEach((p, i) => p.setInnerState(s.parents[i]));
    this.#pos = s.pos;
    this.#done = s.done;
  }
  override close(): void {
    for (const p of this.parents) p.close();
  }
}

class FromIterableIterator<T> extends DatasetIterator<T> {
  #it: Iterator<T> | null = null;
  #count = 0;
  constructor(readonly make: () => Iterable<T>) {
    super();
  }
  override describe(): string {
    return 'IterDataset.fromIterable';
  }
  #open(): Iterator<T> {
    const src = this.make();
    if (!src || typeof (src as Iterable<T>)[Symbol.iterator] !== 'function') throw new TypeError('IterDataset.fromIterable: the function must return an iterable');
    return src[Symbol.iterator]();
  }
  nextOrEnd(): T | End {
    this.#it ??= this.#open();
    const r = this.#it.next();
    if (r.done) return END;
    this.#count++;
    return r.value;
  }
  innerState(): JsonValue {
    return { count: this.#count };
  }
  setInnerState(state: JsonValue): void {
    const s = checkState('IterDataset.fromIterable', state, { count: 'number' });
    if (!Number.isSafeInteger(s.count) || s.count < 0) throw new RangeError(`IterDataset.fromIterable.setState: count must be an integer >= 0; got ${s.count}`);
    this.#it = this.#open();
    for (let i = 0; i < s.count; i++) {
      if (this.#it.next().done) throw new RangeError(`IterDataset.fromIterable.setState: the iterable ended after ${i} elements but the state says ${s.count} were consumed`);
    }
    this.#count = s.count;
  }
}
