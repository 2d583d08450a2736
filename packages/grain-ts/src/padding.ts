/**
 * Static shapes without packing: `padToLength` pads (or truncates) each sequence to one length,
 * and `bucketBySequenceLength` groups sequences by length into buckets with fixed boundaries,
 * padding each batch to its bucket's boundary, so every batch has one of a fixed set of
 * shapes. Rows have the same fields as packed rows (`segmentIds` is 1 on real tokens, 0 on
 * padding), so a model consumes any strategy the same way; each iterator reports its padding
 * waste in `stats`.
 *
 * Bucketing state without data: a parent state at or before the oldest element still waiting
 * in a bucket, the number of elements consumed since, and how many wait in each bucket;
 * restoring replays those elements and keeps the last `count` of each bucket. The parent is
 * snapshotted once per emitted batch (an anchor for later saves), never per element: the
 * buckets hold the elements and their serial numbers in plain arrays.
 */
import { collate } from './collate';
import { ElasticIterator, findElastic } from './elastic';
import { DatasetIterator, END, type End, type JsonValue, badState, checkState, describeCall } from './iterator';
import type { BucketOptions, PackedRow, PadOptions, PaddingStats, Sequence } from './datasetTypes';
import { type PaddedDataset, FnIterDataset, IterDataset } from './iterDataset';
import { addRow, emptyStats, featuresOf } from './packing';

/** One sequence (or `{ tokens, ...features }`) as a padded row of `length`. */
export function padToLength(x: Sequence | Record<string, Sequence>, length: number, options: PadOptions = {}): PackedRow {
  if (!Number.isSafeInteger(length) || length < 1) throw new RangeError(`padToLength: length must be an integer >= 1; got ${length}`);
  const f = featuresOf('padToLength', x);
  let n = f.tokens.length;
  if (n > length) {
    if ((options.overflow ?? 'error') !== 'truncate') {
      throw new RangeError(`padToLength: a sequence of length ${n} is longer than ${length}; pass overflow: 'truncate' or use bucketBySequenceLength / pack`);
    }
    n = length;
  }
  const padId = options.padId ?? 0;
  const row: Record<string, Int32Array | number> = {};
  const segmentIds = new Int32Array(length);
  const positions = new Int32Array(length);
  for (let i = 0; i < n; i++) {
    segmentIds[i] = 1;
    positions[i] = i;
  }
  for (const k of Object.keys(f).sort()) {
    const src = f[k];
    if (src.length !== f.tokens.length) throw new RangeError(`padToLength: feature "${k}" has length ${src.length} but "tokens" has ${f.tokens.length}`);
    const d = new Int32Array(length).fill(padId);
    for (let i = 0; i < n; i++) d[i] = src[i];
    row[k] = d;
    if (k !== 'tokens') {
      row[`${k}SegmentIds`] = segmentIds;
      row[`${k}Positions`] = positions;
    }
  }
  row.segmentIds = segmentIds;
  row.positions = positions;
  row.numTokens = n;
  row.numSegments = n > 0 ? 1 : 0;
  return row as PackedRow;
}

class PadIterator extends DatasetIterator<PackedRow> {
  readonly stats = emptyStats();
  constructor(readonly parent: DatasetIterator<unknown>, readonly length: number, readonly options: PadOptions) {
    super();
  }
  override describe(): string {
    return `${this.parent.describe()}.${describeCall('padToLength', { length: this.length, padId: this.options.padId ?? 0, overflow: this.options.overflow ?? 'error' })}`;
  }
  nextOrEnd(): PackedRow | End {
    const x = this.parent.nextOrEnd();
    if (x === END) return END;
    const row = padToLength(x as Sequence, this.length, this.options);
    addRow(this.stats, row.numTokens, this.length);
    return row;
  }
  innerState(): JsonValue {
    return { parent: this.parent.innerState(), stats: { ...this.stats } as unknown as JsonValue };
  }
  setInnerState(state: JsonValue): void {
    const s = checkState('padToLength', state, { parent: 'any', stats: 'object' });
    this.parent.setInnerState(s.parent);
    Object.assign(this.stats, s.stats);
  }
  override close(): void {
    this.parent.close();
  }
}

/** A parent state and the serial number of the next element consumed after it. */
interface Anchor {
  serial: number;
  state: JsonValue;
}

/** Anchors kept at most; beyond that every other one is dropped (replays get longer, never wrong). */
const MAX_ANCHORS = 32;

class BucketIterator extends DatasetIterator<unknown> {
  readonly stats = emptyStats();
  /** The waiting elements of each bucket, and their serial numbers. */
  readonly #buckets: unknown[][];
  readonly #serials: number[][];
  #serial = 0; // elements consumed since the iterator began (or since the restored start)
  /** Parent snapshots in serial order; the first is at or before the oldest waiting element. */
  #anchors: Anchor[] = [];
  #ended = false;
  #flushed = 0; // buckets emitted after the end
  #started = false;

  constructor(readonly parent: DatasetIterator<unknown>, readonly o: BucketOptions) {
    super();
    this.#buckets = o.bucketBoundaries.map(() => []);
    this.#serials = o.bucketBoundaries.map(() => []);
  }

  override describe(): string {
    const o = this.o;
    return `${this.parent.describe()}.${describeCall('bucketBySequenceLength', { boundaries: o.bucketBoundaries, batchSizes: o.bucketBatchSizes, padId: o.padId ?? 0, dropRemainder: o.dropRemainder ?? false, overflow: o.overflow ?? 'error' })}`;
  }

  #clearBuckets(): void {
    for (let j = 0; j < this.#buckets.length; j++) {
      this.#buckets[j] = [];
      this.#serials[j] = [];
    }
  }

  /** The serial of the oldest waiting element (Infinity when none waits). */
  #oldestWaiting(): number {
    let oldest = Infinity;
    for (const s of this.#serials) if (s.length > 0 && s[0] < oldest) oldest = s[0];
    return oldest;
  }

  /** After a batch went out: anchor the parent's position now, drop anchors no longer needed. */
  #reanchor(): void {
    const a = this.#anchors;
    a.push({ serial: this.#serial, state: this.parent.innerState() });
    const oldest = this.#oldestWaiting();
    let drop = 0;
    while (drop + 1 < a.length && a[drop + 1].serial <= oldest) drop++;
    if (drop > 0) a.splice(0, drop);
    if (a.length > MAX_ANCHORS) this.#anchors = a.filter((_, i) => i % 2 === 0 || i === a.length - 1);
  }

  #bucketOf(n: number): number {
    const b = this.o.bucketBoundaries;
    for (let j = 0; j < b.length; j++) if (n <= b[j]) return j;
    return -1;
  }

  #emit(j: number): unknown {
    const L = this.o.bucketBoundaries[j];
    const rows = this.#buckets[j].map((x) => padToLength(x as Sequence, L, { padId: this.o.padId, overflow: 'truncate' }));
    this.#buckets[j] = [];
    this.#serials[j] = [];
    for (const r of rows) addRow(this.stats, r.numTokens, L);
    this.#reanchor();
    return collate(rows);
  }

  /** Routes one element; returns its bucket, or -1 when it is dropped. */
  #route(x: unknown): number {
    // A bare sequence is measured as is; a dict is checked by featuresOf (which allocates nothing for it).
    const n = x instanceof Int32Array || Array.isArray(x) ? x.length : featuresOf('bucketBySequenceLength', x).tokens.length;
    let j = this.#bucketOf(n);
    if (j < 0) {
      const ov = this.o.overflow ?? 'error';
      if (ov === 'drop') return -1;
      if (ov === 'error') {
        throw new RangeError(`bucketBySequenceLength: a sequence of length ${n} is longer than the last boundary ${this.o.bucketBoundaries.at(-1)}; add a boundary or pass overflow: 'truncate' or 'drop'`);
      }
      j = this.o.bucketBoundaries.length - 1;
    }
    this.#buckets[j].push(x);
    this.#serials[j].push(this.#serial);
    return j;
  }

  nextOrEnd(): unknown | End {
    if (!this.#started) {
      this.#started = true;
      this.#anchors = [{ serial: 0, state: this.parent.innerState() }];
    }
    for (;;) {
      if (this.#ended) {
        if (this.o.dropRemainder) return END;
        while (this.#flushed < this.#buckets.length) {
          const j = this.#flushed++;
          if (this.#buckets[j].length > 0) return this.#emit(j);
        }
        return END;
      }
      const x = this.parent.nextOrEnd();
      if (x === END) {
        this.#ended = true;
        continue;
      }
      const j = this.#route(x);
      this.#serial++;
      if (j >= 0 && this.#buckets[j].length === this.o.bucketBatchSizes[j]) return this.#emit(j);
    }
  }

  innerState(): JsonValue {
    if (!this.#started) return { start: this.parent.innerState(), consumed: 0, counts: this.#buckets.map(() => 0), ended: false, flushed: 0, stats: { ...this.stats } as unknown as JsonValue };
    // The last anchor at or before the oldest waiting element starts the replay.
    const oldest = this.#oldestWaiting();
    let anchor: Anchor | null = null;
    if (oldest !== Infinity) {
      // #reanchor keeps the first anchor at or before the oldest waiting element.
      anchor = this.#anchors[0];
      for (const a of this.#anchors) if (a.serial <= oldest) anchor = a;
    }
    const start = anchor ? anchor.state : this.parent.innerState();
    const consumed = anchor ? this.#serial - anchor.serial : 0;
    return { start, consumed, counts: this.#buckets.map((b) => b.length), ended: this.#ended, flushed: this.#flushed, stats: { ...this.stats } as unknown as JsonValue };
  }

  setInnerState(state: JsonValue): void {
    if (Array.isArray(state)) {
      // Every old shard's state under a new shard count (elastic parent): each old shard rewinds
      // to its oldest waiting element; elements it consumed since then that were already
      // emitted (not among the waiting ones) are marked done, so each is read exactly once.
      const done = this.#emittedIndices(state);
      this.parent.setInnerState(done === null ? state : ({ reshard: state, done } as unknown as JsonValue));
      this.#started = true;
      this.#clearBuckets();
      this.#serial = 0;
      this.#anchors = [{ serial: 0, state: this.parent.innerState() }];
      this.#ended = false;
      this.#flushed = 0;
      return;
    }
    const s = checkState('bucketBySequenceLength', state, { start: 'any', consumed: 'number', counts: 'object', ended: 'boolean', flushed: 'number' });
    const counts = s.counts as number[];
    if (!Array.isArray(counts) || counts.length !== this.#buckets.length) badState('bucketBySequenceLength', `counts must list ${this.#buckets.length} buckets`, state);
    this.parent.setInnerState(s.start);
    this.#started = true;
    this.#anchors = [{ serial: 0, state: s.start }];
    this.#clearBuckets();
    this.#serial = 0;
    for (let i = 0; i < s.consumed; i++) {
      const x = this.parent.nextOrEnd();
      if (x === END) badState('bucketBySequenceLength', 'the stream ended while replaying (the data or pipeline changed?)', state);
      this.#route(x);
      this.#serial++;
    }
    // Keep only the elements that were waiting when the state was saved: the last counts[j] of each bucket.
    for (let j = 0; j < this.#buckets.length; j++) {
      const b = this.#buckets[j];
      if (b.length < counts[j]) badState('bucketBySequenceLength', `replay gave ${b.length} elements for bucket ${j}, expected ${counts[j]}`, state);
      this.#buckets[j] = b.slice(b.length - counts[j]);
      this.#serials[j] = this.#serials[j].slice(b.length - counts[j]);
    }
    this.#ended = s.ended;
    this.#flushed = s.flushed;
    if (s.stats && typeof s.stats === 'object') Object.assign(this.stats, s.stats as PaddingStats);
  }

  #emittedIndices(olds: JsonValue[]): number[] | null {
    if (!(this.parent.root() instanceof ElasticIterator)) return null;
    const done: number[] = [];
    for (const old of olds) {
      const s = old as { start?: JsonValue; consumed?: number; counts?: number[] };
      if (!s || typeof s !== 'object' || !(s.consumed! > 0) || !Array.isArray(s.counts)) continue;
      const start = JSON.parse(JSON.stringify(s.start));
      const e = findElastic(start);
      if (!e) return null;
      e.impersonate = true;
      this.parent.setInnerState(start);
      const routed: number[][] = this.#buckets.map(() => []);
      for (let i = 0; i < s.consumed!; i++) {
        const x = this.parent.nextOrEnd();
        if (x === END) badState('bucketBySequenceLength', 'the stream ended while replaying an old shard', old);
        const g = this.parent.lastIndex();
        const j = this.#route(x);
        if (j >= 0) routed[j].push(g);
        else done.push(g);
      }
      routed.forEach((r, j) => done.push(...r.slice(0, Math.max(0, r.length - s.counts![j]))));
      this.#clearBuckets();
    }
    return done;
  }

  override close(): void {
    this.parent.close();
  }
}

function checkBucketOptions(o: BucketOptions): void {
  const op = 'bucketBySequenceLength';
  if (!o || !Array.isArray(o.bucketBoundaries) || !Array.isArray(o.bucketBatchSizes)) throw new TypeError(`${op}: expected { bucketBoundaries: number[], bucketBatchSizes: number[], ... }`);
  const b = o.bucketBoundaries;
  if (b.length === 0) throw new RangeError(`${op}: bucketBoundaries must not be empty`);
  b.forEach((x, i) => {
    if (!Number.isSafeInteger(x) || x < 1 || (i > 0 && x <= b[i - 1])) throw new RangeError(`${op}: bucketBoundaries must be strictly increasing integers >= 1; got [${b.join(', ')}]`);
  });
  if (o.bucketBatchSizes.length !== b.length) throw new RangeError(`${op}: got ${b.length} boundaries but ${o.bucketBatchSizes.length} batch sizes; give one batch size per bucket`);
  o.bucketBatchSizes.forEach((x) => {
    if (!Number.isSafeInteger(x) || x < 1) throw new RangeError(`${op}: bucketBatchSizes must be integers >= 1; got [${o.bucketBatchSizes.join(', ')}]`);
  });
}

IterDataset.prototype.padToLength = function (this: IterDataset<unknown>, length: number, options: PadOptions = {}) {
  if (!Number.isSafeInteger(length) || length < 1) throw new RangeError(`padToLength: length must be an integer >= 1; got ${length}`);
  return new FnIterDataset(() => new PadIterator(this.iterator(), length, options)) as never;
};

IterDataset.prototype.bucketBySequenceLength = function (this: IterDataset<unknown>, options: BucketOptions) {
  checkBucketOptions(options);
  return new FnIterDataset(() => new BucketIterator(this.iterator(), options)) as never;
};
