// shardMap(...).onDevices: the body runs on every device's worker thread (the built dist; pnpm
// build first) with collectives meeting through the host. Results equal the vectorised shardMap,
// output shards are what each device computed, and failures are clear errors, not hangs.
import { type Array, grad, jit, np, random, withBackend } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { type Mesh, NamedSharding, P, allGather, allToAll, axisIndex, devicePut, makeMesh, pmax, pmean, ppermute, psum, psumScatter, shardMap, withShardingConstraint } from '../src/index';
import { expectClose, useCpuDevices } from './helpers';

let mesh: Mesh;
useCpuDevices(4, () => {
  mesh = makeMesh([2, 2], ['x', 'y']);
});

describe('shardMap on the device workers', () => {
  it('equals the vectorised shardMap for every collective', async () => {
    const x = random.normal(random.key(0), [8, 4]);
    const ring: [number, number][] = [[0, 1], [1, 0]];
    const bodies: [string, (b: Array) => Array, ReturnType<typeof P>, ReturnType<typeof P>][] = [
      ['psum', (b) => psum(np.sum(np.exp(b), { axis: 0, keepdims: true }), ['x', 'y']), P('x', 'y'), P()],
      ['pmax', (b) => pmax(b, 'x'), P('x', 'y'), P(null, 'y')],
      ['allGather', (b) => allGather(b, 'y', { axis: 1, tiled: true }).mul(axisIndex('x').astype('float32').add(1)), P('x', 'y'), P('x')],
      ['psumScatter', (b) => psumScatter(b, 'x', { tiled: true }), P(null, 'y'), P('x', 'y')],
      ['ppermute', (b) => ppermute(np.sin(b), 'x', ring), P('x', 'y'), P('x', 'y')],
      ['allToAll', (b) => allToAll(b, 'y', 0, 1, { tiled: true }), P(null, 'y'), P('y')],
    ];
    for (const [name, body, inSpec, outSpec] of bodies) {
      const f = shardMap(body, { mesh, inSpecs: inSpec, outSpecs: outSpec, checkVma: false });
      const got = await f.onDevices(x);
      try {
        expectClose(got, f(x), { rtol: 1e-6, atol: 1e-6 });
      } catch (e) {
        throw new Error(`${name}: ${(e as Error).message}`);
      }
      expect(String(got.sharding)).toBe(String(new NamedSharding(mesh, outSpec)));
    }
  });
  it('returns the blocks each device computed as the shards, and reads placed inputs in place', async () => {
    const x = devicePut(np.arange(0, 16, 1, 'float32').reshape([4, 4]), new NamedSharding(mesh, P('x', 'y')));
    const f = shardMap((b: Array) => b.add(axisIndex('x').mul(100).add(axisIndex('y').mul(10)).astype('float32')), { mesh, inSpecs: P('x', 'y'), outSpecs: P('x', 'y') });
    const y = await f.onDevices(x);
    expect(y.addressableShards.map((s) => s.device.id)).toEqual([0, 1, 2, 3]);
    expect(globalThis.Array.from(y.addressableShards[3].data.dataSync())).toEqual([110 + 10, 110 + 11, 110 + 14, 110 + 15]);
    expectClose(y, f(x));
  });
  it("computes on the caller's backend", async () => {
    const a = random.normal(random.key(7), [8, 16]);
    const b = random.normal(random.key(8), [16, 16]);
    const f = shardMap((ab: Array, bb: Array) => np.matmul(ab, bb), { mesh, inSpecs: [P(['x', 'y']), P()], outSpecs: P(['x', 'y']) });
    for (const backend of ['systolic', 'reference']) {
      const got = await withBackend(backend, () => f.onDevices(a, b));
      // The two backends differ by ~1e-2 here (bf16 MXU passes vs f32), far above this tolerance.
      withBackend(backend, () => expectClose(got, np.matmul(a, b), { rtol: 1e-6, atol: 1e-6 }));
    }
  });
  it('traces once per signature and runs jitted parts of the body (data-parallel grad with pmean)', async () => {
    let traces = 0;
    const loss = (w: Array, xb: Array) => np.mean(np.square(np.tanh(np.matmul(xb, w))));
    const step = shardMap((w: Array, xb: Array) => {
      traces++;
      return pmean(jit(grad(loss))(w, xb), ['x', 'y']);
    }, { mesh, inSpecs: [P(), P(['x', 'y'])], outSpecs: P() });
    const w = random.normal(random.key(5), [3, 2]);
    const xs = random.normal(random.key(6), [8, 3]);
    const want = grad(loss)(w, xs);
    expectClose(await step.onDevices(w, xs), want, { rtol: 1e-2, atol: 1e-4 });
    expectClose(await step.onDevices(w, xs.mul(2)), grad(loss)(w, xs.mul(2)), { rtol: 1e-2, atol: 1e-4 });
    expect(traces).toBe(1);
    await step.onDevices(w, np.ones([4, 3]));
    expect(traces).toBe(2);
  });
  it('checks that devices holding the same output block agree, and names what cannot be sent', async () => {
    const f = shardMap((b: Array) => b, { mesh, inSpecs: P('x'), outSpecs: P() });
    await expect(f.onDevices(np.arange(0, 4, 1, 'float32'))).rejects.toThrow(/shardMap: output leaf 0 differs between devices 0 and 2, which its outSpecs entry P\(\) says hold the same block/);
    const s = new NamedSharding(mesh, P());
    const g = shardMap((b: Array) => withShardingConstraint(b, s), { mesh, inSpecs: P(), outSpecs: P() });
    await expect(g.onDevices(np.ones([2]))).rejects.toThrow(/primitive sharding_constraint has a NamedSharding parameter, which cannot be sent to a device thread/);
    // The devices still work afterwards.
    const h = shardMap((b: Array) => psum(b, 'x'), { mesh, inSpecs: P('x'), outSpecs: P() });
    expectClose(await h.onDevices(np.array([1, 2], 'float32')), np.array([3], 'float32'));
  });
});
