/**
 * The `systolic` namespace: the TPU-MXU backend instance, its options, the cost model (presets,
 * gemmCycles, ledger, roofline, interconnect model seam) and the PE-grid simulator. Re-exports,
 * plus the conveniences that bind the default backend instance (ledger and its scopes).
 */
import { withBackend } from '../../backend';
import type { Ledger } from './ledger';
import { SystolicBackend, type SystolicOptions } from './backend';
import type { TpuPreset } from './presets';
import { type CollectiveCall, checkInterconnect, type InterconnectModel } from './interconnect';

export { SystolicBackend, type SystolicOptions } from './backend';
export { type ArrayConfig, type CycleModel, type Dataflow, type GemmCycles, type GemmDims, type ScalesimReport, gemmCycles, operandMapping } from './gemmCycles';
export { type Ledger, type OpCost, type OpTotals, mfu, opCost, roofline, stepSeconds } from './ledger';
export { checkInterconnect, type CollectiveCall, type CollectiveCost, type CollectiveKind, getInterconnect, type InterconnectModel, setInterconnect } from './interconnect';
export { batchedStats } from './batched';
export { gemmPhases, resetGemmPhases } from './phases';
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
export function withLedger<T>(fn: () => T, opts: { preset?: TpuPreset; keepEntries?: boolean; interconnect?: InterconnectModel | null } = {}): { result: T; ledger: Ledger } {
  const ic = opts.interconnect === undefined || opts.interconnect === null ? opts.interconnect : checkInterconnect(opts.interconnect, 'systolic.withLedger');
  return withBackend(backend.name, () => backend.withLedger(fn, opts.preset, opts.keepEntries ?? true, ic));
}

/** Whether a ledger is collecting (a partitioned executor then reports through the scopes below). */
export const costing = (): boolean => backend.costing;
/** A partitioned program's execution over `devices` devices in this thread: its ops are costed per chip. */
export const perChip = <T>(devices: number, fn: () => T): T => backend.perChip(devices, fn);
/** Host-side data movement (placing shards, assembling results): not costed. */
export const uncosted = <T>(fn: () => T): T => backend.uncosted(fn);
/** One collective: its interconnect time is recorded, `move` (the host's emulation) is not costed as compute. */
export const collective = <T>(call: CollectiveCall, move: () => T): T => backend.collective(call, move);
