/**
 * The Threefry-2x32 block cipher (20 rounds), the hash under every `random` function. It is a
 * primitive of its own (`threefry2x32`, as in JAX) so the transformations treat it like any other
 * op: it takes four uint32 arrays (key words k1, k2 and counter words x1, x2, broadcast together
 * NumPy-style) and returns the two uint32 words of the enciphered counters.
 *
 * Reference: Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC'11);
 * rotation constants and key-schedule parity 0x1BD11BDA from the Random123 / Skein specification.
 */
import { NON_LINEAR, NOT_DIFFERENTIABLE, definePrimitive } from '../primitive';
import { broadcastShapes, fmt, sizeOf, stridesOf } from '../shape';
import { bind } from '../trace';
import type { Array } from '../array';
import { moveBdim, reshape } from '../lax/structural';

const PARITY = 0x1bd11bda;

/**
 * Enciphers `n` counter pairs in place of `out0`/`out1`. The inputs are read through `get`
 * index maps so that broadcast operands are not materialised. Exported for the key helpers that
 * run on host data; array code goes through the primitive.
 */
export function threefry2x32Block(k0: number, k1: number, x0: number, x1: number, out: Uint32Array, at: number): void {
  const k2 = (k0 ^ k1 ^ PARITY) | 0;
  let a = (x0 + k0) | 0;
  let b = (x1 + k1) | 0;
  // Rounds 1-4 (rotations 13, 15, 26, 6), then key injection 1.
  a = (a + b) | 0; b = ((b << 13) | (b >>> 19)) ^ a;
  a = (a + b) | 0; b = ((b << 15) | (b >>> 17)) ^ a;
  a = (a + b) | 0; b = ((b << 26) | (b >>> 6)) ^ a;
  a = (a + b) | 0; b = ((b << 6) | (b >>> 26)) ^ a;
  a = (a + k1) | 0; b = (b + k2 + 1) | 0;
  // Rounds 5-8 (17, 29, 16, 24), injection 2.
  a = (a + b) | 0; b = ((b << 17) | (b >>> 15)) ^ a;
  a = (a + b) | 0; b = ((b << 29) | (b >>> 3)) ^ a;
  a = (a + b) | 0; b = ((b << 16) | (b >>> 16)) ^ a;
  a = (a + b) | 0; b = ((b << 24) | (b >>> 8)) ^ a;
  a = (a + k2) | 0; b = (b + k0 + 2) | 0;
  // Rounds 9-12, injection 3.
  a = (a + b) | 0; b = ((b << 13) | (b >>> 19)) ^ a;
  a = (a + b) | 0; b = ((b << 15) | (b >>> 17)) ^ a;
  a = (a + b) | 0; b = ((b << 26) | (b >>> 6)) ^ a;
  a = (a + b) | 0; b = ((b << 6) | (b >>> 26)) ^ a;
  a = (a + k0) | 0; b = (b + k1 + 3) | 0;
  // Rounds 13-16, injection 4.
  a = (a + b) | 0; b = ((b << 17) | (b >>> 15)) ^ a;
  a = (a + b) | 0; b = ((b << 29) | (b >>> 3)) ^ a;
  a = (a + b) | 0; b = ((b << 16) | (b >>> 16)) ^ a;
  a = (a + b) | 0; b = ((b << 24) | (b >>> 8)) ^ a;
  a = (a + k1) | 0; b = (b + k2 + 4) | 0;
  // Rounds 17-20, injection 5.
  a = (a + b) | 0; b = ((b << 13) | (b >>> 19)) ^ a;
  a = (a + b) | 0; b = ((b << 15) | (b >>> 17)) ^ a;
  a = (a + b) | 0; b = ((b << 26) | (b >>> 6)) ^ a;
  a = (a + b) | 0; b = ((b << 6) | (b >>> 26)) ^ a;
  a = (a + k2) | 0; b = (b + k0 + 5) | 0;
  out[at] = a;
  out[at + 1] = b;
}

/** Threefry-2x32 of one (key, counter) pair as two uint32 numbers. */
export function threefry2x32Scalar(k0: number, k1: number, x0: number, x1: number): [number, number] {
  const out = new Uint32Array(2);
  threefry2x32Block(k0 | 0, k1 | 0, x0 | 0, x1 | 0, out, 0);
  return [out[0], out[1]];
}

/** Strides that read a `shape` operand broadcast into `outShape` (0 on broadcast axes). */
function broadcastStrides(shape: readonly number[], outShape: readonly number[]): number[] {
  const st = stridesOf(shape);
  const lead = outShape.length - shape.length;
  return outShape.map((d, i) => (i < lead || shape[i - lead] === 1 ? 0 : st[i - lead]));
}

export const threefry2x32P = definePrimitive<Record<string, never>>({
  name: 'threefry2x32',
  rules: (self) => ({
    jvp: NOT_DIFFERENTIABLE,
    transpose: NON_LINEAR,
    // threefry broadcasts its operands NumPy-style: give every operand the same rank with the batch dim first.
    batch: (vals, dims, params, n) => {
      const logical = vals.map((v, i) => (dims[i] === null ? v.shape : v.shape.filter((_, k) => k !== dims[i])));
      const r = Math.max(...logical.map((l) => l.length));
      const ops = vals.map((v, i) => {
        const pad = new globalThis.Array<number>(r - logical[i].length).fill(1);
        if (dims[i] === null) return reshape(v, [1, ...pad, ...logical[i]]);
        return reshape(moveBdim(v, dims[i], 0, n), [n, ...pad, ...logical[i]]);
      });
      return [bind(self, ops, params), [0, 0]];
    },
  }),
  abstractEval(avals) {
    if (avals.length !== 4) throw new Error(`threefry2x32: takes 4 operands (k1, k2, x1, x2); got ${avals.length}`);
    avals.forEach((a, i) => {
      if (a.dtype !== 'uint32') {
        throw new TypeError(`threefry2x32: operand ${['k1', 'k2', 'x1', 'x2'][i]} must be uint32; got ${a.dtype}${fmt(a.shape)}`);
      }
    });
    const shape = broadcastShapes('threefry2x32', ...avals.map((a) => a.shape));
    const out = { shape, dtype: 'uint32' as const, weakType: false };
    return [out, out];
  },
  impl(inputs, _p, [o]) {
    const n = sizeOf(o.shape);
    const out0 = new Uint32Array(n);
    const out1 = new Uint32Array(n);
    const pair = new Uint32Array(2);
    const data = inputs.map((x) => x.data as Uint32Array);
    const sizes = inputs.map((x) => x.data.length);
    const simple = sizes.every((s) => s === 1 || s === n);
    if (simple) {
      // Fast path: every operand is either a scalar-like or full-size array.
      const [d0, d1, d2, d3] = data;
      const [s0, s1, s2, s3] = sizes.map((s) => (s === 1 ? 0 : 1));
      for (let i = 0; i < n; i++) {
        threefry2x32Block(d0[i * s0], d1[i * s1], d2[i * s2], d3[i * s3], pair, 0);
        out0[i] = pair[0];
        out1[i] = pair[1];
      }
      return [out0, out1];
    }
    const strides = inputs.map((x) => broadcastStrides(x.shape, o.shape));
    const idx = new globalThis.Array<number>(o.shape.length).fill(0);
    const off = [0, 0, 0, 0];
    for (let i = 0; i < n; i++) {
      threefry2x32Block(data[0][off[0]], data[1][off[1]], data[2][off[2]], data[3][off[3]], pair, 0);
      out0[i] = pair[0];
      out1[i] = pair[1];
      for (let d = o.shape.length - 1; d >= 0; d--) {
        idx[d]++;
        for (let j = 0; j < 4; j++) off[j] += strides[j][d];
        if (idx[d] < o.shape[d]) break;
        for (let j = 0; j < 4; j++) off[j] -= strides[j][d] * idx[d];
        idx[d] = 0;
      }
    }
    return [out0, out1];
  },
});

/** `threefry2x32(k1, k2, x1, x2)`: binds the primitive; returns the two output words. */
export function threefry2x32(k1: Array, k2: Array, x1: Array, x2: Array): [Array, Array] {
  const [a, b] = bind(threefry2x32P, [k1, k2, x1, x2], {});
  return [a, b];
}
