/** The float16 codec: every bit pattern round-trips, rounding is to nearest even (subnormals included), overflow goes to infinity. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as f16 from './f16';

/** The exact value of a half-precision pattern, computed independently of the codec. */
function halfValue(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  return e === 0 ? s * m * 2 ** -24 : s * (1024 + m) * 2 ** (e - 25);
}

/** A slow reference: the nearest finite half (ties to the even pattern), or infinity past 65520. */
function refEncode(x: number): number {
  if (Number.isNaN(x)) return -1;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a >= 65520) return sign | 0x7c00;
  // Binary search the monotone positive patterns 0..0x7bff for the last one <= a.
  let lo = 0;
  let hi = 0x7bff;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (halfValue(mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  if (lo === 0x7bff) return sign | lo;
  const dlo = a - halfValue(lo);
  const dhi = halfValue(lo + 1) - a;
  const pick = dlo < dhi ? lo : dhi < dlo ? lo + 1 : lo & 1 ? lo + 1 : lo;
  return sign | pick;
}

describe('f16 codec', () => {
  it('decodes every pattern to its exact value and encodes it back (NaN stays NaN)', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const dec = f16.decode(all);
    const back = f16.encode(dec);
    for (let i = 0; i < 65536; i++) {
      const v = halfValue(i);
      if (Number.isNaN(v)) {
        if (!Number.isNaN(dec[i]) || !Number.isNaN(f16.toFloat32(back[i]))) expect.fail(`NaN pattern ${i.toString(16)}`);
      } else if (!Object.is(dec[i], v) || back[i] !== i) {
        expect.fail(`pattern ${i.toString(16)}: decoded ${dec[i]} (want ${v}), re-encoded ${back[i].toString(16)}`);
      }
    }
  });

  it('rounds float32 values to nearest even, matching a slow reference', () => {
    const f = new Float32Array(1);
    const u = new Uint32Array(f.buffer);
    fc.assert(
      fc.property(fc.oneof(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0x33000000, max: 0x47800000 })), (bits) => {
        u[0] = bits;
        const x = f[0];
        if (Number.isNaN(x)) return;
        expect(f16.fromFloat32(x)).toBe(refEncode(x));
      }),
      { numRuns: 3000 },
    );
  });

  it('ties, subnormals, overflow and signed zero by hand', () => {
    expect(f16.fromFloat32(1 + 2 ** -11)).toBe(0x3c00); // tie -> even (down)
    expect(f16.fromFloat32(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie -> even (up)
    expect(f16.fromFloat32(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(f16.fromFloat32(2 ** -25)).toBe(0x0000); // half of it: tie to even zero
    expect(f16.fromFloat32(1.5 * 2 ** -25)).toBe(0x0001);
    expect(f16.fromFloat32(3 * 2 ** -25)).toBe(0x0002); // subnormal tie rounds to even
    expect(f16.fromFloat32(2 ** -14 - 2 ** -25)).toBe(0x0400); // rounds up into the normals
    expect(f16.fromFloat32(65504)).toBe(0x7bff);
    expect(f16.fromFloat32(65519.99)).toBe(0x7bff);
    expect(f16.fromFloat32(65520)).toBe(0x7c00);
    expect(f16.fromFloat32(-1e9)).toBe(0xfc00);
    expect(f16.fromFloat32(-0)).toBe(0x8000);
    expect(f16.fromFloat32(-1e-30)).toBe(0x8000);
    expect(f16.fromFloat32(NaN) & 0x7e00).toBe(0x7e00);
    expect(f16.toFloat32(0x7c00)).toBe(Infinity);
  });

  it('encode/decode accept an out array and subarray views', () => {
    const src = new Float32Array([0, 1, 2, 3]).subarray(1);
    const out = new Uint16Array(3);
    expect(f16.encode(src, out)).toBe(out);
    expect([...f16.decode(out)]).toEqual([1, 2, 3]);
  });
});

it('a too-short out array is an error, as in bf16', () => {
  expect(() => f16.encode(new Float32Array(3), new Uint16Array(2))).toThrow('f16.encode: out has length 2, need 3');
  expect(() => f16.decode(new Uint16Array(3), new Float32Array(1))).toThrow('f16.decode: out has length 1, need 3');
});
