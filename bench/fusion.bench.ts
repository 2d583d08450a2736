/**
 * `pnpm bench:fusion`: one fused elementwise+transcendental kernel over 1M float32 values, run
 * as xla-lite's JavaScript kernel vs its WebAssembly SIMD kernel on 1 thread vs 2 threads,
 * in the same run (interleaved rounds; medians of per-round ratios). The programs are compiled
 * once per variant (`setWasmKernels(false)` gives the JS kernel); threads are switched with
 * `setKernelThreads`. Also a fused row reduction (sum of exp over the last axis), and one whose
 * 4M-element loop reads two 2048-element broadcasts (kernel-bound: no large copies), and two
 * row fusions (softmax, layer norm: JS row kernel vs wasm row kernel). Last, the reference GPT's
 * MLP sub-block (pre-layer-norm, tanh-GELU, residual; forward and backward at bench:gpt's
 * shapes, systolic backend, one thread) compiled with and without loop-fusion
 * rematerialisation (`rematerialize`), interleaved: CPU ms per call, bytes, kernels. Env:
 * FUSION_BENCH_N (default 1048576), FUSION_BENCH_ROUNDS (default 15).
 */
import { type Array, nn, np, systolic, valueAndGrad, withBackend } from '@tpukit/core';
import { type Compiled, jit, lower, setKernelThreads, setWasmKernels } from '@tpukit/xla-lite';
import { median } from './timing';

const N = Number(process.env.FUSION_BENCH_N ?? 1 << 20);
const ROUNDS = Number(process.env.FUSION_BENCH_ROUNDS ?? 15);

const time = (c: Compiled, args: Array[]): number => {
  const t0 = performance.now();
  c.call(args)[0].dataSync();
  return performance.now() - t0;
};

const x = np.array(Float32Array.from({ length: N }, (_, i) => Math.sin(i * 0.37) * 4), 'float32');
const rows = x.reshape([N / 1024, 1024]);
const OUTER = 2048;
const col = np.array(Float32Array.from({ length: OUTER }, (_, i) => Math.cos(i) * 2), 'float32').reshape([OUTER, 1]);
const cases: [string, (a: Array) => Array, Array][] = [
  ['x * sigmoid(x) (silu)', (a) => np.multiply(a, nn.sigmoid(a)), x],
  ['gelu, tanh form', (a) => nn.gelu(a), x],
  ['sum(exp(x), axis=-1) [1024 rows of 1024]', (a) => np.sum(np.exp(a), { axis: -1 }), rows],
  // Kernel-bound: 4M elements from two 2048-element broadcasts, 2048 outputs (almost no copying).
  [`sum(tanh(a_i + b_j), axis=-1) [outer ${OUTER} x ${OUTER}]`, (a) => np.sum(np.tanh(np.add(a, np.reshape(a, [OUTER]))), { axis: -1 }), col],
  // Row fusions (kRow): one row kernel each (row reductions, a scratch row, the output).
  ['softmax [1024 rows of 1024] (row kernel)', (a) => nn.softmax(a), rows],
  [
    'layer norm, no scale [1024 rows of 1024] (row kernel)',
    (a) => {
      const c = np.subtract(a, np.mean(a, { axis: -1, keepdims: true }));
      return np.multiply(c, np.reciprocal(np.sqrt(np.add(np.mean(np.square(c), { axis: -1, keepdims: true }), 1e-5))));
    },
    rows,
  ],
];

console.log(`fusion bench: ${N} float32 elements, ${ROUNDS} rounds (JS kernel, wasm 1 thread, wasm 2 threads interleaved)`);
for (const [name, f, arg] of cases) {
  setWasmKernels(false);
  const js = lower(f)(arg).compile();
  setWasmKernels(true);
  const wasm = lower(f)(arg).compile();
  if (wasm.stats.wasmKernels !== 1 || js.stats.wasmKernels !== 0) throw new Error(`fusion bench: ${name}: expected one wasm kernel, got ${wasm.stats.wasmKernels}`);
  // Results agree (the kernels' documented tolerances).
  const a = js.call([arg])[0].dataSync();
  const b = wasm.call([arg])[0].dataSync();
  let worst = 0;
  let scale = 0;
  for (let i = 0; i < a.length; i++) {
    worst = Math.max(worst, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(a[i]));
  }
  const t = { js: [] as number[], w1: [] as number[], w2: [] as number[] };
  const r = { jsW1: [] as number[], w1W2: [] as number[] };
  for (let k = 0; k < ROUNDS + 2; k++) {
    const tj = time(js, [arg]);
    setKernelThreads(1);
    const t1 = time(wasm, [arg]);
    setKernelThreads(2);
    const t2 = time(wasm, [arg]);
    setKernelThreads(null);
    if (k < 2) continue; // warm-up
    t.js.push(tj);
    t.w1.push(t1);
    t.w2.push(t2);
    r.jsW1.push(tj / t1);
    r.w1W2.push(t1 / t2);
  }
  console.log(`\n${name}`);
  console.log(`  JS kernel        ${median(t.js).toFixed(2)} ms`);
  console.log(`  wasm, 1 thread   ${median(t.w1).toFixed(2)} ms  -> JS / wasm ${median(r.jsW1).toFixed(2)}x`);
  console.log(`  wasm, 2 threads  ${median(t.w2).toFixed(2)} ms  -> 1 thread / 2 threads ${median(r.w1W2).toFixed(2)}x`);
  console.log(`  largest difference JS vs wasm: ${worst.toExponential(2)} (largest |value| ${scale.toFixed(3)})`);
}

// The GPT's MLP sub-block, forward and backward, with and without rematerialisation.
withBackend('systolic', () => {
  systolic.setNumThreads(1);
  setKernelThreads(1);
  const v = (n: number, s: number, scale = 0.5) => np.array(Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + s) * scale));
  const gelu = (a: Array) => np.multiply(np.multiply(a, 0.5), np.add(1, np.tanh(np.multiply(0.7978845834732056, np.add(a, np.multiply(0.044715, np.multiply(np.multiply(a, a), a)))))));
  const norm = (a: Array, g: Array, b: Array) => {
    const c = np.subtract(a, np.mean(a, { axis: -1, keepdims: true }));
    return np.add(np.multiply(np.multiply(c, np.reciprocal(np.sqrt(np.add(np.mean(np.square(c), { axis: -1, keepdims: true }), 1e-5)))), g), b);
  };
  type P = { g: Array; b: Array; w1: Array; b1: Array; w2: Array; b2: Array };
  const block = (p: P, h: Array) => np.sum(np.sin(np.add(h, np.add(np.matmul(gelu(np.add(np.matmul(norm(h, p.g, p.b), p.w1), p.b1)), p.w2), p.b2))));
  const p: P = { g: np.add(v(128, 1), 1), b: v(128, 2), w1: v(128 * 512, 3).reshape([128, 512]), b1: v(512, 4), w2: v(512 * 128, 5).reshape([512, 128]), b2: v(128, 6) };
  const h = v(16 * 128 * 128, 7, 2).reshape([16, 128, 128]);
  const args = [...Object.values(p), h];
  const f = (...a: Array[]) => valueAndGrad(block)({ g: a[0], b: a[1], w1: a[2], b1: a[3], w2: a[4], b2: a[5] }, a[6]);
  const on = jit(f).lower(...args).compile({ rematerialize: true });
  const off = jit(f).lower(...args).compile({ rematerialize: false });
  const cpu = (c: Compiled): number => {
    const c0 = process.cpuUsage();
    c.call(args)[0].dataSync();
    const d = process.cpuUsage(c0);
    return (d.user + d.system) / 1000;
  };
  const t = { on: [] as number[], off: [] as number[], ratio: [] as number[] };
  for (let k = 0; k < ROUNDS + 2; k++) {
    // (alternating which runs first)
    const onFirst = k % 2 === 1;
    const x0 = cpu(onFirst ? on : off);
    const x1 = cpu(onFirst ? off : on);
    const [a, b] = onFirst ? [x0, x1] : [x1, x0];
    if (k < 2) continue;
    t.on.push(a);
    t.off.push(b);
    t.ratio.push(b / a);
  }
  const mib = (c: Compiled) => (c.costAnalysis().bytesAccessed / 2 ** 20).toFixed(1);
  console.log('\nGPT MLP sub-block [16,128,128] -> 512 -> 128, value and gradient, 1 thread (systolic dots)');
  console.log(`  rematerialize off  ${median(t.off).toFixed(2)} ms CPU per call, ${off.stats.fusedKernels} kernels, ${mib(off)} MiB accessed`);
  console.log(`  rematerialize on   ${median(t.on).toFixed(2)} ms CPU per call, ${on.stats.fusedKernels} kernels, ${mib(on)} MiB accessed -> off / on ${median(t.ratio).toFixed(3)}x`);
  setKernelThreads(null);
});
