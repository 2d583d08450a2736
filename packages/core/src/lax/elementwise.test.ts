/**
 * Elementwise primitives per dtype against independent references: floats against float64
 * math rounded once to the dtype (bf16/f16 via float32, as the TPU's vector unit does), integers
 * against BigInt arithmetic wrapped to the width (XLA's two's-complement semantics, division by
 * zero, INT_MIN / -1, shifts past the width), conversions (saturation, NaN -> 0, bool) and
 * bitcasts against a DataView.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Array, type DType, bf16, f16, lax, np } from '../index';

const RUNS = { numRuns: 40 };
const INT_DTYPES = ['int8', 'uint8', 'int32', 'uint32'] as const;
const FLOAT_DTYPES = ['float32', 'bfloat16', 'float16'] as const;
type IntD = (typeof INT_DTYPES)[number];
type FloatD = (typeof FLOAT_DTYPES)[number];

const BITS: Record<IntD, number> = { int8: 8, uint8: 8, int32: 32, uint32: 32 };
const SIGNED: Record<IntD, boolean> = { int8: true, uint8: false, int32: true, uint32: false };

/** A float64 value rounded once to float32, then (for 16-bit floats) once more to the dtype. */
function roundTo(d: FloatD, x: number): number {
  const f = Math.fround(x);
  if (d === 'bfloat16') return bf16.toFloat32(bf16.fromFloat32(f));
  if (d === 'float16') return f16.toFloat32(f16.fromFloat32(f));
  return f;
}

/** Wraps an exact integer to a dtype's width (two's complement). */
function wrap(d: IntD, x: bigint): number {
  return Number(SIGNED[d] ? BigInt.asIntN(BITS[d], x) : BigInt.asUintN(BITS[d], x));
}

const sameFloat = (a: number, b: number): boolean => Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));

function expectFloats(got: ArrayLike<number>, want: number[], what: string, loose0 = false): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    const ok = sameFloat(got[i], want[i]) || (loose0 && got[i] === 0 && want[i] === 0);
    if (!ok) expect.fail(`${what}: element ${i}: got ${got[i]}, want ${want[i]}`);
  }
}

function expectInts(got: ArrayLike<number>, want: number[], what: string): void {
  for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) expect.fail(`${what}: element ${i}: got ${got[i]}, want ${want[i]}`);
}

const f32Arb = fc.oneof(fc.float(), fc.integer({ min: -300, max: 300 }), fc.double({ min: -4, max: 4, noNaN: true }).map(Math.fround));
const floatValues = (d: FloatD): fc.Arbitrary<number[]> => fc.array(f32Arb.map((x) => roundTo(d, x)), { minLength: 1, maxLength: 16 });
const intArb = (d: IntD): fc.Arbitrary<number> => {
  const hi = 2 ** (BITS[d] - (SIGNED[d] ? 1 : 0)) - 1;
  return fc.integer({ min: SIGNED[d] ? -hi - 1 : 0, max: hi });
};
const intValues = (d: IntD): fc.Arbitrary<number[]> => fc.array(intArb(d), { minLength: 1, maxLength: 16 });
const pairOf = (vals: fc.Arbitrary<number[]>, elem: fc.Arbitrary<number>): fc.Arbitrary<[number[], number[]]> =>
  vals.chain((a) => fc.tuple(fc.constant(a), fc.array(elem, { minLength: a.length, maxLength: a.length })));

const arr = (vals: number[], d: DType): Array => np.array(vals, d);

// ---------------------------------------------------------------------------------------------

/** C / XLA pow (JS `**` differs at 1 ** NaN and (-1) ** Infinity). */
function cpow(a: number, b: number): number {
  if (a === 1 || b === 0) return 1;
  if (a === -1 && !Number.isFinite(b) && !Number.isNaN(b)) return 1;
  return a ** b;
}

const FLOAT_BINARY: [string, (x: Array, y: Array) => Array, (a: number, b: number) => number][] = [
  ['add', lax.add, (a, b) => a + b],
  ['sub', lax.sub, (a, b) => a - b],
  ['mul', lax.mul, (a, b) => a * b],
  ['div', lax.div, (a, b) => a / b],
  ['rem', lax.rem, (a, b) => a % b],
  ['pow', lax.pow, cpow],
  ['max', lax.max, (a, b) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.max(a, b))],
  ['min', lax.min, (a, b) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.min(a, b))],
  ['atan2', lax.atan2, Math.atan2],
];

describe.each(FLOAT_DTYPES)('float binary ops on %s match float64 rounded once', (d) => {
  for (const [name, op, ref] of FLOAT_BINARY) {
    it(name, () => {
      fc.assert(
        fc.property(pairOf(floatValues(d), f32Arb.map((x) => roundTo(d, x))), ([a, b]) => {
          const r = op(arr(a, d), arr(b, d));
          expect(r.dtype).toBe(d);
          expectFloats(r.dataSync(), a.map((x, i) => roundTo(d, ref(x, b[i]))), `${name}(${d})`, name === 'max' || name === 'min');
        }),
        RUNS,
      );
    });
  }

  it('comparisons give bool and treat NaN as unordered', () => {
    fc.assert(
      fc.property(pairOf(floatValues(d), f32Arb.map((x) => roundTo(d, x))), ([a, b]) => {
        const cases: [Array, (p: number, q: number) => boolean][] = [
          [lax.eq(arr(a, d), arr(b, d)), (p, q) => p === q],
          [lax.ne(arr(a, d), arr(b, d)), (p, q) => p !== q],
          [lax.lt(arr(a, d), arr(b, d)), (p, q) => p < q],
          [lax.le(arr(a, d), arr(b, d)), (p, q) => p <= q],
          [lax.gt(arr(a, d), arr(b, d)), (p, q) => p > q],
          [lax.ge(arr(a, d), arr(b, d)), (p, q) => p >= q],
        ];
        for (const [r, f] of cases) {
          expect(r.dtype).toBe('bool');
          expect(r.toArray()).toEqual(a.map((p, i) => f(p, b[i])));
        }
      }),
      RUNS,
    );
  });
});

const FLOAT_UNARY: [string, (x: Array) => Array, (a: number) => number][] = [
  ['neg', lax.neg, (a) => -a],
  ['abs', lax.abs, Math.abs],
  ['sign', lax.sign, (a) => (Number.isNaN(a) ? NaN : a > 0 ? 1 : a < 0 ? -1 : a)],
  ['floor', lax.floor, Math.floor],
  ['ceil', lax.ceil, Math.ceil],
  ['round (away from zero)', (x) => lax.round(x, 0), (a) => {
    if (!Number.isFinite(a)) return a;
    const r = Math.floor(Math.abs(a) + 0.5);
    return a < 0 || Object.is(a, -0) ? -r : r;
  }],
  ['round (to even)', (x) => lax.round(x, 1), (a) => {
    if (!Number.isFinite(a)) return a;
    const f = Math.floor(a);
    const diff = a - f;
    const r = diff > 0.5 ? f + 1 : diff < 0.5 ? f : f % 2 === 0 ? f : f + 1;
    return r === 0 ? (Object.is(a, -0) || a < 0 ? -0 : 0) : r;
  }],
  ['exp', lax.exp, Math.exp],
  ['exp2', lax.exp2, (a) => 2 ** a],
  ['log', lax.log, Math.log],
  ['log1p', lax.log1p, Math.log1p],
  ['expm1', lax.expm1, Math.expm1],
  ['tanh', lax.tanh, Math.tanh],
  ['logistic', lax.logistic, (a) => 1 / (1 + Math.exp(-a))],
  ['sin', lax.sin, Math.sin],
  ['cos', lax.cos, Math.cos],
  ['tan', lax.tan, Math.tan],
  ['asin', lax.asin, Math.asin],
  ['acos', lax.acos, Math.acos],
  ['atan', lax.atan, Math.atan],
  ['sinh', lax.sinh, Math.sinh],
  ['cosh', lax.cosh, Math.cosh],
  ['asinh', lax.asinh, Math.asinh],
  ['acosh', lax.acosh, Math.acosh],
  ['atanh', lax.atanh, Math.atanh],
  ['sqrt', lax.sqrt, Math.sqrt],
  ['rsqrt', lax.rsqrt, (a) => 1 / Math.sqrt(a)],
  ['cbrt', lax.cbrt, Math.cbrt],
  ['square', lax.square, (a) => a * a],
  ['integer_pow 3', (x) => lax.integerPow(x, 3), (a) => a * a * a],
  ['integer_pow -2', (x) => lax.integerPow(x, -2), (a) => 1 / (a * a)],
];

describe.each(FLOAT_DTYPES)('float unary ops on %s match float64 rounded once', (d) => {
  for (const [name, op, ref] of FLOAT_UNARY) {
    it(name, () => {
      fc.assert(
        fc.property(floatValues(d), (a) => {
          const r = op(arr(a, d));
          expect(r.dtype).toBe(d);
          const want = a.map((x) => roundTo(d, ref(x)));
          // logistic's reference is the naive formula: allow one unit in the last place.
          if (name === 'logistic') expectCloseUlp(r.dataSync(), want, d);
          else expectFloats(r.dataSync(), want, `${name}(${d})`);
        }),
        RUNS,
      );
    });
  }

  it('is_finite', () => {
    const r = lax.isFinite(arr([1, NaN, Infinity, -Infinity, -0], d));
    expect(r.toArray()).toEqual([true, false, false, false, true]);
  });
});

function expectCloseUlp(got: ArrayLike<number>, want: number[], d: FloatD): void {
  const eps = d === 'float32' ? 2 ** -23 : d === 'bfloat16' ? 2 ** -7 : 2 ** -10;
  for (let i = 0; i < want.length; i++) {
    if (sameFloat(got[i], want[i])) continue;
    expect(Math.abs(got[i] - want[i])).toBeLessThanOrEqual(eps * Math.abs(want[i]) + 1e-45);
  }
}

it('bf16 math is computed in float32 and rounded once to bf16 (not accumulated in bf16)', () => {
  // 1 + 2^-8 + 2^-8: each partial sum rounded to bf16 gives 1; rounding once gives 1 + 2^-7.
  const x = arr([1], 'bfloat16');
  const e = arr([2 ** -8 + 2 ** -8], 'bfloat16');
  expect(lax.add(x, e).item()).toBe(1 + 2 ** -7);
  // 1/3 in bf16 is the nearest bf16 of the f32 quotient.
  expect(lax.div(arr([1], 'bfloat16'), arr([3], 'bfloat16')).item()).toBe(bf16.toFloat32(bf16.fromFloat32(1 / 3)));
});

describe('special functions against known values', () => {
  it('erf / erfc / erf_inv / lgamma / digamma', () => {
    const x = arr([0.5, -1.5, 3], 'float32');
    expectFloats(lax.erf(x).dataSync(), [0.5204998778130465, -0.9661051464753108, 0.9999779095030014].map(Math.fround), 'erf');
    expectFloats(lax.erfc(x).dataSync(), [0.4795001221869535, 1.9661051464753108, 2.209049699858544e-5].map(Math.fround), 'erfc');
    expectFloats(lax.lgamma(arr([0.5, 3, -0.5, 10], 'float32')).dataSync(),
      [0.5723649429247001, 0.6931471805599453, 1.2655121234846454, 12.801827480081469].map(Math.fround), 'lgamma');
    expectFloats(lax.digamma(arr([1, 0.5, 10], 'float32')).dataSync(),
      [-0.5772156649015329, -1.9635100260214235, 2.251752589066721].map(Math.fround), 'digamma');
    expectFloats(lax.erfInv(arr([0, 0.5, -0.9, 1], 'float32')).dataSync(),
      [0, 0.4769362762044699, -1.1630871536766743, Infinity].map(Math.fround), 'erf_inv');
  });

  it('special values at the ends of the range', () => {
    expectFloats(lax.lgamma(arr([Infinity, -Infinity, 0, -2, 1, 2], 'float32')).dataSync(), [Infinity, Infinity, Infinity, Infinity, 0, 0], 'lgamma ends');
    expectFloats(lax.erf(arr([Infinity, -Infinity, 0, -0], 'float32')).dataSync(), [1, -1, 0, -0], 'erf ends');
    expectFloats(lax.erfc(arr([Infinity, -Infinity, 30], 'float32')).dataSync(), [0, 2, 0], 'erfc ends');
    expectFloats(lax.digamma(arr([0, -1, Infinity], 'float32')).dataSync(), [NaN, NaN, Infinity], 'digamma ends');
  });

  it('erf_inv inverts erf', () => {
    fc.assert(
      fc.property(fc.double({ min: -3, max: 3, noNaN: true }), (x) => {
        const y = lax.erfInv(lax.erf(arr([x], 'float32'))).item() as number;
        expect(Math.abs(y - x)).toBeLessThan(2e-3 * Math.max(1, Math.abs(x)));
      }),
      RUNS,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Integers

type IntRef = (a: bigint, b: bigint, d: IntD) => bigint | number;
const ALL_ONES = -1n;

function unsignedShift(d: IntD, b: bigint): bigint {
  return BigInt.asUintN(BITS[d], b);
}

const INT_BINARY: [string, (x: Array, y: Array) => Array, IntRef][] = [
  ['add', lax.add, (a, b) => a + b],
  ['sub', lax.sub, (a, b) => a - b],
  ['mul', lax.mul, (a, b) => a * b],
  ['div (x/0 = -1, INT_MIN/-1 = INT_MIN)', lax.div, (a, b) => (b === 0n ? ALL_ONES : a / b)],
  ['rem (x%0 = x)', lax.rem, (a, b) => (b === 0n ? a : a % b)],
  ['max', lax.max, (a, b) => (a > b ? a : b)],
  ['min', lax.min, (a, b) => (a < b ? a : b)],
  ['and', lax.bitwiseAnd, (a, b) => a & b],
  ['or', lax.bitwiseOr, (a, b) => a | b],
  ['xor', lax.bitwiseXor, (a, b) => a ^ b],
  ['shift_left', lax.shiftLeft, (a, b, d) => (unsignedShift(d, b) >= BigInt(BITS[d]) ? 0n : a << unsignedShift(d, b))],
  ['shift_right_logical', lax.shiftRightLogical, (a, b, d) => {
    const s = unsignedShift(d, b);
    return s >= BigInt(BITS[d]) ? 0n : BigInt.asUintN(BITS[d], a) >> s;
  }],
  ['shift_right_arithmetic', lax.shiftRightArithmetic, (a, b, d) => {
    const s = unsignedShift(d, b);
    const signed = BigInt.asIntN(BITS[d], a);
    return signed >> (s >= BigInt(BITS[d]) ? BigInt(BITS[d] - 1) : s);
  }],
  ['pow', lax.pow, (a, b) => {
    if (b < 0n) return a === 1n ? 1n : a === -1n ? (b % 2n === 0n ? 1n : -1n) : 0n;
    let r = 1n;
    let base = a;
    let e = b;
    while (e > 0n) {
      if (e & 1n) r = BigInt.asIntN(64, r * base);
      base = BigInt.asIntN(64, base * base);
      e >>= 1n;
    }
    return r;
  }],
];

/** Interesting second operands: zeros, -1, shift amounts around the width, and anything. */
const intSecond = (d: IntD): fc.Arbitrary<number> =>
  fc.oneof(intArb(d), fc.constantFrom(0, 1, 7, 8, 31, 32, 33).filter((v) => v <= 2 ** BITS[d] - 1), SIGNED[d] ? fc.constant(-1) : fc.constant(2 ** BITS[d] - 1));

describe.each(INT_DTYPES)('integer binary ops on %s wrap as XLA does', (d) => {
  for (const [name, op, ref] of INT_BINARY) {
    it(name, () => {
      const second = name === 'pow' ? fc.integer({ min: SIGNED[d] ? -3 : 0, max: 40 }) : intSecond(d);
      fc.assert(
        fc.property(pairOf(intValues(d), second), ([a, b]) => {
          const r = op(arr(a, d), arr(b, d));
          expect(r.dtype).toBe(d);
          expectInts(r.dataSync(), a.map((x, i) => wrap(d, BigInt(ref(BigInt(x), BigInt(b[i]), d)))), `${name}(${d}) of ${JSON.stringify([a, b])}`);
        }),
        RUNS,
      );
    });
  }

  it('edge cases by hand', () => {
    if (d === 'int32') {
      expect(lax.div(arr([-2147483648, 7, -7], d), arr([-1, 0, 2], d)).toArray()).toEqual([-2147483648, -1, -3]);
      expect(lax.rem(arr([-2147483648, 7, -7], d), arr([-1, 0, 2], d)).toArray()).toEqual([0, 7, -1]);
      expect(lax.add(arr([2147483647], d), arr([1], d)).toArray()).toEqual([-2147483648]);
    }
    if (d === 'uint8') {
      expect(lax.div(arr([7], d), arr([0], d)).toArray()).toEqual([255]);
      expect(lax.sub(arr([0], d), arr([1], d)).toArray()).toEqual([255]);
    }
  });
});

describe.each(INT_DTYPES)('integer unary ops on %s', (d) => {
  const UNARY: [string, (x: Array) => Array, (a: bigint) => bigint][] = [
    ['neg', lax.neg, (a) => -a],
    ['abs', lax.abs, (a) => (a < 0n ? -a : a)],
    ['sign', lax.sign, (a) => (a > 0n ? 1n : a < 0n ? -1n : 0n)],
    ['square', lax.square, (a) => a * a],
    ['not', lax.bitwiseNot, (a) => ~a],
    ['integer_pow 3', (x) => lax.integerPow(x, 3), (a) => a * a * a],
  ];
  for (const [name, op, ref] of UNARY) {
    it(name, () => {
      fc.assert(
        fc.property(intValues(d), (a) => {
          const r = op(arr(a, d));
          expectInts(r.dataSync(), a.map((x) => wrap(d, ref(BigInt(x)))), `${name}(${d})`);
        }),
        RUNS,
      );
    });
  }

  it('float-only ops reject integers with a clear error', () => {
    expect(() => lax.exp(arr([1], d))).toThrow(`exp: does not accept dtype ${d} (accepts float dtypes)`);
  });
});

describe('bool ops', () => {
  it('add is or, mul is and, not, comparisons, max/min', () => {
    const t = np.array([true, true, false, false]);
    const u = np.array([true, false, true, false]);
    expect(lax.add(t, u).toArray()).toEqual([true, true, true, false]);
    expect(lax.mul(t, u).toArray()).toEqual([true, false, false, false]);
    expect(lax.bitwiseNot(t).toArray()).toEqual([false, false, true, true]);
    expect(lax.bitwiseXor(t, u).toArray()).toEqual([false, true, true, false]);
    expect(lax.max(t, u).toArray()).toEqual([true, true, true, false]);
    expect(lax.min(t, u).toArray()).toEqual([true, false, false, false]);
    expect(lax.gt(t, u).toArray()).toEqual([false, true, false, false]);
    expect(() => lax.sub(t, u)).toThrow('sub: does not accept dtype bool');
  });
});

// ---------------------------------------------------------------------------------------------
// Conversions

const INT_RANGE: Record<IntD, [number, number]> = { int8: [-128, 127], uint8: [0, 255], int32: [-2147483648, 2147483647], uint32: [0, 4294967295] };

describe('convert_element_type', () => {
  it.each(INT_DTYPES)('float32 -> %s truncates, saturates, and maps NaN to 0', (d) => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.float(), fc.float({ min: -300, max: 300 }), fc.constantFrom(2 ** 31, -(2 ** 31), 2 ** 32, 4294967040)), { minLength: 1, maxLength: 16 }), (a) => {
        const [lo, hi] = INT_RANGE[d];
        const r = lax.convertElementType(arr(a, 'float32'), d);
        const want = a.map((x) => (Number.isNaN(x) ? 0 : Math.min(hi, Math.max(lo, Math.trunc(x)))));
        expectInts(r.dataSync(), want, `f32->${d}`);
      }),
      RUNS,
    );
  });

  it.each(FLOAT_DTYPES)('bfloat16 -> int8 / %s -> uint8 go through the decoded value', (d) => {
    expect(lax.convertElementType(arr([-1.5, 300, NaN, -Infinity, Infinity], d), 'uint8').toArray()).toEqual([0, 255, 0, 0, 255]);
    expect(lax.convertElementType(arr([-1.5, 300, NaN, -Infinity, 127.5], d), 'int8').toArray()).toEqual([-1, 127, 0, -128, 127]);
  });

  it('integer -> integer wraps (two\'s complement)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...INT_DTYPES), fc.constantFrom(...INT_DTYPES), fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { minLength: 1, maxLength: 8 }), (from, to, raw) => {
        const a = raw.map((x) => wrap(from, BigInt(x)));
        const r = lax.convertElementType(arr(a, from), to);
        expectInts(r.dataSync(), a.map((x) => wrap(to, BigInt(x))), `${from}->${to}`);
      }),
      RUNS,
    );
  });

  it('integer -> float rounds once to float32 (then to the 16-bit dtype)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...FLOAT_DTYPES), fc.array(fc.integer({ min: 0, max: 2 ** 32 - 1 }), { minLength: 1, maxLength: 8 }), (to, a) => {
        const r = lax.convertElementType(arr(a, 'uint32'), to);
        expectFloats(r.dataSync(), a.map((x) => roundTo(to, x)), `uint32->${to}`);
      }),
      RUNS,
    );
  });

  it('float -> float rounds to nearest even; overflow goes to infinity', () => {
    expect(lax.convertElementType(arr([65520, 65504, 1e-8, 3e38], 'float32'), 'float16').toArray()).toEqual([Infinity, 65504, 0, Infinity]);
    expect(lax.convertElementType(arr([1 + 2 ** -8, 1 + 3 * 2 ** -8], 'float32'), 'bfloat16').toArray()).toEqual([1, 1 + 2 ** -6]);
    expect(lax.convertElementType(arr([3e38], 'bfloat16'), 'float32').item()).toBe(bf16.toFloat32(bf16.fromFloat32(3e38)));
  });

  it('bool conversions: nonzero (and NaN) is true; true is 1', () => {
    expect(lax.convertElementType(arr([0, -0, 2, NaN, -1], 'float32'), 'bool').toArray()).toEqual([false, false, true, true, true]);
    expect(lax.convertElementType(arr([0, 256, 3], 'int32'), 'bool').toArray()).toEqual([false, true, true]);
    for (const d of ['int8', 'uint32', 'float32', 'bfloat16', 'float16'] as const) {
      expect(lax.convertElementType(np.array([true, false]), d).toArray()).toEqual([1, 0]);
    }
  });

  it('weak_type flag is set as asked', () => {
    const r = lax.convertElementType(arr([1], 'int32'), 'float32', true);
    expect([r.dtype, r.weakType]).toEqual(['float32', true]);
  });
});

describe('bitcast_convert_type', () => {
  it('reinterprets bits of 32-bit, 16-bit and 8-bit dtypes', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 2 ** 32 - 1 }), { minLength: 1, maxLength: 8 }), (bits) => {
        const dv = new DataView(new ArrayBuffer(4));
        const asF32 = bits.map((b) => {
          dv.setUint32(0, b);
          return dv.getFloat32(0);
        });
        const asI32 = bits.map((b) => b | 0);
        expectFloats(lax.bitcastConvertType(arr(bits, 'uint32'), 'float32').dataSync(), asF32, 'u32->f32');
        expectInts(lax.bitcastConvertType(arr(bits, 'uint32'), 'int32').dataSync(), asI32, 'u32->i32');
        // float32 -> uint32 round trip keeps NaN payloads.
        const back = lax.bitcastConvertType(lax.bitcastConvertType(arr(bits, 'uint32'), 'float32'), 'uint32');
        expectInts(back.dataSync(), bits, 'u32->f32->u32');
      }),
      RUNS,
    );
    const h = lax.bitcastConvertType(arr([1, -2], 'bfloat16'), 'float16');
    expect(h.dtype).toBe('float16');
    expect(lax.bitcastConvertType(h, 'bfloat16').toArray()).toEqual([1, -2]);
    expect(lax.bitcastConvertType(arr([-1, 127, -128], 'int8'), 'uint8').toArray()).toEqual([255, 127, 128]);
    expect(() => lax.bitcastConvertType(arr([1], 'float32'), 'bfloat16')).toThrow('bitcast_convert_type: float32 (4 bytes) and bfloat16 (2 bytes) differ in width');
  });
});

describe('select_n and nextafter', () => {
  it('select picks per element; select_n takes int32 cases', () => {
    const p = np.array([true, false, true]);
    expect(lax.select(p, arr([1, 2, 3], 'int8'), arr([4, 5, 6], 'int8')).toArray()).toEqual([1, 5, 3]);
    expect(lax.selectN(arr([2, 0, 1], 'int32'), arr([1, 1, 1], 'float32'), arr([2, 2, 2], 'float32'), arr([3, 3, 3], 'float32')).toArray()).toEqual([3, 1, 2]);
    expect(() => lax.select(p, arr([1], 'int8'), arr([1], 'int8'))).toThrow(/which shape \[3\] must be scalar or equal to the case shape \[1\]/);
  });

  it('nextafter steps one float32 ulp', () => {
    const r = lax.nextafter(arr([1, 1, 0, -1], 'float32'), arr([2, 0, -1, -2], 'float32')).dataSync();
    expect([...r]).toEqual([1 + 2 ** -23, 1 - 2 ** -24, -(2 ** -149), -1 - 2 ** -23]);
  });
});

it('pow follows C / XLA at the edges (1 ** NaN = 1, (-1) ** inf = 1, NaN ** 0 = 1)', () => {
  const r = lax.pow(arr([1, -1, NaN, 0, -8], 'float32'), arr([NaN, Infinity, 0, -1, 1 / 3], 'float32'));
  expectFloats(r.dataSync(), [1, 1, 1, Infinity, NaN], 'pow edges');
});
