// Checkpoint laws: a fresh pipeline restored from getState() at any point continues with exactly
// the elements the uninterrupted pipeline would have produced (shuffle, filter, randomMap,
// packing, bucketing, mixing, batching, DataLoader), and elastic resume reads every record once.
import fc from 'fast-check';
import { isCheckpointable } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { Batch, DataLoader, type DatasetIterator, ElasticDataset, IndexSampler, IterDataset, MapDataset } from '../src/index';

/** Comparable view of an element (core Arrays -> nested lists, typed arrays -> lists). */
function plain(x: unknown): unknown {
  if (x && typeof x === 'object' && 'toArray' in (x as object) && 'dtype' in (x as object)) return (x as { toArray(): unknown }).toArray();
  if (ArrayBuffer.isView(x)) return Array.from(x as Int32Array);
  if (Array.isArray(x)) return x.map(plain);
  if (x && typeof x === 'object') return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, plain(v)]));
  return x;
}

function drain<T>(it: DatasetIterator<T>, max = 10_000): unknown[] {
  const out: unknown[] = [];
  for (let v = it.next(); !v.done && out.length < max; v = it.next()) out.push(plain(v.value));
  return out;
}

/** Reads k elements, saves (through JSON), restores into a fresh iterator, checks the rest. */
function checkResume<T>(make: () => DatasetIterator<T>, k: number): void {
  const full = drain(make());
  const a = make();
  const head: unknown[] = [];
  for (let i = 0; i < k; i++) {
    const v = a.next();
    if (v.done) break;
    head.push(plain(v.value));
  }
  expect(isCheckpointable(a)).toBe(true);
  const json = JSON.stringify(a.getState());
  expect(json.length).toBeLessThan(1000); // positions and counters only, never elements
  const state = JSON.parse(json);
  const b = make();
  b.setState(state);
  expect([...head, ...drain(b)]).toEqual(full);
}

const seqs = (n: number, seed: number) =>
  MapDataset.range(n)
    .shuffle({ seed })
    .randomMap((x, rng) => Int32Array.from({ length: 1 + rng.integers(0, 12) }, (_, i) => x * 100 + i), { seed: seed + 1 });

describe('resume equals the uninterrupted stream', () => {
  it('shuffle + filter + randomMap + batch across epochs', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 }), fc.integer({ min: 0, max: 60 }), (seed, k) => {
        const make = () =>
          MapDataset.range(23)
            .shuffle({ seed })
            .repeat(3)
            .randomMap((x, rng) => x + rng.random(), { seed: 1 })
            .filter((x) => Math.floor(x) % 4 !== 0)
            .toIterDataset()
            .batch({ batchSize: 4 })
            .iterator();
        checkResume(make, k);
      }),
      { numRuns: 25 },
    );
  });

  it('first-fit packing', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 40 }), fc.integer({ min: 1, max: 5 }), (seed, k, bins) => {
        checkResume(() => seqs(60, seed).toIterDataset().pack({ length: 16, numBins: bins }).iterator(), k);
        checkResume(() => seqs(60, seed).toIterDataset().pack({ length: 16, numBins: bins }).batch({ batchSize: 3 }).iterator(), Math.floor(k / 3));
      }),
      { numRuns: 25 },
    );
  });

  it('packing with overflow: split, and bucketing', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 40 }), (seed, k) => {
        checkResume(() => seqs(40, seed).toIterDataset().pack({ length: 5, numBins: 2, overflow: 'split' }).iterator(), k);
        checkResume(
          () => seqs(60, seed).toIterDataset().bucketBySequenceLength({ bucketBoundaries: [4, 8, 12], bucketBatchSizes: [3, 2, 2] }).iterator(),
          Math.floor(k / 2),
        );
      }),
      { numRuns: 25 },
    );
  });

  it('mixing and randomMap on streams', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 60 }), (k) => {
        const make = () =>
          IterDataset.mix(
            [MapDataset.range(30).toIterDataset().filter((x) => x % 3 !== 0), MapDataset.range(40).map((x) => -x).toIterDataset()],
            [2, 1],
          )
            .randomMap((x, rng) => [x, rng.integers(0, 1000)], { seed: 4 })
            .iterator();
        checkResume(make, k);
      }),
      { numRuns: 20 },
    );
  });

  it('a stream from a generator', () => {
    function* gen() {
      for (let i = 0; i < 30; i++) yield Int32Array.from({ length: 1 + (i % 7) }, () => i);
    }
    for (const k of [0, 3, 9]) checkResume(() => IterDataset.fromIterable(gen).pack({ length: 8, numBins: 2 }).iterator(), k);
    const it = IterDataset.fromIterable(gen).iterator();
    expect(() => it.setState({ pipeline: it.describe(), state: { count: 31 } })).toThrow(/the iterable ended after 30 elements but the state says 31/);
  });

  it('DataLoader with a shuffled multi-epoch sampler, filter and batch', () => {
    const source = MapDataset.range(50).map((x) => ({ x }));
    const make = () =>
      new DataLoader({
        source: { length: source.length, get: (i: number) => source.get(i)! },
        sampler: new IndexSampler({ numRecords: 50, shuffle: true, seed: 3, numEpochs: 2 }),
        operations: [{ randomMap: (e: { x: number }, rng: any) => ({ x: e.x, r: rng.integers(0, 9) }) }, { filter: (e: { x: number }) => e.x % 5 !== 0 }, new Batch({ batchSize: 4 })],
      }).iterator();
    for (const k of [0, 1, 7, 15, 22]) checkResume(make, k);
    const it = make();
    it.next();
    const st = it.getState() as Record<string, unknown>;
    expect(JSON.stringify(st).length).toBeLessThan(300);
    const other = new DataLoader({ source: { length: 50, get: (i: number) => ({ x: i }) }, sampler: new IndexSampler({ numRecords: 50, shuffle: true, seed: 4 }) }).iterator();
    expect(() => other.setState(st as never)).toThrow(/DataLoader.setState: the state was saved by a different pipeline; first difference: saved "sampler=IndexSampler\([^"]*numEpochs=2, seed=3\)" vs this "sampler=IndexSampler\([^"]*numEpochs=1, seed=4\)"[^]*saved: DataLoader.*seed=3[^]*this: {2}DataLoader.*seed=4/);
  });

  it('resuming twice (save, restore, read on, save again, restore) equals the uninterrupted stream', () => {
    const makers: [string, (seed: number) => DatasetIterator<unknown>][] = [
      ['pack', (seed) => seqs(70, seed).toIterDataset().pack({ length: 16, numBins: 2 }).iterator()],
      ['pack split', (seed) => seqs(50, seed).toIterDataset().pack({ length: 5, numBins: 2, overflow: 'split' }).iterator()],
      ['bucket', (seed) => seqs(70, seed).toIterDataset().bucketBySequenceLength({ bucketBoundaries: [4, 8, 12], bucketBatchSizes: [3, 2, 2] }).iterator()],
    ];
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 25 }), fc.integer({ min: 0, max: 25 }), fc.constantFrom(...makers), (seed, k1, k2, [, make]) => {
        const full = drain(make(seed));
        const a = make(seed);
        const got = a.take(k1).map(plain);
        const b = make(seed);
        b.setState(JSON.parse(JSON.stringify(a.getState())));
        got.push(...b.take(k2).map(plain));
        const c = make(seed);
        c.setState(JSON.parse(JSON.stringify(b.getState())));
        expect([...got, ...drain(c)]).toEqual(full);
      }),
      { numRuns: 40 },
    );
  });

  it('packing and bucketing replay a bounded number of elements however long the stream', () => {
    // Packing: at most the current set, the one being emitted and the elements between them.
    const it = seqs(400, 5).toIterDataset().pack({ length: 16, numBins: 3 }).iterator();
    let maxReplay = 0;
    for (let r = it.next(); !r.done; r = it.next()) {
      const s = it.getState().state as { skip: number; flushed: number; inGroup: number };
      maxReplay = Math.max(maxReplay, s.skip + s.flushed + s.inGroup);
    }
    expect(maxReplay).toBeGreaterThan(0);
    expect(maxReplay).toBeLessThanOrEqual(2 * 3 * 16 + 1);
    // Bucketing with a rare bucket: the replay spans the oldest waiting element's wait, not the stream.
    const lengths = MapDataset.range(2000).map((i) => new Int32Array(i % 50 === 0 ? 10 : 2).fill(i));
    const bt = lengths.toIterDataset().bucketBySequenceLength({ bucketBoundaries: [4, 12], bucketBatchSizes: [2, 3] }).iterator();
    let maxConsumed = 0;
    for (let r = bt.next(); !r.done; r = bt.next()) {
      const st = bt.getState().state as { consumed: number };
      expect(JSON.stringify(st).length).toBeLessThan(300);
      maxConsumed = Math.max(maxConsumed, st.consumed);
    }
    expect(maxConsumed).toBeGreaterThanOrEqual(90);
    expect(maxConsumed).toBeLessThanOrEqual(3 * 50 + 2);
  });

  it('restores pack states saved before `skip` / `elems` existed (start at the oldest unemitted element)', () => {
    const make = () => seqs(40, 3).toIterDataset().pack({ length: 5, numBins: 3, overflow: 'split' }).iterator();
    const full = drain(make());
    const a = make();
    const head = a.take(1).map(plain);
    const saved = JSON.parse(JSON.stringify(a.getState()));
    const st = saved.state;
    expect(st.skip).toBe(0);
    expect(st.start.elems).toBe(0);
    delete st.skip;
    delete st.start.elems;
    const b = make();
    b.setState(saved);
    expect([...head, ...drain(b)]).toEqual(full);
    expect(() => make().setState({ ...saved, state: { ...st, skip: -1 } })).toThrow(/pack.setState: state field "skip" must be an integer >= 0/);
  });

  it('rejects a state from a different pipeline with a clear error', () => {
    const it = MapDataset.range(5).toIterDataset().pack({ length: 4 }).iterator();
    expect(() => it.setState({ pipeline: it.describe(), state: { nextIndex: 2 } })).toThrow(/pack.setState: state is missing "start"/);
    const m = MapDataset.range(5).iterator();
    expect(() => m.setState({ pipeline: m.describe(), state: { nextIndex: 9 } })).toThrow(/nextIndex must be an integer in \[0, 5\]; got 9/);
  });
});

/**
 * Elastic resume through a many-to-one step: reads `takes[s]` elements from each of `a` shards,
 * saves their states (through JSON), restores them all into each of `b` shards and reads those
 * to the end. Returns the tokens of everything read (`tokensOf` maps elements to tokens).
 */
function readAcrossReshard<T>(make: (shard: number, count: number) => DatasetIterator<T>, a: number, b: number, takes: number[], tokensOf: (xs: T[]) => number[]): number[] {
  const olds = [...Array(a).keys()].map((s) => make(s, a));
  const got: number[] = [];
  olds.forEach((o, s) => got.push(...tokensOf(o.take(takes[s]))));
  const states = JSON.parse(JSON.stringify(olds.map((o) => o.getState())));
  for (let s = 0; s < b; s++) {
    const it = make(s, b);
    it.setState(states);
    got.push(...tokensOf([...it]));
  }
  return got;
}

describe('elastic resume across shard counts', () => {
  const global = MapDataset.range(97).shuffle({ seed: 2 }).filter((x) => x % 7 !== 0);
  const expected = global.toArray().sort((a, b) => a - b);

  it('every record exactly once when the shard count changes mid-stream (with a filter)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 5 }), fc.array(fc.integer({ min: 0, max: 12 }), { minLength: 5, maxLength: 5 }), (a, b, c, steps) => {
        const seen: number[] = [];
        // Run a shards, each reading a different number of elements (no lockstep needed).
        const its = [...Array(a).keys()].map((s) => new ElasticDataset(global, { shardIndex: s, shardCount: a }).iterator());
        its.forEach((it, s) => seen.push(...it.take(steps[s])));
        const states = JSON.parse(JSON.stringify(its.map((it) => it.getState())));
        // Resume with b shards, read a bit, then again with c shards to the end.
        const its2 = [...Array(b).keys()].map((s) => {
          const it = new ElasticDataset(global, { shardIndex: s, shardCount: b }).iterator();
          it.setState(states);
          return it;
        });
        its2.forEach((it, s) => seen.push(...it.take(steps[(s + 1) % 5])));
        const states2 = JSON.parse(JSON.stringify(its2.map((it) => it.getState())));
        for (let s = 0; s < c; s++) {
          const it = new ElasticDataset(global, { shardIndex: s, shardCount: c }).iterator();
          it.setState(states2);
          seen.push(...it);
        }
        expect(seen.sort((x, y) => x - y)).toEqual(expected);
      }),
      { numRuns: 40 },
    );
  });

  it('same shard count resumes exactly through a batch', () => {
    checkResume(() => new ElasticDataset(global, { shardIndex: 1, shardCount: 3 }).batch({ batchSize: 2 }).iterator(), 5);
  });

  it('with packing: every sequence exactly once when the shard count changes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 4 }), fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 4, maxLength: 4 }), fc.integer({ min: 1, max: 4 }), (a, b, takes, bins) => {
        const seqDs = seqs(50, 1).filter((s) => s[0] % 700 !== 0);
        const all = seqDs.toArray().flatMap((s) => [...s]).sort((x, y) => x - y);
        const tokensOf = (rows: any[]) => rows.flatMap((r) => [...r.tokens].filter((_, i: number) => r.segmentIds[i] > 0));
        const pack = (s: number, n: number) =>
          new ElasticDataset(seqDs, { shardIndex: s, shardCount: n })
            .map((x) => x)
            .pack({ length: 16, numBins: bins })
            .batch({ batchSize: 1, batchFn: (rows) => rows[0] })
            .iterator();
        const got = readAcrossReshard(pack, a, b, takes, tokensOf);
        expect(got.sort((x, y) => x - y)).toEqual(all);
      }),
      { numRuns: 40 },
    );
  });

  it('with bucketing: every sequence exactly once when the shard count changes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 4 }), fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 4, maxLength: 4 }), (a, b, takes) => {
        const seqDs = seqs(50, 2);
        const all = seqDs.toArray().flatMap((s) => [...s]).sort((x, y) => x - y);
        const tokensOf = (batches: any[]) =>
          batches.flatMap((bt) => {
            const t = bt.tokens.toArray().flat();
            const m = bt.segmentIds.toArray().flat();
            return t.filter((_: number, i: number) => m[i] > 0);
          });
        const make = (s: number, n: number) =>
          new ElasticDataset(seqDs, { shardIndex: s, shardCount: n }).bucketBySequenceLength({ bucketBoundaries: [4, 8, 12], bucketBatchSizes: [2, 3, 2] }).iterator();
        const got = readAcrossReshard(make, a, b, takes, tokensOf);
        expect(got.sort((x, y) => x - y)).toEqual(all);
      }),
      { numRuns: 30 },
    );
  });

  it('refuses one old state under a new shard count', () => {
    const seqDs = seqs(50, 1);
    const pack = (s: number, n: number) => new ElasticDataset(seqDs, { shardIndex: s, shardCount: n }).pack({ length: 16, numBins: 3 }).iterator();
    const states = [pack(0, 2), pack(1, 2)].map((o) => (o.take(2), o.getState()));
    expect(() => pack(0, 3).setState(states[0])).toThrow(/shard 0 of 2 but this iterator is shard 0 of 3/);
  });
});
