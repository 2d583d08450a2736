/**
 * `pnpm bench:bf16`: throughput of the bulk bf16 codec paths against copying the same bytes
 * (a `Float32Array.set`, the floor any conversion pays) and against a naive per-element codec
 * built on DataView (what a straightforward implementation does), measured in the same run.
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

const tCopy = medianMs(() => copy.set(src));
const tEnc = medianMs(() => bf16.encode(src, undefined, enc));
const tEncFlush = medianMs(() => bf16.encode(src, { flushSubnormals: true }, enc));
const tDec = medianMs(() => bf16.decode(enc, dec));
const tNaive = medianMs(() => naiveEncode(src, enc), { runs: 5 });

const rate = (ms: number): string => `${((n / ms) * 1e-3).toFixed(0).padStart(5)} M elem/s`;
console.log(`bf16 codec, ${n} elements (median of runs)`);
console.log(`  Float32Array.set copy   ${rate(tCopy)}  (floor)`);
console.log(`  bf16.encode             ${rate(tEnc)}  ${(tEnc / tCopy).toFixed(2)}x the copy time, ${(tNaive / tEnc).toFixed(1)}x faster than naive`);
console.log(`  bf16.encode (flush)     ${rate(tEncFlush)}  ${(tEncFlush / tCopy).toFixed(2)}x the copy time`);
console.log(`  bf16.decode             ${rate(tDec)}  ${(tDec / tCopy).toFixed(2)}x the copy time`);
console.log(`  naive DataView encode   ${rate(tNaive)}`);
