/**
 * The one-hot arena kernels (xla-lite wasm/oneHotKernel.ts `arenaKernels`) alone at the GPT's size,
 * over the systolic backend's arena memory: the segment sum and the gather's row copy and table
 * rounding, warm and cold (8 MiB touched before each call); us per call, min / median of rounds.
 */
import { withBackend } from '@tpukit/core';
import { arenaHost } from '@tpukit/core/internal';
import { loadavg } from 'node:os';
import { arenaKernels } from '../packages/xla-lite/src/wasm/oneHotKernel';

const [V, N, M] = [256, 128, 2048];
withBackend('systolic', () => {
  const host = arenaHost()!;
  const k = arenaKernels(host)!;
  const bytes = 4 * (M + M * N + V * N * 2);
  const base = host.reserve(bytes);
  const f32 = new Float32Array(host.buffer());
  const i32 = new Int32Array(host.buffer());
  const rows = base;
  const vals = base + 4 * M;
  const dst = vals + 4 * M * N;
  const tbl = dst + 4 * V * N;
  for (let m = 0; m < M; m++) i32[rows / 4 + m] = (m * 7919) % V;
  for (let i = 0; i < M * N; i++) f32[vals / 4 + i] = Math.cos(i * 0.003);
  const junk = new Float32Array(2 * 1024 * 1024);
  const flush = () => {
    for (let i = 0; i < junk.length; i += 16) junk[i] += 1;
  };
  const cases: Record<string, () => void> = {
    segsum: () => k.run.segsum(rows, vals, dst, M, N, V),
    'segsum flush': () => k.run.segsumFlush(rows, vals, dst, M, N, V),
    'gather rows': () => k.run.gather(rows, tbl, vals, M, N),
    'round table': () => k.run.round(dst, tbl, V * N),
  };
  console.log(`load ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const res: Record<string, number[]> = {};
  for (let r = 0; r < 9; r++)
    for (const cold of [false, true])
      for (const [name, f] of Object.entries(cases)) {
        let t = 0;
        for (let i = 0; i < 40; i++) {
          if (cold) flush();
          const t0 = performance.now();
          f();
          t += performance.now() - t0;
        }
        (res[`${name} ${cold ? 'cold' : 'warm'}`] ??= []).push((t / 40) * 1000);
      }
  for (const [name, v] of Object.entries(res)) {
    v.sort((a, b) => a - b);
    console.log(`${name.padEnd(20)} us per call: min ${v[0].toFixed(1)} median ${v[v.length >> 1].toFixed(1)}`);
  }
  host.release(base);
});
