// The device runtime: each device runs a program on its own worker thread (the built
// dist/worker.js; `pnpm build` first), results come back as Arrays, errors name the device.
import { fileURLToPath } from 'node:url';
import { threadId } from 'node:worker_threads';
import { np } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { availableParallelism } from 'node:os';
import { devices, runOnDevices } from '../src/index';
import { kernelThreadsPerDevice } from '../src/devices';
import { expectClose, ramp, useCpuDevices } from './helpers';

const module = fileURLToPath(new URL('./fixtures/programs.mjs', import.meta.url));

useCpuDevices(2);

describe('runOnDevices', () => {
  it("shares the machine's cores among the devices: each worker runs its kernels on max(1, cores / devices) threads", async () => {
    const want = Math.max(1, Math.floor(availableParallelism() / 2));
    expect(kernelThreadsPerDevice()).toBe(want);
    const out = (await runOnDevices({ module, exportName: 'kernelThreads' }, devices(), [[], []])) as number[];
    expect(out).toEqual([want, want]);
  });
  it('runs each device on its own thread and returns its results', async () => {
    const [d0, d1] = devices();
    const x = ramp([3, 4]);
    const out = (await runOnDevices({ module, exportName: 'rowSums' }, [d0, d1], [[x, 'a'], [x.mul(2), 'b']])) as { sums: never; tag: string; thread: number }[];
    expect(out.map((o) => o.tag)).toEqual(['a', 'b']);
    expectClose(out[0].sums, np.sum(x, { axis: 1 }));
    expectClose(out[1].sums, np.sum(x.mul(2), { axis: 1 }));
    expect(new Set([threadId, out[0].thread, out[1].thread]).size).toBe(3);
  });
  it('sends an Array that several devices read once (shared) and computes the same as here', async () => {
    const x = ramp([8, 8], 0.01);
    const out = (await runOnDevices({ module, exportName: 'spin' }, devices(), [[x, 3], [x, 3]])) as never[];
    let want = x;
    for (let i = 0; i < 3; i++) want = np.tanh(np.matmul(want, x));
    expectClose(out[0], want, { rtol: 1e-5, atol: 1e-6 });
    expectClose(out[1], want, { rtol: 1e-5, atol: 1e-6 });
  });
  it('reports errors with the device, and rejects bad programs and arguments', async () => {
    await expect(devices()[1].worker.run({ module, exportName: 'fail' }, [])).rejects.toThrow(/device 1: Error: deliberate failure/);
    await expect(devices()[0].worker.run({ module, exportName: 'nope' }, [])).rejects.toThrow(/device 0: .*has no function export "nope"/);
    await expect(runOnDevices({ module }, devices(), [[]])).rejects.toThrow(/runOnDevices: 2 devices but 1 argument lists/);
    expect(() => devices()[0].worker.run({ module, exportName: 'rowSums' }, [new Map()])).toThrow(/only Arrays, numbers, strings, booleans, null and plain arrays\/objects/);
  });
});
