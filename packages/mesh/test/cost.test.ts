/**
 * The interconnect cost model against hand-computed values: per-generation link data,
 * collective times for ring / bidirectional ring / torus algorithms, simulateStep on a
 * partitioned program's collectives, the transformer scaling summaries, and bad inputs.
 */
import { describe, expect, it } from 'vitest';
import { collectiveTime, spanOf } from '../src/cost/collectiveTime';
import { collectivesOf, simulateStep } from '../src/cost/simulate';
import { flopsPerToken, LLAMA_7B, paramCount, stateBytesPerChip, transformerStep } from '../src/cost/transformer';
import { customTopology, type Generation, generations, hops, slice, torus2d, torus3d } from '../src/topology';

/** A made-up generation with round numbers: 1 GB/s links, 1 us per step, 1 TFLOP/s. */
const TOY: Generation = { ...generations.v5e, name: 'toy', peakBf16Flops: 1e12, iciLinks: 2, iciBandwidth: 4e9, linkBandwidth: 1e9, linkLatency: 1e-6 };
const ring4 = customTopology({ generation: TOY, dims: [4], wraparound: [true] });
const grid4x4 = customTopology({ generation: TOY, dims: [4, 4], wraparound: [true, true] });
const close = (a: number, b: number) => expect(a).toBeCloseTo(b, 12);

describe('topology records', () => {
  it('derives one link, one direction from the published per-chip ICI bandwidth', () => {
    expect(generations.v5p.linkBandwidth).toBe(100e9); // 1200 GB/s over 6 links x 2 directions
    expect(generations.v5e.linkBandwidth).toBe(50e9);
    expect(generations.v6e.linkBandwidth).toBe(100e9);
    expect(generations.v4.linkBandwidth).toBe(50e9);
    expect(generations.v5p.clockHz).toBeCloseTo(459e12 / (2 * 128 * 128 * 4 * 2), 0);
  });

  it('3D slices wrap around whole cubes only; 2D slices at the full pod edge; hops use wrap-around', () => {
    expect(torus3d(generations.v5p, [4, 4, 8]).wraparound).toEqual([true, true, true]);
    expect(torus3d(generations.v5p, [2, 2, 2]).wraparound).toEqual([false, false, false]);
    expect(torus2d(generations.v5e, [16, 16]).wraparound).toEqual([true, true]);
    expect(slice(generations.v5p, 4096).dims).toEqual([16, 16, 16]);
    expect(slice(generations.v6e, 8).dims).toEqual([2, 4]);
    expect(hops(ring4, 0, 3)).toBe(1);
    expect(hops(customTopology({ generation: TOY, dims: [4] }), 0, 3)).toBe(3);
  });

  it('rejects bad topologies and unknown slice sizes', () => {
    expect(() => customTopology({ generation: TOY, dims: [0, 2] })).toThrow(/dims \[0,2\] must be positive integers/);
    expect(() => customTopology({ generation: TOY, dims: [2, 2], wraparound: [true] })).toThrow(/one entry per dimension of 2x2/);
    expect(() => slice(generations.v5p, 12)).toThrow(/no standard v5p slice of 12 chips/);
  });
});

describe('collective times (alpha-beta, hand-computed)', () => {
  const N = 4e6;
  it('ring, bidirectional ring and torus all-gather on a closed ring of 4', () => {
    // (p-1) alpha + N (p-1)/p / B
    close(collectiveTime({ kind: 'all-gather', bytes: N, group: [0, 1, 2, 3] }, ring4, 'ring'), 3e-6 + 3e-3);
    close(collectiveTime({ kind: 'all-gather', bytes: N, group: [0, 1, 2, 3] }, ring4, 'bidirectional-ring'), 3e-6 + 1.5e-3);
    close(collectiveTime({ kind: 'reduce-scatter', bytes: N, group: [0, 1, 2, 3] }, ring4, 'torus'), 3e-6 + 1.5e-3);
    close(collectiveTime({ kind: 'all-reduce', bytes: N, group: [0, 1, 2, 3] }, ring4), 2 * (3e-6 + 1.5e-3));
  });

  it('torus all-gather over a 4x4 grid: one ring per dimension, the data growing', () => {
    // stage 1: 3 alpha + (16e6 * 4/16) * 3/4 / 2e9; stage 2: 3 alpha + 16e6 * 3/4 / 2e9
    close(collectiveTime({ kind: 'all-gather', bytes: 16e6, group: [...Array(16).keys()] }, grid4x4), 6e-6 + 1.5e-3 + 6e-3);
    // A row of the grid: only dimension 1.
    close(collectiveTime({ kind: 'all-gather', bytes: 16e6, group: [4, 5, 6, 7] }, grid4x4), 3e-6 + 6e-3);
  });

  it('an open line (no wrap-around) has half the bandwidth of a closed ring', () => {
    const t = torus3d(generations.v5p, [2, 2, 2]);
    close(collectiveTime({ kind: 'all-reduce', bytes: 1e6, group: [0, 1] }, t), 2 * (1e-6 + 0.5e6 / 100e9));
  });

  it('all-to-all and collective-permute', () => {
    close(collectiveTime({ kind: 'all-to-all', bytes: 8e6, group: [0, 1, 2, 3] }, ring4), 3e-6 + (8e6 * 4) / (8 * 1e9));
    close(collectiveTime({ kind: 'collective-permute', bytes: 2e6, group: [0, 3], pairs: [[0, 3]] }, ring4), 1e-6 + 2e-3);
    expect(collectiveTime({ kind: 'all-reduce', bytes: 1e9, group: [2] }, ring4)).toBe(0);
  });

  it('bad groups name the problem', () => {
    expect(() => spanOf(grid4x4, [0, 5])).toThrow(/group \[0,5\] is not a sub-grid of .* spans 2x2 positions but has 2 chips/);
    expect(() => collectiveTime({ kind: 'all-gather', bytes: 1, group: [0, 16] }, grid4x4)).toThrow(/chip 16 is outside topology/);
    expect(() => collectiveTime({ kind: 'all-gather', bytes: -1, group: [0, 1] }, grid4x4)).toThrow(/bytes must be a non-negative number/);
  });
});

/** A partitioned program as xla-lite's SpmdCompiled shows it: 4 devices, one all-reduce of f32[1000], one all-gather to f32[4,500]. */
function program(flops: number, seconds: number) {
  const x = { opcode: 'parameter', shapes: [{ shape: [1000], dtype: 'float32' }], operands: [], params: {} };
  const ar = { opcode: 'all-reduce', shapes: [{ shape: [1000], dtype: 'float32' }], operands: [x], params: { replicaGroups: [[0, 1, 2, 3]], toApply: 'add' } };
  const ag = { opcode: 'all-gather', shapes: [{ shape: [4, 500], dtype: 'bfloat16' }], operands: [ar], params: { replicaGroups: [[0, 1], [2, 3]], dimensions: [0] } };
  return { module: { entry: { instructions: [x, ar, ag] } }, costAnalysis: () => ({ flops, seconds }), spec: { devices: [0, 1, 2, 3] } };
}

describe('simulateStep', () => {
  it('adds compute and the modelled collectives; MFU and scaling efficiency follow', () => {
    const p = program(5e9, 0.01);
    expect(collectivesOf(p).map((c) => [c.kind, c.bytes, c.group.length])).toEqual([['all-reduce', 4000, 4], ['all-gather', 4000, 2]]);
    const ar = 2 * (3e-6 + (4000 * 0.75) / 2e9);
    const e = simulateStep(p, { topology: ring4 });
    expect(e.collectives[0].seconds).toBeCloseTo(ar, 12);
    // Chips 0 and 1 span 2 of the ring's 4 positions: the ring does not close, one direction's bandwidth.
    expect(e.collectives[1].seconds).toBeCloseTo(1e-6 + (4000 * 0.5) / 1e9, 12);
    close(e.stepSeconds, 0.01 + e.communicationSeconds);
    close(e.mfu, 5e9 / e.stepSeconds / 1e12);
    close(e.scalingEfficiency, 0.01 / e.stepSeconds);
    const o = simulateStep(p, { topology: ring4, overlap: 1 });
    close(o.stepSeconds, 0.01);
  });

  it('rejects a program partitioned for another device count, bad chips and overlap', () => {
    expect(() => simulateStep(program(1, 1), { topology: grid4x4 })).toThrow(/partitioned for 4 devices but topology .* has 16 chips/);
    expect(() => simulateStep(program(1, 1), { topology: ring4, chips: 8 })).toThrow(/chips 8 but topology .* has 4 chips/);
    expect(() => simulateStep(program(1, 1), { topology: ring4, overlap: 2 })).toThrow(/overlap must be in \[0, 1\]; got 2/);
  });
});

describe('transformer scaling summaries', () => {
  it('counts parameters and FLOPs as stated', () => {
    expect(paramCount(LLAMA_7B)).toBe(32 * (4 * 4096 * 4096 + 3 * 4096 * 11008) + 2 * 32000 * 4096);
    expect(flopsPerToken(LLAMA_7B)).toBe(6 * 6738149376 + 12 * 32 * 4096 * 2048);
    expect(stateBytesPerChip(LLAMA_7B, 'fsdp', 64)).toBe((16 * 6738149376) / 64);
  });

  it('data parallel on a v5p 2x2x2: compute at 75% of peak plus 32 gradient all-reduces', () => {
    const t = slice(generations.v5p, 8);
    const e = transformerStep(LLAMA_7B, 'data', t);
    const compute = (flopsPerToken(LLAMA_7B) * 8192) / (459e12 * 0.75);
    close(e.computeSeconds, compute);
    const one = collectiveTime({ kind: 'all-reduce', bytes: (6738149376 * 4) / 32, group: [...Array(8).keys()] }, t);
    expect(e.collectives).toHaveLength(32);
    expect(e.communicationSeconds).toBeCloseTo(32 * one, 9);
    expect(e.mfu).toBeLessThan(0.75);
  });

  it('tensor parallelism pays per-layer activation all-reduces: slower than FSDP at this batch', () => {
    const t = slice(generations.v5p, 64);
    expect(transformerStep(LLAMA_7B, 'tensor', t).stepSeconds).toBeGreaterThan(transformerStep(LLAMA_7B, 'fsdp', t).stepSeconds);
  });
});

describe('COST_MODEL.md', () => {
  it('holds the table the model computes', async () => {
    const { readFileSync } = await import('node:fs');
    const { scalingTable } = await import('../src/cost/transformer');
    const doc = readFileSync(new URL('../COST_MODEL.md', import.meta.url), 'utf8');
    const table = scalingTable(LLAMA_7B, generations.v5p, [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096], (n) => slice(generations.v5p, n));
    expect(doc).toContain(table);
  });
});
