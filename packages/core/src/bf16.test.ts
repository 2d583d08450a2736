import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as bf16 from './bf16';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bitsToF32 = (b: number): number => {
  u32[0] = b >>> 0;
  return f32[0];
};

/** A slow, obviously correct reference: pick the nearer of the two neighbouring bf16 values, ties to even. */
function refRound(x: number): number {
  f32[0] = x;
  const b = u32[0];
  if ((b & 0x7fffffff) > 0x7f800000) return -1; // NaN: checked separately
  const v = f32[0];
  const lo = b >>> 16;
  const hi = lo + 1;
  const vlo = bitsToF32(lo << 16);
  const vhi = bitsToF32((hi & 0xffff) << 16);
  const dlo = Math.abs(v - vlo);
  const dhi = (lo & 0x7fff) === 0x7f7f ? Infinity : Math.abs(vhi - v);
  if ((lo & 0x7fff) === 0x7f80) return lo; // infinity stays
  if ((b & 0xffff) === 0) return lo;
  // Overflow: the value above the largest finite bf16 rounds to infinity when past the midpoint.
  if ((lo & 0x7fff) === 0x7f7f) return (b & 0xffff) > 0x8000 || ((b & 0xffff) === 0x8000 && (lo & 1)) ? hi : lo;
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi & 0xffff;
  return lo & 1 ? hi & 0xffff : lo;
}

describe('bf16 codec', () => {
  it('round-trips every bf16 bit pattern (NaNs stay NaN)', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const back = bf16.encode(bf16.decode(all));
    for (let i = 0; i < 65536; i++) {
      const isNaN = (i & 0x7fff) > 0x7f80;
      if (isNaN) expect(Number.isNaN(bf16.toFloat32(back[i]))).toBe(true);
      else if (back[i] !== i) expect.fail(`pattern ${i.toString(16)} came back as ${back[i].toString(16)}`);
    }
  });

  it('rounds to nearest, ties to even, matching a slow reference', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (b) => {
        const x = bitsToF32(b);
        if (Number.isNaN(x)) return;
        expect(bf16.fromFloat32(x)).toBe(refRound(x));
      }),
      { numRuns: 20000 },
    );
  });

  it('ties go to even', () => {
    // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: rounds down to the even pattern 0x3f80.
    expect(bf16.fromFloat32(1 + 2 ** -8)).toBe(0x3f80);
    // 1 + 3 * 2^-8 is halfway between 0x3f81 and 0x3f82: rounds up to even 0x3f82.
    expect(bf16.fromFloat32(1 + 3 * 2 ** -8)).toBe(0x3f82);
  });

  it('is monotone', () => {
    fc.assert(
      fc.property(fc.float({ noNaN: true }), fc.float({ noNaN: true }), (a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        expect(bf16.toFloat32(bf16.fromFloat32(lo))).toBeLessThanOrEqual(bf16.toFloat32(bf16.fromFloat32(hi)));
      }),
    );
  });

  it('keeps -0, overflows to infinity, quiets NaN', () => {
    expect(bf16.fromFloat32(-0)).toBe(0x8000);
    expect(bf16.fromFloat32(3.5e38)).toBe(0x7f80);
    expect(bf16.fromFloat32(-3.5e38)).toBe(0xff80);
    const sNaN = bitsToF32(0x7f800001);
    expect((bf16.fromFloat32(sNaN) & 0x7fc0) === 0x7fc0).toBe(true);
    expect(Number.isNaN(bf16.toFloat32(bf16.fromFloat32(NaN)))).toBe(true);
  });

  it('keeps subnormals by default and flushes them on request', () => {
    const sub = bitsToF32(0x00400000); // a float32 subnormal, exactly representable in bf16
    expect(bf16.fromFloat32(sub)).toBe(0x0040);
    expect(bf16.fromFloat32(sub, { flushSubnormals: true })).toBe(0x0000);
    expect(bf16.fromFloat32(-sub, { flushSubnormals: true })).toBe(0x8000);
    const enc = bf16.encode(new Float32Array([sub, -sub, 1]), { flushSubnormals: true });
    expect([...enc]).toEqual([0, 0x8000, 0x3f80]);
  });

  it('bulk encode equals the scalar path', () => {
    fc.assert(
      fc.property(fc.float32Array({ maxLength: 64 }), (xs) => {
        const enc = bf16.encode(xs);
        xs.forEach((x, i) => {
          if (!Number.isNaN(x)) expect(enc[i]).toBe(bf16.fromFloat32(x));
          else expect(Number.isNaN(bf16.toFloat32(enc[i]))).toBe(true);
        });
      }),
    );
  });
});

describe('bf16 bulk paths (paired 32-bit loads/stores)', () => {
  it('encode into aligned and unaligned out views, odd lengths included, equals the scalar path bit for bit', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffffffff }), { maxLength: 33 }), fc.integer({ min: 0, max: 3 }), (raw, offset) => {
        const xs = new Float32Array(new Uint32Array(raw).buffer);
        const out = new Uint16Array(raw.length + 4).subarray(offset, offset + raw.length);
        bf16.encode(xs, undefined, out);
        raw.forEach((b, i) => {
          const want = (b & 0x7fffffff) > 0x7f800000 ? ((b >>> 16) | 0x40) & 0xffff : bf16.fromFloat32(bitsToF32(b));
          if (out[i] !== want) expect.fail(`element ${i} of ${raw.length} (offset ${offset}): ${out[i].toString(16)} vs ${want.toString(16)}`);
        });
      }),
      { numRuns: 300 },
    );
  });

  it('decode from aligned and unaligned source views, odd lengths included', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 33 }), fc.integer({ min: 0, max: 3 }), (raw, offset) => {
        const src = new Uint16Array(raw.length + 4).subarray(offset, offset + raw.length);
        src.set(raw);
        const out = bf16.decode(src);
        const outBits = new Uint32Array(out.buffer);
        raw.forEach((h, i) => {
          if (outBits[i] !== h * 65536) expect.fail(`element ${i} (offset ${offset}): ${outBits[i].toString(16)} vs ${(h * 65536).toString(16)}`);
        });
      }),
      { numRuns: 300 },
    );
  });
});
