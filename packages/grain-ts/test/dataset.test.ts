// Laws of the MapDataset / IterDataset operations: shuffle is a permutation per epoch, sharding
// covers every record once, mixing follows its weights, randomMap depends only on (seed, index).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Batch, DataLoader, IndexSampler, IndexShuffle, IterDataset, MapDataset, evenSplit } from '../src/index';

describe('shuffle', () => {
  it('is a permutation of each epoch, different per epoch, deterministic per seed', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 300 }), fc.integer({ min: 0, max: 2 ** 32 - 1 }), (n, seed) => {
        const ds = MapDataset.range(n).shuffle({ seed }).repeat(3);
        const all = ds.toArray();
        for (let e = 0; e < 3; e++) {
          const epoch = all.slice(e * n, (e + 1) * n);
          expect([...epoch].sort((a, b) => a - b)).toEqual([...Array(n).keys()]);
        }
        expect(MapDataset.range(n).shuffle({ seed }).repeat(3).toArray()).toEqual(all);
      }),
      { numRuns: 40 },
    );
    const a = MapDataset.range(100).shuffle({ seed: 1 }).repeat(2).toArray();
    expect(a.slice(0, 100)).not.toEqual(a.slice(100));
    expect(a.slice(0, 100)).not.toEqual([...Array(100).keys()]);
  });

  it('IndexShuffle is a bijection on [0, n) for odd sizes', () => {
    for (const n of [1, 2, 3, 17, 1000, 65537]) {
      const p = new IndexShuffle(n, 7);
      const seen = new Uint8Array(n);
      for (let i = 0; i < n; i++) seen[p.apply(i)]++;
      expect(seen.every((c) => c === 1)).toBe(true);
    }
  });

  it('needs a seed, and .seed() derives one', () => {
    expect(() => MapDataset.range(5).shuffle()).toThrow(/needs a seed/);
    const a = MapDataset.range(50).seed(3).shuffle().toArray();
    expect(MapDataset.range(50).seed(3).shuffle().toArray()).toEqual(a);
    expect(MapDataset.range(50).seed(4).shuffle().toArray()).not.toEqual(a);
    expect(() => MapDataset.range(5).shuffle({ seed: -1 })).toThrow(/seed must be an integer in \[0, 2\^32\); got -1/);
  });
});

describe('operations', () => {
  it('map, filter, batch, slice, repeat compose like Grain', () => {
    const ds = MapDataset.range(10).map((x) => x * 2).filter((x) => x % 3 !== 0);
    expect(ds.length).toBe(10);
    expect(ds.get(0)).toBeUndefined();
    expect(ds.toArray()).toEqual([2, 4, 8, 10, 14, 16]);
    expect(MapDataset.range(10).slice(2, 9, 3).toArray()).toEqual([2, 5, 8]);
    expect(MapDataset.range(3).repeat(2).toArray()).toEqual([0, 1, 2, 0, 1, 2]);
    const b = MapDataset.range(5).batch({ batchSize: 2 });
    expect(b.length).toBe(3);
    expect((b.get(2) as any).toArray()).toEqual([4]);
    expect(MapDataset.range(5).batch({ batchSize: 2, dropRemainder: true }).length).toBe(2);
    const it2 = MapDataset.range(7).toIterDataset().filter((x) => x !== 3).batch({ batchSize: 3 });
    expect(it2.toArray().map((x: any) => x.toArray())).toEqual([[0, 1, 2], [4, 5, 6]]);
  });

  it('a stream batch and a DataLoader Batch keep a short last batch unless dropRemainder', () => {
    const rows = (batches: Iterable<unknown>) => [...batches].map((b) => (b as { toArray(): unknown }).toArray());
    const stream = (dropRemainder: boolean) => MapDataset.range(7).toIterDataset().batch({ batchSize: 3, dropRemainder }).iterator();
    const loader = (dropRemainder: boolean) =>
      new DataLoader({ source: { length: 7, get: (i: number) => i }, sampler: new IndexSampler({ numRecords: 7 }), operations: [new Batch({ batchSize: 3, dropRemainder })] }).iterator();
    for (const make of [stream, loader]) {
      expect(rows(make(false))).toEqual([[0, 1, 2], [3, 4, 5], [6]]);
      expect(rows(make(true))).toEqual([[0, 1, 2], [3, 4, 5]]);
    }
  });

  it('batch stacks typed arrays into [B, L] int32 core Arrays and rejects ragged ones', () => {
    const b = MapDataset.source([{ t: Int32Array.of(1, 2), y: 1 }, { t: Int32Array.of(3, 4), y: 0 }]).batch({ batchSize: 2 }).get(0) as any;
    expect(b.t.shape).toEqual([2, 2]);
    expect(b.t.dtype).toBe('int32');
    expect(b.y.toArray()).toEqual([1, 0]);
    const bad = MapDataset.source([Int32Array.of(1), Int32Array.of(1, 2)]).batch({ batchSize: 2 });
    expect(() => bad.get(0)).toThrow(/element 1 .* has length 2 but element 0 has length 1; pad first/);
  });

  it('randomMap depends only on seed and index', () => {
    const f = (x: number, rng: any) => x + rng.random();
    const a = MapDataset.range(20).randomMap(f, { seed: 5 });
    const forward = a.toArray();
    const backward = [...Array(20).keys()].reverse().map((i) => a.get(i)).reverse();
    expect(backward).toEqual(forward);
    expect(MapDataset.range(20).randomMap(f, { seed: 6 }).toArray()).not.toEqual(forward);
  });

  it('mix follows the weights exactly per block and is deterministic', () => {
    const a = MapDataset.range(1000).map((x) => `a${x}`);
    const b = MapDataset.range(1000).map((x) => `b${x}`);
    const m = MapDataset.mix([a, b], [0.3, 0.7]) as MapDataset<string> & { schedule: any };
    const first = m.slice(0, 100).toArray();
    expect(first.filter((x) => x.startsWith('a')).length).toBe(30);
    expect(first.filter((x) => x.startsWith('a'))).toEqual([...Array(30).keys()].map((i) => `a${i}`));
    // Stops exactly when b runs out: all 1000 b's are used and the next slot would need b1000.
    const all = m.toArray();
    expect(all.filter((x) => x.startsWith('b')).length).toBe(1000);
    expect(m.schedule.component(m.length)).toBe(1);
    expect(MapDataset.mix([a, b], [0.3, 0.7]).slice(0, 100).toArray()).toEqual(first);
    const im = IterDataset.mix([a.toIterDataset(), b.toIterDataset()], [1, 1]);
    expect(im.iterator().take(4)).toEqual(['a0', 'b0', 'a1', 'b1']);
    expect(() => MapDataset.mix([a, b], [1])).toThrow(/2 datasets but 1 weights/);
  });
});

describe('sharding', () => {
  it('even split and IndexSampler shards cover every record exactly once', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 1, max: 9 }), fc.boolean(), (n, count, shuffle) => {
        const seen = new Array(n).fill(0);
        for (let s = 0; s < count; s++) {
          const [lo, hi] = evenSplit(n, { shardIndex: s, shardCount: count });
          for (let i = lo; i < hi; i++) seen[i]++;
          const sampler = new IndexSampler({ numRecords: n, shardOptions: { shardIndex: s, shardCount: count }, shuffle, seed: 9, numEpochs: 1 });
          const keys = [...Array(sampler.length).keys()].map((k) => sampler.get(k).recordKey).sort((x, y) => x - y);
          expect(keys).toEqual([...Array(hi - lo).keys()].map((i) => i + lo));
        }
        expect(seen.every((c) => c === 1)).toBe(true);
      }),
      { numRuns: 60 },
    );
    expect(() => evenSplit(10, { shardIndex: 3, shardCount: 3 })).toThrow(/shardIndex must be an integer in \[0, 3\); got 3/);
    expect(evenSplit(10, { shardIndex: 2, shardCount: 3, dropRemainder: true })).toEqual([6, 9]);
  });
});

describe('bad inputs', () => {
  it('name the operation, the argument and the value', () => {
    expect(() => MapDataset.range(5).batch({ batchSize: 0 })).toThrow(/batch: batchSize must be an integer >= 1; got 0/);
    expect(() => MapDataset.range(5).repeat(0)).toThrow(/repeat: numEpochs must be an integer >= 1/);
    expect(() => MapDataset.range(5).repeat().shuffle({ seed: 1 })).toThrow(/shuffle: cannot shuffle an endless dataset; shuffle before repeat/);
    expect(() => MapDataset.source(null as never)).toThrow(/MapDataset.source: expected an array or \{ length, get\(i\) \}; got null/);
    expect(() => MapDataset.range(5).slice(0, 5, 0)).toThrow(/slice: step must be an integer >= 1; got 0/);
    expect(() => MapDataset.range(4).toIterDataset().pack({ length: 0 })).toThrow(/pack: length must be an integer >= 1; got 0/);
    expect(() => MapDataset.range(4).toIterDataset().bucketBySequenceLength({ bucketBoundaries: [4, 2], bucketBatchSizes: [1, 1] })).toThrow(/strictly increasing/);
    expect(() => new IndexSampler({ numRecords: 10, shuffle: true })).toThrow(/IndexSampler: shuffle: true needs a seed/);
    expect(() => MapDataset.range(4).toIterDataset({ workerCount: -1 })).toThrow(/workerCount must be an integer >= 0; got -1/);
  });

  it('datasets and iterators are async-iterable too', async () => {
    const got: number[] = [];
    for await (const x of MapDataset.range(4).map((v) => v * 2)) got.push(x);
    expect(got).toEqual([0, 2, 4, 6]);
  });
});
