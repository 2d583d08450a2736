/**
 * A batch of small products (attention's per-head products: 64 of 128x128x32 per dot) run item
 * by item: each item packs its two operands with the SIMD packing kernels into a pack area of
 * its thread, multiplies them into an accumulator of its own, and is handed to the sink on the
 * calling thread, in item order, once it is final. With the thread pool (`threads.ts`) the items
 * are shared between the threads through one counter, so a whole batched dot costs one wake-up,
 * not one per item; each item is computed whole by one thread with the same kernels as on one
 * thread, so results do not depend on the thread count. On one thread the same loop runs without
 * the per-product planning of `GemmEngine.batchedProduct` (packing plans, closures, chunking).
 *
 * Only small one-pass products take this path: fewer than `minWork` multiply-adds each (a larger
 * product is split over the pool by itself, tile by tile, which balances a short batch better
 * than whole items), with operands that need no TypeScript packing edges (a unit stride on one
 * axis, k a multiple of 4 for k-contiguous operands, no k padding, B's rows a multiple of the
 * panel width). Everything else keeps `batchedProduct`'s product-by-product loop.
 *
 * A's rows need not fill its last panel (128 rows in panels of 5): the packing kernel packs that
 * panel whole, reading the rows past the item's last from whatever follows it in memory (the
 * next item, the next operand, or the scratch above: always inside the memory), and the kernel
 * never writes C's rows past M. Row i of C depends on row i of A only, so those don't-care rows
 * cannot reach a result; staging and the workers' waits count only the item's real rows.
 *
 * Memory layout (bytes, 64-aligned), from the engine's `floor`, after the staged operands
 * (operands already in the engine's memory are read where they lie, not staged):
 *
 *   [ item table: per item the two operands' source addresses, then a done flag per item |
 *     pack areas, one per thread: A panels then B panels | accumulators, one per item |
 *     bf16 output scratch of the sink ]
 *
 * Items whose accumulators would exceed `ACC_BUDGET` bytes run as several jobs.
 */
import { getNumThreads } from '../../threads';
import type { WasmMemory } from '../../wasm/webassemblyTypes';
import type { GemmExports, GemmShape } from './gemmModule';
import type { OperandView } from './pack';
import { packFunctionName } from './packKernels';
import { Stager, TimedStager } from './packPlan';
import { gemmPhases } from './phases';

/**
 * What batched products use of the GEMM engine (`GemmEngine` implements it): declared here, so
 * this module sits below gemmEngine.ts, which calls it.
 */
export interface BatchEngine {
  readonly shape: GemmShape;
  /** Columns per B panel. */
  readonly nr: number;
  readonly memory: WasmMemory;
  readonly exports: GemmExports;
  /** Byte address of the bf16 output scratch of the current product; set here. */
  outScratch: number;
  /** Byte address where per-product scratch starts (past the regions callers reserved). */
  readonly floor: number;
  /** Whether a view lies in this memory (read in place, not staged). */
  holds(v: ArrayBufferView): boolean;
  /** Bytes moved (see `GemmEngine.traffic`). */
  readonly traffic: { stagedBytes: number; inPlaceBytes: number; resultInPlaceBytes: number };
  /** Grows the memory to hold at least `bytes` (`op` names the operation in the error). */
  ensure(bytes: number, op?: string): void;
  /** Runs the named packing kernel. */
  runPackKernel(fn: string, src: number, rs: number, ks: number, panels: number, k: number, kp: number, dst: number): void;
}

/** One operand's packing-kernel call, the same for every item but for the source address. */
export interface BatchPack {
  /** The packing kernel's export name (`packFunctionName`). */
  fn: string;
  /** Rows per panel, source element size in bytes. */
  R: number;
  esz: number;
  rs: number;
  ks: number;
  /** Panels packed per item (A's last one may hold don't-care rows past `rows`, see the file comment). */
  panels: number;
  /** Rows of the operand an item really has (the source span staging must cover). */
  rows: number;
  k: number;
}

/** A group of items for a runner: which items, where everything lives, and the sink. */
export interface BatchJob {
  packs: readonly [BatchPack, BatchPack];
  /** Byte address of thread t's pack area: `pk + t * pkStride`; its B panels start `bOff` bytes in. */
  pk: number;
  pkStride: number;
  bOff: number;
  /**
   * Byte address of item i's accumulator: `cp + i * cStride` (row stride `np` elements). On one
   * thread every item uses the first one (it stays in cache), unless `direct`: the accumulators
   * are the caller's destination, one per item.
   */
  cp: number;
  cStride: number;
  direct: boolean;
  /** Rows of C (the GEMM's row bound; A's packed panels may run past it). */
  mp: number;
  np: number;
  kp: number;
  items: number;
  /** Byte address of the item table: Int32 pairs (A source, B source), then `items` done flags. */
  table: number;
  /** Staging of the two operands (calling thread only); item i's sources end at `sourceEnd(job, o, i)`. */
  stagers: readonly [Stager, Stager];
  /** Takes item i's accumulator at byte address `c` (calling thread, items in increasing order). */
  sink: (item: number, c: number) => void;
}

/** Runs a batch job over several threads; false when it could not (the caller runs it alone). */
export type BatchRunner = (job: BatchJob) => boolean;

/**
 * Groups of items run item by item so far (`jobs`, `items`), of those on the thread pool
 * (`pooled`, `pooledItems`), and the pooled items that worker threads computed (`workerItems`;
 * the calling thread computed the rest), for tests and benchmarks.
 */
export const batchedStats = { jobs: 0, items: 0, pooled: 0, pooledItems: 0, workerItems: 0 };

/** Bytes of accumulators one job may hold (more items run as several jobs). */
const ACC_BUDGET = 16 << 20;
/** The most threads a runner may use (`applyThreads` caps the pool there too). */
const MAX_AREAS = 256;

/** The staging plans of the current batch's two operands (reused), and the same timing their copies for the phase timer. */
const stagers: [Stager, Stager] = [new Stager(), new Stager()];
const timedStagers: [TimedStager, TimedStager] = [new TimedStager(), new TimedStager()];
/** Operand placement of the current batch (reused). */
const placement: OperandPlacement = { srcA: 0, srcB: 0, inA: false, inB: false, end: 0 };

/** Where the packing kernels read a product's two operands (see `placeOperands`). */
export interface OperandPlacement {
  /** Byte addresses of the operands' first elements in the engine's memory. */
  srcA: number;
  srcB: number;
  /** Whether each is read where it lies (already in the engine's memory) rather than staged. */
  inA: boolean;
  inB: boolean;
  /** Byte address past the staged copies (64-aligned): where the product's scratch goes on. */
  end: number;
}

/**
 * Decides where the SIMD packing kernels read operands `a` and `b`: in place when the engine's
 * memory holds them (`holds`: an arena's views), else from a copy staged into the scratch from
 * byte address `at` up (A, then B, each 64-aligned); counts their bytes as read in place or
 * staged. An operand with `simdX` false is packed in TypeScript from its host array instead:
 * neither placed nor counted. Fills and returns `out` (no allocation).
 */
export function placeOperands(engine: BatchEngine, a: ArrayBufferView, b: ArrayBufferView, simdA: boolean, simdB: boolean, at: number, out: OperandPlacement): OperandPlacement {
  const t = engine.traffic;
  out.inA = simdA && engine.holds(a);
  out.inB = simdB && engine.holds(b);
  out.srcA = out.inA ? a.byteOffset : at;
  if (simdA && !out.inA) at = align(at + a.byteLength);
  out.srcB = out.inB ? b.byteOffset : at;
  if (simdB && !out.inB) at = align(at + b.byteLength);
  if (out.inA) t.inPlaceBytes += a.byteLength;
  else if (simdA) t.stagedBytes += a.byteLength;
  if (out.inB) t.inPlaceBytes += b.byteLength;
  else if (simdB) t.stagedBytes += b.byteLength;
  out.end = at;
  return out;
}

/**
 * Whether a staged one-pass operand packs with the SIMD kernel alone (no TypeScript edges);
 * `wholePanels`: its rows must fill whole panels (B: C's columns are written in whole panels).
 */
export function edgeFree(v: OperandView, R: number, kp: number, wholePanels: boolean): boolean {
  return v.rows > 0 && (!wholePanels || v.rows % R === 0) && kp === v.k && (v.rs === 1 || (v.ks === 1 && v.k % 4 === 0));
}

const align = (x: number): number => Math.ceil(x / 64) * 64;

/**
 * Runs the batch `a[aOffs[i]] x b[bOffs[i]]` (one pass of bf16 `HI` terms) item by item when the
 * operands qualify (see the file comment); returns false, having done nothing, when they do not.
 * `sink(i, c, ldc)` receives item i's accumulator (element offset in `engine.f32`, row stride),
 * valid until it returns; `engine.outScratch` is pointed past the accumulators for the sink's bf16
 * narrowing. `parallel` (the pool's batch runner, or null) runs groups of items on the pool when
 * the whole batch is worth a wake-up (`minWork` multiply-adds or more); each item must be below
 * that (see the file comment).
 */
export function runBatchedItems(
  engine: BatchEngine,
  a: OperandView,
  aOffs: readonly number[],
  b: OperandView,
  bOffs: readonly number[],
  flush: boolean,
  op: string,
  sink: (item: number, c: number, ldc: number) => void,
  parallel: BatchRunner | null,
  minWork: number,
  cAddr = -1,
): boolean {
  const items = aOffs.length;
  if (items < 2 || bOffs.length !== items) return false;
  const { mr, unroll } = engine.shape;
  const nr = engine.nr;
  const M = a.rows;
  const N = b.rows;
  const K = a.k;
  if (K === 0 || b.k !== K) return false;
  const mp = Math.ceil(M / mr) * mr;
  const np = Math.ceil(N / nr) * nr;
  const kp = Math.max(unroll, Math.ceil(K / unroll) * unroll);
  if (mp * np * kp >= minWork || !edgeFree(a, mr, kp, false) || !edgeFree(b, nr, kp, true)) return false;
  // A pack area per thread that may take items (the pool runs getNumThreads() threads).
  const areas = parallel ? Math.min(MAX_AREAS, getNumThreads()) : 1;
  const esA = a.bf16 ? 2 : 4;
  const esB = b.bf16 ? 2 : 4;
  // The caller's destination (`cAddr`, from `GemmEngine.resultTarget`) holds the items' accumulators itself.
  const direct = cAddr >= 0;
  // Accumulators of M rows (the kernel writes no padding rows) by np columns.
  const cStride = direct ? M * N * 4 : align(M * np * 4);
  const group = direct ? items : Math.max(1, Math.min(items, Math.floor(ACC_BUDGET / cStride)));
  const { srcA, srcB, inA, inB, end } = placeOperands(engine, a.bits, b.bits, true, true, engine.floor, placement);
  if (direct) engine.traffic.resultInPlaceBytes += items * M * N * 4;
  const table = end;
  const bOff = align(mp * kp * 4);
  const pkStride = align(bOff + np * kp * 4);
  const pk = align(table + 12 * group);
  const cp = pk + areas * pkStride;
  const out = direct ? cp : cp + group * cStride;
  engine.ensure(out + M * N * 2, op);
  engine.outScratch = out;
  const buf = engine.memory.buffer;
  // The phase timer swaps in stagers and a sink that time themselves: no clock reads per item.
  const timed = gemmPhases.enabled;
  const st = timed ? timedStagers : stagers;
  st[0].reset(buf, engine.floor);
  if (!inA) st[0].add(a.bits, srcA);
  st[1].reset(buf, engine.floor);
  if (!inB) st[1].add(b.bits, srcB);
  const packs: [BatchPack, BatchPack] = [
    { fn: packFunctionName(a.rs === 1 ? 'rc' : 'kc', mr, a.bf16, flush), R: mr, esz: esA, rs: a.rs, ks: a.ks, panels: mp / mr, rows: M, k: K },
    { fn: packFunctionName(b.rs === 1 ? 'rc' : 'kc', nr, b.bf16, flush), R: nr, esz: esB, rs: b.rs, ks: b.ks, panels: N / nr, rows: N, k: K },
  ];
  const tab = new Int32Array(buf, table, 3 * group);
  const pool = parallel !== null && items * mp * np * kp >= minWork;
  for (let g0 = 0; g0 < items; g0 += group) {
    const n = Math.min(group, items - g0);
    for (let i = 0; i < n; i++) {
      tab[2 * i] = srcA + aOffs[g0 + i] * esA;
      tab[2 * i + 1] = srcB + bOffs[g0 + i] * esB;
      tab[2 * n + i] = 0;
    }
    const handOver = (i: number, c: number): void => sink(g0 + i, c / 4, np);
    const job: BatchJob = { packs, pk, pkStride, bOff, cp: direct ? cAddr + g0 * cStride : cp, cStride, direct, mp: M, np, kp, items: n, table, stagers: st, sink: timed ? timedSink(handOver) : handOver };
    batchedStats.jobs++;
    batchedStats.items += n;
    const t0 = timed ? startTiming() : 0;
    if (pool && parallel(job)) {
      batchedStats.pooled++;
      batchedStats.pooledItems += n;
    } else {
      runItemsAlone(engine, job);
      if (timed) addItemPhases(n, t0);
    }
  }
  return true;
}

/** Time the phase timer's sink wrapper measured since `startTiming` (ms). */
let sinkMs = 0;

function timedSink(sink: (i: number, c: number) => void): (i: number, c: number) => void {
  return (i, c) => {
    const t = performance.now();
    sink(i, c);
    sinkMs += performance.now() - t;
  };
}

function startTiming(): number {
  sinkMs = 0;
  timedStagers[0].ms = 0;
  timedStagers[1].ms = 0;
  return performance.now();
}

/** Adds a group of `items` run alone since `t0` to the phase sums: staging, then packing and kernel together (`gemm`), then the sink. */
function addItemPhases(items: number, t0: number): void {
  const total = performance.now() - t0;
  const stage = timedStagers[0].ms + timedStagers[1].ms;
  gemmPhases.products += items;
  gemmPhases.stage += stage;
  gemmPhases.sink += sinkMs;
  gemmPhases.gemm += total - stage - sinkMs;
}

/** Packs and multiplies item `i` of `job` in pack area `area` into the accumulator at byte address `c`. */
export function runItem(engine: BatchEngine, job: BatchJob, i: number, area: number, tab: Int32Array, c: number): void {
  const [pa, pb] = job.packs;
  const ap = job.pk + area * job.pkStride;
  const bp = ap + job.bOff;
  engine.runPackKernel(pa.fn, tab[2 * i], pa.rs, pa.ks, pa.panels, pa.k, job.kp, ap);
  engine.runPackKernel(pb.fn, tab[2 * i + 1], pb.rs, pb.ks, pb.panels, pb.k, job.kp, bp);
  engine.exports.gemm(ap, bp, c, job.mp, job.np, job.kp, 0, job.mp, 0, job.np);
}

/** Byte address just past the last source element of operand `o` of an item starting at `src` (its real rows). */
export function sourceEnd(job: BatchJob, o: 0 | 1, src: number): number {
  const p = job.packs[o];
  return src + ((p.rows - 1) * p.rs + (p.k - 1) * p.ks + 1) * p.esz;
}

/**
 * Runs every item of `job` on the calling thread, all in the first accumulator, each handed to
 * the sink right after it is computed (one accumulator stays in cache; one per item would not).
 */
function runItemsAlone(engine: BatchEngine, job: BatchJob): void {
  const tab = new Int32Array(engine.memory.buffer, job.table, 2 * job.items);
  const [sa, sb] = job.stagers;
  for (let i = 0; i < job.items; i++) {
    // Stage each operand only as far as this item reads (its source then is still in cache).
    sa.to(sourceEnd(job, 0, tab[2 * i]));
    sb.to(sourceEnd(job, 1, tab[2 * i + 1]));
    const c = job.direct ? job.cp + i * job.cStride : job.cp;
    runItem(engine, job, i, 0, tab, c);
    job.sink(i, c);
  }
}
