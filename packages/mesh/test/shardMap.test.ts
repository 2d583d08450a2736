// shardMap and the collectives: every result equals the same computation written on the whole
// array; grad through shardMap equals the unsharded grad (fast-check over random values, fixed
// seeds); grad, vmap and jit inside and around the body; bad specs are clear errors.
import { type Array, grad, jit, lax, np, random, vmap } from '@tpukit/core';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type Mesh,
  NamedSharding,
  P,
  allGather,
  allToAll,
  axisIndex,
  axisSize,
  devicePut,
  makeMesh,
  pmax,
  pmean,
  pmin,
  ppermute,
  psum,
  psumScatter,
  setCpuDeviceCount,
  shardMap,
} from '../src/index';
import { expectClose, ramp } from './helpers';

const rows = (x: Array, a: number, b: number) => lax.slice(x, x.shape.map((_, k) => (k === 0 ? a : 0)), x.shape.map((d, k) => (k === 0 ? b : d)));

let mesh: Mesh;
beforeAll(() => {
  setCpuDeviceCount(8);
  mesh = makeMesh([4, 2], ['x', 'y']);
});


describe('shardMap basics', () => {
  it('sees one block per device and reassembles by outSpecs', () => {
    const x = ramp([8, 4]);
    const shapes: number[][] = [];
    const f = shardMap((b: Array) => {
      shapes.push(b.shape.slice());
      return b.mul(2);
    }, { mesh, inSpecs: P('x', 'y'), outSpecs: P('x', 'y') });
    expectClose(f(x), x.mul(2));
    expect(shapes[0]).toEqual([2, 2]);
  });
  it('matmul with a psum over the contracted axis (the JAX docs example)', () => {
    const a = ramp([8, 16], 0.01);
    const b = ramp([16, 4], 0.02);
    const f = shardMap((ab: Array, bb: Array) => psum(np.matmul(ab, bb), 'y'), { mesh, inSpecs: [P('x', 'y'), P('y', null)], outSpecs: P('x', null) });
    expectClose(f(a, b), np.matmul(a, b), { rtol: 2e-2, atol: 2e-2 });
  });
  it('axisIndex and axisSize give the device coordinates', () => {
    const f = shardMap(() => axisIndex('x').mul(10).add(axisIndex('y')).reshape([1, 1]).astype('float32'), { mesh, inSpecs: [], outSpecs: P('x', 'y') });
    expect(globalThis.Array.from(f().dataSync())).toEqual([0, 1, 10, 11, 20, 21, 30, 31]);
    const g = shardMap((b: Array) => b.add(axisSize('x') * 100 + axisSize(['x', 'y'])), { mesh, inSpecs: P(), outSpecs: P() });
    expect(globalThis.Array.from(g(np.zeros([1])).dataSync())).toEqual([408]);
  });
  it('replicated inputs and outputs; checkVma rejects an output that varies along an unnamed axis', () => {
    const x = ramp([8]);
    const f = shardMap((b: Array) => b.add(1), { mesh, inSpecs: P(), outSpecs: P() });
    expectClose(f(x), x.add(1));
    const bad = shardMap((b: Array) => b, { mesh, inSpecs: P('x'), outSpecs: P() });
    expect(() => bad(x)).toThrow(/shardMap: output leaf 0 varies along mesh axis 'x' but its outSpecs entry P\(\) does not name 'x'/);
    // checkVma false takes the first device's block along the unnamed axis.
    const loose = shardMap((b: Array) => b, { mesh, inSpecs: P('x'), outSpecs: P(), checkVma: false });
    expectClose(loose(x), rows(x, 0, 2));
  });
  it('takes pytrees of arguments and outputs', () => {
    const f = shardMap((t: { a: Array; b: Array }) => ({ s: psum(np.sum(t.a), 'x'), b: t.b.neg() }), { mesh, inSpecs: [{ a: P('x'), b: P() }], outSpecs: { s: P(), b: P() } });
    const out = f({ a: ramp([8]), b: ramp([3]) }) as { s: Array; b: Array };
    expect(out.s.item()).toBe(28);
    expectClose(out.b, ramp([3]).neg());
  });
});

describe('collectives equal the unsharded computation', () => {
  const x = ramp([8, 4], 0.5);
  const run = (f: (b: Array) => Array, inSpec = P('x'), outSpec = P('x'), checkVma = true) => shardMap(f, { mesh, inSpecs: inSpec, outSpecs: outSpec, checkVma })(x);
  it('psum / pmean / pmax / pmin over one axis and over two', () => {
    const colSums = (v: Array) => np.sum(v, { axis: 0, keepdims: true });
    expectClose(run((b) => psum(np.sum(b, { axis: 0, keepdims: true }), 'x'), P('x'), P()), colSums(x));
    expectClose(run((b) => pmean(np.sum(b, { axis: 0, keepdims: true }), 'x'), P('x'), P()), colSums(x).div(4));
    expectClose(run((b) => pmax(np.max(b, { axis: 0, keepdims: true }), 'x'), P('x'), P()), np.max(x, { axis: 0, keepdims: true }));
    expectClose(run((b) => pmin(np.min(b, { axis: 0, keepdims: true }), 'x'), P('x'), P()), np.min(x, { axis: 0, keepdims: true }));
    expect(run((b) => psum(np.sum(b), ['x', 'y']).reshape([1]), P('x', 'y'), P()).item()).toBe(np.sum(x).item());
    // psum of a value that does not vary along the axis multiplies it by the axis size.
    expectClose(run((b) => psum(b, 'y'), P('x'), P('x')), x.mul(2));
  });
  it('allGather (stacked and tiled, one axis and two) and psumScatter', () => {
    expectClose(run((b) => allGather(b, 'x', { tiled: true }), P('x'), P(), false), x);
    expectClose(run((b) => allGather(b, 'x'), P('x'), P(), false), x.reshape([4, 2, 4]));
    expectClose(run((b) => allGather(b, 'x', { axis: 1, tiled: true }), P(null, 'x'), P(), false), x);
    expectClose(run((b) => allGather(b, ['x', 'y'], { tiled: true }), P(['x', 'y']), P(), false), x);
    // Each device holds x; psumScatter sums the 4 copies and leaves device i with row block i.
    expectClose(run((b) => psumScatter(b, 'x', { tiled: true }), P(), P('x')), x.mul(4));
    expectClose(run((b) => psumScatter(b.reshape([4, 2, 4]), 'x').reshape([2, 4]), P(), P('x')), x.mul(4));
    expectClose(run((b) => psumScatter(b, ['x', 'y'], { tiled: true }), P(), P(['x', 'y'])), x.mul(8));
  });
  it('ppermute: a ring shift, and zeros where nothing arrives', () => {
    const shift = run((b) => ppermute(b, 'x', [[0, 1], [1, 2], [2, 3], [3, 0]]));
    expectClose(shift, np.roll(x, 2, 0));
    const partial = run((b) => ppermute(b, 'x', [[0, 1]]));
    expectClose(partial, np.concatenate([np.zeros([2, 4]), rows(x, 0, 2), np.zeros([4, 4])], 0));
    expect(() => run((b) => ppermute(b, 'x', [[0, 1], [2, 1]]))).toThrow(/ppermute: perm .* is not a permutation: device 1 receives twice/);
    expect(() => run((b) => ppermute(b, 'x', [[0, 4]]))).toThrow(/indices in \[0, 4\) of axis 'x'/);
  });
  it('allToAll moves a sharded dimension (tiled and untiled)', () => {
    // Rows sharded -> columns sharded: the global array is unchanged, its layout moves.
    expectClose(run((b) => allToAll(b, 'x', 1, 0, { tiled: true }), P('x'), P(null, 'x')), x);
    const y = ramp([4, 4, 2]);
    const g = shardMap((b: Array) => allToAll(b, 'x', 1, 0), { mesh, inSpecs: P('x'), outSpecs: P(null, 'x') })(y);
    // Untiled: block [1,4,2] -> split axis 1 (size 4) replaced by a new axis 0: result [4,1,2] per device.
    expect(g.shape).toEqual([4, 4, 2]);
    expectClose(g, y);
  });
  it('collectives outside shardMap, or over an unknown axis, are clear errors', () => {
    expect(() => psum(x, 'x')).toThrow(/psum: axis 'x' is not bound here; collectives run inside shardMap .*no shardMap is running/);
    expect(() => run((b) => psum(b, 'z'))).toThrow(/psum: axis 'z' is not bound here.*bound axes: 'x', 'y'/);
  });
});

describe('bad specs', () => {
  it('name the argument, the spec and the shape', () => {
    const id = (b: Array) => b;
    expect(() => shardMap(id, { mesh, inSpecs: P('z'), outSpecs: P() })(ramp([8]))).toThrow(/spec P\('z'\) names axis 'z', which Mesh\(x=4, y=2\) does not have/);
    expect(() => shardMap(id, { mesh, inSpecs: P('x', 'x'), outSpecs: P() })(ramp([8, 8]))).toThrow(/uses mesh axis 'x' twice/);
    expect(() => shardMap(id, { mesh, inSpecs: P('x'), outSpecs: P('x') })(ramp([6]))).toThrow(/shardMap: argument leaf 0 \(inSpecs P\('x'\)\): dimension 0 of \[6\] \(size 6\) is not divisible by 'x' = 4/);
    expect(() => shardMap(id, { mesh, inSpecs: P(null, 'x'), outSpecs: P() })(ramp([8]))).toThrow(/has 2 entries but the array \[8\] has only 1 dimensions/);
    expect(() => shardMap(id, { mesh, inSpecs: [P('x'), P()], outSpecs: P() })(ramp([8]))).toThrow(/inSpecs must be one PartitionSpec or one entry per argument \(1\); got 2 entries/);
  });
  it('an argument sharded over another mesh is rejected', () => {
    const other = makeMesh([2, 4], ['x', 'y']);
    const a = devicePut(ramp([8]), new NamedSharding(other, P('x')));
    expect(() => shardMap((b: Array) => b, { mesh, inSpecs: P('x'), outSpecs: P('x') })(a)).toThrow(/shardMap: argument leaf 0 is sharded over Mesh\(x=2, y=4\) but shardMap's mesh is Mesh\(x=4, y=2\)/);
  });
});

describe('transformations', () => {
  // A small data-parallel model: per-device loss on its batch block, mean over devices.
  const model = (w: Array, xb: Array) => np.mean(np.square(np.tanh(np.matmul(xb, w)).sub(0.3)));
  const sharded = (w: Array, xs: Array) => shardMap((wb: Array, xb: Array) => pmean(model(wb, xb), ['x', 'y']), { mesh, inSpecs: [P(), P(['x', 'y'])], outSpecs: P() })(w, xs);
  const arrays = fc.tuple(fc.array(fc.float({ min: -1, max: 1, noNaN: true }), { minLength: 12, maxLength: 12 }), fc.array(fc.float({ min: -1, max: 1, noNaN: true }), { minLength: 48, maxLength: 48 }));

  it('grad through shardMap equals the unsharded grad (fast-check, fixed seed)', () => {
    fc.assert(
      fc.property(arrays, ([wv, xv]) => {
        const w = np.array(wv, 'float32').reshape([3, 4]);
        const xs = np.array(xv, 'float32').reshape([16, 3]);
        const want = grad((ww: Array) => model(ww, xs))(w);
        expectClose(grad((ww: Array) => sharded(ww, xs))(w), want, { rtol: 2e-2, atol: 1e-3 });
        // Gradient with respect to the sharded input too.
        const gx = grad((xx: Array) => sharded(w, xx))(xs);
        expectClose(gx, grad((xx: Array) => model(w, xx))(xs), { rtol: 2e-2, atol: 1e-3 });
      }),
      { seed: 42, numRuns: 8 },
    );
  });
  it('grad of every linear collective equals the grad of its unsharded meaning', () => {
    const x = random.normal(random.key(1), [8, 4]);
    const w = random.normal(random.key(2), [8, 4]);
    const cases: [string, (v: Array) => Array, (v: Array) => Array][] = [
      ['allGather', shardMap((b: Array) => allGather(b, 'x', { tiled: true }).mul(w), { mesh, inSpecs: P('x'), outSpecs: P(), checkVma: false }), (v) => v.mul(w)],
      ['psumScatter', shardMap((b: Array) => psumScatter(b.mul(w), 'x', { tiled: true }), { mesh, inSpecs: P(), outSpecs: P('x') }), (v) => v.mul(w).mul(4)],
      ['ppermute', shardMap((b: Array) => ppermute(b, 'x', [[0, 1], [1, 2], [2, 3], [3, 0]]), { mesh, inSpecs: P('x'), outSpecs: P('x') }), (v) => np.roll(v, 2, 0)],
      ['allToAll', shardMap((b: Array) => allToAll(b, 'x', 1, 0, { tiled: true }), { mesh, inSpecs: P('x'), outSpecs: P(null, 'x') }), (v) => v],
      ['pmax', shardMap((b: Array) => pmax(b, 'x'), { mesh, inSpecs: P('x'), outSpecs: P() }), (v) => np.max(v.reshape([4, 2, 4]), { axis: 0 })],
    ];
    for (const [name, f, ref] of cases) {
      const loss = (g: (v: Array) => Array) => (v: Array) => np.sum(np.sin(g(v)));
      const got = grad(loss(f))(x);
      const want = grad(loss(ref))(x);
      try {
        expectClose(got, want, { rtol: 1e-4, atol: 1e-5 });
      } catch (e) {
        throw new Error(`${name}: ${(e as Error).message}`);
      }
    }
  });
  it('grad inside the body: psum transposes to pvary (the loss of each device is its own)', () => {
    // d/db of sum(psum(b^2)) on each device is 2b (the psum's cotangent is the one unvarying value).
    const f = shardMap((b: Array) => grad((v: Array) => np.sum(psum(np.square(v), 'x')))(b), { mesh, inSpecs: P('x'), outSpecs: P('x') });
    expectClose(f(ramp([8])), ramp([8]).mul(2));
    const g = shardMap((b: Array) => grad((v: Array) => np.sum(allGather(v, 'x', { tiled: true }).mul(axisIndex('x').astype('float32'))))(b), { mesh, inSpecs: P('x'), outSpecs: P('x') });
    // Each device's block is used by every device i with weight i: its grad is sum_i i = 6.
    expectClose(g(ramp([8])), np.full([8], 6));
  });
  it('grad inside the body: ppermute transposes to the inverse permutation, allToAll to the swapped one', () => {
    const c = random.normal(random.key(4), [8, 8]);
    const ring: [number, number][] = [[0, 1], [1, 2], [2, 3], [3, 0]];
    const pp = shardMap((b: Array, cb: Array) => grad((v: Array) => np.sum(ppermute(v, 'x', ring).mul(cb)))(b), { mesh, inSpecs: [P('x'), P('x')], outSpecs: P('x') });
    // Device j sent its block to j+1, whose weights it gets back.
    expectClose(pp(ramp([8, 8]), c), np.roll(c, -2, 0));
    const a2a = shardMap((b: Array, cb: Array) => grad((v: Array) => np.sum(allToAll(v, 'x', 1, 0, { tiled: true }).mul(cb)))(b), { mesh, inSpecs: [P('x'), P(null, 'x')], outSpecs: P('x') });
    expectClose(a2a(ramp([8, 8]), c), c);
  });
  it('vmap over shardMap and vmap inside the body equal a loop', () => {
    const f = shardMap((b: Array) => psum(np.sum(np.sin(b), { axis: 0 }), 'x'), { mesh, inSpecs: P('x'), outSpecs: P() });
    const xs = random.normal(random.key(3), [3, 8, 2]);
    const loop = np.stack([0, 1, 2].map((i) => f(rows(xs, i, i + 1).reshape([8, 2]))));
    expectClose(vmap(f)(xs), loop, { rtol: 1e-5, atol: 1e-5 });
    const g = shardMap((b: Array) => vmap((r: Array) => psum(np.sum(r), 'x'))(b), { mesh, inSpecs: P(null, 'x'), outSpecs: P() });
    expectClose(g(ramp([3, 8])), np.sum(ramp([3, 8]), { axis: 1 }));
    const h = shardMap((b: Array) => vmap((r: Array) => allGather(r, 'x', { tiled: true }))(b), { mesh, inSpecs: P(null, 'x'), outSpecs: P(), checkVma: false });
    expectClose(h(ramp([3, 8])), ramp([3, 8]));
  });
  it('jit around and inside shardMap', () => {
    const f = shardMap((b: Array) => psum(np.sum(np.exp(b), { axis: 0, keepdims: true }), 'x'), { mesh, inSpecs: P('x'), outSpecs: P() });
    const x = ramp([8, 2], 0.1);
    expectClose(jit(f)(x), f(x));
    const g = shardMap(jit((b: Array) => ppermute(b, 'x', [[0, 3], [3, 0], [1, 2], [2, 1]])), { mesh, inSpecs: P('x'), outSpecs: P('x') });
    expectClose(g(ramp([4])), np.array([3, 2, 1, 0], 'float32'));
  });
});
