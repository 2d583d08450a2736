/** simulateStep on a real partitioned program from xla-lite. */
import * as core from '@tpukit/core';
import * as xla from '@tpukit/xla-lite';
import { describe, expect, it } from 'vitest';
import { collectiveTime } from '../src/cost/collectiveTime';
import { collectivesOf, simulateStep } from '../src/cost/simulate';
import { generations, slice, torus2d } from '../src/topology';

const { np } = core;
const devs = [0, 1].map((id) => ({ id, deviceKind: 'sim', platform: 'sim', processIndex: 0 }));
/** Dimension `dim` split over two simulated devices (null: replicated). */
const split = (dim: number | null): core.Sharding => ({
  deviceSet: devs,
  isFullyReplicated: dim === null,
  devicesIndicesMap: (shape: readonly number[]) => new Map(devs.map((d, i): [core.Device, core.Index] => [d, shape.map((n, k): [number, number] => (k === dim ? [(i * n) / 2, ((i + 1) * n) / 2] : [0, n]))])),
  shardShape: (shape: readonly number[]) => shape.map((n, k) => (k === dim ? n / 2 : n)),
  toString: () => `split(${dim})`,
});

describe('simulateStep on an xla-lite partitioned program', () => {
  it('times the all-reduce of a Megatron MLP on a v5e 1x2 slice and adds it to the per-chip compute', () => {    const mlp = (x: any, w1: any, w2: any) => np.matmul(np.maximum(np.matmul(x, w1), 0), w2);
    const [x, w1, w2] = [np.ones([256, 512]), np.ones([512, 1024]), np.ones([1024, 512])];
    const compiled = xla.jit(mlp, { inShardings: [split(null), split(1), split(0)] }).lower(x, w1, w2).compile();
    const topology = torus2d(generations.v5e, [1, 2]);
    const e = simulateStep(compiled, { topology });
    expect(e.collectives.map((c) => [c.kind, c.bytes, c.groupSize])).toEqual([['all-reduce', 256 * 512 * 4, 2]]);
    expect(e.communicationSeconds).toBeCloseTo(collectiveTime({ kind: 'all-reduce', bytes: 256 * 512 * 4, group: [0, 1] }, topology), 12);
    expect(e.computeSeconds).toBeCloseTo(compiled.costAnalysis(generations.v5e).seconds, 12);
    expect(e.stepSeconds).toBeCloseTo(e.computeSeconds + e.communicationSeconds, 12);
  });

  it('counts the collectives of loop bodies once per iteration: Megatron layers under scan are one all-reduce per layer', () => {
    const layers = (x: core.Array, w1: core.Array, w2: core.Array) =>
      core.lax.scan((h: core.Array, w: [core.Array, core.Array]) => [np.tanh(np.matmul(np.maximum(np.matmul(h, w[0]), 0), w[1])), null], x, [w1, w2])[0];
    const [x, w1, w2] = [np.ones([8, 16]), np.ones([3, 16, 32]), np.ones([3, 32, 16])];
    const compiled = xla.jit(layers, { inShardings: [split(null), split(2), split(1)] }).lower(x, w1, w2).compile();
    expect(compiled.asText().match(/ all-reduce\(/g)).toHaveLength(1);
    const ops = collectivesOf(compiled);
    expect(ops.map((c) => [c.kind, c.bytes])).toEqual([0, 1, 2].map(() => ['all-reduce', 8 * 16 * 4]));
    const e = simulateStep(compiled, { topology: torus2d(generations.v5e, [1, 2]), overlap: 0.5 });
    expect(e.overlap).toBe(0.5);
    expect(e.collectives).toHaveLength(3);
  });

  it('a step of several programs (grad(jit(f))\'s forward and backward) adds their compute and collectives; they must share a slice', () => {
    const loss = (w: core.Array, x: core.Array) => np.sum(np.tanh(np.matmul(x, w)));
    const x = np.ones([64, 32]);
    const w = np.ones([32, 16]);
    const put = (a: core.Array, s: core.Sharding) => core.makeArrayFromCallback(a.shape, a.dtype, s, (idx) => core.lax.slice(a, idx.map(([b]) => b), idx.map(([, e]) => e)));
    xla.clearCompileLog();
    core.grad(xla.jit(loss))(w, put(x, split(0)));
    const programs = xla.compileLog().flatMap((r) => (r.partitioned ? [r.partitioned.program] : []));
    expect(programs).toHaveLength(2);
    const topology = torus2d(generations.v5e, [1, 2]);
    const step = simulateStep(programs, { topology });
    const parts = programs.map((p) => simulateStep(p, { topology }));
    expect(step.computeSeconds).toBeCloseTo(parts[0].computeSeconds + parts[1].computeSeconds, 15);
    expect(step.collectives.map((c) => c.kind)).toEqual([...parts[0].collectives, ...parts[1].collectives].map((c) => c.kind));
    expect(step.collectives.find((c) => c.bytes === 32 * 16 * 4)?.kind).toBe('all-reduce');
    expect(() => simulateStep([], { topology })).toThrow(/simulateStep: no programs given/);
    expect(() => simulateStep([programs[0], {} as never], { topology })).toThrow(/simulateStep: program 1 is not a compiled program/);
    const four = { ...programs[1], costAnalysis: programs[1].costAnalysis.bind(programs[1]), module: programs[1].module, spec: { devices: [0, 1, 2, 3] } };
    expect(() => simulateStep([programs[0], four], { topology: slice(generations.v5e, 4) })).toThrow(/program 1 is partitioned for 4 devices but program 0 for 2/);
  });
});
