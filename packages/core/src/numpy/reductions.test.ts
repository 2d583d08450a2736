/**
 * jnp reductions with axis / keepdims against naive loops over every index, per dtype, with
 * JAX's accumulation dtypes (bool / int8 sums in int32, bf16 in f32) and NaN behaviour.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Array, type DType, np } from '../index';
import { prod, ravel, unravel } from '../../test/indexMath';
import { TOL, expectAllclose } from '../../test/matchers';

const RUNS = { numRuns: 30 };

/** A random shape (rank 0..3, dims 0..4), values of `d`, and a random axis subset. */
function caseArb(d: DType, opts: { nonEmpty?: boolean } = {}) {
  const dim = fc.integer({ min: opts.nonEmpty ? 1 : 0, max: 4 });
  return fc.array(dim, { maxLength: 3 }).chain((shape) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const v =
      d === 'bool' ? fc.boolean().map(Number)
      : d === 'int8' ? fc.integer({ min: -128, max: 127 })
      : d === 'uint8' ? fc.integer({ min: 0, max: 255 })
      : d === 'int32' ? fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })
      : d === 'uint32' ? fc.integer({ min: 0, max: 2 ** 32 - 1 })
      : fc.float({ min: -100, max: 100, noNaN: true }).map((x) => Math.round(x * 8) / 8);
    return fc.record({
      shape: fc.constant(shape),
      vals: fc.array(v, { minLength: n, maxLength: n }),
      axes: fc.subarray(shape.map((_, i) => i)),
      keepdims: fc.boolean(),
      negative: fc.boolean(),
    });
  });
}

/** For each element of `shape` (row-major), its row-major index in the reduction over `axes`. */
function reducedIndex(shape: number[], axes: number[]): number[] {
  const outShape = shape.map((d, i) => (axes.includes(i) ? 1 : d));
  return globalThis.Array.from({ length: prod(shape) }, (_, f) => ravel(unravel(f, shape).map((i, k) => (axes.includes(k) ? 0 : i)), outShape));
}

/** Reduces `vals` (row-major over `shape`) over `axes` with a fold, naively. */
function naive(vals: number[], shape: number[], axes: number[], keepdims: boolean, init: number, step: (a: number, v: number) => number) {
  const outShape = shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const outN = outShape.reduce((a, b) => a * b, 1);
  const out = new globalThis.Array<number>(outN).fill(init);
  reducedIndex(shape, axes).forEach((o, f) => {
    out[o] = step(out[o], vals[f]);
  });
  const finalShape = keepdims ? outShape : shape.filter((_, i) => !axes.includes(i));
  return { shape: finalShape, out };
}

const toInt32 = (x: number): number => x | 0;
const axisArg = (axes: number[], ndim: number, negative: boolean) => (negative ? axes.map((a) => a - ndim) : axes);

describe('sum / prod / max / min over axes match naive loops', () => {
  const DTYPES: DType[] = ['float32', 'bfloat16', 'float16', 'int32', 'uint32', 'int8', 'uint8', 'bool'];
  for (const d of DTYPES) {
    it(`sum of ${d}`, () => {
      fc.assert(
        fc.property(caseArb(d), ({ shape, vals, axes, keepdims, negative }) => {
          const x = np.array(np.asarray(vals.length ? vals : [], 'float32').reshape(shape), d);
          const r = np.sum(x, { axis: axisArg(axes, shape.length, negative), keepdims });
          const outDtype = d === 'bool' || d === 'int8' ? 'int32' : d === 'uint8' ? 'uint32' : d;
          expect(r.dtype).toBe(outDtype);
          const xv = [...x.dataSync()];
          const step = outDtype === 'int32' ? (a: number, v: number) => toInt32(a + v) : outDtype === 'uint32' ? (a: number, v: number) => (a + v) >>> 0 : (a: number, v: number) => a + v;
          const ref = naive(xv, shape, axes, keepdims, 0, step);
          expect(r.shape).toEqual(ref.shape);
          expectAllclose(r, ref.out, TOL[outDtype]);
        }),
        RUNS,
      );
    });
  }

  for (const d of ['float32', 'int32', 'uint8', 'bfloat16'] as DType[]) {
    it(`prod of ${d}`, () => {
      fc.assert(
        fc.property(caseArb(d), ({ shape, vals, axes, keepdims }) => {
          const small = vals.map((v) => (d === 'float32' || d === 'bfloat16' ? Math.round(v) % 3 : v % 5));
          const x = np.array(np.asarray(small.length ? small : [], 'float32').reshape(shape), d);
          const r = np.prod(x, { axis: axes, keepdims });
          const outDtype = d === 'uint8' ? 'uint32' : d;
          const step = outDtype === 'int32' ? (a: number, v: number) => Math.imul(a, v) : outDtype === 'uint32' ? (a: number, v: number) => Math.imul(a, v) >>> 0 : (a: number, v: number) => a * v;
          const ref = naive([...x.dataSync()], shape, axes, keepdims, 1, step);
          expect(r.shape).toEqual(ref.shape);
          expectAllclose(r, ref.out, TOL[outDtype]);
        }),
        RUNS,
      );
    });
  }

  for (const d of ['float32', 'bfloat16', 'int8', 'uint32', 'bool'] as DType[]) {
    for (const which of ['max', 'min'] as const) {
      it(`${which} of ${d}`, () => {
        fc.assert(
          fc.property(caseArb(d, { nonEmpty: true }), ({ shape, vals, axes, keepdims }) => {
            const x = np.array(np.asarray(vals, 'float32').reshape(shape), d);
            const r = np[which](x, { axis: axes, keepdims });
            expect(r.dtype).toBe(d);
            const ref = naive([...x.dataSync()], shape, axes, keepdims, which === 'max' ? -Infinity : Infinity, which === 'max' ? Math.max : Math.min);
            expect(r.shape).toEqual(ref.shape);
            expectAllclose(r, ref.out, { rtol: 0, atol: 0 });
          }),
          RUNS,
        );
      });
    }
  }
});

describe('mean / var / std', () => {
  it('match naive two-pass formulas (float32 and int inputs)', () => {
    fc.assert(
      fc.property(caseArb('float32', { nonEmpty: true }), fc.constantFrom<DType>('float32', 'int32', 'bfloat16'), fc.integer({ min: 0, max: 1 }), ({ shape, vals, axes, keepdims }, d, ddof) => {
        const x = np.array(np.asarray(vals, 'float32').reshape(shape), d);
        const xv = [...x.dataSync()];
        const count = axes.reduce((n, a) => n * shape[a], 1);
        const s = naive(xv, shape, axes, keepdims, 0, (a, v) => a + v);
        const mu = s.out.map((v) => v / count);
        const m = np.mean(x, { axis: axes, keepdims });
        expect(m.dtype).toBe(d === 'int32' ? 'float32' : d);
        const tol = d === 'bfloat16' ? TOL.bfloat16 : { rtol: 1e-5, atol: 1e-4 };
        expectAllclose(m, mu, tol);
        // Variance: sum((x - mu)^2) / (n - ddof) with mu broadcast back.
        const muFull = naiveBroadcastBack(mu, shape, axes);
        const sq = naive(xv.map((v, i) => (v - muFull[i]) ** 2), shape, axes, keepdims, 0, (a, v) => a + v);
        const v = sq.out.map((q) => q / (count - ddof));
        const vtol = d === 'bfloat16' ? TOL.bfloat16 : { rtol: 1e-3, atol: 1e-3 };
        expectAllclose(np.variance(x, { axis: axes, keepdims, ddof }), v, vtol);
        expectAllclose(np.std(x, { axis: axes, keepdims, ddof }), v.map(Math.sqrt), vtol);
      }),
      RUNS,
    );
  });
});

/** For each element of the full shape, the value of the reduced array it belongs to. */
function naiveBroadcastBack(reduced: number[], shape: number[], axes: number[]): number[] {
  return reducedIndex(shape, axes).map((o) => reduced[o]);
}

describe('argmax / argmin / all / any / cumsum / cumprod', () => {
  it('argmax and argmin along an axis and flattened: first occurrence wins', () => {
    fc.assert(
      fc.property(caseArb('int8', { nonEmpty: true }), fc.boolean(), ({ shape, vals, keepdims }, flat) => {
        if (shape.length === 0) return;
        const small = vals.map((v) => v % 4); // many ties
        const x = np.array(np.asarray(small, 'float32').reshape(shape), 'int8');
        for (const which of ['argmax', 'argmin'] as const) {
          const better = which === 'argmax' ? (a: number, b: number) => a > b : (a: number, b: number) => a < b;
          if (flat) {
            let bi = 0;
            for (let i = 1; i < small.length; i++) if (better(small[i], small[bi])) bi = i;
            const r = np[which](x, { keepdims });
            expect(r.dtype).toBe('int32');
            expect(r.shape).toEqual(keepdims ? shape.map(() => 1) : []);
            expect(r.dataSync()[0]).toBe(bi);
          } else {
            const axis = shape.length - 1;
            const len = shape[axis];
            const want: number[] = [];
            for (let o = 0; o < small.length / len; o++) {
              let bi = 0;
              for (let j = 1; j < len; j++) if (better(small[o * len + j], small[o * len + bi])) bi = j;
              want.push(bi);
            }
            const r = np[which](x, { axis: -1, keepdims });
            expect(r.shape).toEqual(keepdims ? [...shape.slice(0, -1), 1] : shape.slice(0, -1));
            expect([...r.dataSync()]).toEqual(want);
          }
        }
      }),
      RUNS,
    );
  });

  it('all / any over axes', () => {
    fc.assert(
      fc.property(caseArb('bool'), ({ shape, vals, axes, keepdims }) => {
        const x = np.array(np.asarray(vals.length ? vals : [], 'float32').reshape(shape), 'bool');
        const all = naive(vals, shape, axes, keepdims, 1, (a, v) => a & v);
        const any = naive(vals, shape, axes, keepdims, 0, (a, v) => a | v);
        const ra = np.all(x, { axis: axes, keepdims });
        expect(ra.dtype).toBe('bool');
        expect(ra.shape).toEqual(all.shape);
        expect([...ra.dataSync()]).toEqual(all.out);
        expect([...np.any(x, { axis: axes, keepdims }).dataSync()]).toEqual(any.out);
      }),
      RUNS,
    );
    expect(np.all(np.array([1, 2, 0], 'int32')).item()).toBe(false);
    expect(np.any(np.array([0, 0, NaN], 'float32')).item()).toBe(true);
  });

  it('cumsum / cumprod along each axis match a running loop', () => {
    fc.assert(
      fc.property(caseArb('int8', { nonEmpty: true }), fc.nat(), fc.constantFrom<DType>('int8', 'float32', 'uint8', 'bool'), ({ shape, vals }, ax, d) => {
        if (shape.length === 0) return;
        const axis = ax % shape.length;
        const x = np.array(np.asarray(vals.map((v) => v % 3), 'float32').reshape(shape), d);
        const xv = [...x.dataSync()];
        const st = shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));
        const run = (step: (a: number, v: number) => number): number[] => {
          const out = xv.slice();
          for (let f = 0; f < xv.length; f++) {
            const idx = Math.floor(f / st[axis]) % shape[axis];
            if (idx > 0) out[f] = step(out[f - st[axis]], xv[f]);
          }
          return out;
        };
        const outDtype = d === 'bool' || d === 'int8' ? 'int32' : d === 'uint8' ? 'uint32' : d;
        const cs = np.cumsum(x, { axis });
        expect(cs.dtype).toBe(outDtype);
        expect(cs.shape).toEqual(shape);
        expectAllclose(cs, run((a, v) => a + v), TOL.float32);
        expectAllclose(np.cumprod(x, { axis }), run((a, v) => a * v), TOL.float32);
      }),
      RUNS,
    );
    // axis omitted: flattened first.
    expect(np.cumsum(np.array([[1, 2], [3, 4]])).toArray()).toEqual([1, 3, 6, 10]);
  });
});

describe('NaN behaviour (as JAX)', () => {
  const x = (): Array => np.array([1, NaN, 3, NaN], 'float32');
  it('sum / max / min / mean propagate NaN; argmax / argmin return the first NaN', () => {
    expect(Number.isNaN(np.sum(x()).item() as number)).toBe(true);
    expect(Number.isNaN(np.max(x()).item() as number)).toBe(true);
    expect(Number.isNaN(np.min(x()).item() as number)).toBe(true);
    expect(Number.isNaN(np.mean(x()).item() as number)).toBe(true);
    expect(np.argmax(x()).item()).toBe(1);
    expect(np.argmin(x()).item()).toBe(1);
    expect(np.argmax(np.array([NaN, 5], 'float32')).item()).toBe(0);
    const c = np.cumsum(np.array([1, NaN, 2], 'float32')).dataSync();
    expect([c[0], Number.isNaN(c[1]), Number.isNaN(c[2])]).toEqual([1, true, true]);
  });

  it('reductions over empty axes give the identity; max of an empty axis is an error', () => {
    expect(np.sum(np.zeros([0, 3]), { axis: 0 }).toArray()).toEqual([0, 0, 0]);
    expect(np.prod(np.zeros([2, 0]), { axis: 1 }).toArray()).toEqual([1, 1]);
    expect(() => np.max(np.zeros([2, 0]), { axis: 1 })).toThrow('max: zero-size array along axis 1 has no identity (shape [2,0])');
    expect(() => np.argmax(np.zeros([0]))).toThrow(/argmax: cannot take argmax of an empty axis 0/);
  });

  it('bad axes are errors naming the op and the valid range', () => {
    expect(() => np.sum(np.zeros([2, 3]), { axis: 2 })).toThrow('sum: axis 2 is out of range for an array of rank 2 (valid: -2..1)');
    expect(() => np.mean(np.zeros([2, 3]), { axis: [0, -2] })).toThrow('mean: repeated axis in [0,-2]');
    expect(() => np.cumsum(np.zeros([2]), { axis: -2 })).toThrow(/cumsum: axis -2 is out of range/);
  });
});

it('a bad dtype option names the reduction', () => {
  expect(() => np.sum(np.zeros([2]), { dtype: 'float64' as never })).toThrow('sum: dtype must be one of bool, int8, uint8, int32, uint32, bfloat16, float16, float32; got "float64"');
  expect(() => np.cumsum(np.zeros([2]), { dtype: 'int64' as never })).toThrow(/cumsum: dtype must be one of/);
  expect(np.sum(np.array([100, 100], 'int8'), { dtype: 'int8' }).item()).toBe(-56);
  expect(np.sum(np.array([1.5, 2], 'bfloat16'), { dtype: 'float32' }).dtype).toBe('float32');
});
