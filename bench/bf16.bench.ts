/**
 * `pnpm bench:bf16`: throughput of the bulk bf16 codec paths against copying the same bytes
 * (a `Float32Array.set`, the floor any conversion pays), against a naive per-element codec
 * built on DataView (what a straightforward implementation does), and against the one-element-
 * per-iteration typed-array loops tpukit used before the paired 32-bit paths, all in the same run.
 */
import { bf16 } from '@tpukit/core';
import { medianMs } from './timing';

const n = 1 << 22; // 4M elements, 16 MB of float32
const src = new Float32Array(n);
for (let i = 0; i < n; i++) src[i] = Math.sin(i) * 1000;
const enc = new Uint16Array(n);
const dec = new Float32Array(n);
const copy = new Float32Array(n);

function naiveEncode(x: Float32Array, out: Uint16Array): void {
  const dv = new DataView(new ArrayBuffer(4));
  for (let i = 0; i < x.length; i++) {
    dv.setFloat32(0, x[i]);
    const b = dv.getUint32(0);
    out[i] = Number.isNaN(x[i]) ? 0x7fc0 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
}

/** The previous bulk paths: one element per iteration through Uint32Array views. */
function scalarEncode(x: Float32Array, out: Uint16Array): void {
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length);
  for (let i = 0; i < x.length; i++) {
    const b = bits[i];
    out[i] = (b & 0x7fffffff) > 0x7f800000 ? (b >>> 16) | 0x0040 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
}
function scalarDecode(h: Uint16Array, out: Float32Array): void {
  const bits = new Uint32Array(out.buffer, out.byteOffset, h.length);
  for (let i = 0; i < h.length; i++) bits[i] = h[i] << 16;
}

const tCopy = medianMs(() => copy.set(src));
const tEnc = medianMs(() => bf16.encode(src, undefined, enc));
const tEncFlush = medianMs(() => bf16.encode(src, { flushSubnormals: true }, enc));
const tDec = medianMs(() => bf16.decode(enc, dec));
const tNaive = medianMs(() => naiveEncode(src, enc), { runs: 5 });
const tScalarEnc = medianMs(() => scalarEncode(src, enc));
const tScalarDec = medianMs(() => scalarDecode(enc, dec));

/** Median over alternating runs of time(b) / time(a): robust to the load drifting on a shared machine. */
function medianRatio(a: () => void, b: () => void, runs = 21): number {
  for (let i = 0; i < 3; i++) {
    a();
    b();
  }
  const r: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    a();
    const t1 = performance.now();
    b();
    r.push((performance.now() - t1) / (t1 - t0));
  }
  r.sort((x, y) => x - y);
  return r[runs >> 1];
}
const encGain = medianRatio(() => bf16.encode(src, undefined, enc), () => scalarEncode(src, enc));
const decGain = medianRatio(() => bf16.decode(enc, dec), () => scalarDecode(enc, dec));

const rate = (ms: number): string => `${((n / ms) * 1e-3).toFixed(0).padStart(5)} M elem/s`;
console.log(`bf16 codec, ${n} elements (median of runs)`);
console.log(`  Float32Array.set copy   ${rate(tCopy)}  (floor)`);
console.log(`  bf16.encode             ${rate(tEnc)}  ${(tEnc / tCopy).toFixed(2)}x the copy time, ${(tNaive / tEnc).toFixed(1)}x faster than naive`);
console.log(`  bf16.encode (flush)     ${rate(tEncFlush)}  ${(tEncFlush / tCopy).toFixed(2)}x the copy time`);
console.log(`  bf16.decode             ${rate(tDec)}  ${(tDec / tCopy).toFixed(2)}x the copy time`);
console.log(`  one-per-iteration enc   ${rate(tScalarEnc)}  (the previous bulk encode)`);
console.log(`  one-per-iteration dec   ${rate(tScalarDec)}  (the previous bulk decode)`);
console.log(`  paired vs one-per-iteration, median of alternating runs: encode ${encGain.toFixed(2)}x, decode ${decGain.toFixed(2)}x faster`);
console.log(`  naive DataView encode   ${rate(tNaive)}`);
