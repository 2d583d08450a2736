/**
 * An optional per-phase timer of the GEMM engine, for finding where the time around the kernel
 * goes. On one thread: staging and packing (`pack`, of which the copying of host operands into
 * wasm memory is `stage`), the kernel (`gemm`) and the hand-over of the accumulator to the caller
 * (`sink`: the output copy or bf16 narrowing), in milliseconds summed over `products`. Batches
 * run item by item (`batched.ts`) count each item as a product, with its staging in `stage` and
 * its packing in `gemm` (the two kernels run back to back). Products on the thread pool are
 * timed from the calling thread (`pool`). Off by default; turned on by `TPUKIT_GEMM_PHASES=1` in
 * the environment or by setting `gemmPhases.enabled`. While it is on, the engine stages through
 * a stager that times its copies (`TimedStager`) and hands item-by-item results over through a
 * timed sink, so the loops over packing chunks and items never read the clock themselves; off,
 * a product costs a few boolean tests.
 */
import { envSwitch } from '../../env';

export const gemmPhases = {
  enabled: envSwitch('TPUKIT_GEMM_PHASES', false),
  products: 0,
  pack: 0,
  stage: 0,
  gemm: 0,
  sink: 0,
  /**
   * Products split over the thread pool (`threads.ts`), as seen by the calling thread: ms from
   * waking the workers until it had staged the operands (`staged`), until packing was complete
   * and the tiles opened (`gate`), and until it found no tile left (`callerTilesDone`), summed
   * over `products`; with the tiles computed in all and by the calling thread. A late `gate`
   * after `staged` means packing lagged the staging. The job's whole wall time (wake-up to every
   * worker done) and the calling thread's wait for the workers are the worker pools' own
   * timings (`poolJobTimes`, wasm/workerPool.ts: the one source of pool job times); a job that
   * ends well past `callerTilesDone` had unbalanced last tiles. K-blocked and group jobs
   * (`unitJobs`) add their wall ms from waking the workers to every worker done (`unitJobMs`)
   * and to the calling thread finding no unit left (`callerUnitsDone`), and how often a thread
   * had to wait for another's units (a K block's packing, a tile's previous K block, B's chunks:
   * `waited`), how often it slept doing so (`slept`) and the ms it slept (`sleptMs`, summed over
   * the threads). These counters are kept only while the timer is on: with it off the threads
   * neither count nor read a clock.
   */
  pool: { products: 0, staged: 0, gate: 0, callerTilesDone: 0, tiles: 0, callerTiles: 0, unitJobs: 0, unitJobMs: 0, callerUnitsDone: 0, waited: 0, slept: 0, sleptMs: 0 },
  /**
   * The one-thread products again, by shape (`M x K x N`, each operand's layout: 'rc' rows
   * contiguous, 'kc' k contiguous, 'host' packed in TypeScript; '-> C' when the result is written
   * straight into its destination): packing of A and of B (each with its staging), the
   * TypeScript edges, the kernel, the sink, and `call`: the whole `dot_general` call on the
   * backend (operand views, planning, all of the above), so `call` less the parts is the per-call
   * overhead.
   */
  byShape: new Map<string, ShapePhases>(),
};

/** Per-shape sums of the phase timer (ms; see `gemmPhases.byShape`). */
export interface ShapePhases {
  products: number;
  packA: number;
  packB: number;
  edges: number;
  gemm: number;
  sink: number;
  calls: number;
  call: number;
}

/** The per-shape record for `key`, created on first use (timer on only). */
export function shapePhases(key: string): ShapePhases {
  let s = gemmPhases.byShape.get(key);
  if (!s) {
    s = { products: 0, packA: 0, packB: 0, edges: 0, gemm: 0, sink: 0, calls: 0, call: 0 };
    gemmPhases.byShape.set(key, s);
  }
  return s;
}

/** The current time when the timer is on, else 0 (no clock read). */
export function phaseClock(): number {
  return gemmPhases.enabled ? performance.now() : 0;
}

/** Zeroes the sums. */
export function resetGemmPhases(): void {
  gemmPhases.products = 0;
  gemmPhases.pack = 0;
  gemmPhases.stage = 0;
  gemmPhases.gemm = 0;
  gemmPhases.sink = 0;
  for (const k of Object.keys(gemmPhases.pool) as Array<keyof typeof gemmPhases.pool>) gemmPhases.pool[k] = 0;
  gemmPhases.byShape.clear();
}
