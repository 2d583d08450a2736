/**
 * The types of a planned fusion kernel: the loop plan `planFusion` / `planRowFusion` make
 * (emitKernel.ts) and the arena addresses the kernel is emitted for (program.ts). They sit below
 * the emitters (emitKernel.ts, kernelScope.ts and the per-kind kernels), which all read them.
 */
import { envNumber } from '@tpukit/core/internal';
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

/**
 * A column reduction (kInput) that a row kernel computes as it walks the rows
 * (`planRowColumnSum`): every output of `body` is a float32 `reduce_sum` over the leading axes,
 * of the rows the row kernel walks, of an elementwise value of `body`'s parameters, each of
 * which is one of the row fusion's operands or one of its full outputs.
 */
export interface RowColumnSum {
  body: HloComputation;
  /** Per parameter of `body`: the row body's parameter it is (`param`: its index), or the row body's full output it is (`value`). */
  args: readonly ({ readonly param: number } | { readonly value: HloInstruction })[];
  /** The stage (`rowPlan.ts`) whose walk computes the summed values (where every `value` argument is computed). */
  stage: number;
  /** How the kernel reads each broadcast of a parameter in `body`: the row's value (splatted), or along the row. */
  broadcasts: ReadonlyMap<HloInstruction, 'row' | 'column'>;
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
  /**
   * Column reductions: the kernel also stores the reduced operand itself, elementwise, at
   * `KernelAddresses.side` (a dot epilogue that computes its result and that result's column
   * sum in one pass: `planEpilogueColumnSum`). False for every other kernel.
   */
  side: boolean;
  /**
   * Row kernels: column sums (over every row, in row order, in float64) the kernel also
   * accumulates as it walks the rows, at `KernelAddresses.colSums` (run on one thread over all
   * rows: `planRowColumnSum`); null for every other kernel.
   */
  sums: readonly RowColumnSum[] | null;
  /**
   * Row kernels with `sums`: the outputs (indices into the body's outputs) that nothing but
   * those sums reads (program.ts's pairing), which that kernel computes for its sums and leaves
   * unwritten (`rowsKernel.ts`); the kernel without the sums writes every output. Absent: none.
   */
  sumOnlyOutputs?: readonly number[];
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
  /** Byte alignment of the scratch region's start and end in the arena (a cache line for row kernels, `setRowScratchAlign`; else 16). */
  scratchAlign: number;
}

/** Work (loop elements, transcendentals weighted) below which a kernel never runs on threads (and a column reduction is never split by rows). */
export const PARALLEL_WORK = 1 << 16;

/**
 * Work from which a kernel runs on threads by default (env `TPUKIT_PARALLEL_WORK`,
 * `setParallelWork`). A pool job costs the worker's wake-up, w = 50-130 us mean in the GPT's 2t
 * step (the kernel pool's worker sleeps through the GEMMs between kernels): the calling thread
 * starts at once and the worker joins w later, so a kernel of T ms on one thread takes about
 * (T + w) / 2 on two, a gain only past T = w. 2^18 work is ~0.1-0.2 ms of loop or row kernel
 * (0.4-0.8 ns per unit here); the GPT's Adam updates of 2^16 elements took 0.05 ms each on one
 * thread and 0.06 on two (BENCHMARKS.md, "red7").
 */
export const THREAD_WORK = 1 << 18;
let threadWork = envNumber('TPUKIT_PARALLEL_WORK', PARALLEL_WORK, 2 ** 52) ?? THREAD_WORK;

/** Sets the work from which kernels run on threads (THREAD_WORK by default; at least PARALLEL_WORK); applies to executables built afterwards. */
export function setParallelWork(work: number): void {
  if (!Number.isInteger(work) || work < PARALLEL_WORK) throw new RangeError(`setParallelWork: work must be an integer >= ${PARALLEL_WORK}; got ${work}`);
  threadWork = work;
}

export function getParallelWork(): number {
  return threadWork;
}

/**
 * Columns per column-reduction span (a multiple of COL_ITEM): a kernel call sums each run of
 * consecutive items of one group, up to this many columns, in one pass over the rows, so that
 * a thread reads whole rows (or 4 KiB of each) front to back; the span's float64 scratch (8 KiB
 * per output: up to 64 KiB for a sibling fusion's 8 outputs, not timed) stays in L1 for one output. Narrow passes read a few cache lines per row at the row stride, which is slow
 * on a cold input (an in-step call): a sum over f32[2048, 512] fresh from the GEMM took 1.0-1.45
 * ms with 64-column items against 0.25 ms with whole rows (BENCHMARKS.md, "colsum").
 * Summation order per column does not depend on the span.
 */
export const COL_CHUNK = 1024;
/** Columns per column-reduction work item (a multiple of 4 dividing COL_CHUNK): narrow, so that threads can split rows of 128 columns. */
export const COL_ITEM = 32;
/** Fewest columns a thread takes from a column reduction at a time (unless that is more than its share): 1 KiB of each row. */
export const COL_POOL_COLUMNS = 256;

/**
 * Work from which a column reduction (not split by rows) runs on threads, its spans of columns
 * split between them (env `TPUKIT_COL_PARALLEL_WORK`, `setColumnParallelWork`); off (infinite)
 * by default. Split by columns, each thread reads part of every row, and such passes over an
 * input fresh from a GEMM are slow (a sum over f32[2048, 512] took 0.33 ms as whole rows and
 * 0.43 ms as two 256-column spans computed by the calling thread alone; "colsum" measured the
 * same for narrow chunks); and the GPT step's bias-gradient sums (0.06-0.3 ms) are about as long
 * as a worker's wake-up. Measured slower on two threads at every size tried (BENCHMARKS.md, "red7").
 * The environment variable, when set, is an integer >= PARALLEL_WORK (unset = off); the setter
 * also takes Infinity (off again).
 */
export const COL_PARALLEL_WORK = Number.POSITIVE_INFINITY;
let colParallelWork = envNumber('TPUKIT_COL_PARALLEL_WORK', PARALLEL_WORK, 2 ** 52) ?? COL_PARALLEL_WORK;

/** Sets the work from which column reductions run on threads (off by default: `COL_PARALLEL_WORK`; at least PARALLEL_WORK, or Infinity); applies to executables built afterwards. */
export function setColumnParallelWork(work: number): void {
  if (work !== Number.POSITIVE_INFINITY && (!Number.isInteger(work) || work < PARALLEL_WORK)) throw new RangeError(`setColumnParallelWork: work must be an integer >= ${PARALLEL_WORK} or Infinity; got ${work}`);
  colParallelWork = work;
}

export function getColumnParallelWork(): number {
  return colParallelWork;
}

/** Whether a kernel of `plan` is worth running on threads: several items and enough work (`setParallelWork`; column reductions not split by rows: `setColumnParallelWork`). */
export function runsOnThreads(plan: FusionPlan): boolean {
  return plan.items >= 2 && plan.work >= (plan.kind === 'col' && plan.rowBlocks === 1 ? colParallelWork : threadWork);
}

/** Fewest items the pool hands a thread at a time (`poolChunk`): a column reduction not split by rows takes whole spans of COL_POOL_COLUMNS columns. */
export function minPoolChunk(plan: FusionPlan): number {
  return plan.kind === 'col' && plan.rowBlocks === 1 ? Math.ceil(COL_POOL_COLUMNS / COL_ITEM) : 1;
}

/**
 * Items per pool chunk for a kernel of `items` items on `threads` threads: about a quarter of a
 * thread's share (the threads balance by taking chunks from a shared counter), at least
 * `minChunk` and at most one thread's share.
 */
export function poolChunk(items: number, threads: number, minChunk: number): number {
  return Math.max(1, Math.min(Math.ceil(items / threads), Math.max(minChunk, Math.floor(items / (4 * threads)))));
}

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
  /** Where a column reduction with `plan.side` stores its reduced operand (elementwise, the loop shape). */
  side?: number;
  /**
   * A row kernel with `plan.sums`: its float64 scratch (per output of every sum, in order, one
   * float64 per column padded to whole vectors) and the float32 sums' addresses (in that order;
   * each region padded to whole vectors).
   */
  colSums?: { scratch: number; outs: number[] };
}

/** The address of output `q` of a kernel (0: `out`, then `more`). */
export const outputAddr = (at: KernelAddresses, q: number): number => (q === 0 ? at.out : at.more![q - 1]);
