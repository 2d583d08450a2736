/**
 * The bfloat16 codec: float32 <-> the 16-bit pattern a bfloat16 array stores. Round to nearest
 * even, overflow to infinity, NaN stays a (quiet) NaN, -0 is kept. Subnormals are kept by default
 * (as ml_dtypes and JAX on CPU do); `flushSubnormals: true` gives the TPU's conversion, which
 * flushes subnormal inputs to a signed zero. The bulk paths sit under every bf16 op, so they
 * work on 32-bit views without per-element allocation or branches beyond the NaN test.
 */

export interface Bf16Options {
  /** Flush float32 subnormals to signed zero before rounding (the TPU's conversion). */
  flushSubnormals?: boolean;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function roundBits(b: number, flush: boolean): number {
  if ((b & 0x7fffffff) > 0x7f800000) return ((b >>> 16) | 0x0040) & 0xffff; // quiet NaN, sign kept
  if (flush && (b & 0x7f800000) === 0) return (b >>> 16) & 0x8000;
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Rounds a number to float32, then to bfloat16; returns the 16 bits as a number. */
export function fromFloat32(x: number, opts?: Bf16Options): number {
  f32[0] = x;
  return roundBits(u32[0], opts?.flushSubnormals === true);
}

/** The float value of a bfloat16 bit pattern. */
export function toFloat32(bits: number): number {
  u32[0] = (bits & 0xffff) << 16;
  return f32[0];
}

/** Two bf16 values share one 32-bit word (element 2j in the low half on little-endian hosts),
 * which the bulk paths use to halve their loads or stores. */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Rounds every element to bfloat16. `out` may be passed to avoid allocating. */
export function encode(src: Float32Array, opts?: Bf16Options, out?: Uint16Array): Uint16Array {
  const n = src.length;
  const dst = out ?? new Uint16Array(n);
  if (dst.length < n) throw new RangeError(`bf16.encode: out has length ${dst.length}, need ${n}`);
  // Signed 32-bit views keep every value a small integer for V8 (a Uint32Array load of a
  // negative float's bits is not), and the rounding add cannot overflow for non-NaN inputs.
  const bits = new Int32Array(src.buffer, src.byteOffset, n);
  if (opts?.flushSubnormals) {
    for (let i = 0; i < n; i++) dst[i] = roundBits(bits[i], true);
    return dst;
  }
  let i = 0;
  if (LITTLE_ENDIAN && (dst.byteOffset & 3) === 0) {
    // Two results per 32-bit store.
    const pairs = n >>> 1;
    const words = new Int32Array(dst.buffer, dst.byteOffset, pairs);
    for (let j = 0; j < pairs; j++, i += 2) {
      const a = bits[i];
      const b = bits[i + 1];
      const ra = (a & 0x7fffffff) > 0x7f800000 ? (a >>> 16) | 0x0040 : (a + 0x7fff + ((a >>> 16) & 1)) >>> 16;
      const rb = (b & 0x7fffffff) > 0x7f800000 ? (b >>> 16) | 0x0040 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
      words[j] = ra | (rb << 16);
    }
  }
  for (; i < n; i++) {
    const b = bits[i];
    dst[i] = (b & 0x7fffffff) > 0x7f800000 ? (b >>> 16) | 0x0040 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
  return dst;
}

/** Widens bfloat16 bit patterns to float32 (exact). `out` may be passed to avoid allocating. */
export function decode(src: Uint16Array, out?: Float32Array): Float32Array {
  const n = src.length;
  const dst = out ?? new Float32Array(n);
  if (dst.length < n) throw new RangeError(`bf16.decode: out has length ${dst.length}, need ${n}`);
  const bits = new Int32Array(dst.buffer, dst.byteOffset, n);
  let i = 0;
  if (LITTLE_ENDIAN && (src.byteOffset & 3) === 0) {
    // One 32-bit load per two values.
    const pairs = n >>> 1;
    const words = new Int32Array(src.buffer, src.byteOffset, pairs);
    for (let j = 0; j < pairs; j++, i += 2) {
      const w = words[j];
      bits[i] = w << 16;
      bits[i + 1] = w & -65536;
    }
  }
  for (; i < n; i++) bits[i] = src[i] << 16;
  return dst;
}

/** Rounds float32 values to the nearest bfloat16 value in place (encode then decode, fused). */
export function roundInPlace(x: Float32Array, opts?: Bf16Options): Float32Array {
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const flush = opts?.flushSubnormals === true;
  for (let i = 0; i < bits.length; i++) bits[i] = roundBits(bits[i], flush) << 16;
  return x;
}
