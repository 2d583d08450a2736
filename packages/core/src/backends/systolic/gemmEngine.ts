/**
 * The GEMM engine: owns the WebAssembly memory the kernels work in, compiles the generated GEMM
 * module once per configuration (relaxed or plain SIMD), and runs one MXU-style matrix product:
 * pack both operands (bf16 rounding, multi-pass splitting), multiply, and hand back the padded f32
 * accumulator. The memory is shared when the runtime supports threads, so the worker pool
 * (`threads.ts`) can pack and multiply parts of the same product on the same buffers.
 */
import * as bf16 from '../../bf16';
import { wasmFeatures } from '../../wasm/features';
import { WA, type WasmMemory } from '../../wasm/webassemblyTypes';
import { DEFAULT_GEMM_SHAPE, type GemmExports, type GemmShape, buildGemmModule } from './gemmModule';
import { type BatchEngine, type BatchRunner, runBatchedItems } from './batched';
import { HI, type OperandView, packOperand } from './pack';
import { packFunctionName } from './packKernels';
import { type PackJob, Stager, chunkCall, planPackJob } from './packPlan';
import { gemmPhases, phaseClock } from './phases';

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
}

/** Runs one product over several threads; false when it could not (the caller runs it alone). */
export type ParallelRunner = (job: ParallelJob) => boolean;

export interface GemmArgs {
  ap: number;
  bp: number;
  cp: number;
  mp: number;
  np: number;
  kp: number;
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
  /** Staging plan of the current product (reused). */
  private readonly stager = new Stager();
  /** Kernel arguments of one packing chunk (reused). */
  private readonly call: number[] = [0, 0, 0, 0, 0, 0, 0];

  constructor({ relaxed, shape = DEFAULT_GEMM_SHAPE }: { relaxed: boolean; shape?: GemmShape }) {
    const f = wasmFeatures();
    if (!f.simd) throw new Error('systolic: this WebAssembly runtime has no SIMD128; the systolic backend needs it');
    if (relaxed && !f.relaxedSimd) throw new Error('systolic: relaxed SIMD was requested but this runtime does not support it');
    this.shape = shape;
    this.relaxed = relaxed;
    this.shared = f.threads;
    this.memory = new WA.Memory({ initial: 16, maximum: MAX_PAGES, shared: this.shared });
    this.bytes = buildGemmModule({ shape, relaxed, shared: this.shared, maxPages: MAX_PAGES });
    const mod = new WA.Module(this.bytes);
    const ex = new WA.Instance(mod, { env: { mem: this.memory } }).exports;
    this.exports = ex as unknown as GemmExports;
    this.packFns = ex as unknown as GemmEngine['packFns'];
    this.u32View = new Uint32Array(this.memory.buffer);
    this.f32View = new Float32Array(this.memory.buffer);
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
    if (this.u32View.buffer !== this.memory.buffer || this.u32View.length * 4 !== this.memory.buffer.byteLength) {
      this.u32View = new Uint32Array(this.memory.buffer);
      this.f32View = new Float32Array(this.memory.buffer);
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
   * called for that product; the sink then only needs the rows it was not given.
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
  ): void {
    // A batch of products the SIMD kernels pack whole: item by item, over the pool's threads.
    if (compsA.length === 1 && compsB.length === 1 && runBatchedItems(this, a, aOffs, b, bOffs, flush, op, sink, this.parallelBatch, PARALLEL_MIN_WORK)) return;
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
    let at = 64;
    const srcA = at;
    if (simdA) at = align(at + a.bits.byteLength);
    const srcB = at;
    if (simdB) at = align(at + b.bits.byteLength);
    const ap = at;
    const bp = align(ap + mp * kp * 4);
    const cp = align(bp + np * kp * 4);
    this.outScratch = align(cp + mp * np * 4);
    this.ensure(this.outScratch + M * N * 2, op);
    const buf = this.memory.buffer;
    // The staged operands are read through views of the whole memory: the packing addresses
    // elements from the memory's start. The copying itself is planned by the stager and done
    // chunk by chunk, interleaved with the packing (see packPlan.ts).
    const stager = this.stager;
    stager.reset(buf);
    const whole = (v: OperandView): OperandView => ({ ...v, bits: v.bf16 ? new Uint16Array(buf) : this.u32View });
    if (simdA) stager.add(a.bits, srcA);
    if (simdB) stager.add(b.bits, srcB);
    const wa = simdA ? whole(a) : a;
    const wb = simdB ? whole(b) : b;
    const u32 = this.u32View;
    const args = { ap, bp, cp, mp, np, kp };
    const big = mp * np * kp >= PARALLEL_MIN_WORK;
    // Packing is split into chunks for the pool's threads; a product the calling thread runs
    // alone packs each operand in as few kernel calls as its cache blocking allows.
    const minChunks = big && this.parallel ? MIN_PACK_CHUNKS : 1;
    const call = this.call;
    for (let bi = 0; bi < aOffs.length; bi++) {
      const jobA = simdA ? this.packJob(wa, srcA, aOffs[bi], mr, kp, flush, ap, minChunks) : null;
      const jobB = simdB ? this.packJob(wb, srcB, bOffs[bi], nr, kp, flush, bp, minChunks) : null;
      const hostPack = (): void => {
        if (!simdA) packOperand(a, aOffs[bi], mr, compsA, kp, flush, u32, ap / 4);
        if (!simdB) packOperand(b, bOffs[bi], nr, compsB, kp, flush, u32, bp / 4);
      };
      const edges = (): void => {
        if (simdA) this.packEdges(wa, srcA, aOffs[bi], mr, kp, flush, ap);
        if (simdB) this.packEdges(wb, srcB, bOffs[bi], nr, kp, flush, bp);
      };
      const packs = jobA && jobB ? [jobA, jobB] : jobA ? [jobA] : jobB ? [jobB] : [];
      // With a thread pool, the calling thread stages while the others pack the chunks already
      // staged; then every thread packs, then takes GEMM tiles from a shared counter.
      const rows = bi === 0 && rowsReady ? (r0: number, r1: number): void => {
        if (Math.min(r1, M) > r0) rowsReady(cp / 4, np, r0, Math.min(r1, M));
      } : undefined;
      const t0 = phaseClock();
      let t1 = t0;
      let t2 = t0;
      let alone = false;
      if (!(big && this.parallel && this.parallel({ args, stager, hostPack, packs, edges, overlap: bi === 0 ? prepare : undefined, rows }))) {
        alone = true;
        hostPack();
        // One thread: copy a chunk, pack it while its source is still in cache.
        for (const j of packs) {
          const fn = this.packFns[j.fn];
          for (let i = 0; i < j.chunks; i++) {
            const s0 = phaseClock();
            stager.to(chunkCall(j, i, call));
            if (gemmPhases.enabled) gemmPhases.stage += phaseClock() - s0;
            fn(call[0], call[1], call[2], call[3], call[4], call[5], call[6]);
          }
        }
        const s0 = phaseClock();
        stager.to(stager.end);
        if (gemmPhases.enabled) gemmPhases.stage += phaseClock() - s0;
        edges();
        t1 = phaseClock();
        this.exports.gemm(ap, bp, cp, mp, np, kp, 0, mp, 0, np);
        t2 = phaseClock();
      }
      sink(bi, cp / 4, np);
      if (gemmPhases.enabled && alone) {
        gemmPhases.products++;
        gemmPhases.pack += t1 - t0;
        gemmPhases.gemm += t2 - t1;
        gemmPhases.sink += phaseClock() - t2;
      }
    }
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

  /** The SIMD kernel call (in chunks) that packs a staged one-pass operand's whole panels / k quads. */
  private packJob(v: OperandView, base: number, off: number, R: number, kp: number, flush: boolean, dst: number, minChunks: number): PackJob {
    const layout = v.rs === 1 ? 'rc' : 'kc';
    const full = Math.floor(v.rows / R);
    const kBulk = layout === 'rc' ? v.k : v.k - (v.k % 4);
    const esz = v.bf16 ? 2 : 4;
    return planPackJob(packFunctionName(layout, R, v.bf16, flush), [base + off * esz, v.rs, v.ks, full, kBulk, kp, dst], R, esz, minChunks);
  }

  /**
   * Packs what the kernel of `packJob` leaves (in TypeScript, after the kernel has run): the
   * partial last panel (every k), then the k tail of the full panels and the kp padding.
   */
  private packEdges(v: OperandView, base: number, off: number, R: number, kp: number, flush: boolean, dst: number): void {
    const full = Math.floor(v.rows / R);
    const kBulk = v.rs === 1 ? v.k : v.k - (v.k % 4);
    const esz = v.bf16 ? 2 : 4;
    const elemOff = base / esz + off;
    const u32 = this.u32View;
    if (full * R < v.rows) packOperand(v, elemOff, R, HI_ONLY, kp, flush, u32, dst / 4, full, 0);
    if (full > 0 && (kBulk < v.k || kp > v.k)) {
      packOperand({ ...v, rows: full * R }, elemOff, R, HI_ONLY, kp, flush, u32, dst / 4, 0, kBulk);
    }
  }
}

const HI_ONLY = [HI];

/** Packing chunks per operand at least (so up to 4 threads each take several). */
const MIN_PACK_CHUNKS = 16;

/** Below this many multiply-adds a product runs on the calling thread (dispatch costs more). */
export const PARALLEL_MIN_WORK = 1 << 21;

function align(x: number): number {
  return Math.ceil(x / 64) * 64;
}
