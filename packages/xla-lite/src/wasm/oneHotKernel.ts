/**
 * The WebAssembly SIMD kernel of `onehot_segment_sum` (js/oneHotKernels.ts) at the MXU's default
 * precision: for each token t in order whose row r is valid, dst[r] += bf16(src[t]) over the row,
 * four lanes at a time (round to nearest even on the bits, NaN kept quiet, as core's bf16 codec),
 * float32 accumulation. One module per process, with a memory of its own that grows to the
 * largest call (up to SEGMENT_SUM_MAX_BYTES; larger calls fall back to the JavaScript loop); the
 * caller's values are copied in and the sums out. It runs on the calling thread:
 * at the GPT's size (2048 x 128 values) one call takes a fraction of a millisecond, below what
 * handing work to the kernel threads costs, and a single thread sums every row in token order,
 * so the result does not depend on the thread count.
 */
import { wasm } from '@tpukit/core/internal';

const { ModuleBuilder, OP, SIMD, WA } = wasm;

interface Kernel {
  mem: wasm.WasmMemory;
  run: (rows: number, src: number, dst: number, T: number, N: number) => void;
}

let kernel: Kernel | null | undefined;

function build(): Kernel | null {
  if (!wasm.wasmFeatures().simd) return null;
  const m = new ModuleBuilder();
  m.importMemory('env', 'mem', { initial: 1 });
  m.addFunction('segsum', ['i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [rows, src, dst, T, N] = [0, 1, 2, 3, 4];
    const t = f.local('i32');
    const r = f.local('i32');
    const s = f.local('i32');
    const d = f.local('i32');
    const e = f.local('i32');
    const bits = f.local('v128');
    const rowBytes = f.local('i32');
    f.get(N).i32Const(4).op(OP.i32_mul).set(rowBytes);
    f.block().loop();
    f.get(t).get(T).op(OP.i32_ge_u).brIf(1);
    f.get(rows).get(t).i32Const(4).op(OP.i32_mul).op(OP.i32_add).mem(OP.i32_load).set(r);
    f.get(r).i32Const(0).op(OP.i32_ge_s).if();
    f.get(src).get(t).get(rowBytes).op(OP.i32_mul).op(OP.i32_add).tee(s).get(rowBytes).op(OP.i32_add).set(e);
    f.get(dst).get(r).get(rowBytes).op(OP.i32_mul).op(OP.i32_add).set(d);
    f.block().loop();
    f.get(s).get(e).op(OP.i32_ge_u).brIf(1);
    f.get(s).simdMem(SIMD.v128_load).set(bits);
    // dst += bitselect(quiet NaN, rounded, isNaN)
    f.get(d);
    f.get(d).simdMem(SIMD.v128_load);
    f.get(bits).v128Const([0x00400000, 0x00400000, 0x00400000, 0x00400000]).simd(SIMD.v128_or).v128Const([0xffff0000, 0xffff0000, 0xffff0000, 0xffff0000]).simd(SIMD.v128_and);
    f.get(bits).v128Const([0x7fff, 0x7fff, 0x7fff, 0x7fff]).simd(SIMD.i32x4_add);
    f.get(bits).i32Const(16).simd(SIMD.i32x4_shr_u).v128Const([1, 1, 1, 1]).simd(SIMD.v128_and).simd(SIMD.i32x4_add);
    f.v128Const([0xffff0000, 0xffff0000, 0xffff0000, 0xffff0000]).simd(SIMD.v128_and);
    f.get(bits).get(bits).simd(SIMD.f32x4_ne);
    f.simd(SIMD.v128_bitselect);
    f.simd(SIMD.f32x4_add).simdMem(SIMD.v128_store);
    f.get(s).i32Const(16).op(OP.i32_add).set(s);
    f.get(d).i32Const(16).op(OP.i32_add).set(d);
    f.br(0).end().end();
    f.end();
    f.get(t).i32Const(1).op(OP.i32_add).set(t);
    f.br(0).end().end();
  });
  const mem = new WA.Memory({ initial: 1 });
  const inst = new WA.Instance(new WA.Module(m.toBytes()), { env: { mem } });
  return { mem, run: (inst.exports as { segsum: Kernel['run'] }).segsum };
}

/** Views of the kernel's memory for one call's sizes, kept while the sizes and the memory stay. */
let views: { buffer: ArrayBufferLike; rows: Int32Array; src: Float32Array; dst: Float32Array } | null = null;
function viewsFor(k: Kernel, T: number, ns: number, nd: number): NonNullable<typeof views> {
  const buffer = k.mem.buffer;
  if (views === null || views.buffer !== buffer || views.rows.length !== T || views.src.length !== ns || views.dst.length !== nd) {
    views = { buffer, rows: new Int32Array(buffer, 0, T), src: new Float32Array(buffer, T * 4, ns), dst: new Float32Array(buffer, T * 4 + ns * 4, nd) };
  }
  return views;
}

/** Whether the SIMD kernel can take a segment sum with rows of `n` values (a multiple of 4). */
export function segmentSumKernelAvailable(n: number): boolean {
  if (kernel === undefined) kernel = build();
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
  v.dst.fill(0);
  k.run(0, v.src.byteOffset, v.dst.byteOffset, T, n);
  dst.set(v.dst);
  return true;
}
