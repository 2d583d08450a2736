// Indexing and the jnp shape functions under the transformations: grad / vmap / jit of code that
// indexes, updates, sorts, pads and einsums agrees with eager evaluation and with closed forms.
import { describe, expect, it } from 'vitest';
import { type Array as TArray, grad, jit, makeJaxpr, np, vmap } from '../index';
import { expectAllclose } from '../../test/matchers';

const x34 = (): TArray => np.arange(12).astype('float32').reshape([3, 4]);

describe('grad through indexing', () => {
  it('gather reads scatter-add their cotangents back (duplicates accumulate)', () => {
    const g = grad((x: TArray) => np.sum(np.square(x.get([0, 2, 0], ':'))))(x34()) as TArray;
    const x = x34().dataSync();
    const want = Array.from(x, (v, i) => {
      const row = Math.floor(i / 4);
      return row === 0 ? 4 * v : row === 2 ? 2 * v : 0;
    });
    expectAllclose(g, want);
  });

  it('basic slices with negative steps and newaxis', () => {
    const g = grad((x: TArray) => np.sum(np.multiply(x.get('::-1', null, '1:3'), 3)))(x34()) as TArray;
    expect(g.toArray()).toEqual([
      [0, 3, 3, 0],
      [0, 3, 3, 0],
      [0, 3, 3, 0],
    ]);
  });

  it('at().set zeroes the overwritten cotangent; at().add passes it to the values', () => {
    const g = grad((x: TArray) => np.sum(x.at(1).set(0)))(x34()) as TArray;
    expect(g.toArray()).toEqual([
      [1, 1, 1, 1],
      [0, 0, 0, 0],
      [1, 1, 1, 1],
    ]);
    const gv = grad((v: TArray) => np.sum(np.square(x34().at([0, 0], 1).add(v))))(np.array([1, 2]).astype('float32')) as TArray;
    // Both updates land on x[0,1] = 1: out = 1 + v0 + v1 = 4, d/dv_i (out^2) = 2 * out = 8.
    expect(gv.toArray()).toEqual([8, 8]);
  });

  it('sort, takeAlongAxis, pad, roll, concatenate and einsum', () => {
    const x = np.array([3, 1, 2]).astype('float32');
    const w = np.array([1, 10, 100]).astype('float32');
    // sum(sort(x) * w): the weight lands on each element's sorted position.
    expect((grad((a: TArray) => np.sum(np.multiply(np.sort(a), w)))(x) as TArray).toArray()).toEqual([100, 1, 10]);
    expect((grad((a: TArray) => np.sum(np.multiply(np.takeAlongAxis(a, np.argsort(a), 0), w)))(x) as TArray).toArray()).toEqual([100, 1, 10]);
    expect((grad((a: TArray) => np.sum(np.pad(a, [1, 1], { mode: 'reflect' })))(x) as TArray).toArray()).toEqual([1, 3, 1]);
    expect((grad((a: TArray) => np.sum(np.multiply(np.roll(a, 1), w)))(x) as TArray).toArray()).toEqual([10, 100, 1]);
    expect((grad((a: TArray) => np.sum(np.concatenate([a, np.multiply(a, 2)])))(x) as TArray).toArray()).toEqual([3, 3, 3]);
    const m = np.arange(6).astype('float32').reshape([2, 3]);
    const gm = grad((a: TArray) => np.sum(np.einsum('ij,ij->i', a, a)))(m) as TArray;
    expectAllclose(gm, np.multiply(m, 2));
  });
});

describe('vmap and jit of indexing', () => {
  it('vmap over integer indices and over the indexed array', () => {
    const x = x34();
    const rows = vmap((i: TArray) => x.get(i))(np.array([2, 0])) as TArray;
    expect(rows.dataSync()).toEqual(x.get([2, 0]).dataSync());
    const picked = vmap((r: TArray) => r.get('::-1').get(0))(x) as TArray;
    expect(picked.toArray()).toEqual([3, 7, 11]);
    const upd = vmap((r: TArray, i: TArray) => r.at(i).set(-1))(x, np.array([0, 1, 3])) as TArray;
    expect(upd.toArray()).toEqual([
      [-1, 1, 2, 3],
      [4, -1, 6, 7],
      [8, 9, 10, -1],
    ]);
    const sorted = vmap((r: TArray) => np.sort(np.negative(r)))(x) as TArray;
    expect(sorted.dataSync()).toEqual(np.sort(np.negative(x), { axis: 1 }).dataSync());
  });

  it('jit gives the eager result and lowers to the primitives', () => {
    const f = (x: TArray, i: TArray): TArray => np.add(x.at(i, '1:').add(1).get(':', [0, 3]), np.einsum('ij->j', x).get(0));
    const x = x34();
    const i = np.array(2);
    expect((jit(f) as (a: TArray, b: TArray) => TArray)(x, i).dataSync()).toEqual(f(x, i).dataSync());
    const text = String(makeJaxpr(f)(x, i));
    expect(text).toContain('scatter-add');
    expect(text).toContain('gather');
  });

  it('value-dependent shapes need concrete values or a static size', () => {
    const x = np.array([0, 3, 0, 5]).astype('float32');
    const sized = (jit((a: TArray) => np.nonzero(a, { size: 3, fillValue: -1 })[0]) as (a: TArray) => TArray)(x);
    expect(sized.toArray()).toEqual([1, 3, -1]);
    expect(() => (jit((a: TArray) => np.nonzero(a)[0]) as (a: TArray) => TArray)(x)).toThrow(/nonzero: needs a concrete array.*pass a static \{ size \}/);
    expect(() => (jit((a: TArray) => a.get(np.greater(a, 1))) as (a: TArray) => TArray)(x)).toThrow(/boolean mask indexing needs concrete values/);
    const rep = (jit((a: TArray, r: TArray) => np.repeat(a, r, 0, { totalRepeatLength: 4 })) as (a: TArray, r: TArray) => TArray)(np.array([7, 8]), np.array([1, 3]));
    expect(rep.toArray()).toEqual([7, 8, 8, 8]);
  });
});
