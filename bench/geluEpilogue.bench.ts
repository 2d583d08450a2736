/**
 * `pnpm gelu-epilogue`: what moving the GPT's forward tanh-GELU into its up-projection's dot
 * epilogue could save, at bench:gpt's shapes (x [2048,128] x W1 [128,512] + b1), systolic
 * backend, `TPUKIT_GEMM_KERNEL` as set (pin it). Per-instruction wall and CPU ms from xla-lite's
 * profiler (argument and result copies excluded), min / median over interleaved rounds.
 *
 * 1. `matmul(gelu(x W1 + b1), W2)` (the activation stays in the arena) compiled three ways:
 *    `loop` (output fusion off: the dot writes its result into the arena, a loop kernel reads
 *    it back and writes the GELU: the step's shape today), `epilogue` (the GELU as the dot's
 *    kOutput epilogue: a second pass over the dot's result after the product, in place),
 *    `banded` (the same epilogue run per finished band of the product's rows,
 *    `setEpilogueBands`); on 1 and 2 threads. Only the up-projection and its GELU are summed
 *    (the down-projection is the same in all three).
 * 2. The step's two-output GELU loop kernel (gelu and tanh of h + b1, h = x W1 written into the
 *    arena by the dot right before it) over the full [2048,512] array against 32 calls over
 *    [64,512] blocks (input and outputs resident in L2): the most a kernel that reads h from
 *    cache instead of memory could save (an epilogue inside the GEMM's tiles would still write
 *    its outputs and the dot's result to memory, so it saves less).
 * Env: GELU_BENCH_ROUNDS (default 40), GELU_BENCH_THREADS (default `1,2`: the thread counts of part 1).
 */
import { type Array, np, systolic, withBackend } from '@tpukit/core';
import { type Compiled, lower, profile, setEpilogueBands, setKernelThreads } from '@tpukit/xla-lite';
import { loadAndTime, median } from './timing';

const ROUNDS = Number(process.env.GELU_BENCH_ROUNDS ?? 40);
const WARMUP = 5;
const values = (n: number, seed: number): Float32Array => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed) * 0.5);
const gelu = (h: Array): [Array, Array] => {
  const t = np.tanh(np.multiply(np.add(h, np.multiply(np.multiply(np.multiply(h, h), h), 0.044715)), 0.7978845608));
  return [np.multiply(np.multiply(h, 0.5), np.add(t, 1)), t];
};

/** Profiled ms (wall and CPU) of the instructions `pick` selects in one call of each of `n` calls. */
function profiled(c: Compiled, args: Array[], n: number, pick: (category: string, detail: string) => boolean): { wall: number; cpu: number } {
  profile.reset();
  profile.enable(true);
  for (let j = 0; j < n; j++) c.call(args);
  profile.enable(false);
  const recs = profile.records('wall').filter((r) => r.instruction !== '(call)' && pick(r.category, r.detail));
  return { wall: recs.reduce((s, r) => s + r.ms, 0), cpu: recs.reduce((s, r) => s + r.cpuMs, 0) };
}

const summary = (xs: number[]): string => `${Math.min(...xs).toFixed(3)} / ${median(xs).toFixed(3)}`;

withBackend('systolic', () => {
  console.log(`bench:gelu-epilogue: ${ROUNDS} rounds; ${loadAndTime()}`);
  const x = np.array(values(2048 * 128, 1), 'float32').reshape([2048, 128]);
  const w1 = np.array(values(128 * 512, 2), 'float32').reshape([128, 512]);
  const b1 = np.array(values(512, 3), 'float32');
  const w2 = np.array(values(512 * 128, 5), 'float32').reshape([512, 128]);
  const mlp = (a: Array, w: Array, b: Array, v: Array): Array[] => [np.matmul(gelu(np.add(np.matmul(a, w), b))[0], v)];
  const variant = (outputFusion: boolean, bands: boolean): Compiled => {
    setEpilogueBands(bands);
    try {
      return lower(mlp)(x, w1, b1, w2).compile({ outputFusion });
    } finally {
      setEpilogueBands(false);
    }
  };
  const variants: [string, Compiled][] = [['loop', variant(false, false)], ['epilogue', variant(true, false)], ['banded', variant(true, true)]];
  if (variants[0][1].stats.outputFusions !== 0 || variants[1][1].stats.outputFusions !== 1) throw new Error('bench:gelu-epilogue: expected no epilogue in `loop` and one in `epilogue`');
  // The up-projection (its output is [2048,512]) and the GELU loop kernel, or the two as one kOutput.
  const up = (category: string, detail: string): boolean => detail.endsWith('-> f32[2048,512]') || category === 'fusion kLoop';
  console.log('1. up-projection + GELU, ms per call, wall min / median, CPU min / median:');
  for (const threads of (process.env.GELU_BENCH_THREADS ?? '1,2').split(',').map(Number)) {
    systolic.setNumThreads(threads);
    setKernelThreads(threads);
    const wall = new Map<string, number[]>();
    const cpu = new Map<string, number[]>();
    for (let r = -WARMUP; r < ROUNDS; r++)
      for (const [name, c] of variants) {
        const t = profiled(c, [x, w1, b1, w2], 1, up);
        if (r < 0) continue;
        wall.set(name, [...(wall.get(name) ?? []), t.wall]);
        cpu.set(name, [...(cpu.get(name) ?? []), t.cpu]);
      }
    for (const [name] of variants) console.log(`  ${threads}t ${name.padEnd(9)} wall ${summary(wall.get(name)!)}  CPU ${summary(cpu.get(name)!)}`);
  }
  systolic.setNumThreads(1);
  setKernelThreads(1);
  const v8 = np.array(values(512 * 8, 6), 'float32').reshape([512, 8]);
  /** The two-output GELU of `h = x W1` for x of `rows` rows; h is a dot's result, written into the arena right before the kernel (as in the step). */
  const kernelOver = (rows: number): { c: Compiled; x: Array } => {
    const xr = np.array(values(rows * 128, 7), 'float32').reshape([rows, 128]);
    // Both outputs are read by small dots, so they stay in the arena (as in the step).
    const c = lower((a: Array, w: Array, b: Array, vv: Array) => gelu(np.add(np.matmul(a, w), b)).map((y) => np.matmul(y, vv)))(xr, w1, b1, v8).compile({ outputFusion: false });
    return { c, x: xr };
  };
  const full = kernelOver(2048);
  const block = kernelOver(64);
  const loopOnly = (category: string): boolean => category === 'fusion kLoop';
  const times = { full: [] as number[], blocks: [] as number[] };
  for (let r = -WARMUP; r < ROUNDS; r++) {
    const a = profiled(full.c, [full.x, w1, b1, v8], 1, loopOnly);
    const b = profiled(block.c, [block.x, w1, b1, v8], 32, loopOnly);
    if (r < 0) continue;
    times.full.push(a.cpu);
    times.blocks.push(b.cpu);
  }
  console.log('2. two-output GELU loop kernel over 1M elements, 1 thread, CPU ms min / median:');
  console.log(`  [2048,512] in one call ${summary(times.full)};  32 calls over [64,512] (L2-resident) ${summary(times.blocks)}`);
});
