/**
 * The cost ledger and the per-op roofline. Every op the systolic backend executes is costed on
 * the selected TPU preset: a dot_general is MXU work (its GEMM cycles from `gemmCycles` with the
 * 'overlapped' model over all MXUs of the chip, one GEMM per batch element and bf16 pass); every
 * other op is vector-unit work, modelled as bound by its HBM traffic. An op's modelled time is
 * the roofline max(compute time, bytes / HBM bandwidth). `withLedger(fn)` collects the entries of
 * everything `fn` runs; MFU on the simulated chip is model FLOPs / (modelled seconds * peak).
 */
import { itemsize } from '../../dtype';
import { freeDims, type DotGeneralParams } from '../../lax/dot';
import type { Primitive, ShapedArray } from '../../primitive';
import { sizeOf } from '../../shape';
import { gemmCycles } from './gemmCycles';
import { passCount } from './mxuDot';
import type { TpuPreset } from './presets';

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
  seconds: number;
}

export function newLedger(preset: TpuPreset, keepEntries = true): Ledger {
  return { preset, entries: [], byOp: {}, keepEntries, ops: 0, flops: 0, mxuFlops: 0, bytes: 0, cycles: 0, seconds: 0 };
}

export function addToLedger(l: Ledger, c: OpCost): void {
  if (l.keepEntries) l.entries.push(c);
  const t = (l.byOp[c.op] ??= { count: 0, flops: 0, bytes: 0, seconds: 0 });
  t.count++;
  t.flops += c.flops;
  t.bytes += c.bytes;
  t.seconds += c.seconds;
  l.ops++;
  l.flops += c.flops;
  if (c.unit === 'mxu') l.mxuFlops += c.flops;
  l.bytes += c.bytes;
  l.cycles += c.cycles;
  l.seconds += c.seconds;
}

/** Model FLOP utilisation of the simulated chip: FLOPs / (modelled seconds * peak bf16 FLOP/s). */
export function mfu(l: Ledger): number {
  return l.seconds === 0 ? 0 : l.flops / (l.seconds * l.preset.peakBf16Flops);
}

/** Roofline of one op: arithmetic intensity and the attainable FLOP/s on the preset. */
export function roofline(c: OpCost, preset: TpuPreset): { intensity: number; attainableFlops: number; ridge: number } {
  const intensity = c.bytes === 0 ? Infinity : c.flops / c.bytes;
  const ridge = preset.peakBf16Flops / preset.hbmBandwidth;
  return { intensity, attainableFlops: Math.min(preset.peakBf16Flops, intensity * preset.hbmBandwidth), ridge };
}
