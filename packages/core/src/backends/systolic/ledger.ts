/**
 * The cost ledger and the per-op roofline. Every op the systolic backend executes is costed on
 * the selected TPU preset: a dot_general is MXU work (its GEMM cycles from `gemmCycles` with the
 * 'overlapped' model over all MXUs of the chip, one GEMM per batch element and bf16 pass), and so
 * is the fused attention (its matmuls per batch and head); every
 * other op is vector-unit work, modelled as bound by its HBM traffic. An op's modelled time is
 * the roofline max(compute time, bytes / HBM bandwidth). `withLedger(fn)` collects the entries of
 * everything `fn` runs. Beside compute, the ledger records communication: every collective a
 * partitioned program executes, timed by the ledger's interconnect model (interconnect.ts);
 * a partitioned program's compute is recorded per chip. MFU on the simulated chip is model
 * FLOPs / ((compute + communication seconds) * peak): no overlap of the two is assumed.
 */
import { itemsize } from '../../dtype';
import { freeDims, type DotGeneralParams } from '../../lax/dot';
import type { Primitive, ShapedArray } from '../../primitive';
import { sizeOf } from '../../shape';
import { gemmCycles } from './gemmCycles';
import { passCount } from './mxuDot';
import type { TpuPreset } from './presets';
import type { CollectiveCost, InterconnectModel } from './interconnect';

export interface OpCost {
  op: string;
  /** Model FLOPs (2*M*N*K per matmul, one per output element for vector ops). */
  flops: number;
  /** HBM bytes read and written (operands and results, at their dtype's size). */
  bytes: number;
  /** Modelled cycles at the preset's clock (the roofline time times the clock). */
  cycles: number;
  /** Cycles of the compute unit alone (MXU GEMM cycles; 0 for vector ops, which are modelled as HBM-bound). */
  computeCycles: number;
  seconds: number;
  /** Which roof limits the op. */
  bound: 'compute' | 'memory';
  unit: 'mxu' | 'vpu' | 'none';
}

/** Ops that only change metadata in XLA (no HBM traffic). */
const FREE = new Set(['reshape', 'squeeze', 'expand_dims']);

export function opCost(prim: Primitive, inAvals: readonly ShapedArray[], params: unknown, outAvals: readonly ShapedArray[], preset: TpuPreset): OpCost {
  const bytesOf = (a: ShapedArray): number => sizeOf(a.shape) * itemsize(a.dtype);
  const memBytes = FREE.has(prim.name) ? 0 : inAvals.reduce((s, a) => s + bytesOf(a), 0) + outAvals.reduce((s, a) => s + bytesOf(a), 0);
  const memSeconds = memBytes / preset.hbmBandwidth;
  if (prim.name === 'dot_general') {
    const p = params as DotGeneralParams;
    const [lhs, rhs] = inAvals;
    const [[lc, rc], [lb]] = p.dimensionNumbers;
    const B = sizeOf(lb.map((d) => lhs.shape[d]));
    const K = sizeOf(lc.map((d) => lhs.shape[d]));
    const M = sizeOf(freeDims(lhs.shape.length, lc, lb).map((d) => lhs.shape[d]));
    const N = sizeOf(freeDims(rhs.shape.length, rc, p.dimensionNumbers[1][1]).map((d) => rhs.shape[d]));
    const flops = 2 * B * M * N * K;
    let cycles = 0;
    if (B * M * N * K > 0) {
      const g = gemmCycles({ m: M, k: K, n: N }, { rows: preset.mxuRows, cols: preset.mxuCols, model: 'overlapped', units: preset.mxusPerCore * preset.coresPerChip });
      cycles = g.cycles * B * passCount(lhs.dtype, p.precision);
    }
    const computeSeconds = cycles / preset.clockHz;
    const seconds = Math.max(computeSeconds, memSeconds);
    return { op: prim.name, flops, bytes: memBytes, cycles: seconds * preset.clockHz, computeCycles: cycles, seconds, bound: computeSeconds >= memSeconds ? 'compute' : 'memory', unit: 'mxu' };
  }
  if (prim.name === 'dot_product_attention' || prim.name === 'dot_product_attention_fwd' || prim.name === 'dot_product_attention_bwd') {
    // The fused attention is MXU work: per (batch, head) the matmuls it runs (QK^T and PV forward;
    // QK^T recomputed unless P was kept (`saveProbs`), dO V^T, P^T dO, dS K, dS^T Q backward), each
    // one bf16 pass. Model FLOPs count the matmuls the composite would do (2 forward, 4
    // backward), not the recomputation. (Kept P's bytes are in memBytes: a result, then an operand.)
    const [b, t, n, h] = inAvals[0].shape;
    const s = inAvals[1].shape[1];
    const fwd = prim.name !== 'dot_product_attention_bwd';
    const recompute: number[][] = (params as { saveProbs?: boolean }).saveProbs === true ? [] : [[t, h, s]];
    const gemms = fwd ? [[t, h, s], [t, s, h]] : [...recompute, [t, h, s], [s, t, h], [t, s, h], [s, t, h]];
    const units = { rows: preset.mxuRows, cols: preset.mxuCols, model: 'overlapped' as const, units: preset.mxusPerCore * preset.coresPerChip };
    const cycles = t * s * h === 0 ? 0 : b * n * gemms.reduce((acc, [m, k, nn]) => acc + gemmCycles({ m, k, n: nn }, units).cycles, 0);
    const flops = (fwd ? 2 : 4) * 2 * b * n * t * s * h;
    const computeSeconds = cycles / preset.clockHz;
    const seconds = Math.max(computeSeconds, memSeconds);
    return { op: prim.name, flops, bytes: memBytes, cycles: seconds * preset.clockHz, computeCycles: cycles, seconds, bound: computeSeconds >= memSeconds ? 'compute' : 'memory', unit: 'mxu' };
  }
  const flops = FREE.has(prim.name) ? 0 : outAvals.reduce((s, a) => s + sizeOf(a.shape), 0);
  return { op: prim.name, flops, bytes: memBytes, cycles: memSeconds * preset.clockHz, computeCycles: 0, seconds: memSeconds, bound: 'memory', unit: memBytes === 0 ? 'none' : 'vpu' };
}

export interface OpTotals {
  count: number;
  flops: number;
  bytes: number;
  seconds: number;
}

export interface Ledger {
  readonly preset: TpuPreset;
  /** Every op's cost in execution order (empty when the ledger keeps totals only). */
  readonly entries: OpCost[];
  /** Totals per primitive name. */
  readonly byOp: Record<string, OpTotals>;
  /** False: keep totals only (long training loops). */
  readonly keepEntries: boolean;
  ops: number;
  flops: number;
  /** FLOPs done on the MXU (matmuls only). */
  mxuFlops: number;
  bytes: number;
  cycles: number;
  /** Modelled compute seconds (per chip for partitioned programs). */
  seconds: number;
  /** The model that times collectives (null: a collective is an error naming the fix). */
  readonly interconnect: InterconnectModel | null;
  /** Every collective's cost in execution order (empty when the ledger keeps totals only). */
  readonly collectives: CollectiveCost[];
  /** Totals per collective kind (`flops` stays 0). */
  readonly byCollective: Record<string, OpTotals>;
  /** Interconnect bytes (each collective's full buffer per device) and modelled seconds. */
  communicationBytes: number;
  communicationSeconds: number;
  /** The most devices a partitioned program recorded here ran on (1 when none did). */
  devices: number;
}

export function newLedger(preset: TpuPreset, keepEntries = true, interconnect: InterconnectModel | null = null): Ledger {
  return {
    preset, entries: [], byOp: {}, keepEntries, ops: 0, flops: 0, mxuFlops: 0, bytes: 0, cycles: 0, seconds: 0,
    interconnect, collectives: [], byCollective: {}, communicationBytes: 0, communicationSeconds: 0, devices: 1,
  };
}

const addTotals = (t: OpTotals, count: number, flops: number, bytes: number, seconds: number): void => {
  t.count += count;
  t.flops += flops;
  t.bytes += bytes;
  t.seconds += seconds;
};

/** Adds one op's cost; `share` < 1 when the op is one device's part of a per-chip cost (see interconnect.ts' `perChip`). */
export function addToLedger(l: Ledger, c: OpCost, share = 1): void {
  const x = share === 1 ? c : { ...c, flops: c.flops * share, bytes: c.bytes * share, cycles: c.cycles * share, computeCycles: c.computeCycles * share, seconds: c.seconds * share };
  if (l.keepEntries) l.entries.push(x);
  addTotals((l.byOp[c.op] ??= { count: 0, flops: 0, bytes: 0, seconds: 0 }), share, x.flops, x.bytes, x.seconds);
  l.ops += share;
  l.flops += x.flops;
  if (c.unit === 'mxu') l.mxuFlops += x.flops;
  l.bytes += x.bytes;
  l.cycles += x.cycles;
  l.seconds += x.seconds;
}

/** Adds one collective's cost (communication, beside compute). */
export function addCollective(l: Ledger, c: CollectiveCost): void {
  if (l.keepEntries) l.collectives.push(c);
  addTotals((l.byCollective[c.kind] ??= { count: 0, flops: 0, bytes: 0, seconds: 0 }), 1, 0, c.bytes, c.seconds);
  l.communicationBytes += c.bytes;
  l.communicationSeconds += c.seconds;
}

/** Modelled step seconds: compute + communication - the hidden part (`overlap` of the shorter, 0..1; default 0). */
export function stepSeconds(l: Ledger, overlap = 0): number {
  if (!(overlap >= 0 && overlap <= 1)) throw new RangeError(`systolic.stepSeconds: overlap must be in [0, 1]; got ${overlap}`);
  return l.seconds + l.communicationSeconds - overlap * Math.min(l.seconds, l.communicationSeconds);
}

/** Model FLOP utilisation of the simulated chip: FLOPs / (step seconds, compute + communication, * peak bf16 FLOP/s). */
export function mfu(l: Ledger, overlap = 0): number {
  const s = stepSeconds(l, overlap);
  return s === 0 ? 0 : l.flops / (s * l.preset.peakBf16Flops);
}

/** Roofline of one op: arithmetic intensity and the attainable FLOP/s on the preset. */
export function roofline(c: OpCost, preset: TpuPreset): { intensity: number; attainableFlops: number; ridge: number } {
  const intensity = c.bytes === 0 ? Infinity : c.flops / c.bytes;
  const ridge = preset.peakBf16Flops / preset.hbmBandwidth;
  return { intensity, attainableFlops: Math.min(preset.peakBf16Flops, intensity * preset.hbmBandwidth), ridge };
}
