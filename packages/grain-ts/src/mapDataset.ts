/**
 * `MapDataset`: a random-access dataset with a known length per epoch (Grain's `MapDataset`),
 * and its index transformations. Datasets are lazy and immutable: `get(i)` computes element `i`
 * on demand, so shuffling, sharding and resuming are index arithmetic and nothing is buffered.
 * An index past `length` continues into the next epoch of an upstream dataset (that is how
 * `repeat` works and how `shuffle` reseeds per epoch). `get(i)` returns `undefined` where a
 * `filter` dropped the element; iteration skips those.
 */
import { collate } from './collate';
import { IndexShuffle } from './indexShuffle';
import type { RandomAccessDataSource, ToIterOptions } from './datasetTypes';
import type { IterDataset } from './iterDataset';
import { MapToIterDataset } from './mapToIter';
import type { DatasetIterator } from './iterator';
import { MixSchedule } from './mixSchedule';
import { Rng, deriveSeed } from './rng';
import { type ShardOptions, evenSplit } from './sharding';

function describeSource(src: unknown): string {
  if (Array.isArray(src)) return `array(len=${src.length})`;
  const s = src as { describe?: () => string; constructor?: { name?: string }; length: number };
  return typeof s.describe === 'function' ? s.describe() : `${s.constructor?.name ?? 'source'}(len=${s.length})`;
}

export abstract class MapDataset<T> {
  /** Elements per epoch (Infinity for an endless `repeat()`). */
  abstract readonly length: number;
  /** Element `index`, or `undefined` where a filter dropped it. */
  abstract get(index: number): T | undefined;
  /** A short description of the chain (used to check a saved state belongs to this pipeline). */
  abstract describe(): string;

  /** The pipeline seed set by `.seed()`, inherited downstream. */
  readonly pipelineSeed: number | undefined;
  /** Position of this operation in the chain (0 for a source). */
  readonly depth: number;

  protected constructor(parent: MapDataset<unknown> | null) {
    this.pipelineSeed = parent?.pipelineSeed;
    this.depth = parent ? parent.depth + 1 : 0;
  }

  /** A dataset over any `{ length, get(i) }` or a JS array. */
  static source<T>(source: RandomAccessDataSource<T> | readonly T[]): MapDataset<T> {
    return new SourceMapDataset(source);
  }

  /** `[start, stop)` by `step`, like Python's range (`range(n)` for one argument). */
  static range(start: number, stop?: number, step = 1): MapDataset<number> {
    if (stop === undefined) [start, stop] = [0, start];
    if (![start, stop, step].every(Number.isSafeInteger) || step === 0) {
      throw new RangeError(`MapDataset.range: start, stop and step must be integers, step != 0; got ${start}, ${stop}, ${step}`);
    }
    const n = Math.max(0, Math.ceil((stop - start) / step));
    const s = start;
    return new SourceMapDataset({ length: n, get: (i: number) => s + i * step, describe: () => `range(${start},${stop},${step})` } as RandomAccessDataSource<number>);
  }

  /**
   * Interleaves datasets in proportion to `weights` (default equal), deterministically; stops
   * at the first component that runs out. Shuffle the components first to keep proportions
   * meaningful (as Grain advises).
   */
  static mix<T>(datasets: readonly MapDataset<T>[], weights?: readonly number[]): MapDataset<T> {
    return new MixMapDataset(datasets, weights ?? datasets.map(() => 1));
  }

  /** Sets the seed random operations downstream derive theirs from (with their position). */
  seed(seed: number): MapDataset<T> {
    return new SeedMapDataset(this, seed);
  }

  /**
   * A global shuffle: each epoch is a seeded permutation of this dataset's indices (reseeded
   * with `(seed + epoch) mod 2^32`), computed per index with no buffer.
   */
  shuffle(options: { seed?: number } = {}): MapDataset<T> {
    return new ShuffleMapDataset(this, this.#seedFor('shuffle', options.seed));
  }

  /** `numEpochs` passes over the data (endless when omitted). */
  repeat(numEpochs?: number): MapDataset<T> {
    return new RepeatMapDataset(this, numEpochs);
  }

  map<U>(fn: (x: T) => U): MapDataset<U> {
    return new MapMapDataset(this, (x) => fn(x), 'map');
  }

  /** `fn(index, x)`, with `index` the position in this dataset. */
  mapWithIndex<U>(fn: (index: number, x: T) => U): MapDataset<U> {
    return new MapMapDataset(this, (x, i) => fn(i, x), 'mapWithIndex');
  }

  /**
   * `fn(x, rng)` where `rng` is the counter-based stream of `(seed, index)`: the result depends
   * only on the seed and the element's index, never on worker layout or iteration order.
   */
  randomMap<U>(fn: (x: T, rng: Rng, index: number) => U, options: { seed?: number } = {}): MapDataset<U> {
    const seed = this.#seedFor('randomMap', options.seed);
    const rng = new Rng();
    return new MapMapDataset(this, (x, i) => fn(x, rng.reset(seed, i), i), `randomMap(seed=${seed})`);
  }

  /** Keeps elements where `pred` holds; `get(i)` is `undefined` for the others. */
  filter(pred: (x: T) => boolean): MapDataset<T> {
    return new FilterMapDataset(this, pred);
  }

  /**
   * Groups `batchSize` consecutive elements and stacks them (see `collate`); filtered elements
   * are left out of their batch. `batchFn` replaces the stacking.
   */
  batch<U = unknown>(options: { batchSize: number; dropRemainder?: boolean; batchFn?: (xs: T[]) => U }): MapDataset<U> {
    return new BatchMapDataset<T, U>(this, options);
  }

  /** Elements `start, start+step, ...` below `stop` (Python slice semantics for non-negative bounds). */
  slice(start = 0, stop?: number, step = 1): MapDataset<T> {
    return new SliceMapDataset(this, start, stop ?? this.length, step);
  }

  /** The contiguous part of this dataset that one process reads (Grain's `even_split`). */
  shard(options: ShardOptions): MapDataset<T> {
    const [start, stop] = evenSplit(this.length, options, 'MapDataset.shard');
    return this.slice(start, stop);
  }

  /** The stream over this dataset (skipping filtered elements), optionally computed by worker threads. */
  toIterDataset(options: ToIterOptions = {}): IterDataset<T> {
    return new MapToIterDataset(this, options);
  }

  /** Shorthand for `toIterDataset().iterator()`. */
  iterator(options?: ToIterOptions): DatasetIterator<T> {
    return this.toIterDataset(options).iterator();
  }

  [Symbol.iterator](): DatasetIterator<T> {
    return this.iterator();
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this.iterator()[Symbol.asyncIterator]();
  }

  /** Every element of one pass (filtered ones skipped); for small datasets and tests. */
  toArray(): T[] {
    if (!Number.isFinite(this.length)) throw new RangeError('MapDataset.toArray: the dataset is endless (repeat() without numEpochs)');
    const out: T[] = [];
    for (let i = 0; i < this.length; i++) {
      const v = this.get(i);
      if (v !== undefined) out.push(v);
    }
    return out;
  }

  #seedFor(op: string, seed: number | undefined): number {
    if (seed !== undefined) {
      if (!Number.isSafeInteger(seed) || seed < 0 || seed >= 2 ** 32) throw new RangeError(`${op}: seed must be an integer in [0, 2^32); got ${seed}`);
      return seed;
    }
    if (this.pipelineSeed === undefined) throw new Error(`${op}: needs a seed: pass { seed } or call .seed(n) earlier in the pipeline`);
    return deriveSeed(this.pipelineSeed, this.depth + 1);
  }
}

class SourceMapDataset<T> extends MapDataset<T> {
  readonly length: number;
  readonly #src: RandomAccessDataSource<T> | readonly T[];
  readonly #isArray: boolean;
  constructor(src: RandomAccessDataSource<T> | readonly T[]) {
    super(null);
    const isArr = Array.isArray(src);
    if (!isArr && (typeof src !== 'object' || src === null || typeof (src as RandomAccessDataSource<T>).get !== 'function')) {
      throw new TypeError(`MapDataset.source: expected an array or { length, get(i) }; got ${src === null ? 'null' : typeof src}`);
    }
    const n = src.length;
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`MapDataset.source: length must be a non-negative integer; got ${n}`);
    this.length = n;
    this.#src = src;
    this.#isArray = isArr;
  }
  get(index: number): T {
    const n = this.length;
    if (n === 0) throw new RangeError('MapDataset.get: the source is empty');
    const i = index < n ? index : index % n;
    return this.#isArray ? (this.#src as readonly T[])[i] : (this.#src as RandomAccessDataSource<T>).get(i);
  }
  describe(): string {
    return `source(${describeSource(this.#src)})`;
  }
}

class SeedMapDataset<T> extends MapDataset<T> {
  override readonly pipelineSeed: number;
  readonly length: number;
  constructor(readonly parent: MapDataset<T>, seed: number) {
    super(parent);
    if (!Number.isSafeInteger(seed) || seed < 0 || seed >= 2 ** 32) throw new RangeError(`seed: must be an integer in [0, 2^32); got ${seed}`);
    this.pipelineSeed = seed;
    this.length = parent.length;
  }
  get(index: number): T | undefined {
    return this.parent.get(index);
  }
  describe(): string {
    return `${this.parent.describe()}.seed(${this.pipelineSeed})`;
  }
}

class ShuffleMapDataset<T> extends MapDataset<T> {
  readonly length: number;
  #epoch = -1;
  #perm: IndexShuffle | null = null;
  constructor(readonly parent: MapDataset<T>, readonly shuffleSeed: number) {
    super(parent);
    if (!Number.isFinite(parent.length)) throw new RangeError('shuffle: cannot shuffle an endless dataset; shuffle before repeat()');
    this.length = parent.length;
  }
  get(index: number): T | undefined {
    const n = this.length;
    const epoch = Math.floor(index / n);
    if (epoch !== this.#epoch) {
      this.#perm = new IndexShuffle(n, (this.shuffleSeed + epoch) % 2 ** 32);
      this.#epoch = epoch;
    }
    const j = index - epoch * n;
    return this.parent.get(epoch * n + this.#perm!.apply(j));
  }
  describe(): string {
    return `${this.parent.describe()}.shuffle(${this.shuffleSeed})`;
  }
}

class RepeatMapDataset<T> extends MapDataset<T> {
  readonly length: number;
  constructor(readonly parent: MapDataset<T>, readonly numEpochs: number | undefined) {
    super(parent);
    if (numEpochs !== undefined && (!Number.isSafeInteger(numEpochs) || numEpochs < 1)) {
      throw new RangeError(`repeat: numEpochs must be an integer >= 1 (or omitted for endless); got ${numEpochs}`);
    }
    if (!Number.isFinite(parent.length)) throw new RangeError('repeat: the dataset is already endless');
    if (parent.length === 0) throw new RangeError('repeat: cannot repeat an empty dataset');
    this.length = numEpochs === undefined ? Infinity : parent.length * numEpochs;
  }
  get(index: number): T | undefined {
    return this.parent.get(index);
  }
  describe(): string {
    return `${this.parent.describe()}.repeat(${this.numEpochs ?? ''})`;
  }
}

class MapMapDataset<T, U> extends MapDataset<U> {
  readonly length: number;
  constructor(readonly parent: MapDataset<T>, readonly fn: (x: T, index: number) => U, readonly name: string) {
    super(parent);
    if (typeof fn !== 'function') throw new TypeError(`${name}: expected a function; got ${typeof fn}`);
    this.length = parent.length;
  }
  get(index: number): U | undefined {
    const x = this.parent.get(index);
    return x === undefined ? undefined : this.fn(x, index);
  }
  describe(): string {
    return `${this.parent.describe()}.${this.name}`;
  }
}

class FilterMapDataset<T> extends MapDataset<T> {
  readonly length: number;
  constructor(readonly parent: MapDataset<T>, readonly pred: (x: T) => boolean) {
    super(parent);
    if (typeof pred !== 'function') throw new TypeError(`filter: expected a predicate function; got ${typeof pred}`);
    this.length = parent.length;
  }
  get(index: number): T | undefined {
    const x = this.parent.get(index);
    return x === undefined || !this.pred(x) ? undefined : x;
  }
  describe(): string {
    return `${this.parent.describe()}.filter`;
  }
}

class BatchMapDataset<T, U> extends MapDataset<U> {
  readonly length: number;
  readonly batchSize: number;
  readonly #fn: (xs: T[]) => U;
  constructor(readonly parent: MapDataset<T>, options: { batchSize: number; dropRemainder?: boolean; batchFn?: (xs: T[]) => U }) {
    super(parent);
    const b = options?.batchSize;
    if (!Number.isSafeInteger(b) || b < 1) throw new RangeError(`batch: batchSize must be an integer >= 1; got ${b}`);
    this.batchSize = b;
    const n = parent.length;
    this.length = n === Infinity ? Infinity : options.dropRemainder ? Math.floor(n / b) : Math.ceil(n / b);
    this.#fn = options.batchFn ?? ((xs) => collate(xs) as U);
  }
  get(index: number): U | undefined {
    const b = this.batchSize;
    const n = this.parent.length;
    let start: number;
    let stop: number;
    if (n === Infinity) {
      start = index * b;
      stop = start + b;
    } else {
      // Past the end, batches follow the same layout in the parent's next epoch.
      const epoch = Math.floor(index / this.length);
      start = epoch * n + (index - epoch * this.length) * b;
      stop = Math.min(start + b, epoch * n + n);
    }
    const s = start;
    const xs: T[] = [];
    for (let i = s; i < stop; i++) {
      const x = this.parent.get(i);
      if (x !== undefined) xs.push(x);
    }
    return xs.length === 0 ? undefined : this.#fn(xs);
  }
  describe(): string {
    return `${this.parent.describe()}.batch(${this.batchSize})`;
  }
}

class SliceMapDataset<T> extends MapDataset<T> {
  readonly length: number;
  constructor(readonly parent: MapDataset<T>, readonly start: number, stop: number, readonly step: number) {
    super(parent);
    const n = parent.length;
    if (!Number.isSafeInteger(step) || step < 1) throw new RangeError(`slice: step must be an integer >= 1; got ${step}`);
    if (!Number.isSafeInteger(start) || start < 0) throw new RangeError(`slice: start must be an integer >= 0; got ${start}`);
    if (!(stop === Infinity || (Number.isSafeInteger(stop) && stop >= 0))) throw new RangeError(`slice: stop must be an integer >= 0; got ${stop}`);
    const hi = Math.min(stop, n);
    this.length = hi === Infinity ? Infinity : Math.max(0, Math.ceil((hi - start) / step));
    this.stop = hi;
  }
  readonly stop: number;
  get(index: number): T | undefined {
    const n = this.length;
    if (n === 0) throw new RangeError('MapDataset.get: the slice is empty');
    const pn = this.parent.length;
    if (n === Infinity || pn === Infinity) return this.parent.get(this.start + index * this.step);
    const epoch = Math.floor(index / n);
    return this.parent.get(epoch * pn + this.start + (index - epoch * n) * this.step);
  }
  describe(): string {
    return `${this.parent.describe()}[${this.start}:${this.stop}:${this.step}]`;
  }
}

class MixMapDataset<T> extends MapDataset<T> {
  readonly length: number;
  readonly schedule: MixSchedule;
  constructor(readonly parents: readonly MapDataset<T>[], readonly weights: readonly number[]) {
    super(parents[0] ?? null);
    if (!Array.isArray(parents) || parents.length === 0) throw new RangeError('MapDataset.mix: needs at least one dataset');
    if (weights.length !== parents.length) {
      throw new RangeError(`MapDataset.mix: got ${parents.length} datasets but ${weights.length} weights`);
    }
    this.schedule = new MixSchedule(weights, 'MapDataset.mix');
    this.length = this.schedule.lengthFor(parents.map((p) => p.length));
  }
  get(index: number): T | undefined {
    const s = this.schedule;
    return this.parents[s.component(index)].get(s.indexInComponent(index));
  }
  describe(): string {
    return `mix([${this.parents.map((p) => p.describe()).join(', ')}], [${this.weights.join(', ')}])`;
  }
}
