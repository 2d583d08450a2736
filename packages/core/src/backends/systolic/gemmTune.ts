/**
 * Picks the GEMM micro-kernel for this CPU, once per process, the way XLA's autotuner picks among
 * algorithms that give the same result: every candidate computes each element of C over the
 * same K order with the same f32 operations, so the choice changes speed only (gemmShape.test.ts
 * checks the kernels agree bit for bit).
 *
 * The candidates are 4 x 8 (8 accumulators) and 5 x 8 (10 accumulators, A rows broadcast from a
 * vector load; see gemmModule.ts). Which is faster depends on the CPU: on Zen 4 the 5 x 8 kernel
 * was 1.4-3.6% faster alone and no faster in the GPT step (its partial row panels and the pool
 * paths that need M a multiple of MR cost what it gains: BENCHMARKS.md, gemmk); on an Intel Xeon
 * with AVX-512 (2026-11-26) it ran 11-20% faster alone and 9% faster in the 1t step. So 5 x 8 is
 * chosen only when its micro-kernel runs at least `MIN_GAIN` faster here.
 *
 * The measurement: both kernels compiled into a small private memory, each run on packed panels
 * that stay in L1/L2 (130 or 128 rows, K block 256, 16 column panels: ~8.5 MFLOP a run), the runs
 * alternated, the best of each after V8 has optimised the code (its first runs are the baseline
 * compiler's). About 50 ms once per process.
 */
import { WA } from '../../wasm/webassemblyTypes';
import { GEMM_SHAPE_4X8, GEMM_SHAPE_5X8, type GemmExports, type GemmShape, buildGemmModule } from './gemmModule';

/** The 5 x 8 kernel is chosen when its rate over 4 x 8's is at least this. */
export const MIN_GAIN = 1.07;

const KC = 256;
const COLS = 16;
const PAGES = 8;

/** A timed micro-kernel: runs `COLS` column panels down `rows` rows of one K block; returns ms. */
function microRunner(shape: GemmShape, relaxed: boolean): () => number {
  const memory = new WA.Memory({ initial: PAGES, maximum: PAGES });
  const ex = new WA.Instance(new WA.Module(buildGemmModule({ shape, relaxed, shared: false, maxPages: PAGES })), { env: { mem: memory } }).exports as unknown as GemmExports;
  const panels = Math.floor(130 / shape.mr);
  const nr = shape.nv * 4;
  const f = new Float32Array(memory.buffer);
  // Small bf16-exact values: products and sums stay finite and normal.
  for (let i = 0; i < f.length; i++) f[i] = ((i % 7) - 3) * 0.25;
  const b = panels * shape.mr * KC * 4;
  const c = b + nr * KC * 4 * COLS;
  const ldc = COLS * nr * 4;
  return () => {
    const t0 = performance.now();
    for (let j = 0; j < COLS; j++) ex.micro(0, b + j * nr * KC * 4, c + j * nr * 4, KC, ldc, 0, panels, KC * shape.mr * 4);
    return performance.now() - t0;
  };
}

/** Multiply-adds per run of `microRunner(shape)`. */
export const work = (shape: GemmShape): number => Math.floor(130 / shape.mr) * shape.mr * shape.nv * 4 * KC * COLS;

/**
 * The rate of 5 x 8 over 4 x 8 from two timed runners (`r4` runs 4 x 8's work, `r5` 5 x 8's; each
 * returns ms): multiply-adds per ms, best of `rounds` alternated rounds of `runs` runs each.
 */
export function gainOf(r4: () => number, r5: () => number, rounds: number, runs: number): number {
  if (!(Number.isInteger(rounds) && rounds >= 1 && Number.isInteger(runs) && runs >= 1)) {
    throw new Error(`gemmTune.gainOf: rounds and runs must be integers >= 1; got rounds ${rounds}, runs ${runs}`);
  }
  let t4 = Infinity;
  let t5 = Infinity;
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < runs; i++) t4 = Math.min(t4, r4());
    for (let i = 0; i < runs; i++) t5 = Math.min(t5, r5());
  }
  // (a run below the timer's resolution reads 0 ms: take the resolution's floor instead)
  return work(GEMM_SHAPE_5X8) / Math.max(t5, 1e-3) / (work(GEMM_SHAPE_4X8) / Math.max(t4, 1e-3));
}

/** The rate of 5 x 8 over 4 x 8 on this CPU (`gainOf` over the two kernels' micro-runs). */
export function measureGain(relaxed: boolean, rounds = 4, runs = 12): number {
  return gainOf(microRunner(GEMM_SHAPE_4X8, relaxed), microRunner(GEMM_SHAPE_5X8, relaxed), rounds, runs);
}

/** The choice for a measured gain: 5 x 8 from `MIN_GAIN` on, else 4 x 8. */
export const shapeForGain = (gain: number): GemmShape => (gain >= MIN_GAIN ? GEMM_SHAPE_5X8 : GEMM_SHAPE_4X8);

/** The measured choice: 5 x 8 when `measureGain` reaches `MIN_GAIN`, else 4 x 8. */
export function tuneGemmShape(relaxed: boolean): { shape: GemmShape; gain: number } {
  const gain = measureGain(relaxed);
  return { shape: shapeForGain(gain), gain };
}
