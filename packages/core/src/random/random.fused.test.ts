/**
 * The fused eager kernels (fused.ts) against the lax chains they stand in for: on random keys
 * and shapes, every sampler gives bit-identical storage with the fused kernels on and off, on
 * the reference and the systolic backend. The pieces are also checked on their own where random
 * draws rarely reach a branch (erfinv's tail and +-1 edges, ties in the radix argsort), and the
 * conditions for taking the fused path (eager, reference kernels, no cost ledger collecting)
 * are checked by counting the kernels that run.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Array, np, random, systolic, withBackend } from '../index';
import { asArray, referenceBackend } from '../internal';
import { erfInvF32 } from './erfinv';
import { MINUS_ONE_UP, normalFromBits } from './distributions';
import { erfInvFloat32, normal16, randintInto, withFusedRandom } from './fused';
import { LineSorter } from '../lax/radixSort';

const RUNS = { numRuns: 8 };
const seed = fc.integer({ min: 0, max: 2 ** 32 - 1 });
const shape = fc.array(fc.integer({ min: 0, max: 7 }), { minLength: 0, maxLength: 3 });

/** The raw bytes of an array's storage, so NaNs and signed zeros compare exactly. */
function bytesOf(a: Array): number[] {
  const s = a._storage();
  return globalThis.Array.from(new Uint8Array(s.buffer, s.byteOffset, s.byteLength));
}

function expectSameBits(make: () => Array): void {
  const fused = make();
  const generic = withFusedRandom(false, make);
  expect(fused.shape).toEqual(generic.shape);
  expect(fused.dtype).toBe(generic.dtype);
  expect(fused.weakType).toBe(generic.weakType);
  expect(bytesOf(fused)).toEqual(bytesOf(generic));
}

type Sampler = [string, (k: Array, s: number[]) => Array];
const SAMPLERS: Sampler[] = [
  ['bits uint32', (k, s) => random.bits(k, s)],
  ['bits uint8', (k, s) => random.bits(k, s, 'uint8')],
  ['randomBits 16', (k, s) => random.randomBits(k, 16, s)],
  ['split', (k, s) => random.split(k, s)],
  ['uniform', (k, s) => random.uniform(k, s)],
  ['uniform [-3, 5)', (k, s) => random.uniform(k, s, { minval: -3, maxval: 5 })],
  ['uniform bfloat16', (k, s) => random.uniform(k, s, { dtype: 'bfloat16' })],
  ['uniform [0.1, 1e7 + 0.3)', (k, s) => random.uniform(k, s, { minval: 0.1, maxval: 1e7 + 0.3 })],
  ['uniform minval > maxval', (k, s) => random.uniform(k, s, { minval: 2.5, maxval: -0.7 })],
  ['uniform bfloat16 [-3, 5)', (k, s) => random.uniform(k, s, { dtype: 'bfloat16', minval: -3, maxval: 5 })],
  ['uniform array bounds', (k, s) => random.uniform(k, s, { minval: asArray(-1), maxval: 2 })],
  ['normal', (k, s) => random.normal(k, s)],
  ['normal float16', (k, s) => random.normal(k, s, { dtype: 'float16' })],
  ['normal bfloat16', (k, s) => random.normal(k, s, { dtype: 'bfloat16' })],
  ['gumbel', (k, s) => random.gumbel(k, s)],
  ['truncatedNormal', (k, s) => random.truncatedNormal(k, -1.5, 2, s)],
  ['truncatedNormal narrow, in the tail', (k, s) => random.truncatedNormal(k, 2.5, 2.5001, s)],
  ['truncatedNormal lower = upper (both clamps bite)', (k, s) => random.truncatedNormal(k, 1, 1, s)],
  ['truncatedNormal infinite bounds', (k, s) => random.truncatedNormal(k, -Infinity, 0.3, s)],
  ['truncatedNormal array bounds', (k, s) => random.truncatedNormal(k, asArray(-1), asArray([0.5]), [...s, 1])],
  ['laplace', (k, s) => random.laplace(k, s)],
  ['logistic', (k, s) => random.logistic(k, s)],
  ['weibullMin', (k, s) => random.weibullMin(k, 2, 1.5, s)],
  ['exponential float16', (k, s) => random.exponential(k, s, { dtype: 'float16' })],
  ['bernoulli', (k, s) => random.bernoulli(k, 0.3, s)],
  ['exponential', (k, s) => random.exponential(k, s)],
  ['randint', (k, s) => random.randint(k, s, -5, 1000)],
  ['randint int32 full range', (k, s) => random.randint(k, s, -(2 ** 31), 2 ** 31 - 1)],
  ['randint uint32 up to 2^32 - 1', (k, s) => random.randint(k, s, 3, asArray(2 ** 32 - 1, { dtype: 'uint32' }), 'uint32')],
  ['randint int8 [-128, 128)', (k, s) => random.randint(k, s, -128, 128, 'int8')],
  ['randint uint8 [0, 256)', (k, s) => random.randint(k, s, 0, 256, 'uint8')],
  ['randint uint8 [7, 200)', (k, s) => random.randint(k, s, 7, 200, 'uint8')],
  ['randint maxval <= minval', (k, s) => random.randint(k, s, 9, 4)],
  ['categorical', (k, s) => random.categorical(k, np.arange(6).astype('float32').mul(0.3), { shape: [...s, 1] })],
  ['permutation of n', (k, s) => random.permutation(k, 3 * s.reduce((a, b) => a * b, 1) + 1)],
  ['permutation of rows', (k, s) => random.permutation(k, np.arange(4 * 5).reshape([4, 5]), { axis: s.length % 2 })],
  ['permutation independent', (k) => random.permutation(k, np.arange(4 * 5).astype('float32').reshape([4, 5]), { axis: 1, independent: true })],
  ['choice without replacement', (k) => random.choice(k, 50, { shape: [20], replace: false })],
];

describe.each(['reference', 'systolic'])('fused kernels equal the lax chain (%s backend)', (backendName) => {
  it.each(SAMPLERS)('%s', (_name, sample) => {
    fc.assert(
      fc.property(seed, seed, shape, (a, b, s) => {
        const k = random.wrapKeyData(Uint32Array.of(a, b));
        withBackend(backendName, () => expectSameBits(() => sample(k, s)));
      }),
      RUNS,
    );
  });
});

describe('randint over random bounds and dtypes', () => {
  const dtypes = ['int32', 'uint32', 'int8', 'uint8'] as const;
  it('equals the lax chain', () => {
    const bound = fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.integer({ min: -300, max: 300 }));
    fc.assert(
      fc.property(seed, bound, bound, fc.constantFrom(...dtypes), (a, lo, hi, d) => {
        expectSameBits(() => random.randint(random.key(a), [64], lo, hi, d));
      }),
      { numRuns: 40 },
    );
  });
});

describe('fused kernels in the original (non-partitionable) layout', () => {
  it.each(SAMPLERS.filter(([n]) => ['normal', 'normal bfloat16', 'normal float16', 'gumbel', 'uniform', 'permutation of n'].includes(n)))('%s', (_name, sample) => {
    fc.assert(
      fc.property(seed, shape, (a, s) => {
        random.withThreefryPartitionable(false, () => expectSameBits(() => sample(random.key(a), s)));
      }),
      RUNS,
    );
  });
});

describe('large draws (many elements reach erfinv tails and sort ties)', () => {
  it('normal, gumbel and permutation of 20000', () => {
    const k = random.key(7);
    expectSameBits(() => random.normal(k, [20000]));
    expectSameBits(() => random.gumbel(k, [20000]));
    expectSameBits(() => random.permutation(k, 20000));
    // Every one of the 256 bfloat16 uniforms (8 random bits) and many of the 65536 float16 ones.
    expectSameBits(() => random.normal(k, [20000], { dtype: 'bfloat16' }));
    expectSameBits(() => random.normal(k, [20000], { dtype: 'float16' }));
  });
});

describe('16-bit normal on every possible draw (rounding ties, the erfinv tails, the +-1 edges)', () => {
  // normal16 reads 8 (bfloat16) or 16 (float16) random bits per element, so these are all of its
  // inputs: bit-identical here means bit-identical for every key and shape.
  it.each([
    ['bfloat16', 8, 'reference'],
    ['float16', 16, 'reference'],
    ['bfloat16', 8, 'systolic'],
    ['float16', 16, 'systolic'],
  ] as const)('%s: normal16 equals the lax chain on all 2^%i bit patterns (%s backend)', (dtype, width, backendName) => {
    const n = 2 ** width;
    const bits = new Uint32Array(n).map((_, i) => i);
    const fused = normal16(bits, dtype, MINUS_ONE_UP[dtype]!);
    const generic = withBackend(backendName, () => withFusedRandom(false, () => normalFromBits(asArray(bits), [n], dtype)));
    expect(generic.dtype).toBe(dtype);
    expect(globalThis.Array.from(fused)).toEqual(globalThis.Array.from(generic._storage() as Uint16Array));
    // The draws reach both ends: the most negative value comes from m = 0 (u = nextafter(-1, 0)).
    const values = generic.dataSync() as Float32Array;
    expect(Math.min(...values)).toBe(values[0]);
    expect(Math.min(...values)).toBeLessThan(-2.5);
    expect(Math.max(...values)).toBeGreaterThan(2.5);
  });
});

describe('fused pieces', () => {
  it('erfInvFloat32 equals erfInvF32 on both polynomial branches, the +-1 edges, zeros and NaN', () => {
    const special = [0, -0, 1, -1, 0.5, -0.5, 0.9966, -0.9966, 0.99999994, -0.99999994, 1 - 2 ** -24, 2 ** -149, NaN, 1.5, -2, Infinity];
    const floats = fc.float({ min: -1, max: 1, noNaN: true });
    fc.assert(
      fc.property(fc.array(floats, { minLength: 1, maxLength: 64 }), (xs) => {
        const x = Float32Array.from([...special, ...xs]);
        const fused = erfInvFloat32(x);
        const generic = erfInvF32(asArray(x)).dataSync() as Float32Array;
        expect(globalThis.Array.from(new Uint32Array(fused.buffer))).toEqual(globalThis.Array.from(new Uint32Array(generic.buffer)));
      }),
      RUNS,
    );
  });

  it('erfInvFloat32 equals erfInvF32 on a sweep of [-1, 1] and on every float32 of the tail branch (|x| > 0.9933)', () => {
    // Giles' second polynomial applies where -log1p(-x^2) >= 5: |x| > sqrt(1 - e^-5) = 0.99326...
    const tail = Math.ceil(0.0068 * 2 ** 24);
    const x = new Float32Array(20001 + 2 * tail);
    for (let i = 0; i <= 20000; i++) x[i] = -1 + i / 10000;
    for (let i = 0; i < tail; i++) {
      x[20001 + 2 * i] = 1 - i * 2 ** -24;
      x[20002 + 2 * i] = -(1 - i * 2 ** -24);
    }
    const fused = erfInvFloat32(x);
    const generic = erfInvF32(asArray(x)).dataSync() as Float32Array;
    expect(globalThis.Array.from(new Uint32Array(fused.buffer))).toEqual(globalThis.Array.from(new Uint32Array(generic.buffer)));
  });

  it('randintInto computes remainders exactly, at multiples of the span and next to them', () => {
    const spans = [0, 1, 2, 3, 7, 10, 255, 1000, 65521, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, 2 ** 32 - 5, 2 ** 32 - 1];
    fc.assert(
      fc.property(fc.constantFrom(...spans), fc.integer({ min: 1, max: 2 ** 32 - 1 }), fc.integer({ min: 0, max: 2 ** 32 - 1 }), (span0, rnd, mult0) => {
        const span = span0 === 0 || span0 === 2 ** 32 - 5 ? span0 : Math.max(1, rnd % (span0 + 1)) || span0;
        const vals: number[] = [0, 1, 2 ** 32 - 1, rnd];
        if (span > 0) for (const q of [1, 2, 3, Math.floor((2 ** 32 - 1) / span)]) for (const d of [-1, 0, 1]) vals.push(q * span + d);
        const a = Uint32Array.from(vals);
        const b = Uint32Array.from(vals.slice().reverse());
        const mult = span === 0 ? mult0 : mult0 % span;
        const out = new Uint32Array(a.length);
        randintInto(out, a, b, span, mult, 0, -1);
        const rem = (x: number): number => (span === 0 ? x : x % span);
        const expected = globalThis.Array.from(a, (x, i) => rem((Math.imul(rem(x), mult) + rem(b[i])) >>> 0));
        expect(globalThis.Array.from(out)).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });

  it('the radix LineSorter that permutation uses is the stable sort order, ties included', () => {
    const key = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.constantFrom(2047, 2048, 2 ** 22, 2 ** 31, 2 ** 32 - 1));
    fc.assert(
      fc.property(fc.array(key, { maxLength: 300 }), (ks) => {
        const keys = Uint32Array.from(ks);
        const expected = ks.map((_, i) => i).sort((p, q) => keys[p] - keys[q] || p - q);
        expect(globalThis.Array.from(new LineSorter(keys.length).sortLine([keys], 0, 1))).toEqual(expected);
      }),
      { numRuns: 30 },
    );
  });
});

describe('when the fused path is taken', () => {
  afterEach(() => vi.restoreAllMocks());

  it('eagerly on the reference backend, normal runs a handful of kernels instead of the whole chain', () => {
    const spy = vi.spyOn(referenceBackend, 'execute');
    const k = random.key(3);
    const [fusedCalls, genericCalls] = withBackend('reference', () => {
      random.normal(k, [100]);
      const fused = spy.mock.calls.length;
      spy.mockClear();
      withFusedRandom(false, () => random.normal(k, [100]));
      return [fused, spy.mock.calls.length];
    });
    expect(fusedCalls).toBeLessThan(5);
    expect(genericCalls).toBeGreaterThan(40);
  });

  it('not while a systolic cost ledger collects: every op of the chain is costed', () => {
    const k = random.key(3);
    const { result, ledger } = systolic.withLedger(() => random.normal(k, [100]));
    expect(ledger.byOp.threefry2x32?.count).toBe(1);
    expect(ledger.ops).toBeGreaterThan(40);
    expect(bytesOf(result)).toEqual(bytesOf(random.normal(k, [100])));
  });
});
