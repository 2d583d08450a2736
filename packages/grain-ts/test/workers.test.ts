// Worker threads: output identical to workerCount 0 (order and content, randomMap included),
// states restore under a different workerCount, worker errors surface on the main thread.
// Workers run the built dist (pnpm build first): Node 20 cannot start a .ts worker.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Batch, DataLoader, IndexSampler, MapDataset } from '../src/index';

const module = fileURLToPath(new URL('./fixtures/pipeline.mjs', import.meta.url));
const args = { n: 97, seed: 5 };
const build = () =>
  MapDataset.range(args.n)
    .shuffle({ seed: args.seed })
    .randomMap((x, rng) => Int32Array.from({ length: 1 + rng.integers(0, 9) }, (_, i) => x * 10 + i), { seed: 11 })
    .filter((s) => s[0] % 3 !== 0);
const plain = (xs: Int32Array[]) => xs.map((x) => Array.from(x));

describe('workers', () => {
  it('give the same stream as workerCount 0, and resume under another worker count', () => {
    const ds = build();
    const ref = plain(ds.toIterDataset().toArray());
    for (const workerCount of [1, 2, 3]) {
      const it = ds.iterator({ workerCount, prefetch: 8, worker: { module, exportName: 'build', args } } as never);
      const got = plain([...it]);
      it.close();
      expect(got).toEqual(ref);
    }
    // Save under 2 workers, restore under 0 and 1.
    const a = ds.toIterDataset({ workerCount: 2, worker: { module, exportName: 'build', args } }).iterator();
    const head = plain(a.take(17));
    const state = JSON.parse(JSON.stringify(a.getState()));
    a.close();
    for (const workerCount of [0, 1]) {
      const b = ds.toIterDataset({ workerCount, worker: { module, exportName: 'build', args } }).iterator();
      b.setState(state);
      expect([...head, ...plain([...b])]).toEqual(ref);
      b.close();
    }
    // Packing on top of a worker-fed stream resumes too.
    const packed = (w: number) => ds.toIterDataset({ workerCount: w, worker: { module, exportName: 'build', args } }).pack({ length: 12, numBins: 3 }).iterator();
    const p0 = [...packed(0)];
    const p2 = packed(2);
    const first = p2.take(5);
    const ps = p2.getState();
    p2.close();
    const p1 = packed(1);
    p1.setState(ps);
    const rest = [...p1];
    p1.close();
    expect([...first, ...rest].map((r) => Array.from(r.tokens))).toEqual(p0.map((r: any) => Array.from(r.tokens)));
  });

  it('randomMap values do not depend on workerCount or chunking', () => {
    for (const rseed of [0, 123456789]) {
      const ds = MapDataset.range(60).randomMap((x, rng) => [x, rng.random(), rng.integers(0, 1 << 30)], { seed: rseed });
      const ref = ds.toIterDataset().toArray();
      for (const [workerCount, chunkSize] of [[1, 1], [2, 7], [3, 16]]) {
        const it = ds.iterator({ workerCount, chunkSize, prefetch: 5, worker: { module, exportName: 'noisy', args: { n: 60, rseed } } });
        expect([...it]).toEqual(ref);
        it.close();
      }
    }
  });

  it('DataLoader output does not depend on workerCount', () => {
    const { loader } = { loader: () => ({ source: { length: 40, get: (i: number) => ({ x: i }), describe: () => 'forty' }, operations: [{ randomMap: (e: { x: number }, rng: any) => ({ x: e.x, r: rng.integers(0, 1000) }) }, { filter: (e: { x: number }) => e.x % 4 !== 1 }] }) };
    const run = (workerCount: number) => {
      const parts = loader();
      const dl = new DataLoader({
        ...parts,
        operations: [...parts.operations, new Batch({ batchSize: 5 })],
        sampler: new IndexSampler({ numRecords: 40, shuffle: true, seed: 2, numEpochs: 2 }),
        workerCount,
        worker: { module, exportName: 'loader' },
      });
      const it = dl.iterator();
      const out = [...it].map((b: any) => [b.x.toArray(), b.r.toArray()]);
      it.close();
      return out;
    };
    const ref = run(0);
    expect(ref.length).toBe(12);
    expect(run(2)).toEqual(ref);
  });

  it('errors in a worker, a missing spec and a mismatched worker dataset are reported', () => {
    const bad = MapDataset.range(5).map((x) => x);
    const it = bad.iterator({ workerCount: 1, worker: { module, exportName: 'broken' } });
    expect(() => [...it]).toThrow(/worker 0 failed computing elements 0\.\.4: Error: bad element three/);
    expect(() => bad.iterator({ workerCount: 2 })).toThrow(/workerCount > 0 needs `worker: \{ module/);
    const other = MapDataset.range(6).map((x) => x);
    const it2 = other.iterator({ workerCount: 1, worker: { module, exportName: 'broken' } });
    expect(() => it2.next()).toThrow(/worker 0 built a different dataset \(length 5/);
    const it3 = bad.iterator({ workerCount: 1, worker: { module, exportName: 'exits' } });
    expect(() => [...it3]).toThrow(/worker 0 exited without answering/);
    const it4 = bad.iterator({ workerCount: 1, worker: { module: `${module}.missing.mjs` } });
    expect(() => it4.next()).toThrow(/worker 0 could not build the dataset: .*Cannot find module/);
  });
});
