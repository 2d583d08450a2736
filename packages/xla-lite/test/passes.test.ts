// Each pass on hand-written HLO: what it rewrites, and what it must leave alone.
import { describe, expect, it } from 'vitest';
import { algebraicSimplify, assignBuffers, compileKernel, constantFold, cse, dce, fuseElementwise, HloModule, kernelSource } from '../src/internal';
import { B, f32, prims, ty } from './build';

describe('dce', () => {
  it('removes instructions the outputs do not use, keeps parameters', () => {
    const b = new B();
    const x = b.param(f32(4));
    const y = b.param(f32(4));
    const dead = b.op('exp', [y]);
    b.op('neg', [dead]);
    const live = b.op('sin', [x]);
    const c = b.out(live);
    expect(dce(c)).toBe(2);
    expect(prims(c)).toEqual(['parameter', 'parameter', 'sin']);
  });
});

describe('cse', () => {
  it('merges identical instructions and equal small constants', () => {
    const b = new B();
    const x = b.param(f32(4));
    const one = b.constant(1);
    const one2 = b.constant(1);
    const e1 = b.op('exp', [x]);
    const e2 = b.op('exp', [x]);
    const s = b.op('add', [e1, e2]);
    const bc1 = b.op('broadcast_in_dim', [one], { shape: [4], broadcastDimensions: [] });
    const bc2 = b.op('broadcast_in_dim', [one2], { shape: [4], broadcastDimensions: [] });
    const c = b.out(b.op('add', [s, bc1]), b.op('add', [s, bc2]));
    const n = cse(c);
    expect(n).toBe(4); // constant, exp, broadcast, final add
    expect(c.outputs[0]).toBe(c.outputs[1]);
    expect(prims(c).filter((p) => p === 'exp')).toHaveLength(1);
  });
  it('keeps instructions whose parameters differ', () => {
    const b = new B();
    const x = b.param(f32(2, 3));
    const c = b.out(b.op('transpose', [x], { permutation: [1, 0] }), b.op('reduce_sum', [x], { axes: [0] }), b.op('reduce_sum', [x], { axes: [1] }));
    expect(cse(c)).toBe(0);
  });
});

describe('constant folding', () => {
  it('evaluates instructions on constants, not broadcasts or big results', () => {
    const b = new B();
    const x = b.param(f32(3));
    const k = b.op('mul', [b.constant([1, 2, 3]), b.constant([2, 2, 2])]);
    const e = b.op('exp', [b.constant(0)]);
    const bc = b.op('broadcast_in_dim', [e], { shape: [3], broadcastDimensions: [] });
    const c = b.out(b.op('add', [b.op('add', [x, k]), bc]));
    expect(constantFold(c)).toBe(2);
    dce(c);
    const consts = c.instructions.filter((i) => i.opcode === 'constant').map((i) => Array.from(i.literal!.dataSync()));
    expect(consts).toContainEqual([2, 4, 6]);
    expect(consts).toContainEqual([1]);
    expect(prims(c)).toContain('broadcast_in_dim');
    const b2 = new B();
    const big = b2.op('neg', [b2.constant(Array.from({ length: 2000 }, (_, i) => i))]);
    expect(constantFold(b2.out(big), 1024)).toBe(0);
  });
});

describe('algebraic simplification', () => {
  it('removes mul by one and add of zero (scalars broadcast or literal arrays)', () => {
    const b = new B();
    const x = b.param(f32(3));
    const one = b.op('broadcast_in_dim', [b.constant(1)], { shape: [3], broadcastDimensions: [] });
    const m = b.op('mul', [one, x]);
    const a = b.op('add', [m, b.constant([0, 0, 0])]);
    const s = b.op('sub', [a, b.constant([0, 0, 0])]);
    const c = b.out(s);
    expect(algebraicSimplify(c)).toBe(3);
    expect(c.outputs[0]).toBe(x);
  });
  it('does not drop a multiply whose result type differs from the operand (weak type)', () => {
    const b = new B();
    const x = b.param({ shape: [3], dtype: 'float32', weakType: true });
    const one = b.constant([1, 1, 1]);
    const m = b.op('mul', [x, one]);
    const c = b.out(m);
    expect(m.shape.weakType).toBe(false);
    expect(algebraicSimplify(c)).toBe(0);
  });
  it('composes transpose chains and removes identities', () => {
    const b = new B();
    const x = b.param(f32(2, 3, 4));
    const t1 = b.op('transpose', [x], { permutation: [1, 2, 0] });
    const t2 = b.op('transpose', [t1], { permutation: [2, 0, 1] });
    const t3 = b.op('transpose', [x], { permutation: [2, 1, 0] });
    const t4 = b.op('transpose', [t3], { permutation: [1, 0, 2] });
    const c = b.out(t2, t4);
    algebraicSimplify(c);
    algebraicSimplify(c);
    dce(c);
    expect(c.outputs[0]).toBe(x);
    const o = c.outputs[1];
    expect(o.prim?.name).toBe('transpose');
    expect(o.operands[0]).toBe(x);
    // t4[i,j,k] = t3[j,i,k] = x[k,i,j] -> permutation [1, 2, 0] of x... check by shape
    expect(o.shape.shape).toEqual([3, 4, 2]);
    expect(o.params.permutation).toEqual([1, 2, 0]);
  });
  it('merges reshape and broadcast chains, drops same-type converts', () => {
    const b = new B();
    const x = b.param(f32(6));
    const r = b.op('reshape', [b.op('reshape', [x], { newSizes: [2, 3] })], { newSizes: [3, 2] });
    const s = b.param(f32(3));
    const bb = b.op('broadcast_in_dim', [b.op('broadcast_in_dim', [s], { shape: [2, 3], broadcastDimensions: [1] })], { shape: [4, 2, 3], broadcastDimensions: [1, 2] });
    const cv = b.op('convert_element_type', [x], { newDtype: 'float32', weakType: false });
    const c = b.out(r, bb, cv);
    algebraicSimplify(c);
    dce(c);
    expect(c.outputs[0].operands[0]).toBe(x);
    expect(c.outputs[1].operands[0]).toBe(s);
    expect(c.outputs[1].params.broadcastDimensions).toEqual([2]);
    expect(c.outputs[2]).toBe(x);
  });
});

describe('algebraic simplification of dots, broadcasts and reductions', () => {
  const dn = (lc: number[], rc: number[], lb: number[] = [], rb: number[] = []) => ({ dimensionNumbers: [[lc, rc], [lb, rb]], precision: null, preferredElementType: null });
  it('dot with a batch-broadcast weight becomes a plain dot', () => {
    const b = new B();
    const x = b.param(f32(4, 8, 16));
    const w = b.param(f32(16, 32));
    const wb = b.op('broadcast_in_dim', [w], { shape: [4, 16, 32], broadcastDimensions: [1, 2] });
    const d = b.op('dot_general', [x, wb], dn([2], [1], [0], [0]));
    const c = b.out(d);
    expect(algebraicSimplify(c)).toBe(1);
    dce(c);
    const o = c.outputs[0];
    expect(o.operands).toEqual([x, w]);
    expect(o.params.dimensionNumbers).toEqual([[[2], [0]], [[], []]]);
    expect(o.shape.shape).toEqual([4, 8, 32]);
  });
  it('leaves a dot whose rhs broadcast does not only add batch dims', () => {
    const b = new B();
    const x = b.param(f32(4, 8, 16));
    const w = b.param(f32(4, 16));
    const wb = b.op('broadcast_in_dim', [w], { shape: [4, 16, 32], broadcastDimensions: [0, 1] });
    const c = b.out(b.op('dot_general', [x, wb], dn([2], [1], [0], [0])));
    expect(algebraicSimplify(c)).toBe(0);
  });
  it('reduce_sum over the batch dims of a dot contracts them', () => {
    const b = new B();
    const x = b.param(f32(4, 8, 16));
    const g = b.param(f32(4, 8, 32));
    const d = b.op('dot_general', [x, g], dn([1], [1], [0], [0])); // [4,16,32]
    const c = b.out(b.op('reduce_sum', [d], { axes: [0] }));
    expect(algebraicSimplify(c)).toBe(1);
    dce(c);
    expect(c.outputs[0].prim?.name).toBe('dot_general');
    expect(c.outputs[0].params.dimensionNumbers).toEqual([[[1, 0], [1, 0]], [[], []]]);
    expect(c.outputs[0].shape.shape).toEqual([16, 32]);
  });
  it('transpose of a broadcast becomes a broadcast (of a smaller transpose when needed)', () => {
    const b = new B();
    const w = b.param(f32(16, 32));
    const wb = b.op('broadcast_in_dim', [w], { shape: [4, 16, 32], broadcastDimensions: [1, 2] });
    const c = b.out(b.op('transpose', [wb], { permutation: [0, 2, 1] }), b.op('transpose', [wb], { permutation: [1, 0, 2] }));
    algebraicSimplify(c);
    dce(c);
    const [o1, o2] = c.outputs;
    expect(o1.prim?.name).toBe('broadcast_in_dim');
    expect(o1.operands[0].prim?.name).toBe('transpose');
    expect(o1.operands[0].shape.shape).toEqual([32, 16]);
    expect(o1.params.broadcastDimensions).toEqual([1, 2]);
    expect(o2.prim?.name).toBe('broadcast_in_dim');
    expect(o2.operands[0]).toBe(w);
    expect(o2.params.broadcastDimensions).toEqual([0, 2]);
  });
});

describe('elementwise fusion', () => {
  it('fuses a DAG of elementwise ops (with a scalar broadcast) into one kernel', () => {
    const b = new B();
    const x = b.param(f32(8));
    const y = b.param(f32(8));
    const half = b.op('broadcast_in_dim', [b.constant(0.5)], { shape: [8], broadcastDimensions: [] });
    const t = b.op('tanh', [b.op('mul', [x, half])]);
    const sum = b.op('add', [t, b.op('exp', [t])]);
    const z = b.op('mul', [sum, y]);
    const red = b.op('reduce_sum', [z], { axes: [0] });
    const c = b.out(red);
    const mod = new HloModule('m', c);
    expect(fuseElementwise(c, mod)).toBe(1);
    dce(c);
    // The reduction joins too (an input fusion rooted at the reduce).
    expect(prims(c)).toEqual(['parameter', 'parameter', 'constant', 'fusion']);
    const f = c.instructions[3];
    expect(f.params.kind).toBe('kInput');
    expect(f.called[0].instructions.filter((i) => i.opcode !== 'parameter')).toHaveLength(7);
    expect(kernelSource(f.called[0])).toContain('Math.tanh');
  });
  it('does not fuse through a value used outside the group, nor across shapes', () => {
    const b = new B();
    const x = b.param(f32(4));
    const e = b.op('exp', [x]);
    const n = b.op('neg', [e]);
    const r = b.op('reduce_sum', [e], { axes: [0] }); // e escapes
    const m = b.op('mul', [n, n]);
    const c = b.out(m, r);
    fuseElementwise(c);
    dce(c);
    expect(prims(c)).toEqual(['parameter', 'exp', 'reduce_sum', 'fusion']);
    const b2 = new B();
    const p = b2.param(f32(2, 3));
    const q = b2.op('reduce_sum', [b2.op('exp', [p])], { axes: [1] });
    const c2 = b2.out(b2.op('neg', [q]));
    expect(fuseElementwise(c2)).toBe(1); // exp into the reduction; neg (other shape) stays out
    dce(c2);
    expect(prims(c2)).toEqual(['parameter', 'fusion', 'neg']);
  });
  it('fuses broadcasts of non-scalars and reductions over leading axes', () => {
    const b = new B();
    const x = b.param(f32(3, 4));
    const bias = b.param(f32(4));
    const bb = b.op('broadcast_in_dim', [bias], { shape: [3, 4], broadcastDimensions: [1] });
    const r = b.op('reduce_sum', [b.op('mul', [b.op('exp', [x]), bb])], { axes: [0] });
    const c = b.out(r);
    expect(fuseElementwise(c)).toBe(1);
    dce(c);
    expect(prims(c)).toEqual(['parameter', 'parameter', 'fusion']);
    const src = kernelSource(c.instructions[2].called[0]);
    expect(src).toContain('c1 * 1');
    expect(src).toContain('scratch');
  });
  it('runs a broadcast that only adds size-1 dims inside a fusion', () => {
    const b = new B();
    const x = b.param(f32(2, 3));
    const e = b.op('exp', [x]);
    const bc = b.op('broadcast_in_dim', [e], { shape: [1, 2, 3], broadcastDimensions: [1, 2] });
    const c = b.out(b.op('neg', [bc]));
    fuseElementwise(c);
    dce(c);
    const fusion = c.instructions.find((i) => i.opcode === 'fusion')!;
    const out = new Float32Array(6);
    compileKernel(fusion.called[0])([Float32Array.from([0, 1, 2, 3, 4, 5])], out, 6);
    // exp has another shape than the loop, so it is an input; the broadcast reads it in order.
    expect(fusion.operands[0]).toBe(e);
    expect(Array.from(out)).toEqual([-0, -1, -2, -3, -4, -5]);
  });
  it('leaves non-float32 arithmetic unfused', () => {
    const b = new B();
    const x = b.param(ty('int32', 4));
    const c = b.out(b.op('neg', [b.op('neg', [x])]));
    expect(fuseElementwise(c)).toBe(0);
  });
});

describe('buffer assignment', () => {
  it('reuses dead temporaries, and donated arguments for outputs', () => {
    const b = new B();
    const x = b.param(f32(256));
    let v = x;
    for (let k = 0; k < 6; k++) v = b.op(k % 2 ? 'exp' : 'neg', [v]);
    const c = b.out(v);
    const a = assignBuffers(c);
    expect(a.argumentBytes).toBe(1024);
    expect(a.outputBytes).toBe(1024);
    expect(a.tempBytesNoReuse).toBe(6 * 1024);
    expect(a.tempBytes).toBe(2 * 1024); // ping-pong between two slabs
    expect(a.peakBytes).toBe(3 * 1024);
    expect(a.aliasedBytes).toBe(0);
    const d = assignBuffers(c, [0]);
    expect(d.aliasedBytes).toBeGreaterThan(0);
    expect(d.tempBytes).toBeLessThan(a.tempBytes);
  });
  it('keeps a value alive until its last use', () => {
    const b = new B();
    const x = b.param(f32(100));
    const e = b.op('exp', [x]);
    const n = b.op('neg', [x]);
    const s = b.op('sin', [n]);
    const c = b.out(b.op('add', [e, s]));
    const a = assignBuffers(c);
    const se = a.slots.get(e)!;
    const ss = a.slots.get(s)!;
    expect(se.offset === ss.offset && se.region === ss.region).toBe(false);
    expect(a.lastUse.get(e)).toBe(4);
  });
});
