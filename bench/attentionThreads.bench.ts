/**
 * `pnpm --filter @tpukit/bench attention:threads`: the fused attention's calls (core's
 * `dot_product_attention_fwd` / `_bwd` on the systolic backend) on 1 and 2 threads as a training
 * step makes them: L layers' forward calls, then their backward calls in reverse, operands and
 * results in the backend's arena memory (as xla-lite hands them over), P kept, with other work
 * between calls (an 8 MiB pass over other memory; with ATTN_THREADS_GEMM=1 also steps with a
 * [2048,128]x[128,128] product on the same thread count before each call, so the GEMM pool's
 * worker runs right before it as in the step). Steps alternate between the variants. Per call it records wall ms, process CPU ms (all
 * threads), the items the attention's worker computed of the B x K, and from core's pool counters
 * the first worker's wake-up and the calling thread's wait at the end; prints medians and the
 * 1t / 2t wall ratio per direction. Wall times need a quiet machine; CPU-s per wall-s says how
 * busy the two threads kept the cores (2 at most).
 *
 * Env: ATTN_BENCH_SHAPE (B,T,N,H; default the GPT's 16,128,4,32), ATTN_BENCH_CAUSAL (default 1),
 * ATTN_BENCH_RUNS (steps per thread count, default 30), ATTN_THREADS_GEMM (default 0),
 * ATTN_CORE_SRC (the core sources to load, default this checkout's).
 */
import { attentionShape, coreSrc, loadCore, positiveEnv, stepLayers } from './attentionHarness';
import { cpuWall, loadAndTime, median } from './timing';

const core = await loadCore<typeof import('../packages/core/src/index')>('index.ts');
const { getBackend } = await loadCore<typeof import('../packages/core/src/backend')>('backend.ts');
const attn = await loadCore<typeof import('../packages/core/src/backends/systolic/attention')>('backends/systolic/attention.ts');
const { wasmFeatures } = await loadCore<typeof import('../packages/core/src/wasm/features')>('wasm/features.ts');
const { poolJobTimes } = await loadCore<typeof import('../packages/core/src/wasm/workerPool')>('wasm/workerPool.ts');

const dims = attentionShape('attention:threads');
const { B, T, N, H, causal } = dims;
const RUNS = positiveEnv('attention:threads', 'ATTN_BENCH_RUNS', 30);
const GEMM = process.env.ATTN_THREADS_GEMM === '1';
core.setBackend('systolic');
const arena = getBackend().arenaHost?.() ?? null;
if (arena === null) throw new Error('bench:attention:threads: the systolic backend has no arena memory here (no WebAssembly threads): nothing to measure on 2 threads');
const relaxed = wasmFeatures().relaxedSimd;

/** A region of the arena (reserved for the whole run), as a view. */
const region = (n: number): Float32Array => {
  const at = arena.reserve(n * 4);
  if (at < 0) throw new Error(`bench:attention:threads: the arena cannot hold ${n * 4} more bytes`);
  return new Float32Array(arena.buffer(), at, n);
};
/** A region of uniform values in [-1, 1), one operand's size. */
const random = (): Float32Array => {
  const r = region(B * T * N * H);
  for (let i = 0; i < r.length; i++) r[i] = Math.random() * 2 - 1;
  return r;
};
const layers = stepLayers({ attn, shape: dims, relaxed, arena, region, operand: random });
const ga = core.random.normal(core.random.key(1), [2048, 128]);
const gb = core.random.normal(core.random.key(2), [128, 128]);

interface Call {
  wall: number;
  cpu: number;
  workerItems: number;
  wakeUs: number;
  waitUs: number;
}
const calls: Record<string, Call[]> = {};
poolJobTimes.enabled = true;
const step = (threads: number, record: boolean, gemm: boolean): void => {
  core.setNumThreads(threads);
  const tag = `${threads}t${gemm ? ' after a product' : ''}`;
  layers.step(true, (dir, call) => {
    if (gemm) core.np.matmul(ga, gb).dataSync();
    const p0 = { ...(poolJobTimes.byPool.attention ?? { wakeMs: 0, waitMs: 0 }) };
    const w0 = attn.attentionStats().workerItems;
    const { wall, cpu } = cpuWall(call);
    const p1 = poolJobTimes.byPool.attention ?? { wakeMs: 0, waitMs: 0 };
    if (record) (calls[`${dir} ${tag}`] ??= []).push({ wall, cpu, workerItems: attn.attentionStats().workerItems - w0, wakeUs: 1000 * (p1.wakeMs - p0.wakeMs), waitUs: 1000 * (p1.waitMs - p0.waitMs) });
  });
};
// (warm-up: both thread counts until the kernels and the drivers' JavaScript are optimised)
const variants: [number, boolean][] = [[1, false], [2, false], ...(GEMM ? ([[1, true], [2, true]] as [number, boolean][]) : [])];
for (let i = 0; i < 10; i++) for (const [n, g] of variants) step(n, false, g);
for (let i = 0; i < RUNS; i++) for (const [n, g] of i % 2 ? variants : [...variants].reverse()) step(n, true, g);
core.setNumThreads(null);

console.log(`bench:attention:threads: [${B}, ${T}, ${N}, ${H}]${causal ? ' causal' : ''}, P kept, ${layers.L} layers' calls as in a step${GEMM ? ' (and, alternating, with a 2-thread product before each)' : ''}, ${RUNS} steps per thread count, alternating; medians per call; ${loadAndTime()}; sources ${coreSrc}`);
const f = (x: number, d = 3): string => x.toFixed(d).padStart(7);
for (const [name, xs] of Object.entries(calls).sort(([a], [b]) => (a < b ? -1 : 1))) {
  const m = (g: (c: Call) => number): number => median(xs.map(g));
  const busy = xs.reduce((a, c) => a + c.cpu, 0) / xs.reduce((a, c) => a + c.wall, 0);
  console.log(`  ${name.padEnd(22)}: wall ${f(m((c) => c.wall))} ms  CPU ${f(m((c) => c.cpu))} ms  CPU-s per wall-s ${busy.toFixed(2)}${name.includes('2t') ? `  worker items ${m((c) => c.workerItems)} of ${B * N}  first wake-up ${f(m((c) => c.wakeUs), 0)} us  caller's wait ${f(m((c) => c.waitUs), 0)} us` : ''}`);
}
const wall = (name: string): number => median(calls[name].map((c) => c.wall));
for (const d of ['fwd', 'bwd']) for (const g of GEMM ? ['', ' after a product'] : ['']) console.log(`  ${d}${g} 1t / 2t wall ${(wall(`${d} 1t${g}`) / wall(`${d} 2t${g}`)).toFixed(2)}x`);
