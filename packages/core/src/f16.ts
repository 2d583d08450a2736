/**
 * The IEEE float16 codec: float32 <-> the 16-bit pattern a float16 array stores. Round to nearest
 * even (including into and out of the subnormal range), overflow to infinity, NaN stays a quiet
 * NaN, -0 kept.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function bitsToHalf(b: number): number {
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0); // inf / quiet NaN
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow
  if (e <= 0) {
    // Subnormal half (or zero): shift the full significand right, rounding to nearest even.
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rem = mant & ((1 << shift) - 1);
    let m = mant >>> shift;
    if (rem > half || (rem === half && (m & 1))) m++;
    return sign | m;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++; // may carry into the exponent: correct
  return sign | h;
}

export function fromFloat32(x: number): number {
  f32[0] = x;
  return bitsToHalf(u32[0]);
}

export function toFloat32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

export function encode(src: Float32Array, out?: Uint16Array): Uint16Array {
  const dst = out ?? new Uint16Array(src.length);
  if (dst.length < src.length) throw new RangeError(`f16.encode: out has length ${dst.length}, need ${src.length}`);
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < src.length; i++) dst[i] = bitsToHalf(bits[i]);
  return dst;
}

const DECODE_TABLE = (() => {
  const t = new Float32Array(65536);
  for (let i = 0; i < 65536; i++) t[i] = toFloat32(i);
  return t;
})();

export function decode(src: Uint16Array, out?: Float32Array): Float32Array {
  const dst = out ?? new Float32Array(src.length);
  if (dst.length < src.length) throw new RangeError(`f16.decode: out has length ${dst.length}, need ${src.length}`);
  for (let i = 0; i < src.length; i++) dst[i] = DECODE_TABLE[src[i]];
  return dst;
}
