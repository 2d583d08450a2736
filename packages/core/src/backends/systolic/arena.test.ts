/**
 * The GEMM engine as an arena host (`Backend.arenaHost`): regions reserved in its shared memory
 * stay put while it grows, and operands that are views of that memory are packed where they lie
 * (no staging copy), with results bit-identical to the same operands as host arrays, on one
 * thread and on the pool, through every packing path (single product, batched items, multi-pass).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type Array, fromStorage, lax, setNumThreads, toStorage, withBackend } from '../../index';
import { arenaHost, evalPrimitiveInto } from '../../internal';
import { dotGeneralP } from '../../lax/dot';
import { systolicTestBackend, wavyData } from './testBackend';

const { backend, engine } = systolicTestBackend('systolic-arena-test');

afterEach(() => setNumThreads(null));

const data = wavyData;

/** `x` copied into a fresh region of the engine's memory, as an Array over the view. */
function inArena(x: Float32Array, shape: number[]): { arr: Array; addr: number } {
  const addr = engine.reserve(x.byteLength);
  const view = new Float32Array(engine.buffer(), addr, x.length);
  view.set(x);
  return { arr: fromStorage(view, shape, 'float32'), addr };
}

const bitsOf = (a: Array): Uint32Array => new Uint32Array((toStorage(a) as Float32Array).slice().buffer);

describe('GemmEngine regions', () => {
  it('reserves 64-aligned, non-overlapping regions below the products\' scratch, and reuses released ones', () => {
    expect(withBackend('systolic-arena-test', () => arenaHost())).toBe(engine);
    expect(withBackend('reference', () => arenaHost())).toBeNull();
    const a = engine.reserve(1000);
    const b = engine.reserve(64);
    const c = engine.reserve(5000);
    for (const x of [a, b, c]) expect(x % 64).toBe(0);
    expect(b).toBeGreaterThanOrEqual(a + 1000);
    expect(c).toBeGreaterThanOrEqual(b + 64);
    expect(engine.floor).toBeGreaterThanOrEqual(c + 5000);
    expect(engine.memory.buffer.byteLength).toBeGreaterThanOrEqual(engine.floor);
    engine.release(b);
    expect(engine.reserve(10)).toBe(b); // first fit: the freed gap
    engine.release(c);
    expect(engine.floor).toBeLessThan(c + 5000);
    engine.release(a);
    engine.release(b);
  });

  it('rejects bad sizes and unknown regions by name, and refuses what the 2 GiB memory cannot hold', () => {
    expect(() => engine.reserve(0)).toThrow(/systolic reserve: bytes must be a positive integer; got 0/);
    expect(() => engine.reserve(1.5)).toThrow(/got 1.5/);
    expect(() => engine.reserve(Number.NaN)).toThrow(/got NaN/);
    expect(() => engine.release(12345)).toThrow(/systolic release: no region is reserved at address 12345/);
    const pages = engine.memory.buffer.byteLength;
    expect(engine.reserve(2 ** 31)).toBe(-1);
    expect(engine.memory.buffer.byteLength).toBe(pages);
  });
});

describe('operands in the engine memory', () => {
  const cases: { name: string; dn: lax.DotDimensionNumbers; a: number[]; b: number[]; precision?: 'highest' }[] = [
    { name: 'a single product (k-contiguous lhs, row-contiguous rhs)', dn: [[[1], [0]], [[], []]], a: [96, 200], b: [200, 136] },
    { name: 'a product of transposed operands', dn: [[[0], [1]], [[], []]], a: [200, 96], b: [136, 200] },
    { name: 'a large product (split over the pool)', dn: [[[1], [0]], [[], []]], a: [256, 512], b: [512, 256] },
    { name: 'a batch of small products (item by item)', dn: [[[2], [1]], [[0], [0]]], a: [64, 64, 32], b: [64, 32, 64] },
    { name: 'a multi-pass product (packed in TypeScript from the view)', dn: [[[1], [0]], [[], []]], a: [24, 40], b: [40, 16], precision: 'highest' },
  ];
  for (const threads of [1, 2])
    for (const c of cases)
      it(`${c.name}, ${threads} thread(s): bit-identical to host operands, read in place`, () => {
        setNumThreads(threads);
        const n = (s: readonly number[]) => s.reduce((x, y) => x * y, 1);
        const ha = data(n(c.a), 1);
        const hb = data(n(c.b), 2);
        const A = inArena(ha, c.a);
        const B = inArena(hb, c.b);
        const dot = (x: Array, y: Array) => withBackend('systolic-arena-test', () => lax.dotGeneral(x, y, c.dn, { precision: c.precision ?? null }));
        const want = dot(fromStorage(ha, c.a, 'float32'), fromStorage(hb, c.b, 'float32'));
        const t0 = { ...engine.traffic };
        const got = dot(A.arr, B.arr);
        const t1 = { ...engine.traffic };
        expect(bitsOf(got)).toEqual(bitsOf(want));
        if (c.precision === undefined) {
          expect(t1.inPlaceBytes - t0.inPlaceBytes).toBe(ha.byteLength + hb.byteLength);
          expect(t1.stagedBytes - t0.stagedBytes).toBe(0);
        }
        engine.release(A.addr);
        engine.release(B.addr);
      });

  for (const threads of [1, 2])
    it(`a destination in the engine memory is the accumulator itself when no padding is needed, ${threads} thread(s)`, () => {
      setNumThreads(threads);
      const plain: lax.DotDimensionNumbers = [[[1], [0]], [[], []]];
      const batch: lax.DotDimensionNumbers = [[[2], [1]], [[0], [0]]];
      // [lhs, rhs, dimension numbers, whether the GEMM writes the destination directly]
      const cases: [number[], number[], lax.DotDimensionNumbers, boolean][] = [
        [[256, 384], [384, 512], plain, true],
        [[96, 40], [40, 64], plain, true],
        [[30, 40], [40, 50], plain, false], // N = 50 pads the accumulator's columns: copied out
        [[30, 40], [40, 48], plain, true], // rows need no padding (C gets only its M rows)
        [[16, 64, 32], [16, 32, 64], batch, true], // item by item
        [[2, 256, 64], [2, 64, 256], batch, true], // product by product, each into its slice
        [[2, 30, 64], [2, 64, 44], batch, false], // padded columns: copied out
      ];
      for (const [sa, sb, dn, direct] of cases) {
        const n = (s: readonly number[]) => s.reduce((x, y) => x * y, 1);
        const ha = data(n(sa), 5);
        const hb = data(n(sb), 6);
        const A = inArena(ha, sa);
        const want = withBackend('systolic-arena-test', () => lax.dotGeneral(fromStorage(ha, sa, 'float32'), fromStorage(hb, sb, 'float32'), dn));
        const addr = engine.reserve(n(want.shape) * 4);
        const dest = new Float32Array(engine.buffer(), addr, n(want.shape)).fill(Number.NaN);
        const t0 = engine.traffic.resultInPlaceBytes;
        const got = withBackend('systolic-arena-test', () => evalPrimitiveInto(dotGeneralP, [A.arr, fromStorage(hb, sb, 'float32')], { dimensionNumbers: dn, precision: null, preferredElementType: null }, dest));
        expect(got).not.toBeNull();
        expect(bitsOf(got!)).toEqual(bitsOf(want));
        expect(new Uint32Array(dest.slice().buffer)).toEqual(bitsOf(want));
        expect(engine.traffic.resultInPlaceBytes - t0).toBe(direct ? dest.byteLength : 0);
        engine.release(A.addr);
        engine.release(addr);
      }
    });

  it('a view of the products\' scratch (above every region) is staged like a host array, not read in place', () => {
    const ha = data(32 * 32, 7);
    const view = new Float32Array(engine.buffer(), engine.floor, ha.length);
    view.set(ha);
    expect(engine.holds(view)).toBe(false);
    const dn: lax.DotDimensionNumbers = [[[1], [0]], [[], []]];
    const want = withBackend('systolic-arena-test', () => lax.dotGeneral(fromStorage(ha, [32, 32], 'float32'), fromStorage(ha, [32, 32], 'float32'), dn));
    const t0 = { ...engine.traffic };
    const got = withBackend('systolic-arena-test', () => lax.dotGeneral(fromStorage(view, [32, 32], 'float32'), fromStorage(view, [32, 32], 'float32'), dn));
    expect(engine.traffic.inPlaceBytes).toBe(t0.inPlaceBytes);
    expect(engine.traffic.stagedBytes - t0.stagedBytes).toBe(2 * ha.byteLength);
    expect(bitsOf(got)).toEqual(bitsOf(want));
  });

  it('views taken before the memory grows stay valid and in place after it', () => {
    const ha = data(64 * 128, 3);
    const hb = data(128 * 64, 4);
    const A = inArena(ha, [64, 128]);
    const B = inArena(hb, [128, 64]);
    const before = engine.memory.buffer.byteLength;
    const big = engine.reserve(before + (8 << 20)); // grows the memory past the old buffer
    expect(engine.memory.buffer.byteLength).toBeGreaterThan(before);
    const dn: lax.DotDimensionNumbers = [[[1], [0]], [[], []]];
    const want = withBackend('systolic-arena-test', () => lax.dotGeneral(fromStorage(ha, [64, 128], 'float32'), fromStorage(hb, [128, 64], 'float32'), dn));
    const t0 = engine.traffic.inPlaceBytes;
    const got = withBackend('systolic-arena-test', () => lax.dotGeneral(A.arr, B.arr, dn));
    expect(engine.traffic.inPlaceBytes - t0).toBe(ha.byteLength + hb.byteLength);
    expect(bitsOf(got)).toEqual(bitsOf(want));
    for (const r of [A.addr, B.addr, big]) engine.release(r);
  });
});
