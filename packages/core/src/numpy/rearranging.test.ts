// Shape laws (transpose / reshape round trips, broadcasting), flip / roll / tile / repeat against
// naive loops, and the eager-only nonzero / argwhere / boolean masks.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Array as TArray, np } from '../index';
import { type Trace } from '../internal';
import { prod, unravel, ravel } from '../../test/indexMath';

const shapeArb = fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 });
const arange = (shape: number[]): TArray => np.arange(prod(shape)).reshape(shape);

describe('shape laws', () => {
  it('transpose(transpose(x, p), inverse(p)) == x', () => {
    const arb = shapeArb.chain((s) => fc.tuple(fc.constant(s), fc.shuffledSubarray([...s.keys()], { minLength: s.length, maxLength: s.length })));
    fc.assert(
      fc.property(arb, ([shape, p]) => {
        const x = arange(shape);
        const inv = p.map((_, i) => p.indexOf(i));
        const t = np.transpose(x, p);
        expect(t.shape).toEqual(p.map((a) => shape[a]));
        expect(np.transpose(t, inv).dataSync()).toEqual(x.dataSync());
        // Element law: t[idx] == x[idx permuted back].
        for (let f = 0; f < Math.min(t.size, 20); f++) {
          const idx = unravel(f, t.shape);
          const src = shape.map((_, d) => idx[p.indexOf(d)]);
          expect(t.dataSync()[f]).toBe(ravel(src, shape));
        }
      }),
      { numRuns: 80 },
    );
  });

  it('reshape round-trips and keeps row-major order', () => {
    const arb = shapeArb.chain((s) => fc.tuple(fc.constant(s), fc.shuffledSubarray(s)));
    fc.assert(
      fc.property(arb, ([shape, other]) => {
        const x = arange(shape);
        const target = [...other, prod(shape) / prod(other)];
        const y = np.reshape(x, target);
        expect(y.dataSync()).toEqual(x.dataSync());
        expect(np.reshape(y, shape).shape).toEqual(shape);
        expect(np.reshape(x, [-1]).shape).toEqual([prod(shape)]);
      }),
      { numRuns: 60 },
    );
  });

  it('broadcasting: broadcastTo then index equals the source at the broadcast index', () => {
    const arb = shapeArb.chain((s) => fc.tuple(fc.constant(s), fc.tuple(...s.map(() => fc.boolean())), fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 2 })));
    fc.assert(
      fc.property(arb, ([shape, ones, lead]) => {
        const src = shape.map((d, i) => (ones[i] ? 1 : d));
        const x = arange(src);
        const target = [...lead, ...shape];
        const y = np.broadcastTo(x, target);
        const ys = y.dataSync();
        for (let f = 0; f < y.size; f++) {
          const idx = unravel(f, target).slice(lead.length);
          expect(ys[f]).toBe(ravel(idx.map((v, d) => (src[d] === 1 ? 0 : v)), src));
        }
        // add broadcasts both ways and is commutative.
        expect(np.add(x, y).dataSync()).toEqual(np.add(y, x).dataSync());
      }),
      { numRuns: 60 },
    );
  });
});

describe('flip / roll / tile / repeat', () => {
  it('flip and roll match naive index maps', () => {
    const arb = shapeArb.chain((s) => fc.tuple(fc.constant(s), fc.nat(s.length - 1), fc.integer({ min: -7, max: 7 })));
    fc.assert(
      fc.property(arb, ([shape, axis, shift]) => {
        const x = arange(shape);
        const f = np.flip(x, axis).dataSync();
        const r = np.roll(x, shift, axis).dataSync();
        for (let k = 0; k < x.size; k++) {
          const idx = unravel(k, shape);
          const fi = idx.slice();
          fi[axis] = shape[axis] - 1 - idx[axis];
          expect(f[k]).toBe(ravel(fi, shape));
          const ri = idx.slice();
          ri[axis] = (((idx[axis] - shift) % shape[axis]) + shape[axis]) % shape[axis];
          expect(r[k]).toBe(ravel(ri, shape));
        }
        const flat = np.roll(x, shift).dataSync();
        for (let k = 0; k < x.size; k++) expect(flat[k]).toBe((((k - shift) % x.size) + x.size) % x.size);
      }),
      { numRuns: 60 },
    );
    expect(np.roll(np.arange(6).reshape([2, 3]), [1, 1], [0, 1]).toArray()).toEqual([
      [5, 3, 4],
      [2, 0, 1],
    ]);
  });

  it('tile and repeat match naive constructions', () => {
    const arb = shapeArb.chain((s) => fc.tuple(fc.constant(s), fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 4 }), fc.nat(s.length - 1), fc.array(fc.integer({ min: 0, max: 3 }), { minLength: s[0], maxLength: s[0] })));
    fc.assert(
      fc.property(arb, ([shape, reps, axis, per]) => {
        const x = arange(shape);
        const t = np.tile(x, reps);
        const rank = Math.max(shape.length, reps.length);
        const s = [...Array(rank - shape.length).fill(1), ...shape];
        const r = [...Array(rank - reps.length).fill(1), ...reps];
        expect(t.shape).toEqual(s.map((d, i) => d * r[i]));
        const td = t.dataSync();
        for (let k = 0; k < t.size; k++) {
          const idx = unravel(k, t.shape).map((v, i) => v % s[i]);
          expect(td[k]).toBe(ravel(idx, s));
        }
        const rep = np.repeat(x, 2, axis);
        const rd = rep.dataSync();
        for (let k = 0; k < rep.size; k++) {
          const idx = unravel(k, rep.shape);
          idx[axis] = Math.floor(idx[axis] / 2);
          expect(rd[k]).toBe(ravel(idx, shape));
        }
        const rp = np.repeat(x, per, 0);
        const rows: number[] = [];
        per.forEach((c, i) => rows.push(...Array(c).fill(i)));
        expect(rp.shape).toEqual([rows.length, ...shape.slice(1)]);
        expect(rp.dataSync()).toEqual(np.take(x, rows.length ? rows : np.zeros([0], 'int32'), { axis: 0 }).dataSync());
        expect(np.repeat(x, np.array(per), 0, { totalRepeatLength: rows.length }).dataSync()).toEqual(rp.dataSync());
      }),
      { numRuns: 60 },
    );
    expect(np.repeat(np.array([[1, 2], [3, 4]]), 2).toArray()).toEqual([1, 1, 2, 2, 3, 3, 4, 4]);
    expect(np.repeat(np.array([5, 6, 7]), np.array([2, 0, 1]), 0, { totalRepeatLength: 3 }).toArray()).toEqual([5, 5, 7]);
    expect(np.repeat(np.array([5, 6, 7]), [2, 0, 1], 0, { totalRepeatLength: 5 }).toArray()).toEqual([5, 5, 7, 7, 7]);
    expect(np.repeat(np.array([5, 6, 7]), [2, 0, 1], 0, { totalRepeatLength: 2 }).toArray()).toEqual([5, 5]);
    expect(np.repeat(np.array([[1, 2], [3, 4]]), 2, 1, { totalRepeatLength: 4 }).toArray()).toEqual([
      [1, 1, 2, 2],
      [3, 3, 4, 4],
    ]);
    expect(() => np.repeat(np.arange(3), [1, 2])).toThrow(/repeats has 2 entries but axis 0 of array \[3\] has 3 elements/);
    expect(() => np.tile(np.arange(3), [-1])).toThrow(/non-negative integers/);
  });
});

describe('nonzero / argwhere / masks (eager only)', () => {
  it('finds the nonzero coordinates in row-major order', () => {
    const x = np.array([
      [0, 3, 0],
      [4, 0, 5],
    ]);
    const [r, c] = np.nonzero(x);
    expect(r.toArray()).toEqual([0, 1, 1]);
    expect(c.toArray()).toEqual([1, 0, 2]);
    expect(np.argwhere(x).toArray()).toEqual([
      [0, 1],
      [1, 0],
      [1, 2],
    ]);
    expect(np.flatnonzero(x).toArray()).toEqual([1, 3, 5]);
    expect(x.get(np.greater(x, 3)).toArray()).toEqual([4, 5]);
    expect(x.at(np.equal(x, 0)).set(-1).toArray()).toEqual([
      [-1, 3, -1],
      [4, -1, 5],
    ]);
  });

  it('with a static size: the first hits, padded with fillValue, equal to the eager result', () => {
    fc.assert(
      fc.property(shapeArb, fc.array(fc.boolean(), { minLength: 256, maxLength: 256 }), fc.nat(8), fc.integer({ min: -3, max: 3 }), (shape, bits, size, fill) => {
        const x = np.array(bits.slice(0, prod(shape))).reshape(shape);
        const eager = np.nonzero(x).map((c) => Array.from(c.dataSync()));
        const sized = np.nonzero(x, { size, fillValue: fill });
        sized.forEach((c, d) => {
          const want = eager[d].slice(0, size);
          while (want.length < size) want.push(fill);
          expect(Array.from(c.dataSync())).toEqual(want);
        });
        const aw = np.argwhere(x, { size, fillValue: fill });
        expect(aw.shape).toEqual([size, shape.length]);
        expect(Array.from(np.flatnonzero(x, { size }).dataSync()).slice(0, Math.min(size, eager[0].length))).toEqual(Array.from(np.flatnonzero(x).dataSync()).slice(0, size));
      }),
      { numRuns: 60 },
    );
    expect(np.argwhere(np.array(3)).shape).toEqual([1, 0]);
    expect(np.argwhere(np.array(0)).shape).toEqual([0, 0]);
    expect(() => np.nonzero(np.ones([2]), { size: -1 })).toThrow(/size must be a non-negative integer; got -1/);
    expect(() => np.nonzero(np.ones([2, 2]), { size: 1, fillValue: [0] })).toThrow(/one integer per dimension \(2\)/);
  });

  it('raises a clear error on a tracer', () => {
    // A minimal tracer: an Array subclass whose _trace is non-null.
    const trace = { level: 1, processPrimitive: () => [] } as unknown as Trace;
    class Tracer extends TArray {
      override get _trace() {
        return trace;
      }
    }
    const t = new Tracer({ shape: [3], dtype: 'bool', weakType: false }, null, null);
    expect(() => np.nonzero(t)).toThrow(/nonzero: needs a concrete array, but got a traced bool\[3\]/);
    expect(() => np.argwhere(t)).toThrow(/pass a static \{ size \}/);
    expect(() => np.arange(3).get(t)).toThrow(/boolean mask indexing needs concrete values/);
    expect(() => np.repeat(np.arange(3), t)).toThrow(/repeat: needs a concrete array/);
  });
});

describe('rot90 / append / searchsorted / grids', () => {
  it('rot90 four times is the identity and once matches NumPy', () => {
    const m = np.array([
      [1, 2],
      [3, 4],
    ]);
    expect(np.rot90(m).toArray()).toEqual([
      [2, 4],
      [1, 3],
    ]);
    expect(np.rot90(m, -1).toArray()).toEqual([
      [3, 1],
      [4, 2],
    ]);
    expect(np.rot90(m, 2).toArray()).toEqual([
      [4, 3],
      [2, 1],
    ]);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 2, maxLength: 3 }), fc.integer({ min: -5, max: 5 }), (shape, k) => {
        const x = arange(shape);
        const once = np.rot90(x, k);
        expect(np.rot90(once, -k).dataSync()).toEqual(x.dataSync());
        expect(np.rot90(np.rot90(x, k), 4 - k).dataSync()).toEqual(x.dataSync());
      }),
      { numRuns: 30 },
    );
    expect(() => np.rot90(m, 1, [0, 0])).toThrow(/axes must be different/);
  });

  it('append flattens without an axis', () => {
    expect(np.append(np.array([[1, 2]]), [3]).toArray()).toEqual([1, 2, 3]);
    expect(np.append(np.array([[1, 2]]), [[3, 4]], 0).toArray()).toEqual([
      [1, 2],
      [3, 4],
    ]);
  });

  it('searchsorted matches a linear scan on both sides', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -5, max: 5 }), { maxLength: 8 }), fc.array(fc.integer({ min: -6, max: 6 }), { minLength: 1, maxLength: 5 }), (raw, v) => {
        const a = [...raw].sort((p, q) => p - q);
        const A = a.length ? np.array(a) : np.zeros([0], 'int32');
        expect(np.searchsorted(A, np.array(v)).toArray()).toEqual(v.map((x) => a.filter((y) => y < x).length));
        expect(np.searchsorted(A, np.array(v), { side: 'right' }).toArray()).toEqual(v.map((x) => a.filter((y) => y <= x).length));
      }),
      { numRuns: 40 },
    );
  });

  it('meshgrid, indices, unravelIndex and ravelMultiIndex', () => {
    const [X, Y] = np.meshgrid(np.array([1, 2, 3]), np.array([4, 5]));
    expect(X.toArray()).toEqual([
      [1, 2, 3],
      [1, 2, 3],
    ]);
    expect(Y.toArray()).toEqual([
      [4, 4, 4],
      [5, 5, 5],
    ]);
    const [I, J] = np.meshgrid(np.array([1, 2, 3]), np.array([4, 5]), { indexing: 'ij' });
    expect(I.shape).toEqual([3, 2]);
    expect(J.toArray()).toEqual([
      [4, 5],
      [4, 5],
      [4, 5],
    ]);
    expect(np.indices([2, 3]).toArray()).toEqual([
      [
        [0, 0, 0],
        [1, 1, 1],
      ],
      [
        [0, 1, 2],
        [0, 1, 2],
      ],
    ]);
    fc.assert(
      fc.property(shapeArb, fc.array(fc.nat(1000), { minLength: 1, maxLength: 6 }), (shape, raw) => {
        const flat = raw.map((r) => r % prod(shape));
        const coords = np.unravelIndex(np.array(flat), shape);
        coords.forEach((c, d) => expect(c.toArray()).toEqual(flat.map((f) => unravel(f, shape)[d])));
        expect(np.ravelMultiIndex(coords, shape).toArray()).toEqual(flat);
      }),
      { numRuns: 40 },
    );
    expect(np.ravelMultiIndex([[5], [-1]], [3, 4], { mode: 'wrap' }).toArray()).toEqual([11]);
    expect(() => np.ravelMultiIndex([[0]], [3, 4])).toThrow(/got 1 index arrays for dims \[3,4\] \(2 needed\)/);
  });
});
