/**
 * Where the one-hot primitives' time goes at the GPT's size (table [256,128], index [2048],
 * values [2048,128]): each primitive's kernel into caller storage as the executable calls it
 * (`implInto`, systolic backend, one thread), over host arrays and (`arena`) with the table,
 * values and results in the backend's arena memory as the executable hands them over with
 * zero-copy dots, and reference costs (a 1 MiB copy, warm and cold). Wall-time medians over
 * interleaved rounds; cold: 8 MiB of other memory touched before each call.
 */
import { getBackend, withBackend } from '@tpukit/core';
import { arenaHost } from '@tpukit/core/internal';
import { oneHotGatherP, oneHotSegmentSumP } from '@tpukit/xla-lite/internal';
import { loadavg } from 'node:os';

const [V, N, M] = [256, 128, 2048];
const table = Float32Array.from({ length: V * N }, (_, i) => Math.sin(i * 0.01) * 0.02);
const idx = Float32Array.from({ length: M }, (_, i) => (i * 7919) % V);
const values = Float32Array.from({ length: M * N }, (_, i) => Math.cos(i * 0.003));
const gOut = new Float32Array(M * N);
const sOut = new Float32Array(V * N);
const copyDst = new Float32Array(M * N);
const junk = new Float32Array(2 * 1024 * 1024);
const p = { classes: V, precision: null, dtype: 'float32' as const, nominalFlops: 0 };
const host = (data: Float32Array, shape: number[]) => ({ data, shape, dtype: 'float32' as const });
const flush = () => {
  for (let i = 0; i < junk.length; i += 16) junk[i] += 1;
};
const cases: Record<string, () => void> = {};
/** Views of `n` floats in the arena memory (a region reserved for the run) holding `x` (or zeros). */
const inArena = (n: number, x?: Float32Array): Float32Array => {
  const host = arenaHost()!;
  const at = host.reserve(4 * n);
  const v = new Float32Array(host.buffer(), at, n);
  if (x) v.set(x);
  return v;
};
const hostCases = {
  gather: () => oneHotGatherP.implInto!([host(table, [V, N]), host(idx, [M])] as never, p, { shape: [M, N], dtype: 'float32' } as never, gOut),
  segsum: () => oneHotSegmentSumP.implInto!([host(values, [M, N]), host(idx, [M])] as never, p, { shape: [V, N], dtype: 'float32' } as never, sOut),
  'copy 1 MiB': () => copyDst.set(values),
};
function arenaCases(): Record<string, () => void> {
  const [t, v, g, o] = [inArena(V * N, table), inArena(M * N, values), inArena(M * N), inArena(V * N)];
  return {
    'gather arena': () => oneHotGatherP.implInto!([host(t, [V, N]), host(idx, [M])] as never, p, { shape: [M, N], dtype: 'float32' } as never, g),
    'segsum arena': () => oneHotSegmentSumP.implInto!([host(v, [M, N]), host(idx, [M])] as never, p, { shape: [V, N], dtype: 'float32' } as never, o),
  };
}
const us = (f: () => void, n: number, cold: boolean): number => {
  let t = 0;
  for (let i = 0; i < n; i++) {
    if (cold) flush();
    const c0 = performance.now();
    f();
    t += performance.now() - c0;
  }
  return (t / n) * 1000;
};
withBackend('systolic', () => {
  Object.assign(cases, hostCases, arenaCases());
  console.log(`backend ${getBackend().name}; load ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const res: Record<string, number[]> = {};
  for (let r = 0; r < 9; r++)
    for (const cold of [false, true])
      for (const [k, f] of Object.entries(cases)) (res[`${k} ${cold ? 'cold' : 'warm'}`] ??= []).push(us(f, 50, cold));
  for (const [k, v] of Object.entries(res)) {
    v.sort((a, b) => a - b);
    console.log(`${k.padEnd(20)} us per call: min ${v[0].toFixed(1)} median ${v[v.length >> 1].toFixed(1)}`);
  }
});
