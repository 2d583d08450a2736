/**
 * The types of a planned fusion kernel: the loop plan `planFusion` / `planRowFusion` make
 * (emitKernel.ts) and the arena addresses the kernel is emitted for (program.ts). They sit below
 * the emitters (emitKernel.ts, kernelScope.ts and the per-kind kernels), which all read them.
 */
import type { HloComputation, HloInstruction } from '../hlo';
import type { RowStructure } from './rowPlan';

export interface Broadcast {
  inst: HloInstruction;
  /** Index of the broadcast's source parameter. */
  param: number;
  /** Element stride of each outer (row-index) loop dim into the source. */
  outer: number[];
  /** Whether the source runs along the row (else it is constant along it). */
  contiguous: boolean;
}

export interface FusionPlan {
  kind: 'loop' | 'row' | 'col' | 'rows';
  body: HloComputation;
  reduce: HloInstruction | null;
  isMax: boolean;
  /** Loop shape, and the split into rows: `rows` rows of `L` elements (dims [0, d) index rows). */
  shape: readonly number[];
  d: number;
  L: number;
  rows: number;
  /** Work items, and per kind: loop chunks per row; row: rows per output; col: groups and padded group width. */
  items: number;
  /**
   * Column reductions split by rows (`rowBlocks` > 1): items [items, items + finalItems) combine
   * the blocks' partial sums and write the output, after every item below `items` is done (one
   * (group, chunk) each). 0 for every other kernel.
   */
  finalItems: number;
  /** Column reductions: blocks of reduced rows, each summed into its own scratch (1 = not split). */
  rowBlocks: number;
  chunksPerRow: number;
  rowsPerOutput: number;
  K: number;
  groups: number;
  groupWidth: number;
  broadcasts: Broadcast[];
  /** Columns per work item (loop and column kinds). */
  chunk: number;
  /** Bytes of float64 scratch (column reductions). */
  scratchBytes: number;
  /** Elements of the loop space, weighted for transcendentals (to decide on threads). */
  work: number;
  /** Row fusions (kind 'rows'): the stage structure, the scratch bytes of one thread, and the threads scratch is laid out for. */
  rowsOf: RowStructure | null;
  scratchRowBytes: number;
  scratchThreads: number;
}

/** Work (loop elements, transcendentals weighted) above which a kernel is split across threads. */
export const PARALLEL_WORK = 1 << 16;

/**
 * The one iota placement rule of the wasm kernels (both `planFusion` and `planRowFusion` plan by
 * it; `kernelScope.ts` computes iotas by it): with rows split off at dim `d` of a rank-`rank`
 * loop shape, a float32 iota along `dimension` is computable when it runs along a row-index dim
 * (`dimension < d`: the row's coordinate, splatted once per row) or along the last dim of rows
 * that are exactly the last dim (`d = rank - 1`: the column index plus the lane).
 */
export const iotaPlaceable = (dimension: number, d: number, rank: number): boolean => dimension < d || (dimension === rank - 1 && d === rank - 1);

/** The smallest row split at which every iota of `body` is placeable (0 without iotas); every larger split works too. */
export function minIotaSplit(body: HloComputation, rank: number): number {
  let d = 0;
  for (const m of body.instructions) {
    if (m.prim?.name !== 'iota') continue;
    const t = (m.params as { dimension: number }).dimension;
    d = Math.max(d, t === rank - 1 ? rank - 1 : t + 1);
  }
  return d;
}

/** Where a fused computation's operands come from: an arena address, or a scalar immediate. */
export type ParamSource = { addr: number } | { imm: number };

export interface KernelAddresses {
  params: ParamSource[];
  out: number;
  scratch: number;
  /** Extra outputs of a multi-output (row) fusion. */
  more?: number[];
}
