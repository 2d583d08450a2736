/** simulateStep on a real partitioned program from xla-lite. */
import * as core from '@tpukit/core';
import * as xla from '@tpukit/xla-lite';
import { describe, expect, it } from 'vitest';
import { collectiveTime } from '../src/cost/collectiveTime';
import { simulateStep } from '../src/cost/simulate';
import { generations, torus2d } from '../src/topology';

describe('simulateStep on an xla-lite partitioned program', () => {
  it('times the all-reduce of a Megatron MLP on a v5e 1x2 slice and adds it to the per-chip compute', () => {
    const { np } = core;
    const devs = [0, 1].map((id) => ({ id, deviceKind: 'sim', platform: 'sim', processIndex: 0 }));
    const split = (dim: number | null): core.Sharding => ({
      deviceSet: devs,
      isFullyReplicated: dim === null,
      devicesIndicesMap: (shape: readonly number[]) => new Map(devs.map((d, i): [core.Device, core.Index] => [d, shape.map((n, k): [number, number] => (k === dim ? [(i * n) / 2, ((i + 1) * n) / 2] : [0, n]))])),
      shardShape: (shape: readonly number[]) => shape.map((n, k) => (k === dim ? n / 2 : n)),
      toString: () => `split(${dim})`,
    });
    const mlp = (x: any, w1: any, w2: any) => np.matmul(np.maximum(np.matmul(x, w1), 0), w2);
    const [x, w1, w2] = [np.ones([256, 512]), np.ones([512, 1024]), np.ones([1024, 512])];
    const compiled = xla.jit(mlp, { inShardings: [split(null), split(1), split(0)] }).lower(x, w1, w2).compile();
    const topology = torus2d(generations.v5e, [1, 2]);
    const e = simulateStep(compiled, { topology });
    expect(e.collectives.map((c) => [c.kind, c.bytes, c.groupSize])).toEqual([['all-reduce', 256 * 512 * 4, 2]]);
    expect(e.communicationSeconds).toBeCloseTo(collectiveTime({ kind: 'all-reduce', bytes: 256 * 512 * 4, group: [0, 1] }, topology), 12);
    expect(e.computeSeconds).toBeCloseTo(compiled.costAnalysis(generations.v5e).seconds, 12);
    expect(e.stepSeconds).toBeCloseTo(e.computeSeconds + e.communicationSeconds, 12);
  });
});
