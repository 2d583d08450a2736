// sort / argsort / top_k laws: the output is sorted, a permutation of the input, stable for ties,
// NaN last; multi-operand sorts are lexicographic over num_keys; errors name the bad values.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lax, np } from '../index';

const prod = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);

/** The lines of an array of `shape` along `axis`, each as the list of its flat offsets. */
function lines(shape: number[], axis: number): number[][] {
  const st = shape.map((_, i) => prod(shape.slice(i + 1)));
  const out: number[][] = [];
  for (let f = 0; f < prod(shape); f++) {
    if (Math.floor(f / st[axis]) % shape[axis] !== 0) continue;
    out.push(Array.from({ length: shape[axis] }, (_, i) => f + i * st[axis]));
  }
  return out;
}

const total = (a: number, b: number): number => (Number.isNaN(a) ? (Number.isNaN(b) ? 0 : 1) : Number.isNaN(b) ? -1 : a < b ? -1 : a > b ? 1 : 0);

const arb = fc
  .array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 3 })
  .chain((shape) =>
    fc.tuple(
      fc.constant(shape),
      fc.nat(shape.length - 1),
      fc.array(fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constant(NaN), fc.constant(Infinity)), { minLength: prod(shape), maxLength: prod(shape) }),
      fc.boolean(),
    ),
  );

describe('sort', () => {
  it('is sorted (NaN last), a permutation, and argsort is stable', () => {
    fc.assert(
      fc.property(arb, ([shape, axis, vals, descending]) => {
        const x = np.array(vals).reshape(shape);
        const s = np.sort(x, { axis, descending }).dataSync();
        const idx = np.argsort(x, { axis, descending });
        const a = idx.dataSync();
        const xs = x.dataSync();
        const st = shape.map((_, i) => prod(shape.slice(i + 1)));
        for (const line of lines(shape, axis)) {
          const got = line.map((f) => s[f]);
          const want = line.map((f) => xs[f]).sort(total);
          if (descending) want.reverse();
          if (!descending) expect(got).toEqual(want);
          else {
            // Descending: same multiset, non-increasing (NaN first).
            expect(got.slice().sort(total)).toEqual(want.slice().sort(total));
            for (let i = 1; i < got.length; i++) expect(total(got[i - 1], got[i])).toBeGreaterThanOrEqual(0);
          }
          // argsort: the indices are a permutation that reproduces the sorted values, stably.
          const ids = line.map((f) => a[f]);
          expect(ids.slice().sort((p, q) => p - q)).toEqual([...ids.keys()]);
          const base = line[0];
          const picked = ids.map((i) => xs[base + i * st[axis]]);
          expect(picked.map((v) => (Number.isNaN(v) ? 'nan' : v))).toEqual(got.map((v) => (Number.isNaN(v) ? 'nan' : v)));
          for (let i = 1; i < ids.length; i++) if (total(picked[i - 1], picked[i]) === 0) expect(ids[i]).toBeGreaterThan(ids[i - 1]);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('sorts several operands by the first numKeys keys, lexicographically', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 2 })), { minLength: 1, maxLength: 12 }), (pairs) => {
        const k1 = np.array(pairs.map((p) => p[0]));
        const k2 = np.array(pairs.map((p) => p[1]));
        const pos = np.arange(pairs.length);
        const [s1, s2, sp] = lax.sort([k1, k2, pos], { numKeys: 2 });
        const want = pairs.map((p, i) => [p[0], p[1], i]).sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
        expect(s1.toArray()).toEqual(want.map((w) => w[0]));
        expect(s2.toArray()).toEqual(want.map((w) => w[1]));
        expect(sp.toArray()).toEqual(want.map((w) => w[2]));
        const [, onlyFirst] = lax.sortKeyVal(k1, pos);
        expect(onlyFirst.toArray()).toEqual(pairs.map((p, i) => [p[0], i]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map((w) => w[1]));
      }),
      { numRuns: 60 },
    );
  });

  it('keeps bf16 bits and sorts ints and bools', () => {
    expect(np.sort(np.array([3, -1, 2], 'bfloat16')).toArray()).toEqual([-1, 2, 3]);
    expect(np.sort(np.array([true, false, true])).toArray()).toEqual([false, true, true]);
    expect(np.sort(np.array([4000000000, 1], 'uint32')).toArray()).toEqual([1, 4000000000]);
    expect(np.sort(np.array([[3, 1], [2, 0]]), { axis: null }).toArray()).toEqual([0, 1, 2, 3]);
  });

  it('top_k equals the first k of a stable descending argsort (NaN largest)', () => {
    fc.assert(
      fc.property(arb, fc.nat(5), ([shape, , vals], kk) => {
        const x = np.array(vals).reshape(shape);
        const k = kk % (shape[shape.length - 1] + 1);
        const [v, i] = lax.topK(x, k);
        const want = np.argsort(x, { axis: -1, descending: true }).get('...', `:${k}`);
        expect(Array.from(i.dataSync())).toEqual(Array.from(want.dataSync()));
        const wantV = np.takeAlongAxis(x, want, -1).dataSync();
        expect(Array.from(v.dataSync()).map(String)).toEqual(Array.from(wantV).map(String));
      }),
      { numRuns: 100 },
    );
  });

  it('top_k returns the k largest with their indices (ties by lower index)', () => {
    const [v, i] = lax.topK(np.array([[1, 5, 3, 5], [0, -1, 2, 2]]), 3);
    expect(v.toArray()).toEqual([
      [5, 5, 3],
      [2, 2, 0],
    ]);
    expect(i.toArray()).toEqual([
      [1, 3, 2],
      [2, 3, 0],
    ]);
    expect(i.dtype).toBe('int32');
    expect(() => lax.topK(np.array([1, 2]), 3)).toThrow(/top_k: k 3 must be between 0 and the last dimension of operand \[2\] \(2\)/);
  });

  it('rejects bad arguments', () => {
    expect(() => lax.sort(np.array(1))).toThrow(/rank >= 1/);
    expect(() => lax.sort([np.zeros([2]), np.zeros([3])])).toThrow(/operands must have equal shapes; got \[2\], \[3\]/);
    expect(() => lax.sort([np.zeros([2])], { numKeys: 2 })).toThrow(/num_keys 2 must be between 1 and the number of operands \(1\)/);
    expect(() => np.sort(np.zeros([2, 2]), { axis: 2 })).toThrow(/axis 2 is out of range for an array of rank 2/);
  });
});
