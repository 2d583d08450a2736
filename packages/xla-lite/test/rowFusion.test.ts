// Row (kRow) fusion: softmax, log-softmax, layer norm, RMSNorm and their gradients, on
// hand-written HLO and through jit.
import { grad, nn, np, valueAndGrad } from '@tpukit/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildExecutable, compileRowKernel, dce, fuseRows, type HloInstruction, HloModule, jit, rowKernelSource } from '../src/internal';
import { B, expectAllclose, f32, prims } from './build';

const seq = (n: number, s = 1) => np.array(Array.from({ length: n }, (_, i) => 2 * Math.sin(i * s)), 'float32');
const layerNorm = (x: any, g: any, b: any) => {
  const mu = np.mean(x, { axis: -1, keepdims: true });
  const v = np.mean(np.square(np.subtract(x, mu)), { axis: -1, keepdims: true });
  return np.add(np.multiply(np.multiply(np.subtract(x, mu), np.reciprocal(np.sqrt(np.add(v, 1e-5)))), g), b);
};
const rmsNorm = (x: any, g: any) => np.multiply(np.multiply(x, np.reciprocal(np.sqrt(np.add(np.mean(np.square(x), { axis: -1, keepdims: true }), 1e-6)))), g);

describe('row fusion (kRow)', () => {
  it('fuses a hand-written softmax into one two-reduction row kernel', () => {
    const b = new B();
    const x = b.param(f32(3, 5));
    const m = b.op('reshape', [b.op('reduce_max', [x], { axes: [1] })], { newSizes: [3, 1], dimensions: null });
    const e = b.op('exp', [b.op('sub', [x, b.op('broadcast_in_dim', [m], { shape: [3, 5], broadcastDimensions: [0, 1] })])]);
    const s = b.op('reduce_sum', [e], { axes: [1] });
    const c = b.out(b.op('div', [e, b.op('broadcast_in_dim', [s], { shape: [3, 5], broadcastDimensions: [0] })]));
    const mod = new HloModule('m', c);
    expect(fuseRows(c, mod)).toBe(1);
    dce(c);
    expect(prims(c)).toEqual(['parameter', 'fusion']);
    const f = c.instructions[1];
    expect(f.params.kind).toBe('kRow');
    const { source, scratchRows } = rowKernelSource(f.called[0]);
    expect(source.match(/for \(let j = 0; j < 5; j\+\+\)/g)).toHaveLength(3); // max, sum, output stages
    expect(scratchRows).toBe(1); // exp(x - max) kept in a row of scratch, not recomputed
    const xs = seq(15).reshape([3, 5]);
    const out = new Float32Array(15);
    compileRowKernel(f.called[0])([xs.dataSync()], out, 15);
    expectAllclose(np.array(out).reshape([3, 5]), nn.softmax(xs), { rtol: 1e-6 });
  });

  it('leaves reductions over leading axes and groups without a broadcast back', () => {
    const b = new B();
    const x = b.param(f32(4, 6));
    const s = b.op('reduce_sum', [x], { axes: [0] });
    const c = b.out(b.op('mul', [x, b.op('broadcast_in_dim', [s], { shape: [4, 6], broadcastDimensions: [1] })]));
    expect(fuseRows(c)).toBe(0);
    const b2 = new B();
    const y = b2.param(f32(4, 6));
    const c2 = b2.out(b2.op('reduce_sum', [b2.op('exp', [y])], { axes: [1] }));
    expect(fuseRows(c2)).toBe(0); // a plain input fusion's job
  });

  const cases: [string, (...a: any[]) => any, any[]][] = [
    ['softmax', (x: any) => nn.softmax(x), [seq(6 * 10).reshape([2, 3, 10])]],
    ['log-softmax', (x: any) => nn.logSoftmax(x), [seq(6 * 10).reshape([6, 10])]],
    ['layer norm', layerNorm, [seq(6 * 16).reshape([6, 16]), seq(16, 0.3), seq(16, 0.7)]],
    ['RMSNorm', rmsNorm, [seq(2 * 3 * 16).reshape([2, 3, 16]), seq(16, 0.3)]],
  ];
  for (const [name, f, args] of cases) {
    it(`${name} and its gradient: one row kernel each way, equal to eager`, () => {
      const c = jit(f).lower(...args).compile();
      expect(c.stats.rowFusions).toBe(1);
      expect(c.stats.fusedKernels).toBe(1);
      expectAllclose(c.call(args)[0], f(...args), { rtol: 1e-5, atol: 1e-6 });
      const loss = (...a: any[]) => np.sum(np.sin(f(...a)));
      const g = jit(grad(loss)).lower(...args).compile();
      expect(g.stats.rowFusions).toBeGreaterThanOrEqual(1);
      expectAllclose(g.call(args)[0], grad(loss)(...args), { rtol: 1e-4, atol: 1e-5 });
      const unfused = jit(grad(loss)).lower(...args).compile({ rowFusion: false });
      expect(g.costAnalysis().bytesAccessed).toBeLessThan(unfused.costAnalysis().bytesAccessed);
    });
  }

  it('fuses log-softmax with the loss reduction that follows it (a row-reduction root)', () => {
    const logits = seq(8 * 12).reshape([8, 12]);
    const onehot = nn.oneHot(np.array(Array.from({ length: 8 }, (_, i) => i % 12), 'int32'), 12);
    const f = (l: any, t: any) => np.sum(np.multiply(nn.logSoftmax(l), t), { axis: -1 });
    const c = jit(f).lower(logits, onehot).compile();
    expect(c.stats.rowFusions).toBe(1);
    expect(c.asText()).toMatch(/f32\[8\]\{0\} fusion\(.*kind=kRow/);
    expectAllclose(c.call([logits, onehot])[0], f(logits, onehot), { rtol: 1e-5, atol: 1e-6 });
    const exe = buildExecutable(jit(f).lower(logits, onehot).compile().module, 'f');
    expect(exe.stats.rowFusions).toBe(1);
  });
});

describe('row kernel indexing', () => {
  it('reads a per-column scale as in[j] and a per-row input as in[row], without coordinates', () => {
    const b = new B();
    const x = b.param(f32(3, 4));
    const g = b.param(f32(4));
    const r = b.param(f32(3));
    const s = b.op('reduce_sum', [x], { axes: [1] });
    const xs = b.op('mul', [x, b.op('broadcast_in_dim', [s], { shape: [3, 4], broadcastDimensions: [0] })]);
    const gb = b.op('broadcast_in_dim', [g], { shape: [3, 4], broadcastDimensions: [1] });
    const rb = b.op('broadcast_in_dim', [r], { shape: [3, 4], broadcastDimensions: [0] });
    const c = b.out(b.op('add', [b.op('mul', [xs, gb]), rb]));
    expect(fuseRows(c)).toBe(1);
    dce(c);
    const body = c.instructions.find((i) => i.opcode === 'fusion')!.called[0];
    const { source } = rowKernelSource(body);
    expect(source).not.toContain('const c0');
    expect(source).toMatch(/in\d\[j\]/);
    expect(source).toMatch(/in\d\[row\]/);
    const [xv, gv, rv] = [seq(12).reshape([3, 4]), seq(4, 0.5), seq(3, 0.9)];
    const out = new Float32Array(12);
    const ins = body.params.map((p) => [xv, gv, rv][[x, g, r].indexOf(c.instructions.find((i) => i.opcode === 'fusion')!.operands[p.paramIndex])].dataSync());
    compileRowKernel(body)(ins, out, 12);
    const want = np.add(np.multiply(np.multiply(xv, np.sum(xv, { axis: 1, keepdims: true })), gv), np.expandDims(rv, 1));
    expectAllclose(np.array(out).reshape([3, 4]), want, { rtol: 1e-6 });
  });
});

describe('multi-output row fusion', () => {
  it('a member also used after the root leaves the fusion as an extra output', () => {
    const f = (x: any) => {
      const e = np.exp(x);
      const p = np.divide(e, np.sum(e, { axis: -1, keepdims: true }));
      return [p, np.sin(e), np.mean(e, { axis: -1 })];
    };
    const x = seq(4 * 9).reshape([4, 9]);
    const c = jit(f).lower(x).compile();
    const row = c.module.entry.instructions.find((i) => i.opcode === 'fusion' && i.params.kind === 'kRow')!;
    expect(row.isTuple).toBe(true);
    expect(row.shapes.map((s) => s.shape)).toContainEqual([4, 9]); // exp(x), read again by sin
    expect(rowKernelSource(row.called[0]).source).toMatch(/o0\[i\] = /);
    expect(c.asText()).toMatch(/\(f32\[4,9\]\{1,0\}, f32\[4,9\]\{1,0\}.*\) fusion\(.*kind=kRow/);
    const got = c.call([x]);
    const want = f(x);
    got.forEach((g, k) => expectAllclose(g, want[k], { rtol: 1e-6, atol: 1e-7 }));
    const text = c.asStableHlo();
    expect(text).not.toContain('fusion');
  });

  it('a training step fuses the forward softmax too (exp and sum leave as extra outputs for the backward pass)', () => {
    const x = seq(6 * 10).reshape([6, 10]);
    const w = seq(10 * 10, 0.3).reshape([10, 10]);
    const g = seq(10, 0.7);
    for (const fwd of [(a: any) => nn.softmax(a), (a: any) => nn.softmax(np.multiply(a, 0.5))]) {
      const loss = (a: any, m: any) => np.sum(np.tanh(np.matmul(fwd(a), m)));
      const c = jit(grad(loss)).lower(x, w).compile();
      const multi = c.module.entry.instructions.filter((i) => i.opcode === 'fusion' && i.params.kind === 'kRow' && i.isTuple);
      expect(multi.length).toBe(1);
      expect(multi[0].shapes).toHaveLength(3); // softmax, exp and the row sums
      expectAllclose(c.call([x, w])[0], grad(loss)(x, w), { rtol: 1e-5, atol: 1e-6 });
    }
  });

  it('a pre-norm residual block, forward and backward: the forward layer norm is one row kernel though its backward reads 2*sqrt(var+eps), computed early', () => {
    // JAX's derivative of sqrt is computed in the forward pass, before the norm's output; it
    // belongs to the backward row group, which runs after the forward one.
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 9 }), fc.integer({ min: 10, max: 24 }), fc.integer({ min: 0, max: 99 }), (rows, n, s) => {
        const x = np.array(Float32Array.from({ length: rows * n }, (_, i) => Math.sin(i * 1.1 + s) * 2 + 0.5)).reshape([rows, n]);
        const w = np.array(Float32Array.from({ length: n * n }, (_, i) => Math.cos(i * 0.7 + s) * 0.3)).reshape([n, n]);
        const g = seq(n, 0.3);
        const b = seq(n, 0.7);
        // The dot at 'highest' precision (six bf16 passes, float32-faithful), not the default (one
        // bf16 pass): the backward dots read the cotangent cos(block), which compiled kernels
        // compute with their own sin/cos/rsqrt (vmath.ts: <= 2 ulp from eager's), and a default
        // dot rounds its operands to bf16. An element within an ulp of a bf16 rounding tie then
        // rounds to the other side on one path: a 2^-8 relative change of one operand, ~1e-3 in
        // a whole column of the dots' outputs, beyond rtol 2e-4 (FC_SEED=255284558, case
        // [2,16,10]: cos(block)[1,1] is 0.4033203125 eager, a bf16 tie, rounded down to even,
        // and one ulp above compiled, rounded up). Against no row fusion (the same vmath) the
        // results stay within float32 rounding at either precision; 'highest' keeps the eager
        // comparison there too, so its bound holds for every input.
        const block = (a: any, m: any, gg: any, bb: any) => np.add(a, np.matmul(layerNorm(a, gg, bb), m, { precision: 'highest' }));
        const loss = (a: any, m: any, gg: any, bb: any) => np.sum(np.sin(block(a, m, gg, bb)));
        const dl = grad(loss, { argnums: [0, 1, 2, 3] } as any);
        const c = jit(dl).lower(x, w, g, b).compile();
        const fusions = c.module.entry.instructions.filter((i) => i.opcode === 'fusion');
        const rowsK = fusions.filter((i) => i.params.kind === 'kRow');
        expect(rowsK).toHaveLength(2);
        // The forward norm writes y and x - mean (full size) and its row values; γ's gradient
        // recomputes x̂ = (x - mean) * rstd from them instead of reading a written x̂.
        expect(rowsK[0].shapes.filter((sh) => sh.shape.join() === `${rows},${n}`)).toHaveLength(2);
        expect(rowsK[0].called[0].outputs.map((o) => o.prim?.name)).not.toContain('mul');
        // No separate variance sum, no kernels on [rows, 1] values: the forward norm is whole.
        expect(fusions.filter((i) => i.params.kind === 'kInput' && i.shapes.some((sh) => sh.shape.join() === String(rows)))).toHaveLength(0);
        expect(fusions.filter((i) => i.shapes.every((sh) => sh.shape.join() === `${rows},1`))).toHaveLength(0);
        const unfused = jit(dl).lower(x, w, g, b).compile({ rowFusion: false });
        const got = c.call([x, w, g, b]);
        const plain = unfused.call([x, w, g, b]);
        const want = dl(x, w, g, b) as any[];
        got.forEach((v, k) => {
          expectAllclose(v, plain[k], { rtol: 2e-5, atol: 2e-5 });
          expectAllclose(v, want[k], { rtol: 2e-4, atol: 2e-4 });
        });
        expect(c.costAnalysis().bytesAccessed).toBeLessThan(unfused.costAnalysis().bytesAccessed);
      }),
      { numRuns: 12 },
    );
  });

  it('a cross-entropy training step: the one-hot of the labels is recomputed by the backward row kernel, not written by the forward one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 9 }), fc.integer({ min: 3, max: 40 }), fc.integer({ min: 0, max: 99 }), (rows, V, s) => {
        const h = np.array(Float32Array.from({ length: 2 * rows * 8 }, (_, i) => Math.sin(i * 1.3 + s))).reshape([2, rows, 8]);
        const e = np.array(Float32Array.from({ length: V * 8 }, (_, i) => Math.cos(i * 0.7 + s) * 0.5)).reshape([V, 8]);
        const y = np.array(Int32Array.from({ length: 2 * rows }, (_, i) => (i * 7 + s) % V), 'int32').reshape([2, rows]);
        // The LM head between the forward and the backward row kernels, as in a GPT; at 'highest'
        // precision for the reason given in the pre-norm block's test: here the backward dots
        // read softmax - onehot, computed with the kernels' own exp/log (FC_SEED=-1851496116,
        // case [8,4,43]: the gradient [0,4,1] is 0.014862060546875 compiled, a bf16 tie rounded
        // up, and 2 ulp below eager, rounded down; ga and gm then differ by up to 5e-3 relative).
        const loss = (a: any, m: any, t: any) =>
          np.negative(np.mean(np.sum(np.multiply(nn.logSoftmax(np.matmul(a, np.transpose(m), { precision: 'highest' })), nn.oneHot(t, V)), { axis: -1 })));
        // (value and gradient: the forward's loss is a row-reduction root of its own kernel)
        const dl = (a: any, m: any, t: any) => {
          const [l, [ga, gm]] = valueAndGrad(loss, { argnums: [0, 1] } as any)(a, m, t) as any;
          return [l, ga, gm];
        };
        const c = jit(dl).lower(h, e, y).compile();
        const rowsK = c.module.entry.instructions.filter((i) => i.opcode === 'fusion' && i.params.kind === 'kRow');
        expect(rowsK).toHaveLength(2);
        const [fwd, bwd] = rowsK;
        // The forward kernel writes exp and the row sums for the backward; the one-hot it does not.
        for (const o of fwd.called[0].outputs) expect(o.prim?.name).not.toBe('convert_element_type');
        expect(bwd.called[0].instructions.some((m) => m.prim?.name === 'iota')).toBe(true);
        const got = c.call([h, e, y]);
        const plain = jit(dl).lower(h, e, y).compile({ rowFusion: false }).call([h, e, y]);
        const want = dl(h, e, y) as any[];
        got.forEach((v, k) => {
          expectAllclose(v, plain[k], { rtol: 1e-5, atol: 1e-6 });
          expectAllclose(v, want[k], { rtol: 1e-4, atol: 1e-5 });
        });
      }),
      { numRuns: 12 },
    );
  });

  it('an extra output that loop fusion can recompute from the other outputs is dropped, unless its reader would contract it or is not a loop fusion', () => {
    // e = (x - mean) * broadcast(q), where x - mean and q leave the row fusion anyway.
    const build = (reader: 'mul' | 'add' | 'dot') => {
      const b = new B();
      const x = b.param(f32(4, 8));
      const w = b.param(f32(8, 8));
      const bc = (v: HloInstruction) => b.op('broadcast_in_dim', [v], { shape: [4, 8], broadcastDimensions: [0] });
      const xc = b.op('sub', [x, bc(b.op('reduce_sum', [x], { axes: [1] }))]);
      const q = b.op('reduce_sum', [b.op('square', [xc])], { axes: [1] });
      const e = b.op('mul', [xc, bc(q)]);
      const y = b.op('sub', [b.op('mul', [e, e]), x]);
      const d = b.op('dot_general', [y, w], { dimensionNumbers: [[[1], [0]], [[], []]], precision: null, preferredElementType: null });
      const later = b.op('mul', [b.op('mul', [xc, d]), bc(q)]);
      const r = reader === 'dot' ? b.op('dot_general', [e, w], { dimensionNumbers: [[[1], [0]], [[], []]], precision: null, preferredElementType: null }) : b.op(reader, [e, d]);
      const c = b.out(b.op('add', [r, later]));
      expect(fuseRows(c)).toBe(1);
      dce(c);
      return c.instructions.find((i) => i.opcode === 'fusion')!;
    };
    const full = (f: HloInstruction) => f.shapes.filter((sh) => sh.shape.join() === '4,8').length;
    expect(full(build('mul'))).toBe(2); // y and x - mean; e recomputed by its reader
    expect(full(build('add'))).toBe(3); // e + d would become one fused multiply-add
    expect(full(build('dot'))).toBe(3); // a dot reads e: it is written either way
  });
});
