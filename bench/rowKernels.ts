/**
 * `npx tsx bench/rowKernels.ts`: the GPT's row fusions (kRow) alone, at bench:gpt's shapes, one
 * thread, systolic backend: a residual add + layer norm forward (five outputs, as in the GPT's
 * step), the logits' log-softmax cross-entropy and the gradient of it all (the loss backward and
 * the layer norm backward with its gamma/beta sums). Prints each kRow instruction's wall and CPU
 * time per call (the profile, `profile.ts`), minimum and median over ROW_BENCH_ROUNDS rounds of
 * ROW_BENCH_CALLS calls. Env ROW_BENCH_ROUNDS (default 7), ROW_BENCH_CALLS (default 20), ROW_BENCH_B
 * (batch, default 16: the GPT's), ROW_BENCH_VARIANTS and ROW_BENCH_EVICT (below), ROW_BENCH_HLO=file,
 * ROW_BENCH_THREADS (kernel threads, default 1; the GEMMs stay on one).
 */
import { writeFileSync } from 'node:fs';
import { type Array, nn, np, systolic, valueAndGrad, withBackend } from '@tpukit/core';
import { jit, profile, setKernelThreads } from '@tpukit/xla-lite';
import { setRowKernelPaths, setRowScratchAlign } from '@tpukit/xla-lite/internal';
import { layerNorm } from './fixtures';
import { loadAndTime, median } from './timing';

const ROUNDS = Number(process.env.ROW_BENCH_ROUNDS ?? 7);
const CALLS = Number(process.env.ROW_BENCH_CALLS ?? 20);
const THREADS = Number(process.env.ROW_BENCH_THREADS ?? 1);
const [B, T, D, V] = [Number(process.env.ROW_BENCH_B ?? 16), 128, 128, 256];

withBackend('systolic', () => {
  systolic.setNumThreads(1);
  setKernelThreads(THREADS);
  const v = (n: number, s: number, scale = 0.5) => np.array(Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + s) * scale));
  type P = { g1: Array; b1: Array; g2: Array; b2: Array; w: Array; bias: Array; wte: Array };
  const loss = (p: P, h0: Array, a: Array, y: Array) => {
    // h = h0 + (a + bias) (a dense layer's output and the residual), two layer norms, the logits.
    const h = np.add(h0, np.add(a, p.bias));
    const m = layerNorm(h, p.g1, p.b1);
    const h2 = np.add(h, np.matmul(m, p.w));
    const logits = np.matmul(layerNorm(h2, p.g2, p.b2), np.transpose(p.wte));
    const logp = nn.logSoftmax(logits, { axis: -1 });
    return np.negative(np.mean(np.sum(np.multiply(logp, nn.oneHot(y, V)), { axis: -1 })));
  };
  const p: P = { g1: np.add(v(D, 1), 1), b1: v(D, 2), g2: np.add(v(D, 3), 1), b2: v(D, 4), w: v(D * D, 5, 0.1).reshape([D, D]), bias: v(D, 6), wte: v(V * D, 7, 0.2).reshape([V, D]) };
  const h0 = v(B * T * D, 8, 2).reshape([B, T, D]);
  const a = v(B * T * D, 9, 1).reshape([B, T, D]);
  const y = np.array(Int32Array.from({ length: B * T }, (_, i) => (i * 37) % V), 'int32').reshape([B, T]);
  const args = [...Object.values(p), h0, a, y];
  const f = (...x: Array[]) => valueAndGrad(loss)({ g1: x[0], b1: x[1], g2: x[2], b2: x[3], w: x[4], bias: x[5], wte: x[6] }, x[7], x[8], x[9]);
  // Variants (ROW_BENCH_VARIANTS, e.g. "off:0,0;on:1,1": skipSumOnly, reread, and optionally a
  // third flag, the scratch rows on cache lines, setRowScratchAlign, a fourth, deferSums, a
  // fifth, shiftedExp, and a sixth, recompute, each default 1), each compiled once, called in turn; ROW_BENCH_EVICT (MiB, default 0) streams
  // that much memory before each call so the row kernels read their first inputs from memory, as
  // in the GPT step.
  const variants = (process.env.ROW_BENCH_VARIANTS ?? 'default:1,1').split(';').map((v) => {
    const [name, flags] = v.split(':');
    const [a, b, al = 1, ds = 1, se = 1, rc = 1, co = 1] = flags.split(',').map(Number);
    setRowKernelPaths({ skipSumOnly: a === 1, reread: b === 1, deferSums: ds === 1, shiftedExp: se === 1, recompute: rc === 1 });
    setRowScratchAlign(al === 1);
    const c = jit(f).lower(...args).compile({ centeredOutputs: co === 1 });
    c.call(args);
    return { name, c };
  });
  setRowKernelPaths({ skipSumOnly: true, reread: true, deferSums: true, shiftedExp: true, recompute: true });
  setRowScratchAlign(true);
  // Every variant's outputs must be the first's, bit for bit.
  const bitsOf = (c: (typeof variants)[number]['c']) => c.call(args).map((o) => new Uint32Array(Float32Array.from(o.dataSync()).buffer));
  const ref = bitsOf(variants[0].c);
  for (const { name, c } of variants.slice(1)) {
    const got = bitsOf(c);
    const bad = got.findIndex((g, q) => g.length !== ref[q].length || g.some((w, i) => w !== ref[q][i]));
    if (bad >= 0) throw new Error(`rowKernels: variant ${name}'s output ${bad} differs from ${variants[0].name}'s`);
  }
  const evict = new Float64Array((Number(process.env.ROW_BENCH_EVICT ?? 0) * 2 ** 20) / 8);
  let sink = 0;
  const out = variants[0].c.call(args);
  if (process.env.ROW_BENCH_HLO) writeFileSync(process.env.ROW_BENCH_HLO, variants[0].c.asText());
  console.log(`row kernels at [${B},${T},${D}] (logits ${V}), ${THREADS} kernel thread(s), evict ${evict.length * 8 / 2 ** 20} MiB; ${loadAndTime()}; loss ${out[0].dataSync()[0]}`);
  profile.enable();
  const per = new Map<string, { detail: string; wall: number[]; cpu: number[] }>();
  for (let k = 0; k < ROUNDS + 1; k++) {
    for (const { name, c } of variants) {
      const acc = new Map<string, { detail: string; wall: number; cpu: number; calls: number }>();
      for (let i = 0; i < CALLS; i++) {
        if (evict.length) for (let q = 0; q < evict.length; q += 8) sink += evict[q]++;
        profile.reset();
        c.call(args);
        for (const r of profile.records()) {
          if (r.category !== 'fusion kRow' || r.calls === 0) continue;
          const e = acc.get(r.instruction) ?? { detail: r.detail, wall: 0, cpu: 0, calls: 0 };
          e.wall += r.ms;
          e.cpu += r.cpuMs;
          e.calls += r.calls;
          acc.set(r.instruction, e);
        }
      }
      if (k === 0) continue;
      for (const [inst, r] of acc) {
        const key = `${name} ${r.detail.split(' -> ')[0].slice(0, 28)}`;
        const e = per.get(key) ?? { detail: r.detail, wall: [], cpu: [] };
        e.wall.push((r.wall / r.calls) * 1000);
        e.cpu.push((r.cpu / r.calls) * 1000);
        per.set(key, e);
      }
    }
  }
  profile.enable(false);
  const sums = new Map<string, number>();
  for (const [key, e] of [...per].sort((x, y) => (x[0].slice(x[0].indexOf(' ')) + x[0]).localeCompare(y[0].slice(y[0].indexOf(' ')) + y[0]))) {
    const name = key.split(' ')[0];
    sums.set(name, (sums.get(name) ?? 0) + Math.min(...e.wall));
    console.log(`  ${key.padEnd(40)} wall min ${Math.min(...e.wall).toFixed(0).padStart(5)} median ${median(e.wall).toFixed(0).padStart(5)} us; CPU median ${median(e.cpu).toFixed(0).padStart(5)} us`);
  }
  for (const [name, v] of sums) console.log(`  ${name}: kRow total of the minima ${v.toFixed(0)} us per call`);
  console.log(`  ${loadAndTime()} (${sink > 0 ? '' : ' '})`);
  setKernelThreads(null);
});
