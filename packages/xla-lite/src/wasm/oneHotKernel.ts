/**
 * The WebAssembly SIMD kernels of the one-hot primitives (js/oneHotKernels.ts) at the MXU's
 * default precision (one bf16 pass: round to nearest even on the bits, NaN kept quiet, as core's
 * bf16 codec; subnormals flushed to a signed zero where the backend flushes), four lanes at a
 * time, float32 accumulation:
 *
 * - `segsum(rows, src, dst, T, N, V)`: dst (V rows of N) = 0, then for each token t in order
 *   whose row r = rows[t] is valid (>= 0), dst[r] += bf16(src[t]). A single thread sums every
 *   row in token order, so the result does not depend on the thread count.
 * - `round(src, dst, n)`: dst = bf16(src) + 0 over n values (-0 becomes +0, as a one-hot dot's
 *   sum of +0 products), the gather's table as the dot's operand.
 * - `segsumFlush`, `roundFlush`: the same, flushing subnormals.
 * - `gather(rows, table, dst, M, N)`: dst row m = table row rows[m], or zeros where rows[m] < 0.
 *
 * Rows are int32 (row index or -1), N a multiple of 4. One module is built per memory:
 *
 * - a memory of its own (`segmentSumBf16`, the path of host arrays): it grows to the largest call
 *   (up to SEGMENT_SUM_MAX_BYTES; larger calls fall back to the JavaScript loop); the caller's
 *   values are copied in and the sums out;
 * - the backend's arena memory (`arenaKernels`: the systolic GEMM engine's shared memory, where
 *   the executable's arena lies with zero-copy dots, `wasm/program.ts`): the executable hands the
 *   primitives views of its arena, read and written in place; operands that lie elsewhere (and
 *   the rows, and the gather's rounded table) go into a scratch region reserved there.
 *
 * Both run on the calling thread: at the GPT's size (2048 x 128 values) one call takes ~0.1 ms,
 * below what handing work to the kernel threads costs.
 */
import { type ArenaHost, wasm } from '@tpukit/core/internal';

const { ModuleBuilder, OP, SIMD, WA } = wasm;

type FB = wasm.FunctionBuilder;

type SegSum = (rows: number, src: number, dst: number, T: number, N: number, V: number) => void;
type Round = (src: number, dst: number, n: number) => void;
interface Exports {
  segsum: SegSum;
  segsumFlush: SegSum;
  round: Round;
  roundFlush: Round;
  gather: (rows: number, table: number, dst: number, M: number, N: number) => void;
}

type Lanes = [number, number, number, number];
const splat = (x: number): Lanes => [x, x, x, x];

/**
 * The rounding's constants in locals, set once at the function's start: V8 materialises a
 * `v128.const` where it is used, several instructions inside the loop otherwise.
 */
interface Consts {
  quiet: number;
  hi: number;
  half: number;
  one: number;
  sign: number;
  exp: number;
  zero: number;
}

function consts(f: FB): Consts {
  const c = (x: number): number => {
    const l = f.local('v128');
    f.v128Const(splat(x)).set(l);
    return l;
  };
  return { quiet: c(0x00400000), hi: c(0xffff0000), half: c(0x7fff), one: c(1), sign: c(0x80000000), exp: c(0x7f800000), zero: c(0) };
}

/**
 * Pushes bf16(bits) as float32 bits (four lanes): round to nearest even, a NaN kept quiet, and
 * with `flush` a subnormal (exponent bits 0) becomes its signed zero. `r` is a v128 scratch local.
 */
function emitRound(f: FB, bits: number, k: Consts, flush: boolean, r: number): void {
  f.get(bits).get(k.quiet).simd(SIMD.v128_or).get(k.hi).simd(SIMD.v128_and);
  f.get(bits).get(k.half).simd(SIMD.i32x4_add);
  f.get(bits).i32Const(16).simd(SIMD.i32x4_shr_u).get(k.one).simd(SIMD.v128_and).simd(SIMD.i32x4_add);
  f.get(k.hi).simd(SIMD.v128_and);
  f.get(bits).get(bits).simd(SIMD.f32x4_ne);
  f.simd(SIMD.v128_bitselect);
  if (!flush) return;
  f.set(r);
  // bitselect(sign of bits, r, subnormal)
  f.get(bits).get(k.sign).simd(SIMD.v128_and);
  f.get(r);
  f.get(bits).get(k.exp).simd(SIMD.v128_and).get(k.zero).simd(SIMD.i32x4_eq);
  f.simd(SIMD.v128_bitselect);
}

/** Stores zeros over [d, e) (16-byte steps); `d` is advanced to `e`. */
function emitZero(f: FB, d: number, e: number, zero: number): void {
  f.block().loop();
  f.get(d).get(e).op(OP.i32_ge_u).brIf(1);
  f.get(d).get(zero).simdMem(SIMD.v128_store);
  f.get(d).i32Const(16).op(OP.i32_add).set(d);
  f.br(0).end().end();
}

/** The kernels' module over a memory imported as `mem` (`segsum` / `round` without flushing, `segsumFlush` / `roundFlush` with). */
function buildModule(mem: wasm.MemoryImport): Uint8Array {
  const m = new ModuleBuilder();
  m.importMemory('env', 'mem', mem);
  for (const flush of [false, true]) {
    m.addFunction(flush ? 'segsumFlush' : 'segsum', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
      const [rows, src, dst, T, N, V] = [0, 1, 2, 3, 4, 5];
      const t = f.local('i32');
      const r = f.local('i32');
      const s = f.local('i32');
      const d = f.local('i32');
      const e = f.local('i32');
      const bits = f.local('v128');
      const tmp = f.local('v128');
      const rowBytes = f.local('i32');
      const k = consts(f);
      f.get(N).i32Const(4).op(OP.i32_mul).set(rowBytes);
      f.get(dst).set(d);
      f.get(dst).get(V).get(rowBytes).op(OP.i32_mul).op(OP.i32_add).set(e);
      emitZero(f, d, e, k.zero);
      f.block().loop();
      f.get(t).get(T).op(OP.i32_ge_u).brIf(1);
      f.get(rows).get(t).i32Const(4).op(OP.i32_mul).op(OP.i32_add).mem(OP.i32_load).set(r);
      f.get(r).i32Const(0).op(OP.i32_ge_s).if();
      f.get(src).get(t).get(rowBytes).op(OP.i32_mul).op(OP.i32_add).tee(s).get(rowBytes).op(OP.i32_add).set(e);
      f.get(dst).get(r).get(rowBytes).op(OP.i32_mul).op(OP.i32_add).set(d);
      f.block().loop();
      f.get(s).get(e).op(OP.i32_ge_u).brIf(1);
      f.get(s).simdMem(SIMD.v128_load).set(bits);
      // dst += bf16(src)
      f.get(d);
      f.get(d).simdMem(SIMD.v128_load);
      emitRound(f, bits, k, flush, tmp);
      f.simd(SIMD.f32x4_add).simdMem(SIMD.v128_store);
      f.get(s).i32Const(16).op(OP.i32_add).set(s);
      f.get(d).i32Const(16).op(OP.i32_add).set(d);
      f.br(0).end().end();
      f.end();
      f.get(t).i32Const(1).op(OP.i32_add).set(t);
      f.br(0).end().end();
    });
    m.addFunction(flush ? 'roundFlush' : 'round', ['i32', 'i32', 'i32'], [], (f) => {
      const [src, dst, n] = [0, 1, 2];
      const e = f.local('i32');
      const bits = f.local('v128');
      const tmp = f.local('v128');
      const k = consts(f);
      f.get(src).get(n).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(e);
      f.block().loop();
      f.get(src).get(e).op(OP.i32_ge_u).brIf(1);
      f.get(dst);
      f.get(src).simdMem(SIMD.v128_load).set(bits);
      emitRound(f, bits, k, flush, tmp);
      // + 0: -0 becomes +0 (the only value + 0 changes; NaN stays the quiet NaN above)
      f.tee(tmp).get(tmp).get(k.sign).simd(SIMD.i32x4_eq).simd(SIMD.v128_andnot);
      f.simdMem(SIMD.v128_store);
      f.get(src).i32Const(16).op(OP.i32_add).set(src);
      f.get(dst).i32Const(16).op(OP.i32_add).set(dst);
      f.br(0).end().end();
    });
  }
  m.addFunction('gather', ['i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [rows, table, dst, M, N] = [0, 1, 2, 3, 4];
    const k = f.local('i32');
    const r = f.local('i32');
    const s = f.local('i32');
    const e = f.local('i32');
    const rowBytes = f.local('i32');
    const zero = f.local('v128');
    f.get(N).i32Const(4).op(OP.i32_mul).set(rowBytes);
    f.block().loop();
    f.get(k).get(M).op(OP.i32_ge_u).brIf(1);
    f.get(rows).get(k).i32Const(4).op(OP.i32_mul).op(OP.i32_add).mem(OP.i32_load).set(r);
    f.get(dst).get(rowBytes).op(OP.i32_add).set(e);
    f.get(r).i32Const(0).op(OP.i32_ge_s).if();
    f.get(table).get(r).get(rowBytes).op(OP.i32_mul).op(OP.i32_add).set(s);
    f.block().loop();
    f.get(dst).get(e).op(OP.i32_ge_u).brIf(1);
    f.get(dst).get(s).simdMem(SIMD.v128_load).simdMem(SIMD.v128_store);
    f.get(s).i32Const(16).op(OP.i32_add).set(s);
    f.get(dst).i32Const(16).op(OP.i32_add).set(dst);
    f.br(0).end().end();
    f.else();
    emitZero(f, dst, e, zero);
    f.end();
    f.get(k).i32Const(1).op(OP.i32_add).set(k);
    f.br(0).end().end();
  });
  return m.toBytes();
}

interface OwnKernel {
  mem: wasm.WasmMemory;
  run: Exports['segsum'];
}

let kernel: OwnKernel | null | undefined;

function buildOwn(): OwnKernel | null {
  if (!wasm.wasmFeatures().simd) return null;
  const mem = new WA.Memory({ initial: 1 });
  const inst = new WA.Instance(new WA.Module(buildModule({ initial: 1 })), { env: { mem } });
  return { mem, run: (inst.exports as unknown as Exports).segsum };
}

/** Views of the kernel's memory for one call's sizes, kept while the sizes and the memory stay. */
let views: { buffer: ArrayBufferLike; rows: Int32Array; src: Float32Array; dst: Float32Array } | null = null;
function viewsFor(k: OwnKernel, T: number, ns: number, nd: number): NonNullable<typeof views> {
  const buffer = k.mem.buffer;
  if (views === null || views.buffer !== buffer || views.rows.length !== T || views.src.length !== ns || views.dst.length !== nd) {
    views = { buffer, rows: new Int32Array(buffer, 0, T), src: new Float32Array(buffer, T * 4, ns), dst: new Float32Array(buffer, T * 4 + ns * 4, nd) };
  }
  return views;
}

/** Whether the SIMD kernel can take a segment sum with rows of `n` values (a multiple of 4). */
export function segmentSumKernelAvailable(n: number): boolean {
  if (kernel === undefined) kernel = buildOwn();
  return kernel !== null && n % 4 === 0;
}

/** The most bytes one call may place in the kernel's memory (offsets are i32; 1 GiB keeps them positive with room). */
export const SEGMENT_SUM_MAX_BYTES = 2 ** 30;

/**
 * dst[rows[t]] = sum over t in order of bf16(src[t]) for every t with rows[t] >= 0 (rows of `n`
 * values; the sums start from zero, whatever `dst` held). Call after
 * `segmentSumKernelAvailable(n)`. Returns false, leaving `dst` alone, where the rows, values and
 * sums together pass SEGMENT_SUM_MAX_BYTES or the memory cannot grow to hold them: the caller
 * then sums in JavaScript.
 */
export function segmentSumBf16(src: Float32Array, rows: Int32Array, dst: Float32Array, n: number): boolean {
  const k = kernel!;
  const T = rows.length;
  const need = T * 4 + src.length * 4 + dst.length * 4;
  if (need > SEGMENT_SUM_MAX_BYTES) return false;
  const have = k.mem.buffer.byteLength;
  if (need > have) {
    try {
      k.mem.grow(Math.ceil((need - have) / 65536));
    } catch (e) {
      if (e instanceof RangeError) return false;
      throw e;
    }
  }
  const v = viewsFor(k, T, src.length, dst.length);
  v.rows.set(rows);
  v.src.set(src);
  k.run(0, v.src.byteOffset, v.dst.byteOffset, T, n, dst.length / n);
  dst.set(v.dst);
  return true;
}

/**
 * The kernels over an arena host's memory (see the file comment) and a scratch region reserved
 * there. Addresses are byte addresses in that memory; `f32` / `i32` view all of it (remade when
 * it grows).
 */
export class ArenaKernels {
  readonly run: Exports;
  f32!: Float32Array;
  i32!: Int32Array;
  /** The scratch region (byte address, bytes; -1 / 0: none yet). */
  private at = -1;
  private bytes = 0;

  constructor(readonly host: ArenaHost, module: wasm.WasmModule) {
    this.run = new WA.Instance(module, { env: { mem: host.memory } }).exports as unknown as Exports;
    this.view();
  }

  /** Remakes the views where the memory grew (a new buffer). */
  private view(): void {
    const buf = this.host.buffer();
    if (this.f32?.buffer === buf) return;
    this.f32 = new Float32Array(buf);
    this.i32 = new Int32Array(buf);
  }

  /** The byte address of a scratch region of at least `bytes` (16-aligned; kept for later calls), or -1 when the memory cannot hold it. */
  scratch(bytes: number): number {
    if (bytes > this.bytes) {
      const want = Math.max(bytes, 2 * this.bytes);
      const at = this.host.reserve(want);
      if (at < 0) return -1;
      if (this.at >= 0) this.host.release(this.at);
      this.at = at;
      this.bytes = want;
    }
    this.view();
    return this.at;
  }

  /** Gives the scratch region back (tests; the next call reserves one again). */
  releaseScratch(): void {
    if (this.at >= 0) this.host.release(this.at);
    this.at = -1;
    this.bytes = 0;
  }
}

const arenaKernelsOf = new WeakMap<ArenaHost, ArenaKernels | null>();

/** The kernels over `host`'s memory (one instance per host), or null where SIMD is missing or the module cannot be built over it. */
export function arenaKernels(host: ArenaHost): ArenaKernels | null {
  let k = arenaKernelsOf.get(host);
  if (k === undefined) {
    k = null;
    if (wasm.wasmFeatures().simd) {
      try {
        k = new ArenaKernels(host, new WA.Module(buildModule({ initial: 1, maximum: host.maxPages, shared: true })));
      } catch {
        k = null;
      }
    }
    arenaKernelsOf.set(host, k);
  }
  return k;
}
