// Dot epilogue (kOutput) fusion on hand-written HLO and end to end through jit.
import { listBackends, nn, np, withBackend } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { buildExecutable, dce, fuseDotEpilogues, fuseElementwise, HloModule, jit, moduleText } from '../src/internal';
import { B, expectAllclose, f32, prims } from './build';

const dn = { dimensionNumbers: [[[1], [0]], [[], []]], precision: null, preferredElementType: null };
const seq = (n: number, s = 1) => np.array(Array.from({ length: n }, (_, i) => Math.sin(i * s)), 'float32');

/** relu(x @ w + bias) by hand; returns the computation and its dot. */
function denseRelu() {
  const b = new B();
  const x = b.param(f32(4, 8));
  const w = b.param(f32(8, 6));
  const bias = b.param(f32(6));
  const d = b.op('dot_general', [x, w], dn);
  const add = b.op('add', [d, b.op('broadcast_in_dim', [bias], { shape: [4, 6], broadcastDimensions: [1] })]);
  const zero = b.op('broadcast_in_dim', [b.constant(0)], { shape: [4, 6], broadcastDimensions: [] });
  return { b, d, y: b.op('max', [add, zero]) };
}

describe('dot epilogue fusion (kOutput)', () => {
  it('fuses a dot with its bias add and relu into one fusion and runs it in place', () => {
    const { b, y } = denseRelu();
    const c = b.out(y);
    const mod = new HloModule('m', c);
    fuseElementwise(c, mod, 1);
    expect(fuseDotEpilogues(c, mod)).toBe(1);
    dce(c);
    expect(prims(c)).toEqual(['parameter', 'parameter', 'parameter', 'constant', 'fusion']);
    const f = c.instructions[4];
    expect(f.params.kind).toBe('kOutput');
    expect(prims(f.called[0])).toContain('dot_general');
    expect(moduleText(mod)).toContain('kind=kOutput');
    const args = [seq(32).reshape([4, 8]), seq(48, 0.4).reshape([8, 6]), seq(6, 3)];
    const exe = buildExecutable(mod, 'm');
    expect(exe.stats.outputFusions).toBe(1);
    expect(exe.stats.primitiveOps).toBe(0);
    expectAllclose(exe.run(args)[0], nn.relu(np.add(np.matmul(args[0], args[1]), args[2])));
  });

  it('leaves a dot whose result has another user (it must stay materialised)', () => {
    const { b, d, y } = denseRelu();
    const c = b.out(y, d);
    fuseElementwise(c, undefined, 1);
    expect(fuseDotEpilogues(c)).toBe(0);
  });

  it('leaves an epilogue that reads the dot result through a broadcast', () => {
    const b = new B();
    const x = b.param(f32(4, 8));
    const w = b.param(f32(8, 1));
    const d = b.op('dot_general', [x, w], dn); // [4,1]
    const bc = b.op('broadcast_in_dim', [d], { shape: [4, 1], broadcastDimensions: [0, 1] });
    const c = b.out(b.op('exp', [bc]));
    fuseElementwise(c, undefined, 1);
    expect(fuseDotEpilogues(c)).toBe(0);
  });

  it('jit: bias + gelu / logistic / relu epilogues equal eager; the dot output moves once', () => {
    const x = seq(16 * 32).reshape([16, 32]);
    const w = seq(32 * 24, 0.37).reshape([32, 24]);
    const bias = seq(24, 1.3);
    for (const act of [nn.gelu, nn.sigmoid, nn.relu, np.tanh]) {
      const f = (a: any, m: any, v: any) => act(np.add(np.matmul(a, m), v));
      const lowered = jit(f).lower(x, w, bias);
      const fused = lowered.compile();
      const unfused = lowered.compile({ outputFusion: false });
      expect(fused.stats.outputFusions).toBe(1);
      expect(fused.stats.primitiveOps).toBe(0);
      expectAllclose(fused.call([x, w, bias])[0], f(x, w, bias), { rtol: 1e-5, atol: 1e-6 });
      // One [16,24] result written once instead of written, read and written again.
      const saved = unfused.costAnalysis().bytesAccessed - fused.costAnalysis().bytesAccessed;
      expect(saved).toBe(2 * 16 * 24 * 4);
      expect(fused.memoryAnalysis().tempBytesNoReuse).toBe(16 * 24 * 4);
    }
  });

  const backends = listBackends().filter((b) => b === 'reference' || b === 'systolic');
  it.each(backends)('runs the dot on the %s backend and the epilogue in place over its result', (backend) => {
    withBackend(backend, () => {
      const x = seq(8 * 40).reshape([8, 40]);
      const w = seq(40 * 24, 0.21).reshape([40, 24]);
      const res = seq(8 * 24, 0.9).reshape([8, 24]);
      const f = (a: any, m: any, r: any) => np.add(r, nn.gelu(np.matmul(a, m)));
      const c = jit(f).lower(x, w, res).compile();
      expect(c.stats.outputFusions).toBe(1);
      expectAllclose(c.call([x, w, res])[0], f(x, w, res), { rtol: 1e-5, atol: 1e-6 });
    });
  });

  it('an output fusion result may land in a donated argument', () => {
    const x = seq(8 * 16).reshape([8, 16]);
    const w = seq(16 * 12, 0.21).reshape([16, 12]);
    const f = (a: any, m: any, r: any) => np.add(r, nn.gelu(np.matmul(a, m)));
    const want = f(x, w, seq(8 * 12, 0.9).reshape([8, 12]));
    const got = jit(f, { donateArgnums: 2 })(x, w, seq(8 * 12, 0.9).reshape([8, 12]));
    expectAllclose(got, want, { rtol: 1e-5, atol: 1e-6 });
  });
});
