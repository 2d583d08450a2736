/**
 * The GEMM engine: owns the WebAssembly memory the kernels work in, compiles the generated GEMM
 * module once per configuration (relaxed or plain SIMD), and runs one MXU-style matrix product:
 * pack both operands (bf16 rounding, multi-pass splitting), multiply, and hand back the padded f32
 * accumulator. The memory is shared when the runtime supports threads, so the worker pool
 * (`threads.ts`) can pack and multiply parts of the same product on the same buffers.
 *
 * Layout of the memory: [ 64 bytes | regions reserved by `reserve` (a compiler's arena) |
 * per-product scratch from `floor` up ]. A shared memory's views never go stale when it grows
 * (its buffer only gets longer), so a reserved region stays valid at a fixed address for as
 * long as it is held; operands that lie in this memory (`holds`, e.g. views of an arena) are
 * packed in place instead of being staged (copied) into the scratch first.
 */
import * as bf16 from '../../bf16';
import { doubleCounters } from '../../counters';
import { wasmFeatures } from '../../wasm/features';
import { WA, type WasmMemory } from '../../wasm/webassemblyTypes';
import { GEMM_SHAPE_4X8, GEMM_SHAPE_5X8, type GemmExports, type GemmShape, buildGemmModule } from './gemmModule';
import { tuneGemmShape } from './gemmTune';
import { type BatchEngine, type BatchRunner, edgeFree, type OperandPlacement, placeOperands, runBatchedItems } from './batched';
import { HI, type OperandView, packOperand } from './pack';
import { packFunctionName, touchArgs } from './packKernels';
import { type PackJob, Stager, TimedStager, chunkCall, planPackJob } from './packPlan';
import { gemmPhases, phaseClock, shapePhases } from './phases';
import { viewsOverlap } from '../../dtype';
import { envSwitch, envVar } from '../../env';
import { getNumThreads } from '../../threads';

/** Memory ceiling: 2 GiB keeps every address a positive i32. */
export const MAX_PAGES = 32768;

/**
 * Everything one product needs, for a runner that spreads it over threads: the staging of the
 * host operands (`stager`, calling thread only: the host arrays are not shared memory), the
 * TypeScript packing (`hostPack`, calling thread only), the SIMD packing kernels (`packs`, in
 * chunks that may run once staging has passed their source), the TypeScript edges that must
 * follow the kernels (`edges`, calling thread), then the GEMM over `args`. `overlap` (optional)
 * is calling-thread work the runner does while the other threads multiply (such as allocating
 * the output, see `batchedProduct`).
 */
export interface ParallelJob {
  args: GemmArgs;
  stager: Stager;
  hostPack: () => void;
  packs: readonly PackJob[];
  edges: () => void;
  overlap?: () => void;
  /**
   * Optional: takes output rows [r0, r1) of the accumulator (padded row indices, in increasing
   * order, each row once) as soon as they are final, so the runner can copy them out while other
   * threads still multiply.
   */
  rows?: (r0: number, r1: number) => void;
  /**
   * Optional (never with `rows`): A's packing, left out of `packs`, to be done one MC row block
   * at a time by the thread that then multiplies that block (`GemmEngine.rowBlocks`): thread t
   * packs its blocks at `args.ap + t * mc * kp * 4`; the packed area holds `aRows` rows.
   */
  rowBlockA?: PackJob;
  aRows?: number;
  /**
   * Optional (never with `rowBlockA`): the product may run one K block at a time (`KBlockJob`;
   * `packs` is then the fallback of a runner that cannot).
   */
  kBlocks?: KBlockJob;
}

/**
 * A product of two 'rc' operands read in place (whole column panels, K unpadded; A's rows whole
 * panels, or a partial last one its packing call `a` packs whole, see `simdPanels`, whose
 * missing rows the runner zeroes) that a runner packs and
 * multiplies one K block of `kc` at a time (the thread pool's version of `GemmEngine.kBlocks`):
 * `a` and `b` are the whole operands' packing calls (their `dst` unused); K block pc's packed
 * blocks go to `args.ap` and `args.bp` for even pc and one block further for odd pc (panel stride
 * kc * R * 4), so A's and B's packed areas must hold two blocks each.
 */
export interface KBlockJob {
  a: PackJob;
  b: PackJob;
  kc: number;
}

/** Runs one product over several threads; false when it could not (the caller runs it alone). */
export type ParallelRunner = (job: ParallelJob) => boolean;

/**
 * Runs independent products as one pool job (threads.ts `runGroup`): `accepts` says whether a
 * product's job can be one of them (K-blocked or row-block, see `GemmEngine.beginGroup`), `run`
 * computes them all (on the calling thread alone when the workers cannot start).
 */
export interface GroupRunner {
  /** Products one group job holds at most; a group's further products make the held ones run first. */
  readonly max: number;
  accepts(job: ParallelJob): boolean;
  run(jobs: readonly ParallelJob[]): void;
  /** `run` in two halves: `start` wakes the workers on the products and returns; `join` computes what they left and waits for them. */
  start(jobs: readonly ParallelJob[]): void;
  join(): void;
}

export interface GemmArgs {
  ap: number;
  bp: number;
  cp: number;
  /** Rows of C (the GEMM's row bound: A's packed panels are zero-padded past it to a multiple of MR, C is not). */
  mp: number;
  np: number;
  kp: number;
}

/** Bytes moved to get operands to the packing kernels since the engine started (for benchmarks and tests). */
export interface OperandTraffic {
  /** Bytes copied from host arrays into wasm memory (staged). */
  stagedBytes: number;
  /** Bytes read in place: operands that already lay in the engine's memory (`GemmEngine.holds`). */
  inPlaceBytes: number;
  /** Bytes of results the GEMM wrote straight into a destination in its memory (no copy out of its accumulator). */
  resultInPlaceBytes: number;
  /** One-thread products whose A was packed by row blocks (`GemmEngine.rowBlocks`). */
  rowBlockedProducts: number;
  /** Products the thread pool ran as a row-block job (each thread packing the A rows it multiplies, `ParallelJob.rowBlockA`). */
  poolRowBlockJobs: number;
  /** Packing calls (chunks or row blocks) whose in-place source was swept first (`touchInPlace`), on any thread. */
  sweptChunks: number;
  /** Group jobs the thread pool ran (`GemmEngine.beginGroup`), and the products in them. */
  groupJobs: number;
  groupProducts: number;
  /** One-thread products packed one K block at a time inside the kernel's loops (`GemmEngine.kBlocks`). */
  kBlockedProducts: number;
  /** Products the thread pool ran one K block at a time (`ParallelJob.kBlocks`). */
  kBlockedPoolJobs: number;
  /** Partial last panels the SIMD kernel packed, reading the rows past an operand in place (`simdPanels`). */
  simdPartialPanels: number;
}

export class GemmEngine implements BatchEngine {
  readonly memory: WasmMemory;
  readonly shape: GemmShape;
  readonly relaxed: boolean;
  readonly shared: boolean;
  readonly bytes: Uint8Array;
  readonly exports: GemmExports;
  private readonly packFns: Record<string, (src: number, rs: number, ks: number, panels: number, k: number, kp: number, dst: number) => void>;
  private u32View: Uint32Array;
  private f32View: Float32Array;
  /** Byte address of the bf16 output scratch of the current product (`narrowToBf16`); set by whoever lays out the memory (here, `batched.ts`). */
  outScratch = 0;
  /** Set by the thread pool: runs a product (packing included) over several threads. */
  parallel: ParallelRunner | null = null;
  /** Set by the thread pool: runs a batch of small products over several threads, split by item (`batched.ts`). */
  parallelBatch: BatchRunner | null = null;
  /** Set by the thread pool: runs independent products as one job (`beginGroup`). */
  parallelGroup: GroupRunner | null = null;
  /** The products deferred since `beginGroup` (null: no group open), and where the next one's scratch starts. */
  private groupJobs: ParallelJob[] | null = null;
  private groupFloor = 0;
  /** The runner of the group `startGroup` started and `joinGroup` has not joined (null: none). */
  private startedGroup: GroupRunner | null = null;
  /** Byte ranges of the deferred products: per product, A's, B's and C's [start, end). */
  private readonly groupRanges: number[] = [];
  /** Staging plan of the current product (reused), and the same timing its copies for the phase timer. */
  private readonly stager = new Stager();
  private readonly timedStager = new TimedStager();
  /** Operand placement of the current product (reused). */
  private readonly placement: OperandPlacement = { srcA: 0, srcB: 0, inA: false, inB: false, end: 0 };
  /** Kernel arguments of one packing chunk (reused). */
  private readonly call: number[] = [0, 0, 0, 0, 0, 0, 0];
  /** Arguments of one `touch_rows` call (reused). */
  private readonly touchCall: number[] = [0, 0, 0, 0];
  /**
   * Whether operands read in place are swept before they are packed (`PackJob.touch`): on by
   * default; `TPUKIT_GEMM_TOUCH=0` in the environment turns it off (an A/B switch for
   * benchmarks: the packed bits are the same either way).
   */
  touchInPlace = envSwitch('TPUKIT_GEMM_TOUCH', true);
  /**
   * Whether the sweep (`touchInPlace`) also covers 'kc' operands (k contiguous: each packing call
   * reads whole rows in address order, which the hardware prefetcher may stream by itself while
   * the kernel converts and shuffles). On by default; `TPUKIT_GEMM_TOUCH_KC=0` sweeps 'rc'
   * operands only (an A/B switch: the same bits either way). Alone, a 'kc' call with the sweep
   * took 12-28% longer than without it with the source in L3, and 8.5% and 13.5% longer in two
   * pairs from DRAM (bench/packCost.ts), but in the GPT step (phase timer, load 8) three of its
   * four 'kc' shapes packed no faster without it (BENCHMARKS.md, pack16).
   */
  touchKc = envSwitch('TPUKIT_GEMM_TOUCH_KC', true);
  /**
   * Whether one-thread products pack an in-place A block by block (`rowBlocks`): on by default;
   * `TPUKIT_GEMM_BLOCK_ROWS=0` in the environment turns it off (an A/B switch for benchmarks: the
   * results are the same bits either way).
   */
  blockRows = envSwitch('TPUKIT_GEMM_BLOCK_ROWS', true);
  /**
   * The same on the thread pool: each thread packs the row blocks of A it then multiplies
   * (`ParallelJob.rowBlockA`, blocks of `poolRowBlockRows`) instead of all threads packing A whole
   * and then taking tiles. On by default: on two threads it took 3-7% less CPU than the tiles for
   * the GPT's in-place 'kc' products (BENCHMARKS.md, gemm7); `TPUKIT_GEMM_BLOCK_ROWS_POOL=0` turns
   * it off (an A/B switch for benchmarks: the same bits either way).
   */
  blockRowsPool = envSwitch('TPUKIT_GEMM_BLOCK_ROWS_POOL', true);
  /**
   * Whether one-thread products of two in-place 'rc' operands with several K blocks (the weight
   * gradients) pack each K block of both operands right before the kernel multiplies it
   * (`kBlocks`): on by default; `TPUKIT_GEMM_K_BLOCKS=0` in the environment turns it off (an A/B
   * switch for benchmarks: the results are the same bits either way).
   */
  blockK = envSwitch('TPUKIT_GEMM_K_BLOCKS', true);
  /**
   * The same on the thread pool (`ParallelJob.kBlocks`): every thread packs and multiplies K block
   * by K block, instead of packing both operands whole and then splitting C into tiles over the
   * whole K. On by default (with `blockK`); `TPUKIT_GEMM_K_BLOCKS_POOL=0` turns it off (an A/B
   * switch for benchmarks: the same bits either way).
   */
  blockKPool = envSwitch('TPUKIT_GEMM_K_BLOCKS_POOL', true);
  /** Phase timer only: how long packing A and packing B took in the current product (ms). */
  private readonly packMs: number[] = [0, 0];
  /** Regions held by `reserve`, in address order (byte address, bytes). */
  private readonly regions: { addr: number; bytes: number }[] = [];
  /** Every buffer object this memory has handed out (see `holds`). */
  private readonly buffers = new WeakSet<ArrayBufferLike>();
  private lastBuffer: ArrayBufferLike | null = null;
  // (doubles from the start: the byte counts pass 2^31 within a training run, see doubleCounters)
  readonly traffic: OperandTraffic = doubleCounters({ stagedBytes: 0, inPlaceBytes: 0, resultInPlaceBytes: 0, rowBlockedProducts: 0, poolRowBlockJobs: 0, sweptChunks: 0, kBlockedProducts: 0, kBlockedPoolJobs: 0, groupJobs: 0, groupProducts: 0, simdPartialPanels: 0 });
  readonly maxPages = MAX_PAGES;

  constructor({ relaxed, shape }: { relaxed: boolean; shape?: GemmShape }) {
    const f = wasmFeatures();
    if (!f.simd) throw new Error('systolic: this WebAssembly runtime has no SIMD128; the systolic backend needs it');
    if (relaxed && !f.relaxedSimd) throw new Error('systolic: relaxed SIMD was requested but this runtime does not support it');
    shape ??= gemmKernelChoice(relaxed).shape;
    this.shape = shape;
    this.relaxed = relaxed;
    this.shared = f.threads;
    this.memory = new WA.Memory({ initial: 16, maximum: MAX_PAGES, shared: this.shared });
    this.bytes = buildGemmModule({ shape, relaxed, shared: this.shared, maxPages: MAX_PAGES, packNanPass: envSwitch('TPUKIT_GEMM_PACK_NAN_PASS', true) });
    const mod = new WA.Module(this.bytes);
    const ex = new WA.Instance(mod, { env: { mem: this.memory } }).exports;
    this.exports = ex as unknown as GemmExports;
    this.packFns = ex as unknown as GemmEngine['packFns'];
    this.u32View = new Uint32Array(this.buffer());
    this.f32View = new Float32Array(this.buffer());
  }

  /** The memory's current buffer, remembered so that views over it are recognised by `holds`. */
  buffer(): ArrayBufferLike {
    const b = this.memory.buffer;
    if (b !== this.lastBuffer) {
      this.buffers.add(b);
      this.lastBuffer = b;
    }
    return b;
  }

  /**
   * Whether `v` is a view of this engine's (shared) memory, taken through `buffer()`, below the
   * products' scratch (in reserved regions): products then read it in place (its byte offset
   * is its address) instead of staging a copy, and write a destination there directly.
   */
  holds(v: ArrayBufferView): boolean {
    if (!this.shared || !this.buffers.has(v.buffer)) return false;
    // Inside one reserved region (not a released gap, where a caller's per-call scratch may land).
    const regions = this.regions;
    let lo = 0;
    let hi = regions.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = regions[mid];
      if (v.byteOffset < r.addr) hi = mid - 1;
      else if (v.byteOffset >= r.addr + r.bytes) lo = mid + 1;
      else return v.byteOffset + v.byteLength <= r.addr + r.bytes;
    }
    return false;
  }

  /** Byte address where per-product scratch starts: the end of the reserved regions (kept sorted and disjoint). */
  get floor(): number {
    const last = this.regions[this.regions.length - 1];
    return last ? last.addr + last.bytes : 64;
  }

  /**
   * Reserves `bytes` of the engine's memory for a caller (a compiler's arena that the GEMM then
   * reads operands from in place): returns the region's byte address (64-aligned), fixed until
   * `release`; growth never moves or invalidates it (the memory is shared). Returns -1 when the
   * memory cannot hold it (its 2 GiB limit, with room left for products). Shared memory only.
   */
  reserve(bytes: number): number {
    if (this.startedGroup) this.refuseWhileStarted(`a reservation of ${bytes} bytes`);
    if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new RangeError(`systolic reserve: bytes must be a positive integer; got ${bytes}`);
    if (!this.shared) throw new Error('systolic reserve: the GEMM memory is not shared on this runtime (no WebAssembly threads), so it cannot hold a caller\'s arena');
    const size = align(bytes);
    let at = 64;
    let k = 0;
    for (; k < this.regions.length; k++) {
      if (this.regions[k].addr - at >= size) break;
      at = this.regions[k].addr + this.regions[k].bytes;
    }
    // Leave at least a quarter of the memory's limit to products.
    if (at + size > (MAX_PAGES * 65536 * 3) / 4) return -1;
    this.regions.splice(k, 0, { addr: at, bytes: size });
    this.ensure(this.floor, 'reserve');
    return at;
  }

  /** Releases a region from `reserve` (its memory may be handed out again). */
  release(addr: number): void {
    let k = this.regions.length - 1;
    while (k >= 0 && this.regions[k].addr !== addr) k--; // (a loop, not a closure per call: see BENCHMARKS.md, bgc)
    if (k < 0) throw new RangeError(`systolic release: no region is reserved at address ${addr}`);
    this.regions.splice(k, 1);
  }

  get mr(): number {
    return this.shape.mr;
  }
  get nr(): number {
    return this.shape.nv * 4;
  }

  /** Grows the memory to hold at least `bytes`; refreshes the views. */
  ensure(bytes: number, op = 'dot_general'): void {
    const have = this.memory.buffer.byteLength;
    if (bytes > have) {
      const pages = Math.ceil((bytes - have) / 65536);
      if (have / 65536 + pages > MAX_PAGES) {
        throw new RangeError(`${op}: the packed operands need ${(bytes / 2 ** 20).toFixed(0)} MiB of WebAssembly memory; the systolic backend's limit is ${MAX_PAGES / 16} MiB (split the product, e.g. over a batch dimension)`);
      }
      this.memory.grow(pages);
    }
    const buf = this.buffer();
    if (this.u32View.buffer !== buf || this.u32View.length * 4 !== buf.byteLength) {
      this.u32View = new Uint32Array(buf);
      this.f32View = new Float32Array(buf);
    }
  }

  get u32(): Uint32Array {
    return this.u32View;
  }
  get f32(): Float32Array {
    return this.f32View;
  }

  /**
   * Runs a batch of products C_b[M,N] = sum_k A_b[m,k] B_b[k,n] with MXU numerics. `compsA[i]`
   * and `compsB[i]` name the bf16 terms multiplied in pass i. For each batch element `sink`
   * receives the padded accumulator's element offset in `f32` and its row stride, valid until
   * the sink returns.
   *
   * One-pass products of operands with a unit stride (every plain or transposed matmul) copy
   * the operands into wasm memory and pack them with the SIMD kernels; the rest pack in
   * TypeScript from the host arrays.
   *
   * `prepare` (optional) is work the sink can use but need not, such as allocating and
   * touching the output array: with a thread pool the calling thread does it while the workers
   * multiply (the first product of a batch only); without one it is not called.
   *
   * `rowsReady` (optional, first product of a batch, thread pool only) receives accumulator rows
   * [r0, r1) (r1 <= M) as soon as they are final, in increasing order, before the sink is
   * called for that product; the sink then only needs the rows it was not given. (One thread
   * hands over nothing early: an epilogue run over each MC row block between the kernel's
   * blocks measured 0.5-3% slower per product than after it; BENCHMARKS.md, epiband.)
   *
   * `cAddr` (optional): the byte address from `resultTarget` of the caller's destination of all
   * the products, [batch, M, N]; each product's C is then written there directly (the sink gets
   * `c * 4 === cAddr + batch * M * N * 4` and finds the result in place).
   */
  batchedProduct(
    a: OperandView,
    aOffs: readonly number[],
    b: OperandView,
    bOffs: readonly number[],
    compsA: readonly number[],
    compsB: readonly number[],
    flush: boolean,
    op: string,
    sink: (batch: number, c: number, ldc: number) => void,
    prepare?: () => void,
    rowsReady?: (c: number, ldc: number, r0: number, r1: number) => void,
    cAddr = -1,
  ): void {
    if (this.startedGroup) this.refuseWhileStarted(op);
    // A batch of products the SIMD kernels pack whole: item by item, over the pool's threads.
    if (this.groupJobs && aOffs.length > 1) this.flushGroup();
    if (compsA.length === 1 && compsB.length === 1 && runBatchedItems(this, a, aOffs, b, bOffs, flush, op, sink, this.parallelBatch, PARALLEL_MIN_WORK, cAddr)) return;
    const { mr, unroll } = this.shape;
    const nr = this.nr;
    const M = a.rows;
    const N = b.rows;
    const K = a.k;
    const mp = Math.ceil(M / mr) * mr;
    const np = Math.ceil(N / nr) * nr;
    const kp = Math.max(unroll, Math.ceil((compsA.length * K) / unroll) * unroll);
    const onePass = compsA.length === 1;
    const simdA = onePass && (a.rs === 1 || a.ks === 1);
    const simdB = onePass && (b.rs === 1 || b.ks === 1);
    // The SIMD kernels pack an operand where it lies in this memory (an arena's view) or from
    // a staged copy in the scratch; the others are packed in TypeScript from their host arrays.
    // (in a group, each deferred product keeps its scratch: the next one is laid out past it)
    const floor = this.groupJobs ? this.groupFloor : this.floor;
    const { srcA, srcB, inA, inB, end } = placeOperands(this, a.bits, b.bits, simdA, simdB, floor, this.placement);
    const ap = end;
    // A read in place may be packed by row blocks (`rowBlocks`); on the pool each thread packs
    // its blocks into its own part of A's packed area, so the area holds a block per thread.
    const blockA = simdA && inA && this.blockRows && this.rowBlocks(a, M, kp);
    const aRows = blockA && this.blockRowsPool && this.parallel ? Math.max(mp, getNumThreads() * this.shape.mc) : mp;
    const bp = align(ap + aRows * kp * 4);
    const direct = cAddr >= 0;
    const cp = direct ? cAddr : align(bp + np * kp * 4);
    // C has M rows (the kernel writes no padding rows), np columns.
    this.outScratch = align(direct ? bp + np * kp * 4 : cp + M * np * 4);
    if (direct) this.traffic.resultInPlaceBytes += aOffs.length * M * N * 4;
    this.ensure(this.outScratch + M * N * 2, op);
    const buf = this.memory.buffer;
    // The staged operands are read through views of the whole memory: the packing addresses
    // elements from the memory's start. The copying itself is planned by the stager and done
    // chunk by chunk, interleaved with the packing (see packPlan.ts); the phase timer swaps in
    // a stager that times its copies (no clock reads in the loop below).
    const timed = gemmPhases.enabled;
    const stager = timed ? this.timedStager : this.stager;
    stager.reset(buf, floor);
    const whole = (v: OperandView): OperandView => ({ ...v, bits: v.bf16 ? new Uint16Array(buf) : this.u32View });
    if (simdA && !inA) stager.add(a.bits, srcA);
    if (simdB && !inB) stager.add(b.bits, srcB);
    const wa = simdA ? whole(a) : a;
    const wb = simdB ? whole(b) : b;
    const u32 = this.u32View;
    const args = { ap, bp, cp, mp: M, np, kp };
    const big = mp * np * kp >= PARALLEL_MIN_WORK;
    // Packing is split into chunks for the pool's threads; a product the calling thread runs
    // alone packs each operand in as few kernel calls as its cache blocking allows.
    const minChunks = big && this.parallel ? MIN_PACK_CHUNKS : 1;
    // Both operands read in place by K blocks on the pool too (see `KBlockJob`).
    // (both operands SIMD-packed and read in place, in K blocks that fit: on one thread or the pool)
    const kBlockable = simdA && simdB && inA && inB && this.kBlocks(a, b, M, N, kp);
    // (the pool's K-blocked job and row-block job take A's partial last row panel only where the
    // SIMD kernel packs it whole, `simdPanels`: checked per product below)
    const poolKBlocks = big && this.parallel !== null && this.blockKPool && kBlockable;
    // A product a group may defer: one product, packed by the SIMD kernels alone (no TypeScript
    // packing or edges; A's partial last panel, packed whole by the SIMD kernel, is zeroed by the
    // pool job that packs A), C written straight into its destination, nothing asked of the
    // calling thread meanwhile. (Operands not read in place are staged when it is deferred.)
    const groupFree = this.groupJobs !== null && aOffs.length === 1 && direct && simdA && simdB && prepare === undefined && rowsReady === undefined && edgeFree(a, mr, kp, false) && edgeFree(b, nr, kp, true);
    const call = this.call;
    for (let bi = 0; bi < aOffs.length; bi++) {
      const jobA = simdA ? this.packJob(wa, srcA, aOffs[bi], mr, kp, flush, ap, minChunks, inA, inA ? floor : 0) : null;
      const jobB = simdB ? this.packJob(wb, srcB, bOffs[bi], nr, kp, flush, bp, minChunks, inB, inB ? floor : 0) : null;
      // Whether the SIMD kernel packs all of A's rows, a partial last panel included (`simdPanels`):
      // then the pool's jobs that pack A themselves (by K blocks, by row blocks) may take it.
      const aWhole = jobA !== null && jobA.args[3] * mr >= M;
      // (set once the pool runs A's packing by row blocks: no edges of A then, see `rowBlock`)
      let aByPoolBlocks = false;
      const hostPack = (): void => {
        if (!simdA) packOperand(a, aOffs[bi], mr, compsA, kp, flush, u32, ap / 4);
        if (!simdB) packOperand(b, bOffs[bi], nr, compsB, kp, flush, u32, bp / 4);
      };
      const edges = (): void => {
        // (a K-blocked product packs A's partial panel per K block, in `gemmKBlocks`)
        // (as does a row-blocked one, its partial last panel in `rowBlock`)
        // (and a pool row-block job in `rowBlockLoop` / `rowBlock`)
        if (jobA && !kBlocked && !blocked && !aByPoolBlocks) this.packEdges(wa, srcA, aOffs[bi], mr, kp, flush, ap, jobA.args[3]);
        if (jobB) this.packEdges(wb, srcB, bOffs[bi], nr, kp, flush, bp, jobB.args[3]);
      };
      const packs = jobA && jobB ? [jobA, jobB] : jobA ? [jobA] : jobB ? [jobB] : [];
      // With a thread pool, the calling thread stages while the others pack the chunks already
      // staged; then every thread packs, then takes GEMM tiles from a shared counter.
      // A destination takes the products one after another; a scratch accumulator is reused.
      if (direct) args.cp = cAddr + bi * M * N * 4;
      const c = args.cp;
      const rows = bi === 0 && rowsReady ? (r0: number, r1: number): void => {
        if (Math.min(r1, M) > r0) rowsReady(c / 4, np, r0, Math.min(r1, M));
      } : undefined;
      const t0 = phaseClock();
      let t1 = t0;
      let t2 = t0;
      let alone = false;
      let blocked = false;
      let kBlocked = false;
      let tp = t0; // (phase timer: when the last up-front packing ended)
      const kbJob = poolKBlocks && jobA && jobB && aWhole ? { a: jobA, b: jobB, kc: K_BLOCK_KC } : null;
      const job = big && this.parallel ? this.parallelJob(args, stager, hostPack, packs, edges, bi === 0 ? prepare : undefined, rows, blockA && aWhole ? jobA : null, jobB, aRows, kbJob) : null;
      aByPoolBlocks = job?.rowBlockA !== undefined;
      // In a group (`beginGroup`), a product that needs nothing from this thread but its kernels runs later, with the others.
      if (this.groupJobs) {
        if (job && groupFree && aWhole && this.defer(job, srcA, a.bits.byteLength, srcB, b.bits.byteLength, c, M * N * 4)) {
          stager.to(stager.end);
          sink(bi, c / 4, np);
          continue;
        }
        // (a product that runs now may overwrite what a deferred one reads: those run first)
        this.flushGroup();
      }
      if (!(job && this.parallel!(job))) {
        alone = true;
        hostPack();
        // A read in place is packed block by block, each just before it is multiplied (see `rowBlocks`).
        blocked = blockA && jobA !== null;
        if (blocked) this.traffic.rowBlockedProducts++;
        // Both operands read in place by K blocks inside the kernel's loops (see `kBlocks`).
        kBlocked = !blocked && kBlockable;
        if (kBlocked) this.traffic.kBlockedProducts++;
        this.packMs[0] = 0;
        this.packMs[1] = 0;
        tp = t0;
        // One thread: copy a chunk, pack it while its source is still in cache.
        for (let p = 0; p < packs.length; p++) {
          const j = packs[p];
          if ((blocked && j === jobA) || kBlocked) continue;
          const fn = this.packFns[j.fn];
          for (let i = 0; i < j.chunks; i++) {
            stager.to(chunkCall(j, i, call));
            if (j.touch) this.touchChunk(call, j.R, j.esz);
            fn(call[0], call[1], call[2], call[3], call[4], call[5], call[6]);
          }
          if (timed) {
            const now = phaseClock();
            this.packMs[j === jobA ? 0 : 1] = now - tp;
            tp = now;
          }
        }
        stager.to(stager.end);
        edges();
        t1 = phaseClock();
        if (blocked && jobA) this.gemmRowBlocks(jobA, wa, flush, ap, bp, c, M, np, kp, timed);
        else if (kBlocked && jobA && jobB) this.gemmKBlocks(jobA, jobB, wa, flush, ap, c, M, np, kp, timed);
        else this.exports.gemm(ap, bp, c, M, np, kp, 0, M, 0, np);
        t2 = phaseClock();
      }
      sink(bi, c / 4, np);
      if (timed && alone) {
        const t3 = phaseClock();
        const [packA, packB] = this.packMs;
        // (A's packing, or both operands', ran between the kernel's blocks)
        const inGemm = blocked ? packA : kBlocked ? packA + packB : 0;
        gemmPhases.products++;
        gemmPhases.stage += this.timedStager.ms;
        this.timedStager.ms = 0; // (a batch stages everything with its first product)
        gemmPhases.pack += t1 - t0 + inGemm;
        gemmPhases.gemm += t2 - t1 - inGemm;
        gemmPhases.sink += t3 - t2;
        const sp = shapePhases(this.shapeKey(a, b, simdA, simdB, direct));
        sp.products++;
        sp.packA += packA;
        sp.packB += packB;
        sp.edges += t1 - tp;
        sp.gemm += t2 - t1 - inGemm;
        sp.sink += t3 - t2;
      }
    }
  }

  /**
   * Opens a group of independent products: until `endGroup`, each product the pool would run as
   * a K-blocked or row-block job and that needs nothing from the calling thread but its kernels
   * (SIMD-packed operands with whole panels, or A's partial last one packed whole by its SIMD
   * kernel and zeroed by the job, result written into its destination in this
   * memory) is laid out in its own scratch, its operands staged there unless read in place,
   * and deferred (its sink sees the destination, not yet written); other products run at once
   * as before. `endGroup(true)` then runs the deferred
   * ones as one pool job (`GroupRunner`): one wake-up, each thread claiming whole products,
   * largest first, then sharing what is left. Returns false (nothing opened: run the products one by one) without a thread pool.
   * The products must be independent: none reads another's destination.
   */
  beginGroup(): boolean {
    if (this.startedGroup) this.refuseWhileStarted('a new group');
    if (this.groupJobs) throw new Error('dot_general group: a group is already open on this GEMM engine (endGroup first)');
    if (!this.parallel || !this.parallelGroup) return false;
    this.groupJobs = [];
    this.groupFloor = this.floor;
    return true;
  }

  /**
   * Closes the group of `beginGroup` like `endGroup(true)`, but only starts its deferred products
   * (the workers claim them at once, `GroupRunner.start`) and returns: the calling thread may do
   * independent work that uses neither this engine nor a thread pool, then calls `joinGroup`,
   * which computes what the workers left and waits for them. Until then the products' operands
   * and scratch must stay as they are, and every product, `beginGroup` and `reserve` on this
   * engine throws. Returns whether products were started (false: nothing to join, they ran).
   */
  startGroup(): boolean {
    if (!this.groupJobs) return false;
    const jobs = this.groupJobs;
    const runner = this.parallelGroup;
    this.groupJobs = null;
    this.groupRanges.length = 0;
    if (jobs.length === 0) return false;
    if (!runner) throw new Error('dot_general group: the thread pool was removed while a group was open');
    runner.start(jobs); // (read at once: the job's description lives in the pool's control block)
    this.startedGroup = runner;
    return true;
  }

  /** Whether products were started by `startGroup` and not yet joined. */
  get groupStarted(): boolean {
    return this.startedGroup !== null;
  }

  /** Joins the products `startGroup` started (see there); nothing when none were started. */
  joinGroup(): void {
    const runner = this.startedGroup;
    if (!runner) return;
    this.startedGroup = null;
    runner.join();
  }

  /** Throws: `what` was asked of this engine while a started group runs (`startGroup`). */
  refuseWhileStarted(what: string): never {
    throw new Error(`dot_general group: ${what} asked for while a started group of products runs on this engine's threads (joinGroup first: the calling thread must run no product, thread-pool job or reservation between startGroup and joinGroup)`);
  }

  /** Closes the group of `beginGroup`: runs its deferred products when `run` (drops them otherwise, after a failure). */
  endGroup(run: boolean): void {
    if (!this.groupJobs) return;
    try {
      if (run) this.flushGroup();
    } finally {
      this.groupJobs = null;
      this.groupRanges.length = 0;
    }
  }

  /** Runs the deferred products of the open group now (as one pool job); the group stays open. */
  private flushGroup(): void {
    const jobs = this.groupJobs!;
    if (jobs.length === 0) return;
    const runner = this.parallelGroup;
    const run = jobs.slice();
    jobs.length = 0;
    this.groupRanges.length = 0;
    if (!runner) throw new Error('dot_general group: the thread pool was removed while a group was open');
    runner.run(run);
  }

  /**
   * Defers `job` into the open group when the runner takes it and a slot is left; its scratch is
   * then kept. A product whose destination overlaps a deferred product's operands as the engine
   * reads them (in place, or the staged copy), or whose operands overlap a deferred destination,
   * first makes the deferred ones run. Only those addresses are compared: an operand staged from
   * a view that is a deferred product's destination is not caught, so the products of a group must
   * be independent (a destination reusing a dead operand's memory is not an error).
   */
  private defer(job: ParallelJob, a: number, aBytes: number, b: number, bBytes: number, c: number, cBytes: number): boolean {
    const jobs = this.groupJobs!;
    if (!this.parallelGroup!.accepts(job)) return false;
    const r = this.groupRanges;
    let clash = jobs.length >= this.parallelGroup!.max;
    for (let i = 0; i < r.length && !clash; i += 6) {
      clash = meets(c, cBytes, r[i], r[i + 1]) || meets(c, cBytes, r[i + 2], r[i + 3]) || meets(c, cBytes, r[i + 4], r[i + 5]) || meets(a, aBytes, r[i + 4], r[i + 5]) || meets(b, bBytes, r[i + 4], r[i + 5]);
    }
    if (clash) this.flushGroup();
    jobs.push(job);
    r.push(a, aBytes, b, bBytes, c, cBytes);
    this.groupFloor = align(this.outScratch);
    return true;
  }

  /**
   * The pool's job for one product: A's packing by row blocks (`rowBlockA`, B alone in chunks)
   * when `blockA` is given, `blockRowsPool` is on, and no early row hand-over is asked for; K
   * block by K block when `kBlocks` is given (the chunked packings as the fallback); else every
   * packing in chunks.
   */
  private parallelJob(args: GemmArgs, stager: Stager, hostPack: () => void, packs: PackJob[], edges: () => void, overlap: (() => void) | undefined, rows: ((r0: number, r1: number) => void) | undefined, blockA: PackJob | null, jobB: PackJob | null, aRows: number, kBlocks: KBlockJob | null): ParallelJob {
    if (blockA && jobB && this.blockRowsPool && rows === undefined) return { args, stager, hostPack, packs: [jobB], edges, overlap, rowBlockA: blockA, aRows };
    if (kBlocks) return { args, stager, hostPack, packs, edges, overlap, rows, kBlocks };
    return { args, stager, hostPack, packs, edges, overlap, rows };
  }

  /**
   * Whether a one-thread product packs A (read in place) one MC row block at a time into the
   * start of its packed area, right before the kernel multiplies that block (`gemmRowBlocks`),
   * instead of packing all of A first: the packed block is then still in L2 when the kernel
   * reads it, where a whole packed A of a few MiB went out to memory and back (a [2048,512]
   * operand: ~0.25-0.3 ms of a 6 ms product; BENCHMARKS.md, gemmstep). Only for a 'kc' A (k
   * contiguous: a block's source is one run of whole rows; an 'rc' block reads a slice of every
   * k row, which packed slower by blocks) that needs no TypeScript edges (whole panels, k a
   * multiple of 4, no k padding) and has several row blocks. On one thread M need not be a
   * multiple of MR (the last block's partial panel is packed in `rowBlock`); the pool's row
   * blocks take it where the SIMD kernel packs it whole (`simdPanels`). The kernel computes every
   * element over the same K order: the
   * same bits.
   */
  private rowBlocks(a: OperandView, M: number, kp: number): boolean {
    const { mc } = this.shape;
    return M > mc && kp === a.k && a.ks === 1 && a.rs !== 1 && a.k % 4 === 0;
  }

  /** The blocked one-thread product of `rowBlocks`: for each MC row block, pack it at `ap`, then multiply its rows. */
  private gemmRowBlocks(jobA: PackJob, va: OperandView, flush: boolean, ap: number, bp: number, c: number, M: number, np: number, kp: number, timed: boolean): void {
    const { mc } = this.shape;
    let packMs = 0;
    for (let i0 = 0; i0 < M; i0 += mc) packMs += this.rowBlock(jobA, ap, bp, c, M, np, kp, i0, Math.min(M, i0 + mc), timed, va, flush);
    this.packMs[0] = packMs;
  }

  /**
   * Packs rows [i0, i1) of A (`jobA`'s operand, 'kc') at byte address `area`, then multiplies
   * them into C's rows [i0, i1) on this thread (a row block of `rowBlocks`; the thread pool's
   * calling thread runs its blocks here too). Returns the packing's ms when `timed`, else 0.
   * A block whose rows end in a partial panel (i1 = M) is packed zero-padded in TypeScript from
   * A's whole view `va` when given (one thread: `packOperand`, fewer than MR rows), else (the
   * pool's calling thread) whole by the SIMD kernel, which `jobA` must cover (`simdPanels`:
   * reading past A's last row is allowed), its missing rows then zeroed.
   */
  rowBlock(jobA: PackJob, area: number, bp: number, c: number, M: number, np: number, kp: number, i0: number, i1: number, timed = false, va?: OperandView, flush = false): number {
    const [src, rs, ks, , k] = jobA.args;
    const call = this.call;
    const t = timed ? phaseClock() : 0;
    const R = jobA.R;
    call[0] = src + i0 * rs * jobA.esz;
    call[1] = rs;
    call[2] = ks;
    const full = Math.floor((i1 - i0) / R);
    const part = i1 - i0 - full * R;
    // A partial last panel: in TypeScript from A's view `va` (one thread, as before: packing it
    // with the SIMD kernel measured 1-3 ms slower per 1t step in two short series, cause not
    // found); without one (the pool's calling thread) packed whole by the SIMD kernel (`simdPanels`
    // allowed reading past A's last row: the engine made the job only then), its missing rows zeroed.
    const simdPart = part > 0 && !va && jobA.args[3] * R >= i1;
    call[3] = full;
    call[4] = k;
    call[5] = kp;
    call[6] = area;
    if (jobA.touch) this.touchChunk(call, R, jobA.esz);
    this.packFns[jobA.fn](call[0], call[1], call[2], simdPart ? full + 1 : full, call[4], call[5], call[6]);
    if (simdPart) zeroPanelRows(this.u32View, area + full * R * kp * 4, R, part, kp);
    else if (part > 0) {
      if (!va) throw new Error(`systolic: rowBlock: rows [${i0}, ${i1}) end in a partial panel of ${R} rows, and no operand view was given to pack it`);
      packOperand({ ...va, rows: i1 - i0 }, call[0] / jobA.esz, R, HI_ONLY, kp, flush, this.u32View, area / 4, full);
    }
    const packMs = timed ? phaseClock() - t : 0;
    // Row r of A lies r * kp * 4 bytes into its packed form: shift the base so rows i0.. read the block.
    this.exports.gemm(area - i0 * kp * 4, bp, c, M, np, kp, i0, i1, 0, np);
    return packMs;
  }

  /**
   * Whether a one-thread product of two operands read in place packs them one K block at a time
   * inside the kernel's loops (`gemmKBlocks`) instead of packing both whole first: for each K
   * block, B's block is packed (in chunks swept in address order), then each MC row block of A
   * just before its rows are multiplied. The packed blocks (A 128 KiB, B at most
   * `K_BLOCK_MAX_B`) are then read from L2, where whole packed operands of several MiB went out
   * to memory and came back once per K block (the GPT's weight gradients: 2-7% less CPU per
   * product, BENCHMARKS.md, gemm6). For 'rc' operands (rows contiguous, so a K block's source
   * is a run of k rows) with several K blocks and whole panels on both sides (no TypeScript
   * edges: N a multiple of NR, K unpadded; M need not be a multiple of MR, see
   * `gemmKBlocks`): the weight gradients of a training step.
   * Every element of C sees the same K order and the same f32 stores and reloads between K
   * blocks as in `gemm`: the same bits.
   */
  private kBlocks(a: OperandView, b: OperandView, M: number, N: number, kp: number): boolean {
    return this.blockK && K_BLOCK_KC % this.shape.unroll === 0 && a.rs === 1 && b.rs === 1 && kp > K_BLOCK_KC && kp === a.k && N % this.nr === 0 && N * K_BLOCK_KC * 4 <= K_BLOCK_MAX_B;
  }

  /**
   * The product of `kBlocks` on this thread. For each K block [pc, pc + kc) (`K_BLOCK_KC`): B's
   * block is packed first, all column panels (panel stride kc) in chunks of k rows of about
   * `K_BLOCK_CHUNK` source bytes, each chunk's rows swept in address order just before it is
   * packed (as the whole-operand path packs); then for each MC row block of A, its rows are
   * swept and packed at `ap` (panel stride kc), and the micro-kernel runs down them for every
   * column panel, accumulating into C from the second K block on. With M not a multiple of MR
   * (the 5 x 8 kernel on the weight gradients' M = 128 or 512), the last row block's partial
   * panel is packed zero-padded per K block in TypeScript (`packOperand`, a few rows) and
   * multiplied by `micro_edge`, which stores only its rows (the pool's K-blocked job packs it
   * with the SIMD kernel instead, threads.ts).
   */
  private gemmKBlocks(jobA: PackJob, jobB: PackJob, va: OperandView, flush: boolean, ap: number, c: number, M: number, np: number, kp: number, timed: boolean): void {
    const { mr, mc } = this.shape;
    const nr = this.nr;
    const KC = K_BLOCK_KC;
    const mp = Math.ceil(M / mr) * mr;
    // The B block right after the A block (A's and B's packed areas hold both: min(mc, mp) <= mp
    // rows and np columns of KC < kp), so the two lie together in L2 and never alias each other.
    const bp = align(ap + Math.min(mc, mp) * KC * 4);
    const [srcA, , ksA] = jobA.args;
    const [srcB, , ksB] = jobB.args;
    const ea = jobA.esz;
    const eb = jobB.esz;
    const packA = this.packFns[jobA.fn];
    const packB = this.packFns[jobB.fn];
    const { micro, micro_edge: microEdge, touch_rows: touch } = this.exports;
    const ldc = np * 4;
    const chunk = Math.max(1, Math.floor(K_BLOCK_CHUNK / (np * eb)));
    let msA = 0;
    let msB = 0;
    for (let pc = 0; pc < kp; pc += KC) {
      const kc = Math.min(KC, kp - pc);
      const accumulate = pc > 0 ? 1 : 0;
      const t0 = timed ? phaseClock() : 0;
      for (let k0 = 0; k0 < kc; k0 += chunk) {
        const kk = Math.min(chunk, kc - k0);
        const b = srcB + (pc + k0) * ksB * eb;
        if (jobB.touch) this.touchRows(touch, b, np * eb, ksB * eb, kk);
        packB(b, 1, ksB, np / nr, kk, kc, bp + k0 * nr * 4);
      }
      const t1 = timed ? phaseClock() : 0;
      if (timed) msB += t1 - t0;
      for (let i0 = 0; i0 < M; i0 += mc) {
        const rows = Math.min(mc, M - i0);
        const t2 = timed ? phaseClock() : 0;
        const a = srcA + (i0 + pc * ksA) * ea;
        if (jobA.touch) this.touchRows(touch, a, rows * ea, ksA * ea, kc);
        const full = Math.floor(rows / mr);
        const part = rows - full * mr;
        packA(a, 1, ksA, full, kc, kc, ap);
        if (part > 0) packOperand({ ...va, rows, k: kc }, a / ea, mr, HI_ONLY, kc, flush, this.u32View, ap / 4, full);
        if (timed) msA += phaseClock() - t2;
        const cRow = c + i0 * np * 4;
        const aEdge = ap + full * mr * kc * 4;
        const cEdge = cRow + full * mr * ldc;
        for (let j = 0; j < np; j += nr) {
          if (full > 0) micro(ap, bp + j * kc * 4, cRow + j * 4, kc, ldc, accumulate, full, kc * mr * 4);
          if (part > 0) microEdge(aEdge, bp + j * kc * 4, cEdge + j * 4, kc, ldc, accumulate, part);
        }
      }
    }
    this.packMs[0] = msA;
    this.packMs[1] = msB;
  }

  /** Sweeps `rows` source rows of `rowBytes` bytes, `stride` bytes apart, from `src` (`touch_rows`) on this thread. */
  private touchRows(touch: GemmExports['touch_rows'], src: number, rowBytes: number, stride: number, rows: number): void {
    this.traffic.sweptChunks++;
    touch(src, rowBytes, stride, rows);
  }

  /** The phase timer's key of a product (see `gemmPhases.byShape`). */
  shapeKey(a: OperandView, b: OperandView, simdA = true, simdB = true, direct = false): string {
    const lay = (v: OperandView, simd: boolean): string => (!simd ? 'host' : v.rs === 1 ? 'rc' : 'kc');
    return `${a.rows}x${a.k}x${b.rows} A:${lay(a, simdA)} B:${lay(b, simdB)}${direct ? ' -> C' : ''}`;
  }

  /**
   * Where the GEMM writes the result of `batch x [M, N]` products bound for the caller's f32
   * destination `into`: the byte address of `into` itself, or -1 when the result must be copied
   * there from a scratch accumulator. Directly when `into` lies in this memory below the
   * scratch (a compiler's arena, see `holds`) and holds exactly the products, and N is a
   * multiple of the panel width (the kernel writes C in whole column panels, but only its M
   * rows, so an accumulator of N columns is exactly [M, N]), and `into` shares no byte with an
   * operand (`readA`, `readB`: a batch writes one product's slice before the next product packs its
   * operands in place, so a destination over an operand would feed results back in). This is
   * the one place the choice is made: `batchedProduct` and the item-by-item path follow its
   * answer.
   */
  resultTarget(into: Float32Array | null, batch: number, M: number, N: number, readA?: ArrayBufferView, readB?: ArrayBufferView): number {
    if (into === null || into.length !== batch * M * N || N % this.nr !== 0 || !this.holds(into)) return -1;
    const overlaps = (r: ArrayBufferView | undefined): boolean => r !== undefined && viewsOverlap(r, into);
    return overlaps(readA) || overlaps(readB) ? -1 : into.byteOffset;
  }

  /**
   * Rounds the accumulator at element offset `c` (row stride `ldc`) to bf16 storage into
   * `out[outOff ..]` (or a new array when `out` is null) as a dense [M,N] matrix: SIMD for
   * 8-column groups, TypeScript for the rest. Call from a `batchedProduct` sink.
   */
  narrowToBf16(c: number, ldc: number, M: number, N: number, flush: boolean, out: Uint16Array | null, outOff: number): Uint16Array {
    const n8 = N - (N % 8);
    const fn = this.packFns[flush ? 'out_bf16_flush' : 'out_bf16'] as unknown as (s: number, l: number, r: number, c8: number, d: number, ldd: number) => void;
    fn(c * 4, ldc, M, n8, this.outScratch, N);
    const view = new Uint16Array(this.memory.buffer, this.outScratch, M * N);
    const dst = out ?? view.slice();
    if (out) out.set(view, outOff);
    if (n8 < N) {
      const f32 = this.f32View;
      for (let i = 0; i < M; i++) for (let j = n8; j < N; j++) dst[outOff + i * N + j] = bf16.fromFloat32(f32[c + i * ldc + j], { flushSubnormals: flush });
    }
    return dst;
  }

  /** Runs packing kernel `fn` on this thread (the thread pool's calling-thread share). */
  runPackKernel(fn: string, src: number, rs: number, ks: number, panels: number, k: number, kp: number, dst: number): void {
    this.packFns[fn](src, rs, ks, panels, k, kp, dst);
  }

  /** Sweeps the source of packing call `call` (`touch_rows`, see packKernels.ts) on this thread. */
  touchChunk(call: readonly number[], R: number, esz: number): void {
    const t = touchArgs(call, R, esz, this.touchCall);
    this.touchRows(this.exports.touch_rows, t[0], t[1], t[2], t[3]);
  }

  /**
   * Panels of operand `v` (R rows each, its first element at byte address `src`) that the SIMD
   * packing kernel packs: the whole ones, and the partial last one too when the kernel covers
   * every k (no k tail, no K padding) and reading the rows missing from it ends at or below
   * `limit` (for an operand read in place: the scratch floor, so the bytes read past it are
   * other data in place, never bytes still to be staged; 0 otherwise). Their products would only
   * reach accumulator rows the kernel never stores; `packEdges` still zeroes them, so the panel is
   * the TypeScript packing's byte for byte and no garbage (NaN, or subnormals, which cost x86
   * FMAs a microcode assist) enters the multiply-adds.
   */
  private simdPanels(v: OperandView, src: number, R: number, kp: number, limit: number): number {
    const full = Math.floor(v.rows / R);
    if (full * R === v.rows || kp !== v.k || (v.rs !== 1 && v.k % 4 !== 0)) return full;
    const end = src + (((full + 1) * R - 1) * v.rs + (v.k - 1) * v.ks + 1) * (v.bf16 ? 2 : 4);
    return end <= limit ? full + 1 : full;
  }

  /** The SIMD kernel call (in chunks) that packs a one-pass operand's panels (`simdPanels`) / k quads; `limit` as there. */
  private packJob(v: OperandView, base: number, off: number, R: number, kp: number, flush: boolean, dst: number, minChunks: number, inPlace: boolean, limit: number): PackJob {
    const layout = v.rs === 1 ? 'rc' : 'kc';
    const esz = v.bf16 ? 2 : 4;
    const panels = this.simdPanels(v, base + off * esz, R, kp, limit);
    const kBulk = layout === 'rc' ? v.k : v.k - (v.k % 4);
    const touch = inPlace && this.touchInPlace && (layout === 'rc' || this.touchKc);
    return planPackJob(packFunctionName(layout, R, v.bf16, flush), [base + off * esz, v.rs, v.ks, panels, kBulk, kp, dst], R, esz, minChunks, touch);
  }

  /**
   * Packs what the kernel of `packJob` leaves (in TypeScript, after the kernel has run; `packed`:
   * the panels it packed, its `args[3]`): the partial last panel (every k; when the kernel packed
   * it, only its missing rows, zeroed),
   * then the k tail of the full panels and the kp padding.
   */
  private packEdges(v: OperandView, base: number, off: number, R: number, kp: number, flush: boolean, dst: number, packed: number): void {
    const full = Math.floor(v.rows / R);
    const kBulk = v.rs === 1 ? v.k : v.k - (v.k % 4);
    const esz = v.bf16 ? 2 : 4;
    const elemOff = base / esz + off;
    const u32 = this.u32View;
    if (full * R < v.rows) {
      if (packed > full) {
        const rows = v.rows - full * R;
        this.traffic.simdPartialPanels++;
        zeroPanelRows(u32, dst + full * R * kp * 4, R, rows, kp);
      } else packOperand(v, elemOff, R, HI_ONLY, kp, flush, u32, dst / 4, full, 0);
    }
    if (full > 0 && (kBulk < v.k || kp > v.k)) {
      packOperand({ ...v, rows: full * R }, elemOff, R, HI_ONLY, kp, flush, u32, dst / 4, 0, kBulk);
    }
  }
}

const HI_ONLY = [HI];

/**
 * Zeroes rows [rows, R) of each of the k row groups (R floats each) of the packed panel at byte
 * address `dst`: the rows a SIMD kernel packed from past an operand's last row (threads.ts has
 * the workers' copy, `zeroPanelRows`).
 */
function zeroPanelRows(u32: Uint32Array, dst: number, R: number, rows: number, k: number): void {
  for (let q = dst >> 2, end = q + k * R; q < end; q += R) for (let r = rows; r < R; r++) u32[q + r] = 0;
}

/** How the micro-kernel of engines made without a shape was chosen (see `gemmKernelChoice`). */
export interface GemmKernelChoice {
  readonly shape: GemmShape;
  /** 'env': `TPUKIT_GEMM_KERNEL`; 'tuned': measured on this CPU (`tuneGemmShape`). */
  readonly by: 'env' | 'tuned';
  /** The measured rate of 5 x 8 over 4 x 8 (null when set by the environment). */
  readonly gain: number | null;
}

/** The measured choice per `relaxed` (index 1: relaxed-SIMD FMA), made on first use. */
const tunedChoices: [GemmKernelChoice | null, GemmKernelChoice | null] = [null, null];

/**
 * The micro-kernel of engines made without a shape: `TPUKIT_GEMM_KERNEL=4x8|5x8` in the
 * environment (A/B runs), else (unset or `auto`) the one this CPU runs faster, measured once per
 * process (gemmTune.ts). Every kernel gives the same bits.
 */
export function gemmKernelChoice(relaxed: boolean): GemmKernelChoice {
  const env = envVar('TPUKIT_GEMM_KERNEL');
  if (env === '4x8' || env === '5x8') return { shape: env === '4x8' ? GEMM_SHAPE_4X8 : GEMM_SHAPE_5X8, by: 'env', gain: null };
  if (env !== undefined && env !== '' && env !== 'auto') throw new Error(`systolic: TPUKIT_GEMM_KERNEL must be 4x8, 5x8 or auto; got ${JSON.stringify(env)}`);
  const i = relaxed ? 1 : 0;
  return (tunedChoices[i] ??= { ...tuneGemmShape(relaxed), by: 'tuned' });
}

/**
 * K blocks of a K-blocked product (`GemmEngine.kBlocks`): 256 k, so A's block (128 KiB), B's block
 * of up to 512 columns (512 KiB) and a packing chunk's source stay in L2 together. Any K block
 * gives the same bits (C is stored and reloaded in f32 between blocks). Other sizes were timed
 * only for a variant that was not kept (128 / 1024, BENCHMARKS.md, gemm6).
 */
export const K_BLOCK_KC = 256;
/** Source bytes of B swept and packed per chunk in a K-blocked product (about 128 k rows of a 512-column f32 operand). */
const K_BLOCK_CHUNK = 256 * 1024;
/** The largest packed B block (N x K_BLOCK_KC f32) a K-blocked product keeps for its row blocks: half of L2. */
const K_BLOCK_MAX_B = 512 * 1024;


/** Packing chunks per operand at least (so up to 4 threads each take several). */
const MIN_PACK_CHUNKS = 16;

/** Below this many multiply-adds a product runs on the calling thread (dispatch costs more). */
export const PARALLEL_MIN_WORK = 1 << 21;

/** Whether byte ranges [x, x + xn) and [y, y + yn) overlap. */
function meets(x: number, xn: number, y: number, yn: number): boolean {
  return x < y + yn && y < x + xn;
}

function align(x: number): number {
  return Math.ceil(x / 64) * 64;
}
