/**
 * `npx tsx bench/rowKernels.ts`: the GPT's row fusions (kRow) alone, at bench:gpt's shapes, one
 * thread, systolic backend: a residual add + layer norm forward (five outputs, as in the GPT's
 * step), the logits' log-softmax cross-entropy and the gradient of it all (the loss backward and
 * the layer norm backward with its gamma/beta sums). Prints each kRow instruction's wall and CPU
 * time per call (the profile, `profile.ts`), minimum and median over ROW_BENCH_ROUNDS rounds of
 * ROW_BENCH_CALLS calls. Env ROW_BENCH_ROUNDS (default 7), ROW_BENCH_CALLS (default 20).
 */
import { writeFileSync } from 'node:fs';
import { type Array, nn, np, systolic, valueAndGrad, withBackend } from '@tpukit/core';
import { jit, profile, setKernelThreads } from '@tpukit/xla-lite';
import { loadAndTime, median } from './timing';

const ROUNDS = Number(process.env.ROW_BENCH_ROUNDS ?? 7);
const CALLS = Number(process.env.ROW_BENCH_CALLS ?? 20);
const [B, T, D, V] = [16, 128, 128, 256];

function layerNorm(x: Array, g: Array, b: Array): Array {
  const mu = np.mean(x, { axis: -1, keepdims: true });
  const xc = np.subtract(x, mu);
  const v = np.mean(np.square(xc), { axis: -1, keepdims: true });
  return np.add(np.multiply(np.multiply(xc, np.reciprocal(np.sqrt(np.add(v, 1e-5)))), g), b);
}

withBackend('systolic', () => {
  systolic.setNumThreads(1);
  setKernelThreads(1);
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
  const c = jit(f).lower(...args).compile();
  if (process.env.ROW_BENCH_HLO) writeFileSync(process.env.ROW_BENCH_HLO, c.asText());
  const out = c.call(args);
  console.log(`row kernels at [${B},${T},${D}] (logits ${V}), 1 thread; ${loadAndTime()}; loss ${out[0].dataSync()[0]}`);
  profile.enable();
  const per = new Map<string, { detail: string; wall: number[]; cpu: number[] }>();
  for (let k = 0; k < ROUNDS + 1; k++) {
    profile.reset();
    for (let i = 0; i < CALLS; i++) c.call(args);
    if (k === 0) continue;
    for (const r of profile.records()) {
      if (r.category !== 'fusion kRow' || r.calls === 0) continue;
      const e = per.get(r.instruction) ?? { detail: r.detail, wall: [], cpu: [] };
      e.wall.push((r.ms / r.calls) * 1000);
      e.cpu.push((r.cpuMs / r.calls) * 1000);
      per.set(r.instruction, e);
    }
  }
  profile.enable(false);
  let sum = 0;
  for (const [name, e] of per) {
    sum += median(e.wall);
    console.log(`  ${name.padEnd(14)} wall min ${Math.min(...e.wall).toFixed(0).padStart(5)} median ${median(e.wall).toFixed(0).padStart(5)} us; CPU median ${median(e.cpu).toFixed(0).padStart(5)} us  ${e.detail}`);
  }
  console.log(`  kRow total (medians) ${sum.toFixed(0)} us per call; ${loadAndTime()}`);
  setKernelThreads(null);
});
