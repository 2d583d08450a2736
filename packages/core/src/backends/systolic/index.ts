/**
 * The `systolic` namespace: the TPU-MXU backend instance, its options, the cost model (presets,
 * gemmCycles, ledger, roofline) and the PE-grid simulator. Re-exports only, plus the two
 * conveniences that bind the default backend instance.
 */
import { withBackend } from '../../backend';
import type { Ledger } from './ledger';
import { SystolicBackend, type SystolicOptions } from './backend';
import type { TpuPreset } from './presets';

export { SystolicBackend, type SystolicOptions } from './backend';
export { type ArrayConfig, type CycleModel, type Dataflow, type GemmCycles, type GemmDims, type ScalesimReport, gemmCycles, operandMapping } from './gemmCycles';
export { type Ledger, type OpCost, type OpTotals, mfu, opCost, roofline } from './ledger';
export { batchedStats } from './batched';
export { PASSES, passCount } from './mxuDot';
export { type TpuPreset, presets } from './presets';
export { type PeGridResult, simulatePeGrid } from './peGrid';
export { getNumThreads, setNumThreads } from '../../threads';

/** The registered 'systolic' backend. */
export const backend = new SystolicBackend('systolic');

/** Sets options of the registered backend (flushSubnormals, relaxedSimd, preset). */
export function configure(opts: SystolicOptions): void {
  backend.configure(opts);
}

/**
 * Runs `fn` on the systolic backend and returns its result with the ledger of every op it ran:
 * FLOPs, HBM bytes, modelled cycles and seconds on the preset (default: the backend's).
 */
export function withLedger<T>(fn: () => T, opts: { preset?: TpuPreset; keepEntries?: boolean } = {}): { result: T; ledger: Ledger } {
  return withBackend(backend.name, () => backend.withLedger(fn, opts.preset, opts.keepEntries ?? true));
}
