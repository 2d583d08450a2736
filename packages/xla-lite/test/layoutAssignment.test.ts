// Layout assignment for dots on hand-written HLO, and end to end on a dense layer's backward pass.
import { grad, lax, nn, np } from '@tpukit/core';
import { evalPrimitive } from '@tpukit/core/internal';
import { describe, expect, it } from 'vitest';
import { assignLayouts, buildExecutable, dce, foldDotTransposes, gemmReadable, HloModule, insertLayoutCopies, jit, moduleText } from '../src/internal';
import { B, expectAllclose, f32, prims } from './build';

const dn = (lc: number[], rc: number[], lb: number[] = [], rb: number[] = []) => ({ dimensionNumbers: [[lc, rc], [lb, rb]], precision: null, preferredElementType: null });
const seq = (n: number, s = 1) => np.array(Array.from({ length: n }, (_, i) => Math.sin(i * s)), 'float32');

describe('layout assignment', () => {
  it('says which operands the GEMM reads in place', () => {
    expect(gemmReadable([4, 8], [], [1])).toBe(true); // row-major [M,K]
    expect(gemmReadable([8, 4], [], [0])).toBe(true); // transposed [K,M]: rows stride 1
    expect(gemmReadable([2, 3, 4], [], [0, 1])).toBe(true);
    expect(gemmReadable([2, 3, 4], [], [0, 2])).toBe(false); // k dims 0 and 2 do not merge
    expect(gemmReadable([2, 3, 4], [1], [2])).toBe(true); // batch dims may have any stride
  });

  it('folds a transpose feeding a dot into its dimension numbers (x.T @ g)', () => {
    const b = new B();
    const x = b.param(f32(8, 4));
    const g = b.param(f32(8, 6));
    const xt = b.op('transpose', [x], { permutation: [1, 0] });
    const c = b.out(b.op('dot_general', [xt, g], dn([1], [0])));
    expect(foldDotTransposes(c)).toBe(1);
    dce(c);
    expect(prims(c)).toEqual(['parameter', 'parameter', 'dot_general']);
    const d = c.outputs[0];
    expect(d.operands).toEqual([x, g]);
    expect(d.params.dimensionNumbers).toEqual([[[0], [0]], [[], []]]);
    expect(d.shape.shape).toEqual([4, 6]);
  });

  it('folds transpose(dot(g, x)) into dot(x, g) by swapping operands', () => {
    const b = new B();
    const g = b.param(f32(8, 6));
    const x = b.param(f32(8, 4));
    const d = b.op('dot_general', [g, x], dn([0], [0])); // [6,4]
    const c = b.out(b.op('transpose', [d], { permutation: [1, 0] }));
    expect(foldDotTransposes(c)).toBe(1);
    expect(prims(c)).toEqual(['parameter', 'parameter', 'dot_general']);
    expect(c.outputs[0].operands).toEqual([x, g]);
    expect(c.outputs[0].shape.shape).toEqual([4, 6]);
  });

  it('leaves a transpose that would reorder the dot output', () => {
    const b = new B();
    const x = b.param(f32(2, 3, 4));
    const w = b.param(f32(4, 5));
    const xt = b.op('transpose', [x], { permutation: [1, 0, 2] }); // free dims 0,1 swap
    const c = b.out(b.op('dot_general', [xt, w], dn([2], [0])));
    expect(foldDotTransposes(c)).toBe(0);
  });

  it('inserts a layout copy only where the GEMM cannot read a view, and runs it', () => {
    const b = new B();
    const x = b.param(f32(2, 3, 4));
    const y = b.param(f32(2, 4, 5));
    const d = b.op('dot_general', [x, y], dn([0, 2], [0, 1])); // contracts x's dims 0 and 2
    const c = b.out(d);
    expect(insertLayoutCopies(c)).toBe(1);
    const copy = c.outputs[0].operands[0];
    expect(copy.opcode).toBe('copy');
    expect(copy.layout).toEqual([2, 0, 1]); // physical [free 1, contracting 0, 2]
    expect(moduleText(new HloModule('m', c))).toContain('f32[2,3,4]{2,0,1} copy(');
    const xs = seq(24).reshape([2, 3, 4]);
    const ys = seq(40, 0.7).reshape([2, 4, 5]);
    const out = buildExecutable(new HloModule('m', c), 'm').run([xs, ys])[0];
    expectAllclose(out, evalPrimitive(d.prim!, [xs, ys], d.params)[0], { rtol: 1e-6 });
    // Both operands the same value in the same wanted layout: one copy.
    const b3 = new B();
    const z = b3.param(f32(2, 3, 4));
    const c3 = b3.out(b3.op('dot_general', [z, z], dn([0, 2], [0, 2])));
    expect(insertLayoutCopies(c3)).toBe(1);
    expect(c3.outputs[0].operands[0]).toBe(c3.outputs[0].operands[1]);
    // Reordering the contracting pairs is enough when it makes both operands readable: no copy.
    const b2 = new B();
    const p = b2.param(f32(2, 3, 4));
    const q = b2.param(f32(2, 3, 5));
    const c2 = b2.out(b2.op('dot_general', [p, q], dn([1, 0], [1, 0])));
    expect(assignLayouts(c2)).toBe(0);
    expect(c2.outputs[0].params.dimensionNumbers).toEqual([[[0, 1], [0, 1]], [[], []]]);
  });

  it('the backward pass of a dense layer executes fewer transposes, with identical results', () => {
    const loss = (x: any, w: any, bias: any) => np.sum(np.tanh(np.add(np.matmul(x, w), bias)));
    const args = [seq(2 * 4 * 8).reshape([2, 4, 8]), seq(48, 0.3).reshape([8, 6]), seq(6, 2)];
    const lowered = jit(grad(loss, { argnums: [0, 1, 2] })).lower(...args);
    const before = lowered.compile({ layout: false });
    const after = lowered.compile();
    const transposes = (text: string) => (text.split('ENTRY')[1].match(/ transpose\(| copy\(/g) ?? []).length;
    expect(transposes(before.asText())).toBeGreaterThan(0);
    expect(transposes(after.asText())).toBe(0);
    expect(after.passStats.layout).toBeGreaterThan(0);
    const [r0, r1] = [before.call(args), after.call(args)];
    r0.forEach((v, k) => expectAllclose(r1[k], v, { rtol: 1e-6, atol: 1e-6 }));
  });

  it('a dot reading a layout copy still takes its epilogue (kOutput) and equals eager', () => {
    const f = (x: any, y: any) => nn.relu(lax.dotGeneral(x, y, [[[0, 2], [0, 1]], [[], []]]));
    const args = [seq(24).reshape([2, 3, 4]), seq(40, 0.7).reshape([2, 4, 5])];
    const c = jit(f).lower(args[0], args[1]).compile();
    expect(c.asText()).toContain('f32[2,3,4]{2,0,1} copy(');
    expect(c.stats.outputFusions).toBe(1);
    expectAllclose(c.call(args)[0], f(args[0], args[1]), { rtol: 1e-6, atol: 1e-7 });
  });
});
