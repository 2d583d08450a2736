// Every iterator state carries the pipeline's description, and a state saved by a different
// pipeline (source, seeds, operations or their options) is refused before anything changes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Batch, DataLoader, type DatasetIterator, ElasticDataset, IndexSampler, IterDataset, MapDataset } from '../src/index';

interface Config {
  seed: number;
  withMap: boolean;
  batchSize: number;
  randomSeed: number;
}

/** A MapDataset pipeline read as a stream; every field of `c` changes the stream it produces. */
function pipeline(c: Config): DatasetIterator<unknown> {
  let ds: MapDataset<number> = MapDataset.range(37).seed(c.seed).shuffle();
  if (c.withMap) ds = ds.map((x) => x * 2);
  return ds
    .randomMap((x, rng) => x + rng.integers(0, 5), { seed: c.randomSeed })
    .toIterDataset()
    .batch({ batchSize: c.batchSize, batchFn: (xs) => xs.join(',') })
    .iterator();
}

const config = fc.record({ seed: fc.constantFrom(0, 7), withMap: fc.boolean(), batchSize: fc.constantFrom(2, 3), randomSeed: fc.constantFrom(1, 2) });
const same = (a: Config, b: Config) => a.seed === b.seed && a.withMap === b.withMap && a.batchSize === b.batchSize && a.randomSeed === b.randomSeed;

describe('iterator states are fingerprinted with the pipeline', () => {
  it('a seed-0 state does not resume a seed-7 + map pipeline (issue 15)', () => {
    const a = MapDataset.range(20).seed(0).shuffle().iterator();
    a.take(5);
    const state = JSON.parse(JSON.stringify(a.getState()));
    expect(state.pipeline).toBe('source(range(0,20,1)).seed(0).shuffle(' + state.pipeline.match(/shuffle\((\d+)\)/)[1] + ')');
    const b = MapDataset.range(20).seed(7).shuffle().map((x) => x + 1).iterator();
    const before = b.take(3);
    expect(() => b.setState(state)).toThrow(/DatasetIterator.setState: the state was saved by a different pipeline; first difference: saved "seed\(0\)" vs this "seed\(7\)"[^]*saved: source\(range\(0,20,1\)\)\.seed\(0\)[^]*this: {2}source\(range\(0,20,1\)\)\.seed\(7\)\.shuffle\(\d+\)\.map/);
    // Nothing changed: b goes on from where it was.
    const c = MapDataset.range(20).seed(7).shuffle().map((x) => x + 1).iterator();
    expect([...before, ...b.take(4)]).toEqual(c.take(7));
  });

  it('resuming a state in the pipeline that saved it equals the uninterrupted stream; any other pipeline is refused', () => {
    fc.assert(
      fc.property(config, config, fc.integer({ min: 0, max: 20 }), (ca, cb, k) => {
        const a = pipeline(ca);
        const head = a.take(k);
        const state = JSON.parse(JSON.stringify(a.getState()));
        const b = pipeline(cb);
        if (same(ca, cb)) {
          b.setState(state);
          expect([...head, ...b]).toEqual([...pipeline(ca)]);
        } else {
          expect(() => b.setState(state)).toThrow(/saved by a different pipeline; first difference: saved "[^"]*" vs this "[^"]*"/);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('names the first difference for appended and changed operations', () => {
    const base = () => MapDataset.range(10).toIterDataset();
    const cases: [DatasetIterator<unknown>, DatasetIterator<unknown>, RegExp][] = [
      [base().iterator(), base().map((x) => x).iterator(), /saved \(end\) vs this "\.map"/],
      [base().batch({ batchSize: 2 }).iterator(), base().batch({ batchSize: 2, dropRemainder: true }).iterator(), /saved "batch\(size=2, dropRemainder=false\)" vs this "batch\(size=2, dropRemainder=true\)"/],
      [base().randomMap((x) => x, { seed: 1 }).iterator(), base().randomMap((x) => x, { seed: 2 }).iterator(), /saved "randomMap\(seed=1\)" vs this "randomMap\(seed=2\)"/],
      [IterDataset.mix([base(), base()], [1, 2]).iterator(), IterDataset.mix([base(), base()], [1, 3]).iterator(), /saved "\[1, 2\]" vs this "\[1, 3\]"/],
      [base().pack({ length: 8 }).iterator(), base().pack({ length: 9 }).iterator(), /saved "pack\(length=8, numBins=16, overflow=error, padId=0\)" vs this "pack\(length=9, /],
      [base().padToLength(4).iterator(), base().padToLength(4, { padId: 1 }).iterator(), /saved "padToLength\(length=4, padId=0, overflow=error\)" vs this "padToLength\(length=4, padId=1, /],
      [MapDataset.range(10).iterator(), MapDataset.range(11).iterator(), /saved "range\(0,10,1\)" vs this "range\(0,11,1\)"/],
    ];
    for (const [a, b, re] of cases) expect(() => b.setState(a.getState())).toThrow(re);
  });

  it('refuses states without a fingerprint (saved before this change), and reads them when wrapped on purpose', () => {
    const make = () => MapDataset.range(9).iterator();
    const a = make();
    a.take(4);
    const legacy = { nextIndex: 4 };
    expect(() => make().setState(legacy)).toThrow(/DatasetIterator.setState: the state has no pipeline fingerprint[^]*"source\(range\(0,9,1\)\)"[^]*pass \{ pipeline: it.describe\(\), state: <old state> \}\); got \{"nextIndex":4\}/);
    const b = make();
    b.setState({ pipeline: b.describe(), state: legacy });
    expect([...b]).toEqual([4, 5, 6, 7, 8]);
    // DataLoader states of version 1 carried the sampler and source but not the operations.
    const loader = () => new DataLoader({ source: { length: 4, get: (i: number) => i + 1 }, sampler: new IndexSampler({ numRecords: 4, seed: 1 }), operations: [{ map: (x: number) => x * 10 }] }).iterator();
    const v1 = { version: 1, nextIndex: 2, sampler: 'IndexSampler(...)', source: 'array(len=4)' };
    expect(() => loader().setState(v1)).toThrow(/DataLoader.setState: the state has no pipeline fingerprint/);
    const l = loader();
    l.setState({ pipeline: l.describe(), state: v1 });
    expect([...l]).toEqual([30, 40]);
  });

  it('DataLoader states name the operations, and not the worker count', () => {
    const twelve = { length: 12, get: (i: number) => i, describe: () => 'twelve' };
    const make = (ops: unknown[]) => new DataLoader({ source: twelve, sampler: new IndexSampler({ numRecords: 12, seed: 2 }), operations: ops as never }).iterator();
    const a = make([{ map: (x: number) => x }, new Batch({ batchSize: 3 })]);
    a.next();
    expect(a.describe()).toBe('DataLoader(source=twelve, sampler=IndexSampler(numRecords=12, shard=0/1, shuffle=false, numEpochs=1, seed=2), operations=[map, batch(size=3, dropRemainder=false)])');
    expect(() => make([new Batch({ batchSize: 3 })]).setState(a.getState())).toThrow(/first difference: saved "operations=\[map, batch\(size=3, dropRemainder=false\)\]" vs this "operations=\[batch\(size=3, dropRemainder=false\)\]"/);
    expect(() => make([{ filter: () => true }, new Batch({ batchSize: 3 })]).setState(a.getState())).toThrow(/saved "operations=\[map, [^"]*" vs this "operations=\[filter, /);
  });

  it('elastic shards share one description, so every old shard state restores any new shard count; a list from another pipeline is refused', () => {
    const ds = MapDataset.range(30).seed(1).shuffle();
    const shard = (d: MapDataset<number>, s: number, n: number) => new ElasticDataset(d, { shardIndex: s, shardCount: n }).iterator();
    const olds = [shard(ds, 0, 2), shard(ds, 1, 2)];
    olds.forEach((o) => o.take(3));
    const states = olds.map((o) => o.getState());
    expect(states[0].pipeline).toBe(states[1].pipeline);
    expect(() => shard(ds, 0, 3).setState(states)).not.toThrow();
    const other = MapDataset.range(30).seed(2).shuffle();
    expect(() => shard(other, 0, 3).setState(states)).toThrow(/states\[0\] was saved by a different pipeline; first difference: saved "seed\(1\)" vs this "seed\(2\)"/);
  });
});
