/**
 * The GEMM engine: owns the WebAssembly memory the kernels work in, compiles the generated GEMM
 * module once per configuration (relaxed or plain SIMD), and runs one MXU-style matrix product:
 * pack both operands (bf16 rounding, multi-pass splitting), multiply, and hand back the padded f32
 * accumulator. The memory is shared when the runtime supports threads, so the worker pool
 * (`threads.ts`) can run column slices of the same product on the same buffers.
 */
import { wasmFeatures } from '../wasm/features';
import '../wasm/webassemblyTypes';
import { DEFAULT_GEMM_SHAPE, type GemmShape, buildGemmModule } from './gemmModule';
import { type OperandView, packOperand } from './pack';

/** Memory ceiling: 2 GiB keeps every address a positive i32. */
export const MAX_PAGES = 32768;

export interface GemmExports {
  gemm(ap: number, bp: number, cp: number, mp: number, np: number, kp: number, j0: number, j1: number): void;
}

/** Splits the columns [0, np) into work items; returns the number of items run. */
export type ColumnRunner = (args: GemmArgs) => void;

export interface GemmArgs {
  ap: number;
  bp: number;
  cp: number;
  mp: number;
  np: number;
  kp: number;
}

export class GemmEngine {
  readonly memory: WebAssembly.Memory;
  readonly shape: GemmShape;
  readonly relaxed: boolean;
  readonly shared: boolean;
  readonly bytes: Uint8Array;
  readonly exports: GemmExports;
  private u32View: Uint32Array;
  private f32View: Float32Array;
  /** Set by the thread pool: runs a product over several threads instead of this one. */
  parallel: ColumnRunner | null = null;

  constructor({ relaxed, shape = DEFAULT_GEMM_SHAPE }: { relaxed: boolean; shape?: GemmShape }) {
    const f = wasmFeatures();
    if (!f.simd) throw new Error('systolic: this WebAssembly runtime has no SIMD128; the systolic backend needs it');
    if (relaxed && !f.relaxedSimd) throw new Error('systolic: relaxed SIMD was requested but this runtime does not support it');
    this.shape = shape;
    this.relaxed = relaxed;
    this.shared = f.threads;
    this.memory = new WebAssembly.Memory({ initial: 16, maximum: MAX_PAGES, shared: this.shared } as WebAssembly.MemoryDescriptor);
    this.bytes = buildGemmModule({ shape, relaxed, shared: this.shared, maxPages: MAX_PAGES });
    const mod = new WebAssembly.Module(this.bytes);
    this.exports = new WebAssembly.Instance(mod, { env: { mem: this.memory } }).exports as unknown as GemmExports;
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
   * Runs one product C[M,N] = sum_k A[m,k] B[k,n] with MXU numerics. `compsA[i]`/`compsB[i]`
   * name the bf16 terms multiplied in pass i. Returns the padded accumulator's element offset
   * and row stride in `f32`; valid until the next call.
   */
  product(a: OperandView, aOff: number, b: OperandView, bOff: number, compsA: readonly number[], compsB: readonly number[], flush: boolean, op: string): { c: number; ldc: number } {
    const { mr, unroll } = this.shape;
    const nr = this.nr;
    const M = a.rows;
    const N = b.rows;
    const K = a.k;
    const mp = Math.ceil(M / mr) * mr;
    const np = Math.ceil(N / nr) * nr;
    const kp = Math.max(unroll, Math.ceil((compsA.length * K) / unroll) * unroll);
    const ap = 64;
    const bp = align(ap + mp * kp * 4);
    const cp = align(bp + np * kp * 4);
    this.ensure(cp + mp * np * 4, op);
    const u32 = this.u32View;
    packOperand(a, aOff, mr, compsA, kp, flush, u32, ap / 4);
    packOperand(b, bOff, nr, compsB, kp, flush, u32, bp / 4);
    const args = { ap, bp, cp, mp, np, kp };
    if (this.parallel && mp * np * kp >= PARALLEL_MIN_WORK) this.parallel(args);
    else this.exports.gemm(ap, bp, cp, mp, np, kp, 0, np);
    return { c: cp / 4, ldc: np };
  }
}

/** Below this many multiply-adds a product runs on the calling thread (dispatch costs more). */
export const PARALLEL_MIN_WORK = 1 << 21;

function align(x: number): number {
  return Math.ceil(x / 64) * 64;
}
