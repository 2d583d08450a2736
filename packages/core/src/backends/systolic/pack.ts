/**
 * Operand packing for the MXU GEMM: reads a strided operand (any layout, so transposed operands
 * cost no extra copy), rounds it to bf16 the way the MXU's input conversion does (round to
 * nearest even; optionally flushing subnormals), and writes panels of R rows x K for the
 * micro-kernel. For float32 inputs at precision 'high'/'highest' each value is split into bf16
 * terms x ~ hi + mid + lo, and each pass of the multi-pass algorithm becomes a stretch of the
 * packed K axis (so one GEMM accumulates all passes in f32, smallest terms first).
 *
 * Packed layout of one operand: panel p (rows p*R .. p*R+R-1), then virtual k (pass-major),
 * then the R row values: index ((p * kp) + k') * R + r. Rows past the end and k' past P*K are 0.
 */

/** Which bf16 term of a float32 value a pass uses. */
export const HI = 0;
export const MID = 1;
export const LO = 2;

/** A strided view of one operand: element (row, k) of batch b is `data[off + row*rs + k*ks]`. */
export interface OperandView {
  /** float32 data as 32-bit patterns, or bf16 patterns. */
  readonly bits: Uint32Array | Uint16Array;
  readonly bf16: boolean;
  readonly rows: number;
  readonly k: number;
  readonly rs: number;
  readonly ks: number;
}

const sf = new Float32Array(1);
const su = new Uint32Array(sf.buffer);

/** bf16 RNE rounding of f32 bits, returned as f32 bits (low half zero). NaN stays a quiet NaN. */
function roundBits(b: number): number {
  if ((b & 0x7fffffff) > 0x7f800000) return (b | 0x00400000) & 0xffff0000;
  return (b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000;
}

/** The bf16 term `comp` (HI, MID, LO) of float32 bits `b`, as f32 bits. */
export function splitTerm(b: number, comp: number, flush: boolean): number {
  if (flush && (b & 0x7f800000) === 0) b &= 0x80000000;
  const hi = roundBits(b);
  if (comp === HI) return hi;
  // Infinities and NaN carry no residual (x - hi would be NaN); the TPU's splitting does the same.
  if ((hi & 0x7f800000) === 0x7f800000) return 0;
  su[0] = b;
  const x = sf[0];
  su[0] = hi;
  sf[0] = x - sf[0]; // exact: x and hi share the leading bits
  let r = su[0];
  if (flush && (r & 0x7f800000) === 0) r &= 0x80000000;
  const mid = roundBits(r);
  if (comp === MID) return mid;
  const rx = sf[0];
  su[0] = mid;
  sf[0] = rx - sf[0];
  let r2 = su[0];
  if (flush && (r2 & 0x7f800000) === 0) r2 &= 0x80000000;
  return roundBits(r2);
}

/**
 * Splits every element of a float32 operand into its three bf16 terms at once:
 * planes[c * rows * K + row * K + k] for c = HI, MID, LO (each term's bits).
 */
export function splitPlanes(v: OperandView, off: number, flush: boolean): Uint32Array {
  const { bits, rows, k: K, rs, ks } = v;
  const n = rows * K;
  const planes = new Uint32Array(3 * n);
  for (let r = 0; r < rows; r++) {
    for (let k = 0; k < K; k++) {
      let b = bits[off + r * rs + k * ks];
      if (flush && (b & 0x7f800000) === 0) b &= 0x80000000;
      const i = r * K + k;
      const hi = roundBits(b);
      planes[i] = hi;
      if ((hi & 0x7f800000) === 0x7f800000) continue; // inf / NaN: no residual terms
      su[0] = b;
      const x = sf[0];
      su[0] = hi;
      sf[0] = x - sf[0];
      let r1 = su[0];
      if (flush && (r1 & 0x7f800000) === 0) r1 &= 0x80000000;
      const mid = roundBits(r1);
      planes[n + i] = mid;
      const rx = sf[0];
      su[0] = mid;
      sf[0] = rx - sf[0];
      let r2 = su[0];
      if (flush && (r2 & 0x7f800000) === 0) r2 &= 0x80000000;
      planes[2 * n + i] = roundBits(r2);
    }
  }
  return planes;
}

/**
 * Packs `v` (offset `off` for this batch) into `dst` starting at element `base`: panels of `R`
 * rows, `comps.length` passes of K each, padded to `kp`. `p0` and `kFrom` restrict it to the
 * panels from p0 and the k values from kFrom (one pass only), to finish what the SIMD packing
 * kernels leave (see packKernels.ts).
 */
export function packOperand(v: OperandView, off: number, R: number, comps: readonly number[], kp: number, flush: boolean, dst: Uint32Array, base: number, p0 = 0, kFrom = 0): void {
  const { bits, rows, k: Kall, rs, ks } = v;
  const panels = Math.ceil(rows / R);
  const onePass = comps.length === 1 && comps[0] === HI;
  const K = Kall - kFrom;
  // Multi-pass float32: split each element once, then copy the terms pass by pass.
  const planes = !onePass && !v.bf16 ? splitPlanes(v, off, flush) : null;
  const plane = rows * Kall;
  for (let p = p0; p < panels; p++) {
    const r0 = p * R;
    const rn = Math.min(R, rows - r0);
    let o = base + (p * kp + kFrom) * R;
    const end = base + (p + 1) * kp * R;
    const rowOff = off + r0 * rs + kFrom * ks;
    for (const comp of comps) {
      if (v.bf16) {
        for (let k = 0; k < K; k++) {
          let s = rowOff + k * ks;
          for (let r = 0; r < rn; r++, s += rs) {
            let b = bits[s] << 16;
            if (flush && (b & 0x7f800000) === 0) b &= 0x80000000;
            dst[o + r] = b;
          }
          for (let r = rn; r < R; r++) dst[o + r] = 0;
          o += R;
        }
      } else if (onePass && !flush) {
        for (let k = 0; k < K; k++) {
          let s = rowOff + k * ks;
          for (let r = 0; r < rn; r++, s += rs) {
            const b = bits[s];
            dst[o + r] = (b & 0x7fffffff) > 0x7f800000 ? (b | 0x00400000) & 0xffff0000 : (b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000;
          }
          for (let r = rn; r < R; r++) dst[o + r] = 0;
          o += R;
        }
      } else if (planes) {
        const pb = comp * plane + r0 * Kall + kFrom;
        for (let k = 0; k < K; k++) {
          for (let r = 0; r < rn; r++) dst[o + r] = planes[pb + r * Kall + k];
          for (let r = rn; r < R; r++) dst[o + r] = 0;
          o += R;
        }
      } else {
        for (let k = 0; k < K; k++) {
          let s = rowOff + k * ks;
          for (let r = 0; r < rn; r++, s += rs) dst[o + r] = splitTerm(bits[s], comp, flush);
          for (let r = rn; r < R; r++) dst[o + r] = 0;
          o += R;
        }
      }
    }
    dst.fill(0, o, end);
  }
}
