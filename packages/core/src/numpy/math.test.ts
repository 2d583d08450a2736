/**
 * jnp elementwise functions: the broadcasting law (np.add equals a naive loop over the broadcast
 * index for random broadcastable shapes), errors for shapes that do not broadcast, and the
 * NumPy-flavoured integer functions (floor_divide, remainder) against naive definitions.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lax, np } from '../index';

const RUNS = { numRuns: 40 };

/** An output shape and two input shapes that broadcast to it (suffixes with some dims set to 1). */
const broadcastCase = fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 4 }).chain((out) => {
  const inShape = fc.tuple(fc.nat({ max: out.length }), fc.array(fc.boolean(), { minLength: out.length, maxLength: out.length })).map(([drop, ones]) =>
    out.slice(drop).map((d, i) => (ones[i + drop] ? 1 : d)),
  );
  return fc.record({ out: fc.constant(out), xs: inShape, ys: inShape });
});

function values(shape: number[], seed: number): number[] {
  const n = shape.reduce((a, b) => a * b, 1);
  return Array.from({ length: n }, (_, i) => ((i * 7 + seed * 13) % 17) - 8);
}

/** The element of an array of `shape` that output index `idx` (of rank >= shape.length) reads. */
function readBroadcast(vals: number[], shape: number[], idx: number[]): number {
  const lead = idx.length - shape.length;
  let off = 0;
  for (let k = 0; k < shape.length; k++) off = off * shape[k] + (shape[k] === 1 ? 0 : idx[lead + k]);
  return vals[off];
}

describe('broadcasting law', () => {
  it('np.add / np.multiply / np.logicalAnd / np.logicalOr equal a naive loop over the broadcast index', () => {
    fc.assert(
      fc.property(broadcastCase, fc.nat({ max: 100 }), ({ out, xs, ys }, seed) => {
        const xv = values(xs, seed);
        const yv = values(ys, seed + 1);
        const x = np.reshape(np.array(xv, 'float32'), xs);
        const y = np.reshape(np.array(yv, 'int8'), ys);
        const s = np.add(x, y);
        const p = np.multiply(y, x);
        const l = np.logicalAnd(x, y);
        const o = np.logicalOr(x, y);
        const rk = Math.max(xs.length, ys.length);
        const pad = (sh: number[]): number[] => [...new Array<number>(rk - sh.length).fill(1), ...sh];
        expect(s.shape).toEqual(pad(xs).map((d, i) => Math.max(d, pad(ys)[i])));
        expect(out.slice(out.length - rk).every((d, i) => s.shape[i] === 1 || s.shape[i] === d)).toBe(true);
        const rank = s.ndim;
        const n = s.size;
        const sv = s.dataSync();
        const pv = p.dataSync();
        const lv = l.dataSync();
        const ov = o.dataSync();
        expect(l.shape).toEqual(s.shape);
        for (let f = 0; f < n; f++) {
          const idx: number[] = [];
          let rem = f;
          for (let k = rank - 1; k >= 0; k--) {
            idx.unshift(rem % s.shape[k]);
            rem = Math.floor(rem / s.shape[k]);
          }
          const a = readBroadcast(xv, xs, idx);
          const b = readBroadcast(yv, ys, idx);
          if (sv[f] !== a + b || pv[f] !== a * b) expect.fail(`at ${JSON.stringify(idx)}: ${sv[f]} / ${pv[f]} vs ${a + b} / ${a * b}`);
          if (lv[f] !== Number(a !== 0 && b !== 0) || ov[f] !== Number(a !== 0 || b !== 0)) expect.fail(`logical at ${JSON.stringify(idx)}`);
        }
      }),
      RUNS,
    );
  });

  it('shapes that do not broadcast are an error naming the op and both shapes', () => {
    expect(() => np.add(np.zeros([3, 4]), np.zeros([5]))).toThrow('add: shapes [3,4] and [5] cannot broadcast');
    expect(() => np.where(np.array([true, false]), np.zeros([3]), 1)).toThrow('where: shapes [2] and [3] and [3] cannot broadcast');
    expect(() => np.broadcastTo(np.zeros([3]), [2, 4])).toThrow('broadcast_to: shapes [3] and [2,4] cannot broadcast');
    expect(() => np.broadcastTo(np.zeros([3, 1]), [3])).toThrow('broadcast_to: cannot broadcast shape [3,1] to [3]');
  });

  it('broadcasting a dimension of size 0 works', () => {
    expect(np.add(np.zeros([0, 3]), np.ones([3])).shape).toEqual([0, 3]);
    expect(np.add(np.zeros([2, 1]), np.ones([0])).shape).toEqual([2, 0]);
  });
});

describe('NumPy integer division semantics', () => {
  it('floor_divide and remainder satisfy x = (x // y) * y + x % y with % taking the sign of y', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: -1000, max: 1000 }), fc.integer({ min: -50, max: 50 }).filter((v) => v !== 0)), { minLength: 1, maxLength: 20 }), (pairs) => {
        const x = np.array(pairs.map((p) => p[0]), 'int32');
        const y = np.array(pairs.map((p) => p[1]), 'int32');
        const q = np.floorDivide(x, y).dataSync();
        const r = np.remainder(x, y).dataSync();
        pairs.forEach(([a, b], i) => {
          expect(q[i]).toBe(Math.floor(a / b) + 0); // + 0: an int32 has no -0
          expect(r[i]).toBe(a - Math.floor(a / b) * b + 0);
        });
        const qf = np.floorDivide(np.astype(x, 'float32'), np.astype(y, 'float32')).dataSync();
        pairs.forEach(([a, b], i) => expect(qf[i]).toBe(Math.floor(a / b)));
      }),
      RUNS,
    );
  });

  it('integer division by zero follows jnp (XLA gives -1, floor_divide corrects to -2 for x != 0)', () => {
    expect(np.floorDivide(np.array([5, 0, -5], 'int32'), 0).toArray()).toEqual([-2, -1, -2]);
    expect(np.remainder(np.array([5, -5], 'int32'), 0).toArray()).toEqual([5, -5]);
  });

  it('true division of integers gives float32; power with an integer exponent keeps int dtype', () => {
    const d = np.divide(np.array([1, 2], 'int32'), 4);
    expect([d.dtype, ...d.toArray() as number[]]).toEqual(['float32', 0.25, 0.5]);
    const p = np.power(np.array([2, 3], 'int8'), 3);
    expect([p.dtype, ...p.toArray() as number[]]).toEqual(['int8', 8, 27]);
    expect(np.power(np.array([2, 4], 'float32'), 0.5).toArray()).toEqual([Math.fround(Math.SQRT2), 2]);
  });

  it('float-only functions of integers give float32 (as jnp.sin(int))', () => {
    expect(np.sqrt(np.array([4], 'int32')).dtype).toBe('float32');
    expect(np.exp(np.array([0], 'uint8')).dtype).toBe('float32');
    expect(np.sin(np.array([0], 'bfloat16')).dtype).toBe('bfloat16');
    expect(np.sqrt(4).weakType).toBe(true);
  });
});

describe('hypot, lax scalar operands, bool products', () => {
  it('hypot does not overflow for large inputs and handles zeros and infinities', () => {
    const r = np.hypot(np.array([3e30, 0, Infinity, 3, -Infinity], 'float32'), np.array([4e30, 0, NaN, -4, 1], 'float32')).dataSync();
    expect([...r]).toEqual([Math.fround(5e30), 0, Infinity, 5, Infinity]);
    expect(np.hypot(np.array([3], 'bfloat16'), 4).toArray()).toEqual([5]);
  });

  it('lax takes JS scalars in the operand dtype only when they are exact there', () => {
    expect(lax.add(np.array([1], 'int8'), 2).toArray()).toEqual([3]);
    expect(lax.mul(np.array([1], 'float32'), 1.5).toArray()).toEqual([1.5]);
    expect(() => lax.add(np.array([1], 'int32'), 1.5)).toThrow('add: JS value 1.5 cannot be a int32 operand (lax does not promote); use the np function or convert the array first');
    expect(() => lax.bitwiseOr(np.array([true]), 2)).toThrow('or: JS value 2 cannot be a bool operand');
    expect(() => lax.add(np.array([1], 'int8'), 300)).toThrow(/add: value 300 does not fit in int8/);
  });

  it('bool matmul is a logical or of ands; mixed bool/int literals infer int32', () => {
    const a = np.array([[true, false], [false, false]]);
    const b = np.array([[true, true], [true, false]]);
    const r = np.matmul(a, b);
    expect([r.dtype, r.toArray()]).toEqual(['bool', [[true, true], [false, false]]]);
    expect(np.array([true, 2]).dtype).toBe('int32');
    expect(() => lax.iota('bool', 3)).toThrow('iota: dtype must be numeric; got bool');
  });
});
