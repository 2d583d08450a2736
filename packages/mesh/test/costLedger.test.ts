/**
 * Collectives in the systolic cost ledger: a partitioned program run under `withLedger` records
 * per-chip compute and, through the interconnect model mesh injects (`useInterconnect`), the
 * modelled time of every collective it executes: forward and backward programs of a sharded
 * `grad(jit(f))` included. Bad inputs are clear errors.
 */
import { type Array, grad, np, systolic } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { collectiveTime } from '../src/cost/collectiveTime';
import { interconnect, useInterconnect } from '../src/cost/interconnect';
import { type Mesh, NamedSharding, P, devicePut, makeMesh, setCpuDeviceCount } from '../src/index';
import { customTopology, generations, slice, torus2d } from '../src/topology';
import { expectClose, ramp } from './helpers';

let mesh: Mesh;
let mesh4: Mesh;
beforeAll(() => {
  setCpuDeviceCount(4);
  mesh = makeMesh([2], ['x']);
  mesh4 = makeMesh([4], ['x']);
});
afterEach(() => {
  useInterconnect(null);
});

const v5e = generations.v5e;
const x = ramp([64, 32], 1 / 2048);
const w = ramp([32, 16], 1 / 512);
const loss = (w: Array, x: Array) => np.sum(np.tanh(np.matmul(x, w)));

describe('collectives in the systolic ledger', () => {
  it('a data-parallel program: per-chip compute is half the whole; its one all-reduce is timed on the topology', () => {
    const topo = torus2d(v5e, [1, 2]);
    useInterconnect(topo);
    const xs = devicePut(x, new NamedSharding(mesh, P('x', null)));
    const f = jit(loss);
    f(w, xs); // compile outside the ledger
    const { ledger, result } = systolic.withLedger(() => f(w, xs), { preset: v5e });
    expectClose(result, loss(w, x), { rtol: 1e-5, atol: 1e-4 });
    const whole = systolic.withLedger(() => loss(w, x), { preset: v5e }).ledger;
    expect(ledger.byOp.dot_general.flops).toBe(whole.byOp.dot_general.flops / 2);
    expect(ledger.devices).toBe(2);
    expect(ledger.collectives).toEqual([{ kind: 'all-reduce', bytes: 4, groupSize: 2, seconds: collectiveTime({ kind: 'all-reduce', bytes: 4, group: [0, 1] }, topo) }]);
    expect(ledger.byCollective['all-reduce']).toMatchObject({ count: 1, bytes: 4 });
    expect(ledger.communicationSeconds).toBeGreaterThan(0);
    // The collective's host emulation (an add of the two partial sums) is not compute.
    expect(ledger.byOp.add).toBeUndefined();
    expect(systolic.stepSeconds(ledger)).toBeCloseTo(ledger.seconds + ledger.communicationSeconds, 15);
    expect(systolic.mfu(ledger)).toBeCloseTo(ledger.flops / ((ledger.seconds + ledger.communicationSeconds) * v5e.peakBf16Flops), 12);
    expect(systolic.mfu(ledger, 1)).toBeGreaterThan(systolic.mfu(ledger));
  });

  it('grad(jit(f)) over sharded arguments: the forward and backward programs\' collectives are both in the ledger', () => {
    const topo = slice(generations.v5p, 4);
    useInterconnect(topo, { algorithm: 'ring' });
    const ws = devicePut(w, new NamedSharding(mesh4, P('x', null)));
    const xs = devicePut(x, new NamedSharding(mesh4, P('x', null)));
    const g = grad(jit(loss));
    g(ws, xs);
    const { ledger, result } = systolic.withLedger(() => g(ws, xs), { preset: generations.v5p });
    expectClose(result, grad(loss)(w, x), { rtol: 1e-4, atol: 1e-5 });
    const kinds = ledger.collectives.map((c) => c.kind);
    // FSDP: the weight is all-gathered forward (and its residual use backward), its gradient reduce-scattered.
    expect(kinds).toContain('all-gather');
    expect(kinds).toContain('reduce-scatter');
    const rs = ledger.collectives.find((c) => c.kind === 'reduce-scatter')!;
    expect(rs).toEqual({ kind: 'reduce-scatter', bytes: 32 * 16 * 4, groupSize: 4, seconds: collectiveTime({ kind: 'reduce-scatter', bytes: 32 * 16 * 4, group: [0, 1, 2, 3] }, topo, 'ring') });
    expect(ledger.communicationSeconds).toBeCloseTo(ledger.collectives.reduce((s, c) => s + c.seconds, 0), 15);
    expect(ledger.devices).toBe(4);
  });

  it('a per-ledger interconnect wins over the installed one; totals-only ledgers keep the sums', () => {
    useInterconnect(torus2d(v5e, [1, 2]));
    const slow = customTopology({ generation: { ...v5e, linkBandwidth: v5e.linkBandwidth / 100 }, dims: [2] });
    const xs = devicePut(x, new NamedSharding(mesh, P(null, 'x')));
    const f = jit((x: Array) => np.matmul(x, np.transpose(x)));
    f(xs);
    const fast = systolic.withLedger(() => f(xs), { preset: v5e }).ledger;
    const slowL = systolic.withLedger(() => f(xs), { preset: v5e, interconnect: interconnect(slow), keepEntries: false }).ledger;
    expect(fast.byCollective['all-reduce'].bytes).toBe(64 * 64 * 4);
    expect(slowL.collectives).toEqual([]);
    expect(slowL.byCollective['all-reduce'].count).toBe(1);
    expect(slowL.communicationSeconds).toBeGreaterThan(10 * fast.communicationSeconds);
  });

  it('eager and single-device programs record no communication', () => {
    useInterconnect(torus2d(v5e, [1, 2]));
    const { ledger } = systolic.withLedger(() => jit(loss)(w, x), { preset: v5e });
    expect(ledger.communicationSeconds).toBe(0);
    expect(ledger.devices).toBe(1);
  });

  it('bad inputs: a collective without an interconnect, an interconnect without a topology, too few chips, a bad model record', () => {
    const xs = devicePut(x, new NamedSharding(mesh, P('x', null)));
    const f = jit(loss);
    f(w, xs);
    expect(() => systolic.withLedger(() => f(w, xs))).toThrow(/systolic ledger: a partitioned program ran all-reduce over 2 devices \(4 bytes\) but the ledger has no interconnect model.*useInterconnect\(topology\)/);
    expect(() => useInterconnect(undefined as never)).toThrow(/useInterconnect: needs a topology record .*got undefined/);
    expect(() => interconnect({ dims: [2] } as never)).toThrow(/interconnect: needs a topology record/);
    expect(() => interconnect(torus2d(v5e, [1, 2]), { algorithm: 'tree' as never })).toThrow(/unknown algorithm "tree"; known: ring, bidirectional-ring, torus/);
    const x4 = devicePut(x, new NamedSharding(mesh4, P('x', null)));
    jit(loss)(w, x4);
    expect(() => systolic.withLedger(() => jit(loss)(w, x4), { interconnect: interconnect(torus2d(v5e, [1, 2])) })).toThrow(/all-reduce over device 3 but interconnect v5e-1x2 torus has 2 chips/);
    expect(() => systolic.withLedger(() => 0, { interconnect: { name: 'x' } as never })).toThrow(/systolic.withLedger: an interconnect model needs \{ name: string, chips: positive integer, seconds\(call\) \}/);
    expect(() => systolic.setInterconnect({ chips: 2 } as never)).toThrow(/systolic.setInterconnect: an interconnect model needs/);
    expect(() => systolic.stepSeconds(systolic.withLedger(() => 0).ledger, 2)).toThrow(/overlap must be in \[0, 1\]; got 2/);
  });
});
