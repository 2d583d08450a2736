// jit with shardings over the CPU devices: every device runs its compiled program (fusion, wasm
// kernels) on its own worker thread (the built dist; pnpm build first), and the collectives meet
// worker to worker through shared memory. Results equal the in-thread executor (xla-lite's
// reference) and the unsharded program; shards live in device-owned shared buffers; bad inputs
// (a shard on the wrong device, a dead device worker, donating a held buffer) are clear errors.
import { type Array, grad, jit, lax, makeArrayFromCallback, np, random, toStorage } from '@tpukit/core';
import { setSpmdDeviceRunner } from '@tpukit/xla-lite/internal';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hold, ownerOf } from '../src/deviceBuffers';
import { type CpuDevice, type Mesh, NamedSharding, P, axisIndex, devicePut, devices, makeMesh, pmax, psum, runOnDevices, shardMap } from '../src/index';
import { cpuDeviceRunner } from '../src/spmdRunner';
import { expectClose, useCpuDevices } from './helpers';

let devs: CpuDevice[];
let mesh: Mesh;
useCpuDevices(2, () => {
  devs = devices();
  mesh = makeMesh([2], ['x']);
});

const sh = (...spec: (string | null)[]) => new NamedSharding(mesh, P(...spec));
const calls = () => devs.map((d) => d.worker.spmd.calls);

/** `f(...args)` on the device threads and with the in-thread executor (same compiled program). */
function both(f: (...a: Array[]) => Array, args: Array[], opts: Parameters<typeof jit>[1] = {}): { dev: Array; ref: Array } {
  const g = jit(f, opts);
  const before = calls();
  const dev = g(...args) as Array;
  expect(calls().map((c, k) => c - before[k])).toEqual([1, 1]);
  setSpmdDeviceRunner(null);
  try {
    return { dev, ref: g(...args) as Array };
  } finally {
    setSpmdDeviceRunner(cpuDeviceRunner);
  }
}

describe('sharded jit on the device threads', () => {
  it('data parallel: each device runs its rows, results live in device-owned shared buffers', () => {
    const x = random.normal(random.key(0), [8, 16]);
    const w = random.normal(random.key(1), [16, 4]);
    const f = (a: Array, b: Array) => np.tanh(np.matmul(a, b));
    const xs = devicePut(x, sh('x'));
    expect(xs.addressableShards.map((s) => ownerOf(s.data))).toEqual([0, 1]);
    const { dev, ref } = both(f, [xs, devicePut(w, sh())]);
    expectClose(dev, ref, { rtol: 1e-6, atol: 1e-6 });
    expectClose(dev, f(x, w), { rtol: 1e-5, atol: 1e-6 });
    // The host reads each shard in place: the Array wraps the device's SharedArrayBuffer.
    expect(dev.addressableShards.map((s) => [s.device.id, ownerOf(s.data), toStorage(s.data).buffer instanceof SharedArrayBuffer])).toEqual([
      [0, 0, true],
      [1, 1, true],
    ]);
  });

  it('every collective the partitioner emits meets worker to worker and equals the in-thread executor', () => {
    const a = random.normal(random.key(2), [8, 6]);
    const b = random.normal(random.key(3), [6, 4]);
    const c = random.normal(random.key(4), [8, 4]);
    const rev = new NamedSharding(makeMesh([2], ['x'], { devices: [devs[1], devs[0]] }), P('x', null));
    const cases: [string, (...x: Array[]) => Array, Array[], Parameters<typeof jit>[1]][] = [
      ['all-reduce', (p, q) => np.matmul(p, q), [devicePut(a, sh(null, 'x')), devicePut(b, sh('x', null))], { outShardings: sh() }],
      ['reduce-scatter', (p, q) => np.matmul(p, q), [devicePut(a, sh(null, 'x')), devicePut(b, sh('x', null))], { outShardings: sh('x', null) }],
      ['all-gather', (p) => np.exp(p), [devicePut(c, sh('x', null))], { outShardings: sh() }],
      ['all-to-all', (p) => np.multiply(p, 2), [devicePut(c, sh('x', null))], { outShardings: sh(null, 'x') }],
      ['collective-permute', (p) => np.add(p, 1), [devicePut(c, sh('x', null))], { outShardings: rev }],
    ];
    for (const [name, f, args, opts] of cases) {
      const { dev, ref } = both(f, args, opts);
      try {
        expectClose(dev, ref, { rtol: 1e-6, atol: 1e-6 });
        expectClose(dev, f(...args.map((x) => np.array(x.dataSync()).reshape(x.shape))), { rtol: 1e-5, atol: 1e-5 });
      } catch (e) {
        throw new Error(`${name}: ${(e as Error).message}`);
      }
    }
  });

  it('control flow with collectives inside (a scanned layer stack) and its gradient', () => {
    const ws = random.normal(random.key(5), [3, 8, 8]).mul(0.3);
    const x = random.normal(random.key(6), [8, 8]);
    const loss = (w: Array, h: Array) => {
      const [y] = lax.scan((c: Array, wl: Array) => [np.tanh(np.matmul(c, wl)), null], h, w) as [Array, null];
      return np.mean(np.square(y));
    };
    const g = (w: Array, h: Array) => grad(loss)(w, h);
    const { dev, ref } = both(g, [devicePut(ws, sh()), devicePut(x, sh('x', null))]);
    expectClose(dev, ref, { rtol: 1e-5, atol: 1e-6 });
    expectClose(dev, g(ws, x), { rtol: 1e-5, atol: 1e-6 });
  });

  it('law: for random shapes and specs, sharded jit on the devices = unsharded', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.constantFrom<(string | null)[]>(['x', null], [null, 'x'], [null, null]), fc.constantFrom<(string | null)[]>(['x', null], [null, 'x'], [null, null]), fc.integer({ min: 0, max: 1000 }), (m, k, n, sa, sb, seed) => {
        const a = random.normal(random.key(seed), [2 * m, 2 * k]);
        const b = random.normal(random.key(seed + 1), [2 * k, 2 * n]);
        const f = (p: Array, q: Array) => np.sum(np.maximum(np.matmul(p, q), 0), { axis: 1 });
        const got = jit(f)(devicePut(a, sh(...sa)), devicePut(b, sh(...sb))) as Array;
        expectClose(got, f(a, b), { rtol: 1e-5, atol: 1e-5 });
      }),
      { numRuns: 12 },
    );
  });
});

describe('bad inputs on the device threads', () => {
  it('a shard whose buffer another device owns is an error naming both devices', () => {
    const x = devicePut(np.arange(0, 8, 1, 'float32').reshape([4, 2]), sh('x', null));
    // Device 0's shard given to device 1 (and the other way round).
    const swapped = makeArrayFromCallback([4, 2], 'float32', sh('x', null), (idx) => x.addressableShards[idx[0][0] === 0 ? 1 : 0].data);
    expect(() => jit((v: Array) => v.mul(2))(swapped)).toThrow(/shard for device 0 is a float32\[2,2\] buffer owned by device 1/);
  });

  it('a device whose worker thread died is a clear error until the device is closed', async () => {
    const x = devicePut(np.ones([4, 2]), sh('x', null));
    const f = jit((v: Array) => v.add(1));
    f(x);
    // A program that ends device 1's thread.
    await runOnDevices({ module: new URL('./fixtures/exitThread.mjs', import.meta.url).pathname, exportName: 'exit' }, [devs[1]], [[]]).catch(() => undefined);
    expect(() => f(x)).toThrow(/device 1's worker thread died \(exited with code 7\)/);
    await devs[1].close();
    expectClose(f(x) as Array, np.full([4, 2], 2));
  });

  it('donating a buffer a running call holds is an error; donating afterwards works', () => {
    const x = devicePut(np.ones([4, 2]), sh('x', null));
    const f = jit((v: Array) => v.mul(3), { donateArgnums: 0 });
    const release = hold([x.addressableShards[1].data]);
    try {
      expect(() => f(x)).toThrow(/donated input 0: cannot donate this float32\[2,2\] shard of device 1: a shardMap\(\.\.\.\)\.onDevices call still running holds its buffer/);
    } finally {
      release();
    }
    expectClose(f(x) as Array, np.full([4, 2], 3));
    expect(() => x.dataSync()).toThrow(/deleted/);
  });

  it('a shardMap(...).onDevices run in flight holds its device buffers: donating them meanwhile is an error', async () => {
    const x = devicePut(np.ones([4, 2]), sh('x', null));
    const f = shardMap((b: Array) => psum(np.sum(b), 'x'), { mesh, inSpecs: P('x', null), outSpecs: P() });
    const running = f.onDevices(x);
    expect(() => jit((v: Array) => v.mul(3), { donateArgnums: 0 })(x)).toThrow(/cannot donate this float32\[2,2\] shard of device 0: a shardMap\(\.\.\.\)\.onDevices call still running holds its buffer/);
    expectClose(await running, np.array(8));
    expectClose(jit((v: Array) => v.mul(3), { donateArgnums: 0 })(x) as Array, np.full([4, 2], 3));
  });

  it('devices that reach different collectives fail with a clear error instead of hanging, and work afterwards', async () => {
    const f = shardMap((b: Array) => lax.cond(np.equal(axisIndex('x'), 0), (v: Array) => psum(v, 'x'), (v: Array) => pmax(v, 'x'), b), { mesh, inSpecs: P('x'), outSpecs: P('x') });
    await expect(f.onDevices(np.array([1, 2], 'float32'))).rejects.toThrow(/the devices reached different collectives/);
    const g = shardMap((b: Array) => psum(b, 'x'), { mesh, inSpecs: P('x'), outSpecs: P() });
    expectClose(await g.onDevices(np.array([1, 2], 'float32')), np.array([3], 'float32'));
  });
});
