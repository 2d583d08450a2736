/**
 * The radix `sort` kernel against a stable comparator sort of each line's permutation, kept here
 * as the reference (NaN last and equal to NaN, -0 equal to +0, as JAX's sort comparator). Random shapes,
 * dimensions, dtypes, numbers of operands and keys; values full of duplicates, NaN, ±0 and
 * ±Infinity; lines long enough for the radix passes and short enough for the insertion sort.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as bf16 from '../bf16';
import { type DType, type StorageArray, allocStorage } from '../dtype';
import * as f16 from '../f16';
import { type HostArray, getPrimitive } from '../primitive';
import { sizeOf, stridesOf } from '../shape';
import './index';
import { compareTotal } from './sort';
import { LineSorter } from './radixSort';

function decoded(data: StorageArray, d: DType): ArrayLike<number> {
  if (d === 'bfloat16') return bf16.decode(data as Uint16Array);
  if (d === 'float16') return f16.decode(data as Uint16Array);
  return data;
}

/** A stable comparator sort (the several-operand kernel this replaced, now for one operand too). */
function oldSort(xs: HostArray[], dimension: number, numKeys: number): StorageArray[] {
  const shape = xs[0].shape;
  const n = shape[dimension];
  const st = stridesOf(shape)[dimension];
  const total = sizeOf(shape);
  const keys = xs.slice(0, numKeys).map((x) => decoded(x.data, x.dtype));
  if (total === 0) return xs.map((x) => allocStorage(x.dtype, 0));
  const lines = total / n;
  const lineBase = (line: number): number => Math.floor(line / st) * n * st + (line % st);
  const outs = xs.map((x) => allocStorage(x.dtype, total));
  const nk = keys.length;
  const lineKeys = keys.map(() => new Float64Array(n));
  const perm: number[] = [];
  const cmp = (p: number, q: number): number => {
    for (let j = 0; j < nk; j++) {
      const c = compareTotal(lineKeys[j][p], lineKeys[j][q]);
      if (c !== 0) return c;
    }
    return p - q;
  };
  for (let line = 0; line < lines; line++) {
    const base = lineBase(line);
    for (let j = 0; j < nk; j++) for (let i = 0; i < n; i++) lineKeys[j][i] = keys[j][base + i * st];
    for (let i = 0; i < n; i++) perm[i] = i;
    perm.sort(cmp);
    for (let j = 0; j < xs.length; j++) for (let i = 0; i < n; i++) outs[j][base + i * st] = xs[j].data[base + perm[i] * st];
  }
  return outs;
}

const DTYPES: DType[] = ['float32', 'bfloat16', 'float16', 'int32', 'uint32', 'int8', 'uint8', 'bool'];
const FLOAT_POOL = [0, -0, 1, -1, 2.5, -2.5, 3, 1e-40, -1e-40, 65504, -65504, Infinity, -Infinity, NaN, -NaN, 1e30, -7];

/** Storage of dtype d: many duplicates (values drawn from small pools) mixed with arbitrary values. */
function storageArb(d: DType, n: number): fc.Arbitrary<StorageArray> {
  const len = { minLength: n, maxLength: n };
  const anyFloat = fc.float();
  switch (d) {
    case 'float32':
      return fc.array(fc.oneof(fc.constantFrom(...FLOAT_POOL), fc.integer({ min: -5, max: 5 }), anyFloat), len).map((v) => Float32Array.from(v));
    case 'bfloat16':
      return fc.array(fc.oneof(fc.constantFrom(...FLOAT_POOL), fc.integer({ min: -5, max: 5 }), anyFloat), len).map((v) => Uint16Array.from(v, (x) => bf16.fromFloat32(x)));
    case 'float16':
      return fc.array(fc.oneof(fc.constantFrom(...FLOAT_POOL), fc.integer({ min: -5, max: 5 }), anyFloat), len).map((v) => Uint16Array.from(v, (x) => f16.fromFloat32(x)));
    case 'int32':
      return fc.array(fc.oneof(fc.constantFrom(-2147483648, 2147483647, 0, -1), fc.integer({ min: -4, max: 4 }), fc.integer()), len).map((v) => Int32Array.from(v));
    case 'uint32':
      return fc.array(fc.oneof(fc.constantFrom(4294967295, 2147483648, 0), fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 4294967295 })), len).map((v) => Uint32Array.from(v));
    case 'int8':
      return fc.array(fc.integer({ min: -128, max: 127 }).map((x) => (x % 7 === 0 ? x : x % 5)), len).map((v) => Int8Array.from(v));
    case 'uint8':
      return fc.array(fc.oneof(fc.constantFrom(255, 128, 0), fc.integer({ min: 0, max: 6 })), len).map((v) => Uint8Array.from(v));
    default:
      return fc.array(fc.integer({ min: 0, max: 1 }), len).map((v) => Uint8Array.from(v));
  }
}

/** Equal element by element, with any NaN equal to any NaN (the old kernel quieted NaN bits). */
function expectSameValues(got: StorageArray, want: StorageArray, d: DType, what: string): void {
  expect(got.constructor).toBe(want.constructor);
  const g = decoded(got, d);
  const w = decoded(want, d);
  expect(g.length).toBe(w.length);
  for (let i = 0; i < g.length; i++) {
    if (!(Object.is(g[i], w[i]) || (Number.isNaN(g[i]) && Number.isNaN(w[i])))) expect.fail(`${what}: element ${i}: got ${g[i]}, want ${w[i]}`);
  }
}

/** The first index where `got` and `want` differ, or -1 (cheap to report for long lines). */
function firstDifference(got: ArrayLike<number>, want: ArrayLike<number>): number {
  if (got.length !== want.length) return Math.min(got.length, want.length);
  for (let i = 0; i < got.length; i++) if (got[i] !== want[i]) return i;
  return -1;
}

const caseArb = fc
  .record({
    shape: fc.oneof(
      fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 3 }),
      fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 49, max: 140 })).map(([a, b]) => [a, b]),
      fc.tuple(fc.integer({ min: 49, max: 140 }), fc.integer({ min: 1, max: 3 })).map(([a, b]) => [a, b]),
    ),
    dtypes: fc.array(fc.constantFrom(...DTYPES), { minLength: 1, maxLength: 3 }),
    dimSeed: fc.nat(),
    keySeed: fc.nat(),
  })
  .chain(({ shape, dtypes, dimSeed, keySeed }) => {
    const n = shape.reduce((a, b) => a * b, 1);
    return fc.tuple(
      fc.constant(shape),
      fc.constant(dimSeed % shape.length),
      fc.constant(1 + (keySeed % dtypes.length)),
      fc.tuple(...dtypes.map((d) => storageArb(d, n).map((data): HostArray => ({ data, shape, dtype: d })))),
    );
  });

describe('sort kernel: same result as the comparator sort', () => {
  it('for random shapes, dimensions, dtypes, operand and key counts', () => {
    const sort = getPrimitive('sort');
    fc.assert(
      fc.property(caseArb, ([shape, dimension, numKeys, xs]) => {
        const params = { dimension, isStable: true, numKeys };
        const avals = xs.map((x) => ({ shape: x.shape, dtype: x.dtype, weakType: false }));
        const got = sort.impl(xs, params, sort.abstractEval(avals, params));
        const want = oldSort(xs, dimension, numKeys);
        for (let j = 0; j < xs.length; j++) expectSameValues(got[j], want[j], xs[j].dtype, `operand ${j} (${xs[j].dtype}) of sort shape [${shape}] dim ${dimension} keys ${numKeys}`);
      }),
      { numRuns: 120 },
    );
  });

  it('keeps ±0 (equal, as in JAX) and NaNs in input order, for one operand and among keys', () => {
    const sort = getPrimitive('sort');
    const x: HostArray = { data: new Float32Array([0, -0, 1, -0, NaN, 0, -1]), shape: [7], dtype: 'float32' };
    const params = { dimension: 0, isStable: true, numKeys: 1 };
    const avals = [{ shape: [7], dtype: 'float32' as DType, weakType: false }];
    const [one] = sort.impl([x], params, avals);
    expect(Array.from(one).map((v) => (Object.is(v, -0) ? '-0' : String(v)))).toEqual(['-1', '0', '-0', '-0', '0', '1', 'NaN']);
    const idx: HostArray = { data: Int32Array.from([0, 1, 2, 3, 4, 5, 6]), shape: [7], dtype: 'int32' };
    const [, perm] = sort.impl([x, idx], params, [...avals, { shape: [7], dtype: 'int32', weakType: false }]);
    expect(Array.from(perm)).toEqual([6, 0, 1, 3, 5, 2, 4]);
  });

  it('long lines (11-bit digit passes), skipped passes, several keys and strided lines order as a stable comparator sort', () => {
    const n = 70_000;
    const rnd = (seed: number) => () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 0);
    const next = rnd(7);
    const patterns: Record<string, () => number> = {
      random: () => next(),
      'high bits shared': () => 0xabc00000 | (next() & 0xfff),
      'low bits shared': () => (next() & 0xffc00000) | 0x155,
      'few values': () => next() % 5,
      'all equal': () => 42,
    };
    for (const [name, gen] of Object.entries(patterns)) {
      const k1 = Uint32Array.from({ length: n }, gen);
      const k1Before = k1.slice();
      const k2 = Uint32Array.from({ length: n }, () => next() % 3);
      for (const keys of [[k1], [k2, k1]]) {
        const want = Array.from({ length: n }, (_, i) => i).sort((p, q) => {
          for (const k of keys) if (k[p] !== k[q]) return k[p] < k[q] ? -1 : 1;
          return p - q;
        });
        expect(firstDifference(new LineSorter(n).sortLine(keys, 0, 1), want), `${name}, ${keys.length} key(s)`).toBe(-1);
      }
      // The same keys as column 1 of an [n, 2] array, sorted along dimension 0 (stride 2).
      const strided = new Uint32Array(2 * n);
      for (let i = 0; i < n; i++) strided[2 * i + 1] = k1[i];
      const want = Array.from({ length: n }, (_, i) => i).sort((p, q) => (k1[p] !== k1[q] ? (k1[p] < k1[q] ? -1 : 1) : p - q));
      expect(firstDifference(new LineSorter(n).sortLine([strided], 1, 2), want), `${name}, strided`).toBe(-1);
      expect(firstDifference(k1, k1Before), `${name}: the caller's keys are only read`).toBe(-1);
    }
  });
});
