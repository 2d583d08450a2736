/**
 * `evalPrimitiveInto`'s result bands: the systolic dot_general on its thread pool hands over its
 * finished rows (between the calling thread's tiles and while it waits), and core hands over the
 * rest (all of it on one thread), so the bands cover the result exactly once, in order, each
 * final when it arrives. An elementwise epilogue run over each band in place gives the same bits
 * as the same epilogue after the product.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { type Array, fromStorage, lax, registerBackend, setNumThreads, toStorage, withBackend } from '../../index';
import { evalPrimitiveInto, intoMemo } from '../../internal';
import type { ResultBands } from '../../backend';
import type { StorageArray } from '../../dtype';
import { dotGeneralP } from '../../lax/dot';
import { transposeP } from '../../lax/structural';
import type { Primitive, ShapedArray } from '../../primitive';
import { SystolicBackend } from './backend';
import { systolicTestBackend, wavyData } from './testBackend';

const { backend, engine } = systolicTestBackend('systolic-bands-test');

afterEach(() => setNumThreads(null));

const data = wavyData;

const bitsOf = (x: Float32Array): Uint32Array => new Uint32Array(x.slice().buffer);
/** The test's epilogue: not idempotent, so a band run twice changes the result, and a skipped one leaves the product's value. */
const epi = (x: number): number => Math.fround(Math.fround(x * 3) + 1);
const plain: lax.DotDimensionNumbers = [[[1], [0]], [[], []]];
const dotParams = (dn: lax.DotDimensionNumbers) => ({ dimensionNumbers: dn, precision: null, preferredElementType: null });

/** A region of the engine's memory holding `n` floats (filled with NaN), and its release. */
function region(n: number): { view: Float32Array; free: () => void } {
  const addr = engine.reserve(Math.max(4, 4 * n));
  const view = new Float32Array(engine.buffer(), addr, n).fill(Number.NaN);
  return { view, free: () => engine.release(addr) };
}

/**
 * Runs `x @ y` into `dest` with bands: each band must start where the previous one ended and
 * hold its final values when it arrives (checked against `want`); the epilogue then runs over it
 * in place. Returns the bands.
 */
function banded(x: Array, y: Array, dn: lax.DotDimensionNumbers, dest: Float32Array, want: Float32Array, memo = intoMemo()): [number, number][] {
  const seen: [number, number][] = [];
  const bands: ResultBands = (e0, e1) => {
    expect(e0).toBe(seen.length === 0 ? 0 : seen[seen.length - 1][1]);
    expect(e1).toBeGreaterThan(e0);
    expect(bitsOf(dest.subarray(e0, e1))).toEqual(bitsOf(want.subarray(e0, e1)));
    for (let i = e0; i < e1; i++) dest[i] = epi(dest[i]);
    seen.push([e0, e1]);
  };
  const r = withBackend('systolic-bands-test', () => evalPrimitiveInto(dotGeneralP, [x, y], dotParams(dn), dest, memo, bands));
  expect(r).not.toBeNull();
  expect(seen.length === 0 ? 0 : seen[seen.length - 1][1]).toBe(dest.length);
  return seen;
}

describe('evalPrimitiveInto bands (systolic dot_general)', () => {
  it('law: bands cover the result once, in order, each final when handed over; an epilogue over them equals the epilogue after the product (1-3 threads, in place or copied)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 600 }),
        fc.integer({ min: 1, max: 160 }),
        fc.oneof(fc.integer({ min: 1, max: 32 }).map((p) => 8 * p), fc.integer({ min: 1, max: 90 })),
        fc.constantFrom(1, 2, 3),
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        (M, K, N, threads, inMemory, transposedA, aInMemory) => {
          setNumThreads(threads);
          const ha = data(M * K, M);
          const hb = data(K * N, N);
          const dn: lax.DotDimensionNumbers = transposedA ? [[[0], [0]], [[], []]] : plain;
          const sa = transposedA ? [K, M] : [M, K];
          // A in the engine memory is read in place (one thread: packed by row blocks when it can be).
          const ra = aInMemory ? region(M * K) : null;
          ra?.view.set(ha);
          const x = fromStorage(ra ? ra.view : ha, sa, 'float32');
          const y = fromStorage(hb, [K, N], 'float32');
          const want = toStorage(withBackend('systolic-bands-test', () => lax.dotGeneral(fromStorage(ha, sa, 'float32'), y, dn))) as Float32Array;
          const r = inMemory ? region(M * N) : { view: new Float32Array(M * N).fill(Number.NaN), free: () => {} };
          try {
            banded(x, y, dn, r.view, want);
            expect(bitsOf(r.view)).toEqual(bitsOf(want.map(epi)));
          } finally {
            r.free();
            ra?.free();
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  for (const threads of [1, 2])
    for (const aInMemory of [false, true])
      it(`a product written straight into the engine memory hands over whole rows (one thread: all at the end), ${threads} thread(s), A ${aInMemory ? 'read in place' : 'staged'}`, () => {
        setNumThreads(threads);
        // [512, 128] x [128, 128]: 4 row blocks of 128, and large enough for the pool.
        const M = 512;
        const ha = data(M * 128, 1);
        const ra = aInMemory ? region(M * 128) : null;
        ra?.view.set(ha);
        const x = fromStorage(ra ? ra.view : ha, [M, 128], 'float32');
        const y = fromStorage(data(128 * 128, 2), [128, 128], 'float32');
        const want = toStorage(withBackend('systolic-bands-test', () => lax.dotGeneral(fromStorage(ha, [M, 128], 'float32'), y, plain))) as Float32Array;
        const r = region(M * 128);
        try {
          const t0 = { ...engine.traffic };
          const seen = banded(x, y, plain, r.view, want);
          expect(engine.traffic.resultInPlaceBytes - t0.resultInPlaceBytes).toBe(r.view.byteLength);
          for (const [, e1] of seen) expect(e1 % 128).toBe(0);
          // (On the pool, how many bands the calling thread sees depends on the timing.)
          if (threads === 1) {
            expect(seen).toEqual([[0, M * 128]]);
            expect(engine.traffic.rowBlockedProducts - t0.rowBlockedProducts).toBe(aInMemory ? 1 : 0);
          }
          expect(bitsOf(r.view)).toEqual(bitsOf(want.map(epi)));
        } finally {
          r.free();
          ra?.free();
        }
      });

  it('a batched product and a primitive run by its reference kernel get the whole result as one band; a declined primitive gets none', () => {
    const x = fromStorage(data(2 * 8 * 16, 3), [2, 8, 16], 'float32');
    const y = fromStorage(data(2 * 16 * 8, 4), [2, 16, 8], 'float32');
    const dn: lax.DotDimensionNumbers = [[[2], [1]], [[0], [0]]];
    const want = toStorage(withBackend('systolic-bands-test', () => lax.dotGeneral(x, y, dn))) as Float32Array;
    const dest = new Float32Array(want.length);
    const got: [number, number][] = [];
    withBackend('systolic-bands-test', () => evalPrimitiveInto(dotGeneralP, [x, y], dotParams(dn), dest, undefined, (e0, e1) => got.push([e0, e1])));
    expect(got).toEqual([[0, want.length]]);
    expect(bitsOf(dest)).toEqual(bitsOf(want));
    // The reference backend has no dot_general into caller storage: null, and no band.
    const none: [number, number][] = [];
    expect(withBackend('reference', () => evalPrimitiveInto(dotGeneralP, [x, y], dotParams(dn), dest, undefined, (e0, e1) => none.push([e0, e1])))).toBeNull();
    expect(none).toEqual([]);
    // transpose: a reference kernel into caller storage.
    const seen: [number, number][] = [];
    const out = new Float32Array(x.size);
    const r = withBackend('systolic-bands-test', () => evalPrimitiveInto(transposeP, [x], { permutation: [2, 1, 0] }, out, undefined, (e0, e1) => seen.push([e0, e1])));
    expect(r).not.toBeNull();
    expect(seen).toEqual([[0, x.size]]);
    expect(bitsOf(out)).toEqual(bitsOf(toStorage(lax.transpose(x, [2, 1, 0])) as Float32Array));
  });

  it('rejects a callback that is not a function, and bands a backend hands over out of order or before declining, naming the primitive', () => {
    const x = fromStorage(data(64, 1), [8, 8], 'float32');
    const dest = new Float32Array(64);
    expect(() => withBackend('systolic-bands-test', () => evalPrimitiveInto(dotGeneralP, [x, x], dotParams(plain), dest, undefined, 7 as unknown as ResultBands))).toThrow(/evalPrimitiveInto\(dot_general\): bands must be a function \(e0, e1\) => void; got number/);
    class Bad extends SystolicBackend {
      constructor(
        name: string,
        private readonly mode: 'gap' | 'twice' | 'past' | 'decline',
      ) {
        super(name);
      }
      override executeInto(prim: Primitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAval: ShapedArray, out: StorageArray, bands?: ResultBands): boolean {
        if (bands === undefined) return super.executeInto(prim, inputs, inAvals, params, outAval, out);
        if (this.mode === 'gap') bands(8, 16);
        else if (this.mode === 'twice') {
          bands(0, 16);
          bands(0, 16);
        } else if (this.mode === 'past') bands(0, 65);
        else {
          bands(0, 8);
          return false;
        }
        return true;
      }
    }
    const cases = [
      ['gap', /evalPrimitiveInto\(dot_general\): the backend handed over elements \[8, 16\) of 64 after \[0, 0\)/],
      ['twice', /handed over elements \[0, 16\) of 64 after \[0, 16\)/],
      ['past', /handed over elements \[0, 65\) of 64 after \[0, 0\)/],
      ['decline', /evalPrimitiveInto\(dot_general\): the backend handed over 8 of 64 elements and then declined the primitive/],
    ] as const;
    for (const [mode, msg] of cases) {
      const name = `systolic-bands-bad-${mode}`;
      registerBackend(new Bad(name, mode));
      expect(() => withBackend(name, () => evalPrimitiveInto(dotGeneralP, [x, x], dotParams(plain), dest, intoMemo(), () => {}))).toThrow(msg);
    }
  });

  it('a memo reused across calls with and without bands keeps each call\'s own bands', () => {
    setNumThreads(1);
    const x = fromStorage(data(256 * 64, 5), [256, 64], 'float32');
    const y = fromStorage(data(64 * 64, 6), [64, 64], 'float32');
    const want = toStorage(withBackend('systolic-bands-test', () => lax.dotGeneral(x, y, plain))) as Float32Array;
    const memo = intoMemo();
    const r = region(256 * 64);
    try {
      for (let call = 0; call < 3; call++) {
        banded(x, y, plain, r.view, want, memo);
        expect(bitsOf(r.view)).toEqual(bitsOf(want.map(epi)));
        const plainOut = withBackend('systolic-bands-test', () => evalPrimitiveInto(dotGeneralP, [x, y], dotParams(plain), r.view, memo));
        expect(plainOut).not.toBeNull();
        expect(bitsOf(r.view)).toEqual(bitsOf(want));
      }
    } finally {
      r.free();
    }
  });
});
