/**
 * `pnpm bench:matmul`: the systolic backend's matmul (TPU MXU numerics: bf16 operands, f32
 * accumulation, on generated WebAssembly SIMD) against @tensorflow/tfjs-backend-wasm (XNNPACK,
 * float32, single-threaded in Node), timed in the same run with the runs interleaved so both see
 * the same machine load. Prints GFLOP/s (2*M*N*K / time, medians) and the ratios the issue asks
 * for: f32 1024^3 on one thread vs tfjs-wasm, 2 threads vs 1 at 1024 and 2048, bf16 storage vs
 * f32, backward-pass shapes vs the square shape, and the reference GPT's matmuls on 1 and 2
 * threads ([5]; `MATMUL_ONLY=gpt` runs only those; with TPUKIT_GEMM_PHASES=1 each also prints
 * where its time goes, see systolic.gemmPhases). Set RUNS to change the repetitions.
 *
 * jax-js (@jax-js/jax, its 'wasm' backend) is a second peer for the square f32 case. It runs in
 * Node 20 once a `navigator` global exists (Node 20 has none; jax-js probes navigator.gpu while
 * initialising), so a minimal one is defined before it is imported, and `init('wasm')` is used.
 *
 * On a shared machine set QUIET (e.g. QUIET=0.9): each round then starts only once the whole
 * machine was at least that fraction idle over 0.4 s (Linux /proc/stat), waiting at most
 * QUIET_WAIT seconds (default 120); the idle fractions and load averages seen are printed.
 */
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-wasm';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { type Array as TArray, type DType, lax, np, systolic, withBackend } from '@tpukit/core';
import { threadSnapshot } from './threadTimes';
import { cpuWall, loadAndTime } from './timing';
import { GEMM_SHAPE_4X8, GEMM_SHAPE_5X8, GemmEngine, type GemmShape, aval, dotGeneralP, evalPrimitiveInto, mxuDotGeneral, wasm } from '@tpukit/core/internal';

const RUNS = Number(process.env.RUNS ?? 9);
const QUIET = Number(process.env.QUIET ?? 0);
const QUIET_WAIT_MS = Number(process.env.QUIET_WAIT ?? 120) * 1000;

/** Idle and total jiffies of all cores (Linux), or null elsewhere. */
function cpuJiffies(): { idle: number; total: number } | null {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    return { idle: f[3] + f[4], total: f.reduce((a, b) => a + b, 0) };
  } catch {
    return null;
  }
}

/** What the QUIET waits saw: idle fractions and 1-minute load averages at the start of rounds. */
const quietSeen: { idle: number[]; load: number[] } = { idle: [], load: [] };

/** With QUIET set, waits until the machine was at least QUIET idle over 0.4 s (or QUIET_WAIT passes). */
async function waitQuiet(): Promise<void> {
  if (!(QUIET > 0)) return;
  const t0 = Date.now();
  for (;;) {
    const a = cpuJiffies();
    await new Promise((r) => setTimeout(r, 400));
    const b = cpuJiffies();
    if (!a || !b) return;
    const idle = (b.idle - a.idle) / Math.max(1, b.total - a.total);
    if (idle >= QUIET || Date.now() - t0 > QUIET_WAIT_MS) {
      quietSeen.idle.push(idle);
      quietSeen.load.push(Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]));
      return;
    }
  }
}

function median(v: number[]): number {
  const s = v.slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/**
 * Times several functions interleaved (one run of each per round), after warm-up. Returns the
 * median time of each (ms) and, for each, the median over rounds of (time of fns[0] / its time):
 * a per-round ratio is far less sensitive to the shared machine's load swings than a ratio of
 * two separately taken medians. `cpuSpeedup` is the same ratio of process CPU time: on an
 * oversubscribed machine a single-threaded run gets only part of a core, and CPU time measures
 * the work itself (single-threaded cases only).
 */
async function interleaved(fns: Array<() => void | Promise<void>>, runs = RUNS, warmup = 2): Promise<{ ms: number[]; speedup: number[]; cpuSpeedup: number[]; cpuPerWall: number[] }> {
  for (let w = 0; w < warmup; w++) for (const f of fns) await f();
  const times = fns.map(() => [] as number[]);
  const cpu = fns.map(() => [] as number[]);
  for (let r = 0; r < runs; r++) {
    await waitQuiet();
    for (let i = 0; i < fns.length; i++) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await fns[i]();
      times[i].push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      cpu[i].push((c.user + c.system) / 1000);
    }
  }
  const ratio = (v: number[][]) => v.map((t) => median(t.map((x, r) => v[0][r] / x)));
  return { ms: times.map(median), speedup: ratio(times), cpuSpeedup: ratio(cpu), cpuPerWall: cpu.map((t, i) => median(t.map((x, r) => x / times[i][r]))) };
}

function rand(n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.random() * 2 - 1;
  return out;
}

const gflops = (m: number, k: number, n: number, ms: number): number => (2 * m * k * n) / ms / 1e6;
const fmt = (x: number): string => x.toFixed(1).padStart(6);

/**
 * A tpukit product [m,k]x[k,n] (lhs stored [k,m] when transA) on the systolic backend. The op is
 * synchronous and leaves its result in a host typed array (copied out of wasm memory, as tfjs's
 * dataSync copies its result out), so it is not read back: a bf16 readback would add a decode
 * to f32 that is not part of the matmul.
 */
function tpukit(m: number, k: number, n: number, dtype: DType, transA = false): () => void {
  const a: TArray = np.array(rand(m * k), dtype).reshape(transA ? [k, m] : [m, k]);
  const b: TArray = np.array(rand(k * n), dtype).reshape([k, n]);
  return () => withBackend('systolic', () => lax.dotGeneral(a, b, [[[transA ? 0 : 1], [0]], [[], []]]).dispose());
}

function tfjs(m: number, k: number, n: number, transA = false): () => void {
  const a = tf.tensor2d(rand(m * k), transA ? [k, m] : [m, k]);
  const b = tf.tensor2d(rand(k * n), [k, n]);
  return () => {
    const c = tf.matMul(a, b, transA, false);
    c.dataSync();
    c.dispose();
  };
}

interface JaxJs {
  init(...devices: string[]): Promise<string[]>;
  defaultDevice(d: string): void;
  numpy: { matmul(a: unknown, b: unknown): { data(): Promise<unknown> }; array(x: Float32Array): { reshape(s: number[]): unknown } };
}

/** jax-js's matmul on its wasm backend, or null when it cannot start here. */
async function jaxjs(n: number): Promise<(() => Promise<void>) | null> {
  try {
    const g = globalThis as { navigator?: object };
    g.navigator ??= { hardwareConcurrency: 1 };
    const jax = (await import('@jax-js/jax')) as unknown as JaxJs;
    const got = await jax.init('wasm');
    if (!got.includes('wasm')) return null;
    jax.defaultDevice('wasm');
    type JArr = { ref: JArr };
    const a = jax.numpy.array(rand(n * n)).reshape([n, n]) as JArr;
    const b = jax.numpy.array(rand(n * n)).reshape([n, n]) as JArr;
    return async () => {
      await jax.numpy.matmul(a.ref, b.ref).data();
    };
  } catch (e) {
    console.log(`jax-js could not run: ${(e as Error).message}`);
    return null;
  }
}

/**
 * The reference GPT's matmuls (bench:gpt, B=16, T=128, d=128, MLP 512, V=256, 4 heads of 32)
 * as its compiled step runs them: [name, lhs shape, rhs shape, dimension numbers].
 */
type DotCase = [string, number[], number[], [[number[], number[]], [number[], number[]]]];
const GPT_DOTS: DotCase[] = [
  ['mlp up   [2048,128]x[128,512]', [16, 128, 128], [128, 512], [[[2], [0]], [[], []]]],
  ['mlp down [2048,512]x[512,128]', [16, 128, 512], [512, 128], [[[2], [0]], [[], []]]],
  ['dX up    [2048,512]x[128,512]^T', [16, 128, 512], [128, 512], [[[2], [1]], [[], []]]],
  ['dX down  [2048,128]x[512,128]^T', [16, 128, 128], [512, 128], [[[2], [1]], [[], []]]],
  ['dW up    [2048,128]^Tx[2048,512]', [16, 128, 128], [16, 128, 512], [[[0, 1], [0, 1]], [[], []]]],
  ['dW down  [2048,512]^Tx[2048,128]', [16, 128, 512], [16, 128, 128], [[[0, 1], [0, 1]], [[], []]]],
  ['qkv/out  [2048,128]x[128,128]', [16, 128, 128], [128, 128], [[[2], [0]], [[], []]]],
  ['dW qkv   [2048,128]^Tx[2048,128]', [16, 128, 128], [16, 128, 128], [[[0, 1], [0, 1]], [[], []]]],
  ['one-hot  [2048,256]x[256,128]', [16, 128, 256], [256, 128], [[[2], [0]], [[], []]]],
  ['lm head  [2048,128]x[256,128]^T', [16, 128, 128], [256, 128], [[[2], [1]], [[], []]]],
  ['scores   64x[128,32]x[128,32]^T', [16, 128, 4, 32], [16, 128, 4, 32], [[[3], [3]], [[0, 2], [0, 2]]]],
  ['att.v    64x[128,128]x[128,32]', [16, 4, 128, 128], [16, 128, 4, 32], [[[3], [1]], [[0, 1], [0, 2]]]],
];

/** FLOPs of a dot case: 2 * |out| * K. */
function dotCaseFlops([, ls, rs, [[lc], [lb]]]: DotCase): number {
  const k = lc.reduce((a, d) => a * ls[d], 1);
  const bsz = lb.reduce((a, d) => a * ls[d], 1);
  const m = ls.reduce((a, b) => a * b, 1) / k / bsz;
  const n = rs.reduce((a, b) => a * b, 1) / k / bsz;
  return 2 * bsz * m * n * k;
}

/** With TPUKIT_GEMM_PHASES=1: where one product's time goes on 1 thread and on 2 (means of RUNS runs each). */
function phaseReport(one: () => void, two: () => void): void {
  const ph = systolic.gemmPhases;
  const ms = (x: number, n: number): string => (x / Math.max(1, n)).toFixed(2);
  systolic.resetGemmPhases();
  for (let i = 0; i < RUNS; i++) one();
  console.log(`        1t phases (ms per product; an item of a batch run item by item counts as one): stage ${ms(ph.stage, ph.products)} pack ${ms(ph.pack, ph.products)} (stage included) gemm ${ms(ph.gemm, ph.products)} sink ${ms(ph.sink, ph.products)}`);
  systolic.resetGemmPhases();
  // The job's whole time (wake-up to every worker done) is the worker pool's own timing.
  const jobs = wasm.poolJobTimes;
  const [wasOn, jobs0, ms0] = [jobs.enabled, jobs.jobs, jobs.ms];
  jobs.enabled = true;
  for (let i = 0; i < RUNS; i++) two();
  jobs.enabled = wasOn;
  const p = ph.pool;
  if (p.products > 0) console.log(`        2t calling thread (ms from wake-up): staged ${ms(p.staged, p.products)} packed ${ms(p.gate, p.products)} own tiles done ${ms(p.callerTilesDone, p.products)} all done ${ms(jobs.ms - ms0, jobs.jobs - jobs0)}; it computed ${p.callerTiles}/${p.tiles} tiles`);
  else console.log('        2t: run item by item (batched.ts), not timed per phase');
}

/** The GPT's dots, 1 thread and 2 threads interleaved: GFLOP/s (wall), 2t/1t and CPU-seconds per second. */
async function gptShapes(): Promise<void> {
  const cores = systolic.getNumThreads();
  console.log(`\n[5] the reference GPT's matmuls (bench:gpt shapes), f32 storage, into a reused destination, interleaved 1 and 2 threads`);
  for (const c of GPT_DOTS) {
    const [name, ls, rs, dn] = c;
    const a = np.array(rand(ls.reduce((x, y) => x * y, 1))).reshape(ls);
    const b = np.array(rand(rs.reduce((x, y) => x * y, 1))).reshape(rs);
    // Into a destination reused across runs, as the jitted step's executable does (a fresh
    // multi-megabyte output per call would time page faults, not the product).
    const out = new Float32Array(dotCaseFlops(c) / 2 / dn[0][0].reduce((x, d) => x * ls[d], 1));
    const params = { dimensionNumbers: dn, precision: null, preferredElementType: null };
    const run = (t: number) => () => {
      systolic.setNumThreads(t);
      withBackend('systolic', () => evalPrimitiveInto(dotGeneralP, [a, b], params, out)?.dispose());
    };
    const r = await interleaved([run(1), run(2)], RUNS * 2, 2);
    const fl = dotCaseFlops(c);
    const g = (ms: number) => fmt(fl / ms / 1e6);
    console.log(`    ${name.padEnd(34)} 1t ${g(r.ms[0])} GFLOP/s (${r.ms[0].toFixed(2)} ms)   2t ${g(r.ms[1])} GFLOP/s   2t/1t ${r.speedup[1].toFixed(2)}x   CPU-s/s 1t ${r.cpuPerWall[0].toFixed(2)} 2t ${r.cpuPerWall[1].toFixed(2)}`);
    if (systolic.gemmPhases.enabled) phaseReport(run(1), run(2));
  }
  systolic.setNumThreads(cores);
}

/**
 * The operands and destination of GPT dot `c` in engine `e`'s memory, as the compiled step's
 * arena holds them (read in place, the result written there): a run of mxuDotGeneral, its
 * destination, and a release of the regions.
 */
function dotInEngine(e: GemmEngine, c: DotCase, ha = rand(c[1].reduce((x, y) => x * y, 1)), hb = rand(c[2].reduce((x, y) => x * y, 1))): { run: () => void; into: Float32Array; release: () => void } {
  const [, ls, rs, dn] = c;
  const outLen = dotCaseFlops(c) / 2 / dn[0][0].reduce((x, d) => x * ls[d], 1);
  const params = { dimensionNumbers: dn, precision: null, preferredElementType: null };
  const out = aval([outLen], 'float32');
  const addrs: number[] = [];
  const view = (x: Float32Array): Float32Array => {
    const addr = e.reserve(x.byteLength); // (grows the memory: take the buffer after)
    addrs.push(addr);
    const v = new Float32Array(e.buffer(), addr, x.length);
    v.set(x);
    return v;
  };
  const lhs = { data: view(ha), shape: ls, dtype: 'float32' as const };
  const rhs = { data: view(hb), shape: rs, dtype: 'float32' as const };
  const into = view(new Float32Array(outLen));
  return { run: () => void mxuDotGeneral(e, lhs, rhs, params, out, { flushSubnormals: false }, into), into, release: () => addrs.forEach((a) => e.release(a)) };
}

/** Evictions' sum, printed never (it keeps the reads); see `oneThreadCold`. */
let evicted = 0;

/**
 * The systolic backend's GEMM engine set to one thread, and `evict`: reads 48 MiB of other memory,
 * so that the next call finds its operands out of the caches, as a step's operands come after
 * other work.
 */
function oneThreadCold(): { e: GemmEngine; evict: () => void } {
  systolic.setNumThreads(1);
  const e = systolic.backend.engine; // (takes the thread setting)
  const junk = new Float32Array(12 << 20);
  const evict = (): void => {
    for (let i = 0; i < junk.length; i += 16) evicted += junk[i];
  };
  return { e, evict };
}

/**
 * `MATMUL_ONLY=account`: where a GPT dot's one-thread time goes, with its operands and
 * destination in the GEMM memory as in the compiled step, by the phase timer's per-shape sums
 * (`systolic.gemmPhases.byShape`): packing A, packing B, edges, kernel, sink, and the rest of
 * the call (views, planning: the per-call overhead). 'warm': the call repeated (operands in
 * cache); 'cold': 48 MiB of other memory read before each call, as a step's operands come
 * after other work. GFLOP/s of the call and of its kernel alone. Then the same on two threads
 * (`accountPool`).
 */
async function account(): Promise<void> {
  const { e, evict } = oneThreadCold();
  const ph = systolic.gemmPhases;
  console.log(`\n[7] GPT dots, 1 thread, operands and destination in the GEMM memory: ms per call by phase (least of ${RUNS} runs: wall clock, so the least disturbed)`);
  console.log(`    ${'dot'.padEnd(34)} ${'cache'.padEnd(5)} ${['call', 'packA', 'packB', 'edges', 'kernel', 'sink', 'other'].map((x) => x.padStart(7)).join('')}   GFLOP/s call / kernel`);
  for (const c of GPT_DOTS.slice(0, 10)) {
    const d = dotInEngine(e, c);
    for (const cold of [false, true]) {
      const rows: number[][] = [];
      for (let r = 0; r < RUNS + 1; r++) {
        if (cold) evict();
        systolic.resetGemmPhases();
        ph.enabled = true;
        d.run();
        ph.enabled = false;
        const v = [...ph.byShape.values()][0];
        if (r > 0) rows.push([v.call, v.packA, v.packB, v.edges, v.gemm, v.sink, v.call - v.packA - v.packB - v.edges - v.gemm - v.sink]);
      }
      const med = rows[0].map((_, j) => Math.min(...rows.map((x) => x[j])));
      const fl = dotCaseFlops(c);
      console.log(`    ${c[0].padEnd(34)} ${(cold ? 'cold' : 'warm').padEnd(5)} ${med.map((x) => x.toFixed(3).padStart(7)).join('')}   ${fmt(fl / med[0] / 1e6)} / ${fmt(fl / med[4] / 1e6)}`);
    }
    d.release();
  }
  if (evicted === 42) console.log('');
  await accountPool();
}

/**
 * The same dots on two threads, operands and destination in the GEMM memory, the pool's tiles
 * (default) against its opt-in row blocks (`TPUKIT_GEMM_BLOCK_ROWS_POOL=1`: each thread packs the
 * A rows it multiplies), interleaved per round: wall ms per call (median of RUNS * 2) and
 * CPU-seconds per second (under 1.9 the second core was not free: the ratio means nothing then).
 */
async function accountPool(): Promise<void> {
  systolic.setNumThreads(2);
  const e = systolic.backend.engine; // (takes the thread setting)
  const saved = e.blockRowsPool;
  console.log(`\n[8] GPT dots, 2 threads, operands and destination in the GEMM memory: wall ms per call, tiles vs row blocks (median of ${RUNS * 2})`);
  for (const c of GPT_DOTS.slice(0, 10)) {
    const d = dotInEngine(e, c);
    const mode = (on: boolean) => () => {
      e.blockRowsPool = on;
      d.run();
    };
    const r = await interleaved([mode(false), mode(true)], RUNS * 2, 2);
    console.log(`    ${c[0].padEnd(34)} tiles ${r.ms[0].toFixed(3)}  row blocks ${r.ms[1].toFixed(3)}  row blocks / tiles ${(1 / r.speedup[1]).toFixed(3)}x   CPU-s/s ${r.cpuPerWall[0].toFixed(2)} / ${r.cpuPerWall[1].toFixed(2)}`);
    d.release();
  }
  e.blockRowsPool = saved;
  systolic.setNumThreads(1);
}

/**
 * `MATMUL_ONLY=kblocks`: the weight gradients (both operands 'rc', K = 2048), one thread, operands
 * and destination in the GEMM memory as the compiled step has them: packed one K block at a time
 * inside the kernel's loops (`GemmEngine.blockK`, the default) against both operands packed whole
 * first (`TPUKIT_GEMM_K_BLOCKS=0`), interleaved per round, warm and cold (48 MiB of other memory
 * read before each call), by process CPU time: median per-round ratio, least and median CPU ms.
 * The results must be the same bits (checked).
 */
async function kBlocksAB(): Promise<void> {
  const { e, evict } = oneThreadCold();
  const saved = e.blockK;
  const cases: DotCase[] = [
    ...GPT_DOTS.filter(([name]) => name.startsWith('dW')),
    ['dW lm/emb [2048,256]^Tx[2048,128]', [16, 128, 256], [16, 128, 128], [[[0, 1], [0, 1]], [[], []]]],
  ];
  console.log(`\n[9] weight gradients, 1 thread, in the GEMM memory: K-blocked packing vs whole operands first, by CPU time (${RUNS * 2} interleaved rounds)`);
  for (const c of cases) {
    const d = dotInEngine(e, c);
    const results: Uint32Array[] = [];
    const fl = dotCaseFlops(c);
    for (const cold of [false, true]) {
      // CPU ms of the calls alone (the eviction runs inside the interleaved round, outside this)
      const cpu: number[][] = [[], []];
      const mode = (on: boolean) => () => {
        if (cold) evict();
        e.blockK = on;
        const c0 = process.cpuUsage();
        d.run();
        const u = process.cpuUsage(c0);
        cpu[on ? 0 : 1].push((u.user + u.system) / 1000);
        if (results.length < 2) results.push(new Uint32Array(d.into.slice().buffer));
      };
      await interleaved([mode(true), mode(false)], RUNS * 2, 2);
      for (const v of cpu) v.splice(0, 2); // (the warm-up runs)
      const ratio = median(cpu[1].map((x, r) => x / cpu[0][r]));
      const g = (v: number[]): string => `${Math.min(...v).toFixed(3)} / ${median(v).toFixed(3)} ms (${fmt(fl / median(v) / 1e6)} GFLOP/s)`;
      console.log(`    ${c[0].padEnd(34)} ${cold ? 'cold' : 'warm'}  K-blocked ${g(cpu[0])}   whole ${g(cpu[1])}   whole / K-blocked ${ratio.toFixed(3)}x`);
    }
    if (!results[0].every((x, i) => x === results[1][i])) throw new Error(`bench:matmul: ${c[0]}: K-blocked and whole-operand packing give different results`);
    d.release();
  }
  e.blockK = saved;
  if (evicted === 42) console.log('');
}

/**
 * `MATMUL_ONLY=shape`: the GEMM's 5 x 8 micro-kernel (opt-in) against the default 4 x 8 kernel
 * on the GPT's dots, one thread, each engine in one process with its operands
 * and destination in its own memory (as the compiled step's arena holds them: no staging, the
 * result written in place), the two interleaved per round and compared by process CPU time
 * (median per-round ratio). Results are bit-identical (checked here too).
 */
async function shapeAB(): Promise<void> {
  const relaxed = wasm.wasmFeatures().relaxedSimd;
  // MATMUL_SHAPES: comma-separated kernels, the first the baseline: MRxNR with an optional
  // 'u<unroll>' suffix (e.g. 4x8,4x8u2,5x8)
  const named: Record<string, GemmShape> = { '4x8': GEMM_SHAPE_4X8, '5x8': GEMM_SHAPE_5X8 };
  const parse = (t: string): GemmShape => {
    const m = /^(\d+x\d+)(?:u(\d+))?$/.exec(t.trim());
    const base = m ? named[m[1]] : undefined;
    if (!m || !base) throw new Error(`bench:matmul: MATMUL_SHAPES: unknown kernel ${JSON.stringify(t)} (4x8 or 5x8, optional u<unroll>)`);
    return m[2] ? { ...base, unroll: Number(m[2]) } : base;
  };
  const names = (process.env.MATMUL_SHAPES ?? '4x8,5x8').split(',');
  const shapes = names.map(parse);
  const engines = shapes.map((shape) => new GemmEngine({ relaxed, shape }));
  console.log(`\n[6] micro-kernels ${names.join(' / ')} (ratios to ${names[0]}), GPT dots, 1 thread, operands and destination in the engine memory, by CPU time`);
  for (const c of GPT_DOTS) {
    const [name, ls, rs] = c;
    const fl = dotCaseFlops(c);
    const ha = rand(ls.reduce((x, y) => x * y, 1));
    const hb = rand(rs.reduce((x, y) => x * y, 1));
    const runs = engines.map((e) => dotInEngine(e, c, ha, hb));
    const r = await interleaved(runs.map((x) => x.run), RUNS * 2, 2);
    for (let k = 1; k < runs.length; k++) if (!runs[k].into.every((x, i) => Object.is(x, runs[0].into[i]))) throw new Error(`bench:matmul: ${name}: the ${names[k]} and ${names[0]} kernels give different results`);
    const cpuG = (k: number): string => fmt(fl / (r.ms[k] * r.cpuPerWall[k]) / 1e6);
    const cols = names.map((n, k) => `${n} ${cpuG(k)}${k > 0 ? ` (${(1 / r.cpuSpeedup[k]).toFixed(3)}x)` : ''}`);
    console.log(`    ${name.padEnd(34)} ${cols.join('   ')}  GFLOP/s (CPU time)`);
    if (systolic.gemmPhases.enabled) {
      const ph = systolic.gemmPhases;
      const parts = runs.map((x, k) => {
        systolic.resetGemmPhases();
        for (let i = 0; i < RUNS; i++) x.run();
        const per = (v: number): string => (v / Math.max(1, ph.products)).toFixed(3);
        return `${names[k]} pack ${per(ph.pack)} gemm ${per(ph.gemm)} sink ${per(ph.sink)}`;
      });
      console.log(`        phases (ms per product): ${parts.join('; ')}`);
    }
    for (const x of runs) x.release();
  }
}

/**
 * CPU ms of this process so far: [every thread (getrusage, exact for the calling thread too), the
 * threads other than the calling one (`/proc/self/task/<tid>/schedstat`: exact for threads that
 * are asleep, as the pool's workers are between jobs; the calling thread's own entry lags by up to
 * a scheduler tick, so its time is the difference)].
 */
function threadCpu(): [number, number] {
  const u = process.cpuUsage();
  let rest = 0;
  for (const [tid, [run]] of threadSnapshot()) if (tid !== process.pid) rest += run;
  return [(u.user + u.system) / 1000, rest];
}

/**
 * `MATMUL_ONLY=cpu2t`: each GPT dot with its operands and destination in the GEMM memory (as the
 * compiled step has them), cold (48 MiB of other memory read before each call, outside the
 * measurement), one thread against the pool's two threads, interleaved per round: CPU ms of the
 * calling thread and of the other threads (workers) per call, and wall ms (median of RUNS * 2), plus
 * the median per-round ratio of each variant's total CPU to the 1t call's. Variants: '2t' (the
 * defaults: row blocks for an in-place 'kc' A, K blocks for two in-place 'rc' operands), '2t tiles'
 * (both off: `TPUKIT_GEMM_BLOCK_ROWS_POOL=0 TPUKIT_GEMM_K_BLOCKS_POOL=0`, main's path before gemm7),
 * '2t held' (the defaults with the worker held: the calling thread computes every unit, so the
 * path's own cost without a second thread). Where a two-thread product spends CPU beyond the
 * one-thread product is what the 2t step pays on top (the 2t step is CPU-bound on two cores). The
 * results must be the same bits (checked).
 */
async function cpu2t(): Promise<void> {
  const { e, evict } = oneThreadCold();
  // [label, threads, pool row blocks, pool K blocks, worker held (the calling thread computes every unit alone)]
  const variants: Array<[string, number, boolean, boolean, boolean]> = [
    ['1t', 1, true, true, false],
    ['2t', 2, true, true, false],
    ['2t tiles', 2, false, false, false],
    ['2t held', 2, true, true, true],
  ];
  console.log(`\n[10] GPT dots in the GEMM memory, cold: CPU ms per call (median of ${RUNS * 2} interleaved rounds; main = calling thread, wk = other threads; x = total CPU / 1t's, median per round)`);
  const sums = variants.map(() => 0);
  for (const c of GPT_DOTS.slice(0, 10)) {
    const d = dotInEngine(e, c);
    const rec = variants.map(() => ({ wall: [] as number[], main: [] as number[], rest: [] as number[] }));
    let bits: Uint32Array | null = null;
    const mode = (k: number) => () => {
      const [, threads, rowBlocks, kBlocks, held] = variants[k];
      systolic.setNumThreads(threads);
      void systolic.backend.engine; // (installs the thread setting)
      e.blockRowsPool = rowBlocks;
      e.blockKPool = kBlocks;
      evict();
      if (held) wasm.holdWorkers(true);
      const [a0, r0] = threadCpu();
      const t0 = performance.now();
      d.run();
      const t1 = performance.now();
      const [a1, r1] = threadCpu();
      if (held) wasm.holdWorkers(false);
      rec[k].wall.push(t1 - t0);
      rec[k].main.push(a1 - a0 - (r1 - r0));
      rec[k].rest.push(r1 - r0);
      const got = new Uint32Array(d.into.slice().buffer);
      if (bits === null) bits = got;
      else if (!got.every((x, i) => x === bits![i])) throw new Error(`bench:matmul: ${c[0]}: ${variants[k][0]} gives different results`);
    };
    await interleaved(variants.map((_, k) => mode(k)), RUNS * 2, 2);
    for (const r of rec) for (const v of [r.wall, r.main, r.rest]) v.splice(0, 2); // (the warm-up runs)
    const tot = rec.map((r) => r.main.map((x, i) => x + r.rest[i]));
    const f = (v: number[]): string => median(v).toFixed(2).padStart(5);
    const parts = variants.map(([label], k) => {
      sums[k] += median(tot[k]);
      const x = k === 0 ? '' : ` ${median(tot[k].map((t, i) => t / tot[0][i])).toFixed(3)}x`;
      return `${label} ${f(tot[k])}${k === 0 ? '' : ` (${f(rec[k].main)}+${f(rec[k].rest)})`}${x} w ${f(rec[k].wall)}`;
    });
    console.log(`    ${c[0].padEnd(33)} ${parts.join(' | ')}`);
    d.release();
  }
  console.log(`    sum of medians (ms CPU): ${variants.map(([label], k) => `${label} ${sums[k].toFixed(2)}`).join(', ')}`);
  e.blockRowsPool = true;
  e.blockKPool = true;
  systolic.setNumThreads(1);
  if (evicted === 42) console.log('');
}

/**
 * `MATMUL_ONLY=groups`: the GPT step's dot groups (xla-lite's passes/dotGroups.ts), operands and
 * destinations in the GEMM memory, cold, in interleaved rounds: the products one by one on one
 * thread ('1t'), one by one on two threads ('2t separate', one pool job each: main's path), and as
 * one group on two threads ('2t group', `GemmEngine.beginGroup`: one job, each thread starting on
 * its own product). CPU ms per group (all threads), wall ms, and the median per-round ratio of
 * CPU to 1t's; results checked bit-identical.
 */
async function groupsAB(): Promise<void> {
  const { e, evict } = oneThreadCold();
  const byName = (prefix: string): DotCase => GPT_DOTS.find((c) => c[0].startsWith(prefix))!;
  const groups: Array<[string, DotCase[]]> = [
    ['pair dX + dW [2048,128]x[128,128]', [byName('qkv/out'), byName('dW qkv')]],
    ['attn bwd: dX, dW, dX, dW', [byName('qkv/out'), byName('dW qkv'), byName('qkv/out'), byName('dW qkv')]],
    ['dW qkv x2 + dW up + dW down', [byName('dW qkv'), byName('dW qkv'), byName('dW up'), byName('dW down')]],
    ['pair dX down + dW down', [byName('dX down'), byName('dW down')]],
  ];
  const variants: Array<[string, number, boolean]> = [['1t', 1, false], ['2t separate', 2, false], ['2t group', 2, true]];
  console.log(`\n[11] GPT dot groups in the GEMM memory, cold: CPU ms per group, all threads (median of ${RUNS * 2} interleaved rounds; x = CPU / 1t's, median per round; w = wall ms)`);
  for (const [label, cases] of groups) {
    const ds = cases.map((c) => dotInEngine(e, c));
    const cpu = variants.map((): number[] => []);
    const wall = variants.map((): number[] => []);
    let want: Uint32Array[] | null = null;
    const mode = (k: number) => () => {
      const [, threads, group] = variants[k];
      systolic.setNumThreads(threads);
      const eng = systolic.backend.engine; // (installs the thread setting)
      evict();
      const t = cpuWall(() => {
        const open = group && eng.beginGroup();
        for (const d of ds) d.run();
        if (open) eng.endGroup(true);
      });
      wall[k].push(t.wall);
      cpu[k].push(t.cpu);
      const got = ds.map((d) => new Uint32Array(d.into.slice().buffer));
      if (want === null) want = got;
      else if (!got.every((g, i) => g.every((x, j) => x === want![i][j]))) throw new Error(`bench:matmul: ${label}: ${variants[k][0]} gives different results`);
    };
    await interleaved(variants.map((_, k) => mode(k)), RUNS * 2, 2);
    for (const v of [...cpu, ...wall]) v.splice(0, 2); // (the warm-up runs)
    const parts = variants.map(([name], k) => `${name} ${median(cpu[k]).toFixed(2).padStart(6)}${k === 0 ? '' : ` ${median(cpu[k].map((t, i) => t / cpu[0][i])).toFixed(3)}x`} w ${median(wall[k]).toFixed(2).padStart(6)}`);
    console.log(`    ${label.padEnd(36)} ${parts.join(' | ')}`);
    for (const d of ds) d.release();
  }
  systolic.setNumThreads(1);
  if (evicted === 42) console.log('');
}

async function main(): Promise<void> {
  if (process.env.MATMUL_ONLY === 'groups') {
    console.log(`matmul benchmark, GPT dot groups on 1 and 2 threads; ${loadAndTime()}`);
    await groupsAB();
    return;
  }
  if (process.env.MATMUL_ONLY === 'shape') {
    console.log(`matmul benchmark, micro-kernel shapes: medians of ${RUNS * 2} interleaved runs; load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}; ${new Date().toISOString()}`);
    await shapeAB();
    return;
  }
  if (process.env.MATMUL_ONLY === 'account') {
    console.log(`matmul benchmark, GPT dots by phase; load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}; ${new Date().toISOString()}`);
    await account();
    return;
  }
  if (process.env.MATMUL_ONLY === 'kblocks') {
    console.log(`matmul benchmark, weight gradients' K-blocked packing; load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}; ${new Date().toISOString()}`);
    await kBlocksAB();
    return;
  }
  if (process.env.MATMUL_ONLY === 'cpu2t') {
    console.log(`matmul benchmark, GPT dots' CPU on 1 and 2 threads; load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}; ${new Date().toISOString()}`);
    await cpu2t();
    return;
  }
  if (process.env.MATMUL_ONLY === 'gpt') {
    console.log(`matmul benchmark, GPT shapes only: medians of ${RUNS * 2} interleaved runs; load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}; ${new Date().toISOString()}`);
    await gptShapes();
    return;
  }
  tf.enableProdMode();
  await tf.setBackend('wasm');
  await tf.ready();
  const cores = systolic.getNumThreads();
  const relaxed = systolic.backend.usesRelaxedSimd;
  console.log(`matmul benchmark: medians of ${RUNS} interleaved runs; ${cores} cores; tpukit ${relaxed ? 'relaxed-SIMD FMA' : 'plain SIMD'}; tfjs-wasm ${tf.version_core}; load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}; ${new Date().toISOString()}`);

  // 1. f32 1024^3, one thread, vs tfjs-wasm.
  systolic.setNumThreads(1);
  const n = 1024;
  const jx = await jaxjs(n);
  const r1 = await interleaved([tfjs(n, n, n), tpukit(n, n, n, 'float32'), ...(jx ? [jx] : [])]);
  const gT = gflops(n, n, n, r1.ms[0]);
  const gS = gflops(n, n, n, r1.ms[1]);
  console.log(`\n[1] f32 ${n}^3, 1 thread     tfjs-wasm ${fmt(gT)} GFLOP/s   tpukit ${fmt(gS)} GFLOP/s   ratio ${r1.speedup[1].toFixed(2)}x (target >= 1.7x; by CPU time ${r1.cpuSpeedup[1].toFixed(2)}x)`);
  if (jx) {
    const gJ = gflops(n, n, n, r1.ms[2]);
    console.log(`    jax-js (wasm backend) ${fmt(gJ)} GFLOP/s   tpukit / jax-js ${(r1.speedup[1] / r1.speedup[2]).toFixed(2)}x (by CPU time ${(r1.cpuSpeedup[1] / r1.cpuSpeedup[2]).toFixed(2)}x)`);
  }
  const r3 = await interleaved([tpukit(n, n, n, 'float32'), tpukit(n, n, n, 'bfloat16')]);
  console.log(`[3] bf16 storage ${n}^3       tpukit f32 ${fmt(gflops(n, n, n, r3.ms[0]))}   bf16 ${fmt(gflops(n, n, n, r3.ms[1]))} GFLOP/s   bf16 vs f32: ${r3.speedup[1].toFixed(2)}x (target >= 1.0x; by CPU time ${r3.cpuSpeedup[1].toFixed(2)}x)`);

  // 2. Two threads vs one at 1024 and 2048.
  for (const size of [1024, 2048]) {
    const f = tpukit(size, size, size, 'float32');
    const one = () => {
      systolic.setNumThreads(1);
      f();
    };
    const two = () => {
      systolic.setNumThreads(2);
      f();
    };
    const r2 = await interleaved([one, two], size >= 2048 ? Math.max(3, Math.ceil(RUNS / 2)) : RUNS, 1);
    console.log(`[2] f32 ${size}^3 threads       1: ${fmt(gflops(size, size, size, r2.ms[0]))} GFLOP/s   2: ${fmt(gflops(size, size, size, r2.ms[1]))} GFLOP/s   speed-up ${r2.speedup[1].toFixed(2)}x (target >= 1.8x; CPU-seconds per second 1: ${r2.cpuPerWall[0].toFixed(2)}, 2: ${r2.cpuPerWall[1].toFixed(2)})`);
  }

  // 4. Backward-pass shapes of a small transformer vs the square shape, one thread.
  systolic.setNumThreads(1);
  const shapes: Array<[string, number, number, number, boolean]> = [
    ['[2048,128]^T x [2048,512]', 128, 2048, 512, true],
    ['[2048,512]^T x [2048,128]', 512, 2048, 128, true],
    ['[2048,512] x [512,128]', 2048, 512, 128, false],
    ['batch-like [4096,128] x [128,128]', 4096, 128, 128, false],
  ];
  console.log(`\n[4] backward-pass shapes (1 thread; square f32 reference ${fmt(gS)} GFLOP/s; target within 1.5x)`);
  const square = tpukit(n, n, n, 'float32');
  const squareFlops = 2 * n ** 3;
  for (const [name, m, k, nn, transA] of shapes) {
    // Round: square, this shape (tpukit), this shape (tfjs). Ratios are of GFLOP/s per round.
    const r4 = await interleaved([square, tpukit(m, k, nn, 'float32', transA), tfjs(m, k, nn, transA)]);
    const flops = 2 * m * k * nn;
    const g = gflops(m, k, nn, r4.ms[1]);
    const squareOverThis = (squareFlops / flops) * (1 / r4.speedup[1]);
    const squareOverThisCpu = (squareFlops / flops) * (1 / r4.cpuSpeedup[1]);
    const vsTfjs = r4.speedup[1] / r4.speedup[2];
    console.log(`    ${name.padEnd(34)} tpukit ${fmt(g)} GFLOP/s (square/this ${squareOverThis.toFixed(2)}x, by CPU time ${squareOverThisCpu.toFixed(2)}x)   tfjs-wasm ${fmt(gflops(m, k, nn, r4.ms[2]))}   ratio ${vsTfjs.toFixed(2)}x`);
  }
  await gptShapes();
  systolic.setNumThreads(cores);
  if (quietSeen.idle.length > 0) {
    const range = (v: number[]): string => `${Math.min(...v).toFixed(2)}-${Math.max(...v).toFixed(2)}`;
    console.log(`\nQUIET=${QUIET}: rounds started at machine idle ${range(quietSeen.idle)} (load average ${range(quietSeen.load)})`);
  }
}

await main();
