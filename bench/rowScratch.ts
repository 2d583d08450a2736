/**
 * `npx tsx bench/rowScratch.ts`: a layer norm forward row kernel (the GPT's residual add + layer
 * norm, [ROWSCR_B*128, 128], its centred rows kept in per-thread scratch) and its gradient, with
 * the row kernels' per-thread scratch on cache lines of their own (`setRowScratchAlign(true)`,
 * the default) and in the old layout (16-byte multiples from a 16-byte address: thread 0's last
 * scratch line is thread 1's first), each compiled once; per round, every (threads, layout)
 * pair in turn, the order alternating. Prints each kRow kernel's wall per call (the profile),
 * minimum and median over ROWSCR_ROUNDS rounds (default 15) of ROWSCR_CALLS calls (default 40),
 * and the pool jobs per call. Pin the GEMM kernel (TPUKIT_GEMM_KERNEL) for A/Bs across runs.
 */
import { type Array, np, systolic, valueAndGrad, withBackend } from '@tpukit/core';
import { jit, poolStats, profile, setKernelThreads } from '@tpukit/xla-lite';
import { setRowScratchAlign } from '@tpukit/xla-lite/internal';
import { layerNorm } from './fixtures';
import { loadAndTime, median } from './timing';

const ROUNDS = Number(process.env.ROWSCR_ROUNDS ?? 15);
const CALLS = Number(process.env.ROWSCR_CALLS ?? 40);
const [B, T, D] = [Number(process.env.ROWSCR_B ?? 16), 128, 128];

withBackend('systolic', () => {
  systolic.setNumThreads(1);
  const v = (n: number, s: number, scale = 0.5) => np.array(Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + s) * scale));
  const loss = (p: { g: Array; b: Array; w: Array }, h0: Array, a: Array) => np.sum(np.square(np.matmul(layerNorm(np.add(h0, a), p.g, p.b), p.w)));
  const f = (...x: Array[]) => valueAndGrad(loss)({ g: x[0], b: x[1], w: x[2] }, x[3], x[4]);
  const args = [np.add(v(D, 1), 1), v(D, 2), v(D * D, 5, 0.1).reshape([D, D]), v(B * T * D, 8, 2).reshape([B, T, D]), v(B * T * D, 9, 1).reshape([B, T, D])];
  const layouts = [true, false].map((on) => {
    setRowScratchAlign(on);
    const c = jit(f).lower(...args).compile();
    c.call(args);
    return { name: on ? 'lines' : 'old', c };
  });
  setRowScratchAlign(true);
  console.log(`row scratch layouts at [${B * T},${D}]; ${loadAndTime()}`);
  profile.enable();
  const per = new Map<string, number[]>();
  const jobsPer = new Map<string, number>();
  const pairs = [1, 2].flatMap((threads) => layouts.map((l) => ({ threads, ...l })));
  for (let k = 0; k <= ROUNDS; k++) {
    for (const { threads, name, c } of k % 2 === 0 ? pairs : [...pairs].reverse()) {
      setKernelThreads(threads);
      const acc = new Map<string, { wall: number; calls: number }>();
      const j0 = poolStats().parallelJobs;
      for (let i = 0; i < CALLS; i++) {
        profile.reset();
        c.call(args);
        for (const r of profile.records()) {
          if (r.category !== 'fusion kRow' || r.calls === 0) continue;
          const e = acc.get(r.instruction) ?? { wall: 0, calls: 0 };
          e.wall += r.ms;
          e.calls += r.calls;
          acc.set(r.instruction, e);
        }
      }
      jobsPer.set(`${threads}t ${name}`, (poolStats().parallelJobs - j0) / CALLS);
      if (k === 0) continue;
      for (const [inst, r] of acc) {
        const key = `${threads}t ${inst.padEnd(14)} ${name}`;
        per.set(key, [...(per.get(key) ?? []), (r.wall / r.calls) * 1000]);
      }
    }
  }
  profile.enable(false);
  setKernelThreads(null);
  for (const [key, w] of [...per].sort((x, y) => x[0].localeCompare(y[0]))) console.log(`  ${key.padEnd(30)} wall min ${Math.min(...w).toFixed(0).padStart(5)} median ${median(w).toFixed(0).padStart(5)} us per call`);
  for (const [key, j] of jobsPer) console.log(`  ${key}: ${j.toFixed(1)} pool jobs per call`);
  console.log(`  ${loadAndTime()}`);
});
