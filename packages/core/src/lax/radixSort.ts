/**
 * The machinery behind the `sort` primitive's kernel (sort.ts): every key operand is mapped to
 * unsigned 32-bit keys whose integer order is sort's total order, then each line is ordered by a
 * stable least-significant-digit radix sort of a permutation (byte digits, passes whose digit is
 * the same for the whole line skipped; short lines use a stable insertion sort instead). Sorting
 * by several keys runs the stable sort once per key, last key first. No comparator call per
 * element pair, and the only allocations are per call, not per line.
 */
import * as bf16 from '../bf16';
import { type BitView, type DType, type StorageArray, isFloat } from '../dtype';
import * as f16 from '../f16';

/** Lines shorter than this are insertion-sorted (the radix histograms would dominate). */
const INSERTION_MAX = 48;
const NAN_KEY = 0xffffffff;

/**
 * Sort keys for storage `x` of `dtype`: integer order of the keys = sort's order of the values.
 * Floats: numbers ascending, every NaN after +Infinity and equal to every other NaN, -0 equal to
 * +0 (JAX's sort comparator canonicalises zeros and NaNs before comparing, so a stable sort keeps
 * ±0 and NaNs in input order). Integers and bools: their value order.
 */
export function sortKeys(x: StorageArray, dtype: DType): Uint32Array {
  const n = x.length;
  const keys = new Uint32Array(n);
  if (isFloat(dtype)) {
    const f = dtype === 'bfloat16' ? bf16.decode(x as Uint16Array) : dtype === 'float16' ? f16.decode(x as Uint16Array) : (x as Float32Array);
    floatKeys(new Int32Array(f.buffer, f.byteOffset, n), keys, n);
  } else if (dtype === 'int32') int32Keys(x as Int32Array, keys, n);
  else if (dtype === 'int8') int8Keys(x as Int8Array, keys, n);
  else keys.set(x as Uint8Array | Uint32Array); // uint8, uint32, bool: the value is the key
  return keys;
}

function floatKeys(bits: Int32Array, keys: Uint32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    let b = bits[i];
    const mag = b & 0x7fffffff;
    if (mag > 0x7f800000) keys[i] = NAN_KEY;
    else {
      if (mag === 0) b = 0;
      // Negative: flip every bit (larger magnitude sorts first); positive: set the sign bit.
      keys[i] = b < 0 ? ~b : b | 0x80000000;
    }
  }
}
function int32Keys(x: Int32Array, keys: Uint32Array, n: number): void {
  for (let i = 0; i < n; i++) keys[i] = x[i] ^ 0x80000000;
}
function int8Keys(x: Int8Array, keys: Uint32Array, n: number): void {
  for (let i = 0; i < n; i++) keys[i] = x[i] + 128;
}

/** Scratch for ordering lines of one length; reused across the lines of one sort. */
export class LineSorter {
  readonly perm: Int32Array;
  private readonly tmpPerm: Int32Array;
  private readonly cur: Uint32Array;
  private readonly tmpKey: Uint32Array;
  private readonly hist = new Int32Array(256 * 4);

  constructor(readonly n: number) {
    this.perm = new Int32Array(n);
    this.tmpPerm = new Int32Array(n);
    this.cur = new Uint32Array(n);
    this.tmpKey = new Uint32Array(n);
  }

  /**
   * Sets `perm` to the stable order of the line whose element i sits at `base + i * stride` in
   * each key array, lexicographic over `keys` (first key most significant).
   */
  sortLine(keys: Uint32Array[], base: number, stride: number): Int32Array {
    const n = this.n;
    const perm = this.perm;
    for (let i = 0; i < n; i++) perm[i] = i;
    for (let j = keys.length - 1; j >= 0; j--) {
      const k = keys[j];
      const cur = this.cur;
      for (let i = 0; i < n; i++) cur[i] = k[base + perm[i] * stride];
      if (n <= INSERTION_MAX) insertionSort(cur, perm, n);
      else this.radix(n);
    }
    return perm;
  }

  /** Stable LSD radix sort of (cur, perm) by cur, leaving the result in this.cur / this.perm. */
  private radix(n: number): void {
    const hist = this.hist;
    hist.fill(0);
    let cur = this.cur;
    let perm = this.perm;
    let key2 = this.tmpKey;
    let perm2 = this.tmpPerm;
    for (let i = 0; i < n; i++) {
      const v = cur[i];
      hist[v & 0xff]++;
      hist[256 + ((v >>> 8) & 0xff)]++;
      hist[512 + ((v >>> 16) & 0xff)]++;
      hist[768 + (v >>> 24)]++;
    }
    for (let pass = 0; pass < 4; pass++) {
      const h = pass * 256;
      const shift = pass * 8;
      // A digit shared by the whole line leaves the order unchanged: skip the pass.
      if (hist[h + ((cur[0] >>> shift) & 0xff)] === n) continue;
      let sum = 0;
      for (let d = 0; d < 256; d++) {
        const c = hist[h + d];
        hist[h + d] = sum;
        sum += c;
      }
      scatter(cur, perm, key2, perm2, hist, h, shift, n);
      const tk = cur;
      cur = key2;
      key2 = tk;
      const tp = perm;
      perm = perm2;
      perm2 = tp;
    }
    if (perm !== this.perm) this.perm.set(perm);
  }
}

function scatter(cur: Uint32Array, perm: Int32Array, key2: Uint32Array, perm2: Int32Array, offs: Int32Array, h: number, shift: number, n: number): void {
  for (let i = 0; i < n; i++) {
    const v = cur[i];
    const pos = offs[h + ((v >>> shift) & 0xff)]++;
    key2[pos] = v;
    perm2[pos] = perm[i];
  }
}

function insertionSort(cur: Uint32Array, perm: Int32Array, n: number): void {
  for (let i = 1; i < n; i++) {
    const v = cur[i];
    const p = perm[i];
    let j = i - 1;
    while (j >= 0 && cur[j] > v) {
      cur[j + 1] = cur[j];
      perm[j + 1] = perm[j];
      j--;
    }
    cur[j + 1] = v;
    perm[j + 1] = p;
  }
}

const gather8 = (src: Uint8Array, dst: Uint8Array, perm: Int32Array, base: number, st: number, n: number): void => {
  for (let i = 0; i < n; i++) dst[base + i * st] = src[base + perm[i] * st];
};
const gather16 = (src: Uint16Array, dst: Uint16Array, perm: Int32Array, base: number, st: number, n: number): void => {
  for (let i = 0; i < n; i++) dst[base + i * st] = src[base + perm[i] * st];
};
const gather32 = (src: Int32Array, dst: Int32Array, perm: Int32Array, base: number, st: number, n: number): void => {
  for (let i = 0; i < n; i++) dst[base + i * st] = src[base + perm[i] * st];
};

/** Writes line `base + i * st` of `dst` from the same line of `src` permuted by `perm` (same-width views). */
export function gatherLine(src: BitView, dst: BitView, perm: Int32Array, base: number, st: number, n: number): void {
  if (src instanceof Uint8Array) gather8(src, dst as Uint8Array, perm, base, st, n);
  else if (src instanceof Uint16Array) gather16(src, dst as Uint16Array, perm, base, st, n);
  else gather32(src, dst as Int32Array, perm, base, st, n);
}
