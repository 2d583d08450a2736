/**
 * The plan for getting one product's operands into the GEMM's packed layout: copy ("stage") the
 * host operands into wasm memory in address order, and cut each operand's SIMD packing-kernel
 * call into chunks that each read only a prefix of the staged bytes. A chunk can therefore run as
 * soon as staging has passed its last source byte, so packing overlaps staging: on one thread each
 * chunk is packed right after it is copied (its source still in cache), and in the thread pool the
 * workers pack while the calling thread, the only one that can read the host arrays, copies.
 *
 * Chunks run along the axis in which the source is laid out in address order: whole panels for a
 * k-contiguous operand ('kc': a panel's rows are consecutive), k values for a row-contiguous one
 * ('rc': every panel reads all k rows, so a k range of all panels is a contiguous source range).
 * Each chunk writes its own part of the packed panels, so chunks may run in any order on any thread
 * and the packed bytes do not depend on the chunking. The worker in `threads.ts` repeats
 * `chunkCall` on the Int32 control slots (it cannot import this file); the thread tests check that
 * both give identical results.
 */

/** One SIMD packing-kernel call over whole panels, cut into chunks. Addresses in bytes, strides in elements. */
export interface PackJob {
  /** The packing kernel's export name (`packFunctionName`). */
  fn: string;
  /** Kernel arguments for the whole operand: (src, rs, ks, panels, k, kp, dst). */
  args: readonly [number, number, number, number, number, number, number];
  /** Rows per panel. */
  R: number;
  /** Source element size in bytes. */
  esz: number;
  /** 0: chunks are runs of whole panels; 1: chunks are runs of k values of every panel. */
  axis: 0 | 1;
  /** Panels (axis 0) or k values (axis 1) per chunk. */
  per: number;
  /** Number of chunks. */
  chunks: number;
  /**
   * Whether each chunk's source is swept line by line (`touch_rows`, packKernels.ts) before it
   * is packed: for operands read in place from memory written long before (not for staged
   * copies, which are in cache).
   */
  touch: boolean;
}

/** Staging copies of about this many bytes: small enough that packing starts early, large enough to be cheap. */
export const STAGE_CHUNK_BYTES = 128 * 1024;
/** Packing chunks of about this many source bytes on one thread (a chunk's source stays in L2). */
const SERIAL_PACK_BYTES = 256 * 1024;

/**
 * Chunks a kernel call. `minChunks` is the least number of chunks wanted (for the thread pool:
 * a few per thread, so a slowed thread takes fewer); chunks are also kept near
 * `SERIAL_PACK_BYTES` of source so that packing can follow staging closely.
 */
export function planPackJob(fn: string, args: PackJob['args'], R: number, esz: number, minChunks: number, touch = false): PackJob {
  const [, rs, , panels, k] = args;
  const axis: 0 | 1 = rs === 1 ? 1 : 0;
  const units = axis === 0 ? panels : k;
  const sourceBytes = panels * R * k * esz;
  const want = Math.max(minChunks, Math.ceil(sourceBytes / SERIAL_PACK_BYTES));
  const per = Math.max(1, Math.ceil(units / Math.min(units, want)));
  return { fn, args, R, esz, axis, per, chunks: panels === 0 || k === 0 ? 0 : Math.ceil(units / per), touch };
}

/**
 * The kernel arguments of chunk `i` of `job` (written into `out`) and the staged address its
 * source ends at (returned): the chunk may run once staging has reached that address.
 */
export function chunkCall(job: PackJob, i: number, out: number[]): number {
  const [src0, rs, ks, panels0, k0, kp, dst0] = job.args;
  const { R, esz, per } = job;
  let src = src0;
  let dst = dst0;
  let panels = panels0;
  let k = k0;
  const u0 = i * per;
  if (job.axis === 0) {
    panels = Math.min(panels0 - u0, per);
    src += u0 * R * rs * esz;
    dst += u0 * R * kp * 4;
  } else {
    k = Math.min(k0 - u0, per);
    src += u0 * ks * esz;
    dst += u0 * R * 4;
  }
  out[0] = src;
  out[1] = rs;
  out[2] = ks;
  out[3] = panels;
  out[4] = k;
  out[5] = kp;
  out[6] = dst;
  return src + ((panels * R - 1) * rs + (k - 1) * ks + 1) * esz;
}

/**
 * Copies host operands into wasm memory in address order, a chunk at a time. `staged` is the
 * address below which every added operand's bytes are in place (it only grows); `end` is where
 * the last added operand ends.
 */
export class Stager {
  private readonly bits: Array<Uint32Array | Uint16Array> = [];
  private readonly addrs: number[] = [];
  private buffer: ArrayBufferLike = new ArrayBuffer(0);
  private part = 0;
  private copied = 0;
  staged = 0;
  end = 0;

  /**
   * Starts a new plan over `buffer` (the wasm memory's current buffer). Everything below byte
   * address `floor` counts as in place already (operands read where they lie, below the
   * scratch the staged ones are copied to).
   */
  reset(buffer: ArrayBufferLike, floor = 0): void {
    this.buffer = buffer;
    this.bits.length = 0;
    this.addrs.length = 0;
    this.part = 0;
    this.copied = 0;
    this.staged = floor;
    this.end = floor;
  }

  /** Adds an operand to copy to byte address `addr` (after every operand added so far). */
  add(bits: Uint32Array | Uint16Array, addr: number): void {
    if (addr < this.end) throw new Error(`systolic staging: operand at ${addr} overlaps the previous one (ends at ${this.end})`);
    this.bits.push(bits);
    this.addrs.push(addr);
    this.end = addr + bits.byteLength;
  }

  /** Copies the next chunk; returns the new `staged` address (`end` once everything is copied). */
  next(): number {
    if (this.part >= this.bits.length) return (this.staged = this.end);
    const src = this.bits[this.part];
    const esz = src.BYTES_PER_ELEMENT;
    const n = Math.min(src.length - this.copied, STAGE_CHUNK_BYTES / esz);
    const addr = this.addrs[this.part] + this.copied * esz;
    const dst = esz === 4 ? new Uint32Array(this.buffer, addr, n) : new Uint16Array(this.buffer, addr, n);
    dst.set(src.subarray(this.copied, this.copied + n));
    this.copied += n;
    this.staged = addr + n * esz;
    if (this.copied >= src.length) {
      this.part++;
      this.copied = 0;
      if (this.part >= this.bits.length) this.staged = this.end;
    }
    return this.staged;
  }

  /** Copies until `staged` reaches `addr` (or everything is copied). */
  to(addr: number): void {
    while (this.staged < addr && this.staged < this.end) this.next();
  }
}

/**
 * A stager that also sums the milliseconds its `to` calls take (`ms`, zeroed by `reset`), for
 * the GEMM phase timer (`phases.ts`): the engine swaps it in while the timer is on, so the
 * packing loops themselves read no clock.
 */
export class TimedStager extends Stager {
  ms = 0;

  override reset(buffer: ArrayBufferLike, floor = 0): void {
    super.reset(buffer, floor);
    this.ms = 0;
  }

  override to(addr: number): void {
    if (this.staged >= addr || this.staged >= this.end) return; // nothing to copy: no time
    const t = performance.now();
    super.to(addr);
    this.ms += performance.now() - t;
  }
}
