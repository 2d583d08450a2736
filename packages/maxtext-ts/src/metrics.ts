/**
 * What a run reports, as MaxText's metric_logger does: the per-step line, the scalars (JSONL and
 * TensorBoard), and the two MFU denominators: this CPU's measured peak for the matmul kernel the
 * model uses, and the simulated TPU chip's, from core's systolic cost ledger (plus, for a sharded
 * run, the interconnect time of the compiled partitioned step's collectives).
 */
import { type Array, type DType, np, systolic } from '@tpukit/core';
import { customTopology, generations, type ProgramLike, simulateStep, slice, type Topology } from '@tpukit/mesh';
import { jit } from '@tpukit/xla-lite';

export interface StepReport {
  step: number;
  seconds: number;
  tflopsPerSec: number;
  tokensPerSec: number;
  totalWeights: number;
  loss: number;
  /** Fraction of this CPU's measured matmul peak (null when not measured). */
  mfuCpu: number | null;
  /** Fraction of the simulated TPU's peak (null when not modelled). */
  mfuTpu: number | null;
  tpuGeneration: string;
}

const pct = (x: number | null): string => (x === null ? 'n/a' : `${(100 * x).toFixed(2)}%`);

/** MaxText's line (`completed step: N, seconds: ..., loss: ...`) followed by the two MFUs. */
export function formatStepLine(r: StepReport): string {
  return (
    `completed step: ${r.step}, seconds: ${r.seconds.toFixed(3)}, TFLOP/s/device: ${r.tflopsPerSec.toFixed(3)}, Tokens/s/device: ${r.tokensPerSec.toFixed(3)}, ` +
    `total_weights: ${r.totalWeights}, loss: ${r.loss.toFixed(3)}, MFU(cpu): ${pct(r.mfuCpu)}, MFU(${r.tpuGeneration} simulated): ${pct(r.mfuTpu)}`
  );
}

/**
 * Peak FLOP/s of this CPU for the jitted matmul kernel at the model's activation dtype, measured
 * once: a [m, k] x [k, n] product, best of `repeats` timed calls after a warm-up.
 */
export function measureCpuPeakFlops(dtype: DType, opts: { m?: number; k?: number; n?: number; repeats?: number } = {}): number {
  const m = opts.m ?? 256;
  const k = opts.k ?? 256;
  const n = opts.n ?? 256;
  const a = np.astype(np.ones([m, k]), dtype);
  const b = np.astype(np.ones([k, n]), dtype);
  const mm = jit((x: Array, y: Array) => np.matmul(x, y));
  mm(a, b).dataSync();
  let best = Infinity;
  for (let r = 0; r < (opts.repeats ?? 7); r++) {
    const t = performance.now();
    mm(a, b).dataSync();
    best = Math.min(best, performance.now() - t);
  }
  return (2 * m * n * k) / (Math.max(best, 1e-3) / 1000);
}

/** Modelled seconds of `fn` on the simulated chip (every op it runs, costed by the systolic ledger). */
export function simulatedSeconds(fn: () => unknown, generation: keyof typeof systolic.presets): number {
  const { ledger } = systolic.withLedger(fn, { preset: systolic.presets[generation], keepEntries: false });
  return ledger.seconds;
}

/** A slice of `chips` chips of a generation: Google's standard shape when there is one, else a line of chips. */
function sliceOf(generation: keyof typeof generations, chips: number): Topology {
  try {
    return slice(generations[generation], chips);
  } catch {
    return customTopology({ generation: generations[generation], dims: [chips] });
  }
}

/**
 * Modelled interconnect seconds of one step of a compiled partitioned program (its own
 * collectives, through @tpukit/mesh's cost model) on a slice of `chips` chips of `generation`;
 * null for generations without an interconnect record (v2, v3).
 */
export function simulatedCommunicationSeconds(program: ProgramLike, generation: keyof typeof systolic.presets, chips: number): number | null {
  if (!(generation in generations)) return null;
  const g = generation as keyof typeof generations;
  return simulateStep(program, { topology: sliceOf(g, chips) }).communicationSeconds;
}

/** Progress bar for a TTY: `[#####.....] 37/200 loss 3.210`. */
export function progressBar(done: number, total: number, loss: number, width = 30): string {
  const filled = Math.round((width * done) / Math.max(total, 1));
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} loss ${loss.toFixed(3)}`;
}
