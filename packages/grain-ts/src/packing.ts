/**
 * First-fit packing of variable-length sequences into fixed-length rows (Grain's
 * `FirstFitPackIterDataset`), so every batch has one static shape with little padding.
 * `numBins` rows are filled in arrival order, each sequence going to the first row with room;
 * when a sequence fits nowhere, all rows are emitted and it starts a fresh set. A sequence is
 * never split across rows (unless `overflow: 'split'` asks for longer ones to be cut into
 * pieces first). Each row carries `segmentIds` (1, 2, ... per sequence, 0 for padding) and
 * `positions` (0.. within each sequence), so attention can be masked per segment.
 *
 * State without data: a parent state at or before the first element of the rows not yet fully
 * emitted, the number of elements from there to that first element (`skip`, already emitted),
 * and how many elements and rows have passed since. Restoring replays those few elements
 * through the same deterministic packer, which rebuilds the partly filled rows exactly. The
 * parent's state is snapshotted once per set of rows (when the last row of a set goes out),
 * never per element: `nextOrEnd()` only counts elements.
 */
import { IterDataset, FnIterDataset } from './iterDataset';
import { ElasticIterator, findElastic } from './elastic';
import { DatasetIterator, END, type End, type JsonValue, badState, checkState, describeCall } from './iterator';
import type { PackOptions, PackedRow, PaddingStats, Sequence } from './datasetTypes';

export function emptyStats(): PaddingStats {
  return { rows: 0, realTokens: 0, totalTokens: 0, waste: 0 };
}

export function addRow(stats: PaddingStats, real: number, total: number): void {
  stats.rows++;
  stats.realTokens += real;
  stats.totalTokens += total;
  stats.waste = stats.totalTokens === 0 ? 0 : 1 - stats.realTokens / stats.totalTokens;
}

/** Element -> named int32 features (a bare sequence is the feature `tokens`). */
export function featuresOf(op: string, x: unknown): Record<string, Sequence> {
  if (x instanceof Int32Array || Array.isArray(x)) return { tokens: x as Sequence };
  if (x && typeof x === 'object' && !ArrayBuffer.isView(x)) {
    const r = x as Record<string, unknown>;
    // for..in rather than Object.entries: this runs per element in the packers' hot path.
    for (const k in r) {
      const v = r[k];
      if (!(v instanceof Int32Array || Array.isArray(v))) throw new TypeError(`${op}: feature "${k}" must be an Int32Array or number[]; got ${v?.constructor?.name ?? typeof v}`);
    }
    if (!('tokens' in r)) throw new TypeError(`${op}: a dict element needs a "tokens" feature (the one lengths are measured on); got keys ${JSON.stringify(Object.keys(r))}`);
    return r as Record<string, Sequence>;
  }
  throw new TypeError(`${op}: elements must be Int32Array, number[] or { tokens, ...features }; got ${x === null ? 'null' : x?.constructor?.name ?? typeof x}`);
}

function seqLength(f: Record<string, Sequence>, op: string): number {
  const n = f.tokens.length;
  for (const k in f) {
    const v = f[k];
    if (v.length !== n) throw new RangeError(`${op}: feature "${k}" has length ${v.length} but "tokens" has ${n}; features are packed with one layout and must have equal lengths`);
  }
  return n;
}

class Bin {
  used = 0;
  segments = 0;
  /** Ordinals (within the current replay) of the elements in this bin; only tracked on request. */
  members: number[] | null = null;
  readonly data: Record<string, Int32Array>;
  readonly segmentIds: Int32Array;
  readonly positions: Int32Array;
  constructor(readonly length: number, names: string[], padId: number) {
    this.data = {};
    for (const n of names) this.data[n] = new Int32Array(length).fill(padId);
    this.segmentIds = new Int32Array(length);
    this.positions = new Int32Array(length);
  }
  add(f: Record<string, Sequence>, n: number): void {
    const at = this.used;
    for (const k in this.data) {
      const src = f[k];
      if (src === undefined) throw new TypeError(`pack: element lacks feature "${k}" that earlier elements had`);
      const dst = this.data[k];
      for (let i = 0; i < n; i++) dst[at + i] = src[i];
    }
    const seg = ++this.segments;
    for (let i = 0; i < n; i++) {
      this.segmentIds[at + i] = seg;
      this.positions[at + i] = i;
    }
    this.used += n;
  }
  row(): PackedRow {
    const r: Record<string, Int32Array | number> = {};
    for (const k in this.data) {
      r[k] = this.data[k];
      if (k !== 'tokens') {
        r[`${k}SegmentIds`] = this.segmentIds;
        r[`${k}Positions`] = this.positions;
      }
    }
    r.segmentIds = this.segmentIds;
    r.positions = this.positions;
    r.numTokens = this.used;
    r.numSegments = this.segments;
    return r as PackedRow;
  }
}

class PackIterator extends DatasetIterator<PackedRow> {
  readonly stats = emptyStats();
  readonly #L: number;
  readonly #numBins: number;
  readonly #maxSeg: number;
  readonly #overflow: 'error' | 'truncate';
  readonly #padId: number;
  #names: string[] | null = null;
  #bins: Bin[] = [];
  #queue: PackedRow[] = [];
  #qPos = 0;
  #ended = false;
  // Checkpoint bookkeeping: positions are element counts from a parent snapshot.
  #start: JsonValue = null; // parent state at or before the oldest unemitted element
  #skip = 0; // elements from #start to the oldest unemitted element (all already emitted)
  #flushed = 0; // elements after those that went into the queued rows
  #inGroup = 0; // elements in the current (unflushed) bins
  #anchor: JsonValue = null; // parent snapshot taken when the last set drained
  #sinceAnchor = 0; // elements pulled since #anchor
  #started = false;

  constructor(readonly parent: DatasetIterator<unknown>, o: PackOptions, readonly split = false) {
    super();
    this.#L = o.length;
    this.#numBins = o.numBins ?? 16;
    this.#maxSeg = o.maxSequencesPerBin ?? Infinity;
    this.#overflow = o.overflow === 'truncate' ? 'truncate' : 'error';
    this.#padId = o.padId ?? 0;
  }

  override describe(): string {
    const maxSeg = Number.isFinite(this.#maxSeg) ? this.#maxSeg : undefined;
    return `${this.parent.describe()}.${describeCall('pack', { length: this.#L, numBins: this.#numBins, maxSequencesPerBin: maxSeg, overflow: this.#overflow, padId: this.#padId })}`;
  }

  /** The pulled element's features (a reused wrapper for a bare sequence: bins copy at once). */
  #pf: Record<string, Sequence> = { tokens: [] };
  readonly #scratch: Record<string, Sequence> = { tokens: [] };

  /** Pulls one element into `#pf`; returns its (possibly truncated) length, or -1 at the end. */
  #pull(): number {
    const x = this.parent.nextOrEnd();
    if (x === END) return -1;
    let n: number;
    if (x instanceof Int32Array || Array.isArray(x)) {
      this.#scratch.tokens = x as Sequence;
      this.#pf = this.#scratch;
      n = (x as Sequence).length;
    } else {
      this.#pf = featuresOf('pack', x);
      n = seqLength(this.#pf, 'pack');
    }
    if (n > this.#L) {
      if (this.#overflow === 'error') {
        throw new RangeError(`pack: a sequence of length ${n} does not fit rows of length ${this.#L}; pass overflow: 'truncate' or 'split', or filter long sequences out`);
      }
      n = this.#L;
    }
    return n;
  }

  /** Puts an element into the first bin with room; false when none has room. */
  #place(f: Record<string, Sequence>, n: number, member = -1): boolean {
    if (this.#names === null) this.#names = Object.keys(f).sort();
    for (const b of this.#bins) {
      if (b.used + n <= this.#L && b.segments < this.#maxSeg) {
        b.add(f, n);
        if (member >= 0) (b.members ??= []).push(member);
        return true;
      }
    }
    if (this.#bins.length < this.#numBins) {
      const b = new Bin(this.#L, this.#names, this.#padId);
      this.#bins.push(b);
      b.add(f, n);
      if (member >= 0) (b.members ??= []).push(member);
      return true;
    }
    return false;
  }

  /**
   * Global indices of the elements in the rows an old shard had already emitted from a partly
   * emitted set: replays that shard's set through this chain, impersonating the old shard in
   * the elastic iterator underneath. null when there is no elastic root (or pieces are split).
   */
  #emittedIndices(olds: JsonValue[]): number[] | null {
    if (!(this.parent.root() instanceof ElasticIterator) || this.split) return null;
    const done: number[] = [];
    for (const old of olds) {
      const s = old as { start?: JsonValue; skip?: number; flushed?: number; emitted?: number };
      if (!s || typeof s !== 'object') continue;
      const skip = s.skip ?? 0;
      const rows = s.flushed! > 0 && s.emitted! > 0;
      if (!(skip > 0) && !rows) continue;
      const start = JSON.parse(JSON.stringify(s.start));
      const e = findElastic(start);
      if (!e) return null;
      e.impersonate = true;
      this.parent.setInnerState(start);
      // The skipped elements went out in rows emitted before the save.
      for (let i = 0; i < skip; i++) {
        if (this.#pull() < 0) badState('pack', 'replaying an old shard ended early (the data or pipeline changed?)', old);
        done.push(this.parent.lastIndex());
      }
      if (!rows) continue;
      this.#bins = [];
      const indices: number[] = [];
      for (let i = 0; i < s.flushed!; i++) {
        const n = this.#pull();
        if (n < 0 || !this.#place(this.#pf, n, i)) badState('pack', 'replaying an old shard gave a different packing (the data or pipeline changed?)', old);
        indices.push(this.parent.lastIndex());
      }
      this.#bins.slice(0, s.emitted).forEach((b) => {
        for (const m of b.members ?? []) done.push(indices[m]);
      });
      this.#bins = [];
    }
    return done;
  }

  #flush(): void {
    this.#queue = this.#bins.map((b) => b.row());
    this.#qPos = 0;
    this.#bins = [];
  }

  nextOrEnd(): PackedRow | End {
    if (!this.#started) {
      this.#started = true;
      this.#start = this.#anchor = this.parent.innerState();
      this.#skip = this.#sinceAnchor = 0;
    }
    for (;;) {
      if (this.#qPos < this.#queue.length) {
        const row = this.#queue[this.#qPos++];
        addRow(this.stats, row.numTokens, this.#L);
        if (this.#qPos === this.#queue.length) this.#drained();
        return row;
      }
      if (this.#ended) return END;
      const n = this.#pull();
      if (n < 0) {
        this.#ended = true;
        if (this.#bins.length === 0) return END;
        this.#flushed = this.#inGroup;
        this.#inGroup = 0;
        this.#flush();
        continue;
      }
      this.#sinceAnchor++;
      if (this.#place(this.#pf, n)) {
        this.#inGroup++;
        continue;
      }
      // It fits nowhere: emit every bin, and it opens the next set.
      this.#flushed = this.#inGroup;
      this.#flush();
      this.#inGroup = 1;
      this.#place(this.#pf, n);
    }
  }

  /**
   * Every row of the flushed set is out: the oldest unemitted element is now the current
   * group's first, #sinceAnchor - #inGroup elements after the anchor. Then a fresh anchor (the
   * parent's position now, after the current group's elements) serves the next set, so the
   * replay on restore stays within about two sets of elements.
   */
  #drained(): void {
    this.#start = this.#anchor;
    this.#skip = this.#sinceAnchor - this.#inGroup;
    this.#flushed = 0;
    this.#queue = [];
    this.#qPos = 0;
    this.#anchor = this.parent.innerState();
    this.#sinceAnchor = 0;
  }

  innerState(): JsonValue {
    if (!this.#started) return { start: this.parent.innerState(), skip: 0, flushed: 0, emitted: 0, inGroup: 0, ended: false, stats: { ...this.stats } as unknown as JsonValue };
    return { start: this.#start, skip: this.#skip, flushed: this.#flushed, emitted: this.#qPos, inGroup: this.#inGroup, ended: this.#ended, stats: { ...this.stats } as unknown as JsonValue };
  }

  setInnerState(state: JsonValue): void {
    if (Array.isArray(state)) {
      // Every old shard's state, for an elastic parent under a new shard count: each old shard
      // rewinds to where its unemitted rows began and the elements of rows it had already
      // emitted are marked consumed, so every sequence is read exactly once; packing restarts
      // with empty bins.
      const done = this.#emittedIndices(state);
      this.parent.setInnerState(done === null ? state : ({ reshard: state, done } as unknown as JsonValue));
      this.#started = true;
      this.#bins = [];
      this.#queue = [];
      this.#qPos = 0;
      this.#ended = false;
      this.#start = this.#anchor = this.parent.innerState();
      this.#skip = this.#sinceAnchor = this.#flushed = this.#inGroup = 0;
      return;
    }
    const s = checkState('pack', state, { start: 'any', flushed: 'number', emitted: 'number', inGroup: 'number', ended: 'boolean' });
    // `skip` is absent from states saved before it existed (their start was the element itself).
    const skip = s.skip ?? 0;
    if (!Number.isSafeInteger(skip) || skip < 0) badState('pack', 'state field "skip" must be an integer >= 0', state);
    this.parent.setInnerState(s.start);
    this.#started = true;
    this.#bins = [];
    this.#queue = [];
    this.#qPos = 0;
    this.#ended = false;
    this.#start = this.#anchor = s.start;
    this.#skip = skip;
    this.#flushed = 0;
    this.#inGroup = 0;
    for (let i = 0; i < skip; i++) {
      if (this.#pull() < 0) badState('pack', 'the stream ended while replaying (the data or pipeline changed?)', state);
    }
    if (s.flushed > 0) {
      for (let i = 0; i < s.flushed; i++) {
        const n = this.#pull();
        if (n < 0 || !this.#place(this.#pf, n)) badState('pack', 'replaying the saved rows gave a different packing (the data or pipeline changed?)', state);
      }
      this.#flush();
      if (s.emitted > this.#queue.length) badState('pack', `emitted ${s.emitted} rows of a set of ${this.#queue.length}`, state);
      this.#qPos = s.emitted;
      this.#flushed = s.flushed;
    }
    for (let i = 0; i < s.inGroup; i++) {
      const n = this.#pull();
      if (n < 0 || !this.#place(this.#pf, n)) badState('pack', 'replaying the saved rows gave a different packing (the data or pipeline changed?)', state);
    }
    this.#inGroup = s.inGroup;
    this.#sinceAnchor = skip + s.flushed + s.inGroup;
    this.#ended = s.ended;
    const st = s.stats as PaddingStats | undefined;
    if (st && typeof st === 'object') Object.assign(this.stats, st);
  }

  override close(): void {
    this.parent.close();
  }
}

/**
 * Cuts sequences longer than `length` into pieces of at most `length` (the 'split' overflow).
 * Mid-sequence its state is a parent state before the sequence being cut plus the number of
 * elements to skip from there (`elems`) and the offset into it (`skip`). The parent is
 * snapshotted only by `getState()` (between sequences, which also moves the anchor up), never
 * per element.
 */
class SplitIterator extends DatasetIterator<unknown> {
  #pending: Record<string, Sequence> | null = null;
  #offset = 0;
  #anchor: JsonValue = null; // a parent state between sequences
  #sinceAnchor = 0; // elements pulled since #anchor
  #started = false;
  constructor(readonly parent: DatasetIterator<unknown>, readonly length: number) {
    super();
  }
  override describe(): string {
    return `${this.parent.describe()}.split(length=${this.length})`;
  }
  nextOrEnd(): unknown {
    if (!this.#started) {
      this.#started = true;
      this.#anchor = this.parent.innerState();
    }
    if (this.#pending === null) {
      const x = this.parent.nextOrEnd();
      if (x === END) return END;
      this.#sinceAnchor++;
      const n = x instanceof Int32Array || Array.isArray(x) ? x.length : seqLength(featuresOf('pack', x), 'pack');
      if (n <= this.length) return x;
      this.#pending = featuresOf('pack', x);
      this.#offset = 0;
    }
    const f = this.#pending;
    const n = f.tokens.length;
    const end = Math.min(n, this.#offset + this.length);
    const piece: Record<string, Int32Array> = {};
    for (const k in f) piece[k] = Int32Array.from(f[k].slice(this.#offset, end));
    this.#offset = end;
    if (end >= n) this.#pending = null;
    return piece;
  }
  innerState(): JsonValue {
    if (this.#pending === null) {
      const here = this.parent.innerState();
      if (this.#started) {
        this.#anchor = here;
        this.#sinceAnchor = 0;
      }
      return { parent: here, elems: 0, skip: 0 };
    }
    return { parent: this.#anchor, elems: this.#sinceAnchor - 1, skip: this.#offset };
  }
  setInnerState(state: JsonValue): void {
    const s = checkState('pack(split)', state, { parent: 'any', skip: 'number' });
    const elems = s.elems ?? 0;
    if (!Number.isSafeInteger(elems) || elems < 0) badState('pack(split)', 'state field "elems" must be an integer >= 0', state);
    this.parent.setInnerState(s.parent);
    this.#started = true;
    this.#anchor = s.parent;
    this.#sinceAnchor = 0;
    this.#pending = null;
    for (let i = 0; i < elems; i++) {
      if (this.parent.nextOrEnd() === END) badState('pack(split)', 'the stream ended while replaying (the data or pipeline changed?)', state);
      this.#sinceAnchor++;
    }
    if (s.skip > 0) {
      const x = this.parent.nextOrEnd();
      if (x === END) badState('pack(split)', 'the saved sequence is missing', state);
      this.#sinceAnchor++;
      this.#pending = featuresOf('pack', x);
      this.#offset = s.skip;
    }
  }
  override close(): void {
    this.parent.close();
  }
}

export function checkPackOptions(o: PackOptions): void {
  if (!o || typeof o !== 'object') throw new TypeError('pack: expected { length, numBins?, maxSequencesPerBin?, overflow?, padId? }');
  if (!Number.isSafeInteger(o.length) || o.length < 1) throw new RangeError(`pack: length must be an integer >= 1; got ${o.length}`);
  if (o.numBins !== undefined && (!Number.isSafeInteger(o.numBins) || o.numBins < 1)) throw new RangeError(`pack: numBins must be an integer >= 1; got ${o.numBins}`);
  if (o.maxSequencesPerBin !== undefined && (!Number.isSafeInteger(o.maxSequencesPerBin) || o.maxSequencesPerBin < 1)) {
    throw new RangeError(`pack: maxSequencesPerBin must be an integer >= 1; got ${o.maxSequencesPerBin}`);
  }
  if (o.overflow !== undefined && !['error', 'truncate', 'split'].includes(o.overflow)) throw new RangeError(`pack: overflow must be 'error', 'truncate' or 'split'; got ${JSON.stringify(o.overflow)}`);
}

IterDataset.prototype.pack = function pack(this: IterDataset<unknown>, options: PackOptions) {
  checkPackOptions(options);
  return new FnIterDataset(() => {
    const src = options.overflow === 'split' ? new SplitIterator(this.iterator(), options.length) : this.iterator();
    return new PackIterator(src, options, options.overflow === 'split');
  }) as never;
};
