/**
 * `pnpm bench:jit`: eager vs jit (xla-lite) on the forward+backward of a small transformer, in
 * the same run. Reports step times (medians of interleaved rounds) and their ratio, the jit
 * step with the compiler switched off (core's op-by-op jit) as a second peer, compile time,
 * recompiles across the timed steps, fused-kernel count, and modelled bytes moved per step
 * (xla-lite's cost analysis) fused vs unfused, the same step compiled with elementwise fusion
 * only (no layout assignment, row or dot-epilogue fusion) as a third peer, and the jit step
 * with every fusion run as its JavaScript kernel (`setWasmKernels(false)`, what xla-lite did
 * before its WebAssembly kernels) as a fourth. Config from the issue by default (vocab 256,
 * d_model 128, 4 layers, 4 heads, MLP 512, context 128, batch 16); override with env
 * JIT_BENCH_SMALL=1 (batch 4, context 32, 2 layers), JIT_BENCH_ROUNDS (default 5) and
 * JIT_BENCH_STEPS (default 100: jit-only steps with fresh data, counting recompiles).
 */
import { type Array, jit as coreJit, listBackends, nn, np, valueAndGrad, withBackend } from '@tpukit/core';
import { compileLog, getKernelThreads, jit, Lowered, setPipelineOptions, setWasmKernels, useXla } from '@tpukit/xla-lite';
import { attentionSublayer, rand, rmsNorm } from './fixtures';

const SMALL = process.env.JIT_BENCH_SMALL === '1';
const V = 256;
const D = 128;
const L = SMALL ? 2 : 4;
const H = 4;
const F = 512;
const T = SMALL ? 32 : 128;
const B = SMALL ? 4 : 16;
const ROUNDS = Number(process.env.JIT_BENCH_ROUNDS ?? 5);
const STEPS = Number(process.env.JIT_BENCH_STEPS ?? 100);

type Layer = Record<'g1' | 'g2' | 'wq' | 'wk' | 'wv' | 'wo' | 'w1' | 'w2', Array>;
interface Params {
  wte: Array;
  layers: Layer[];
}

function block(p: Layer, x: Array): Array {
  const x1 = attentionSublayer(p, x, H);
  return np.add(x1, np.matmul(nn.gelu(np.matmul(rmsNorm(x1, p.g2), p.w1)), p.w2));
}

function loss(p: Params, tokens: Array, targets: Array): Array {
  let h = np.take(p.wte, tokens, { axis: 0 });
  for (const l of p.layers) h = block(l, h);
  const logits = np.matmul(h, np.transpose(p.wte));
  const logp = nn.logSoftmax(logits, { axis: -1 });
  return np.negative(np.mean(np.sum(np.multiply(logp, nn.oneHot(targets, V)), { axis: -1 })));
}

const med = (v: number[]) => v.slice().sort((a, b) => a - b)[Math.floor(v.length / 2)];
const time = (fn: () => void): number => {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
};

function run(backend: string): void {
  withBackend(backend, () => {
    const params: Params = {
      wte: rand([V, D], 1, 0.05),
      layers: globalThis.Array.from({ length: L }, (_, l) => ({
        g1: np.ones([D]),
        g2: np.ones([D]),
        wq: rand([D, D], 10 * l + 2, 0.08),
        wk: rand([D, D], 10 * l + 3, 0.08),
        wv: rand([D, D], 10 * l + 4, 0.08),
        wo: rand([D, D], 10 * l + 5, 0.08),
        w1: rand([D, F], 10 * l + 6, 0.08),
        w2: rand([F, D], 10 * l + 7, 0.04),
      })),
    };
    const tok = (seed: number) => np.array(Int32Array.from({ length: B * T }, (_, i) => (i * 31 + seed * 17) % V)).reshape([B, T]);
    const vg = valueAndGrad(loss);
    const jvg = jit(vg);
    const opByOp = coreJit(valueAndGrad(loss));
    const jvgJs = jit(valueAndGrad(loss));
    const step = (f: typeof vg, s: number) => () => {
      const [l, g] = f(params, tok(s), tok(s + 1)) as [Array, Params];
      l.dataSync();
      g.layers[0].wq.dataSync();
    };
    // First jit call: trace + compile (compile time from the compiler's log).
    const before = compileLog().length;
    const first = time(step(jvg, 0));
    const compiles = compileLog().slice(before);
    const compileMs = compiles.reduce((s, r) => s + r.ms, 0);
    useXla(false);
    time(step(opByOp, 0)); // trace once, op by op
    useXla(true);
    // Peer: the same step with elementwise fusion only (how xla-lite compiled before layout
    // assignment, row fusion and dot epilogue fusion existed).
    const ELEMENTWISE_ONLY = { layout: false, rowFusion: false, outputFusion: false };
    const jEw = jit(valueAndGrad(loss));
    setPipelineOptions(ELEMENTWISE_ONLY);
    time(step(jEw, 0)); // compiles with those options
    setPipelineOptions({});
    setWasmKernels(false);
    time(step(jvgJs, 0)); // compiled with JavaScript kernels only
    setWasmKernels(true);
    const tk: number[] = [];
    const kratio: number[] = [];
    const te: number[] = [];
    const tj: number[] = [];
    const to: number[] = [];
    const tw: number[] = [];
    const ratio: number[] = [];
    const ratioEw: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const a = time(step(vg, r));
      const b = time(step(jvg, r));
      useXla(false);
      const c = time(step(opByOp, r));
      useXla(true);
      const w = time(step(jEw, r));
      const d = time(step(jvgJs, r));
      tk.push(d);
      kratio.push(d / b);
      te.push(a);
      tj.push(b);
      to.push(c);
      tw.push(w);
      ratio.push(a / b);
      ratioEw.push(w / b);
    }
    // A training-length run with fixed shapes and fresh data: must not recompile.
    const tSteps: number[] = [];
    for (let s = 0; s < STEPS; s++) tSteps.push(time(step(jvg, 100 + s)));
    const stats = jvg.compileStats();
    // Bytes moved per step, modelled: unoptimised program vs optimised unfused vs optimised fused.
    const lowered: Lowered = jvg.lower(params, tok(0), tok(1));
    const raw = lowered.costAnalysis();
    const unfused = lowered.compile({ fuse: false });
    const fused = lowered.compile();
    const ew = lowered.compile(ELEMENTWISE_ONLY);
    const ce = ew.costAnalysis();
    const cu = unfused.costAnalysis();
    const cf = fused.costAnalysis();
    const mu = unfused.memoryAnalysis();
    const mf = fused.memoryAnalysis();
    const MB = (b: number) => (b / 1e6).toFixed(1);
    console.log(`\n[${backend}] jaxpr -> ${lowered.module.entry.instructions.length} HLO instructions -> ${fused.module.entry.instructions.length} after passes (${JSON.stringify(fused.passStats)})`);
    console.log(`  eager step        ${med(te).toFixed(0)} ms (median of ${ROUNDS})`);
    console.log(`  jit step (xla)    ${med(tj).toFixed(0)} ms  -> eager/jit ${med(ratio).toFixed(2)}x (median per-round ratio)`);
    console.log(`  jit (elementwise fusion only) ${med(tw).toFixed(0)} ms  -> ${med(ratioEw).toFixed(2)}x slower than the full pipeline (median per-round ratio)`);
    console.log(`  jit op-by-op      ${med(to).toFixed(0)} ms  (core jit, no compiler)`);
    console.log(`  jit, JS kernels   ${med(tk).toFixed(0)} ms  -> JS-kernel jit / wasm-kernel jit ${med(kratio).toFixed(2)}x (${fused.stats.wasmKernels} of ${fused.stats.fusedKernels} kernels are WebAssembly SIMD, ${getKernelThreads()} threads, arena ${(fused.stats.arenaBytes / 1e6).toFixed(1)} MB)`);
    console.log(`  first jit call    ${first.toFixed(0)} ms, of which compile ${compileMs.toFixed(0)} ms (${compiles.length} compilation${compiles.length === 1 ? '' : 's'})`);
    console.log(`  cache             ${stats.hits} hits, ${stats.misses} misses, ${stats.recompiles} recompiles over ${ROUNDS + 1 + STEPS} jit steps (${STEPS}-step run: median ${med(tSteps).toFixed(0)} ms/step)`);
    console.log(`  fused kernels     ${fused.stats.fusedKernels} generated kernels per step (${fused.stats.multiOpFusions} fusing 2+ ops, ${fused.stats.fusedOps} ops in all) + ${fused.stats.primitiveOps} other ops; the unfused program runs ${unfused.stats.primitiveOps} ops`);
    console.log(`  new fusions       ${fused.stats.rowFusions} row (kRow) + ${fused.stats.outputFusions} dot-epilogue (kOutput) kernels, ${fused.passStats.layout} transposes folded / layout copies; elementwise-only: ${ew.stats.fusedKernels} kernels + ${ew.stats.primitiveOps} other ops, ${MB(ce.bytesAccessed)} MB/step (${(ce.bytesAccessed / cf.bytesAccessed).toFixed(2)}x the full pipeline's bytes)`);
    console.log(`  bytes moved/step  fused ${MB(cf.bytesAccessed)} MB vs unfused ${MB(cu.bytesAccessed)} MB (${(cu.bytesAccessed / cf.bytesAccessed).toFixed(2)}x less); unoptimised ${MB(raw.bytesAccessed)} MB`);
    console.log(`  modelled v5e      fused ${(cf.seconds * 1e6).toFixed(0)} us vs unfused ${(cu.seconds * 1e6).toFixed(0)} us; ${(cf.flops / 1e9).toFixed(2)} GFLOP, ${(cf.transcendentals / 1e6).toFixed(1)} M transcendentals`);
    console.log(`  memory            args ${MB(mf.argumentBytes)} MB, out ${MB(mf.outputBytes)} MB, temp ${MB(mf.tempBytes)} MB (no reuse: ${MB(mf.tempBytesNoReuse)} MB), peak ${MB(mf.peakBytes)} MB; unfused temp ${MB(mu.tempBytes)} MB`);
  });
}

console.log(`jit bench: forward+backward of a transformer (vocab ${V}, d_model ${D}, ${L} layers, ${H} heads, MLP ${F}, context ${T}, batch ${B}), float32${SMALL ? ' [SMALL config]' : ''}`);
for (const b of ['systolic', 'reference']) if (listBackends().includes(b) && (b === 'systolic' || process.env.JIT_BENCH_REFERENCE === '1')) run(b);
