/**
 * Column reductions (reduced axes leading): work items are (group of L output columns, chunk
 * of COL_CHUNK columns); each chunk accumulates in a float64 scratch row over the K reduced
 * rows in order, then rounds to float32 once.
 */
import { wasm } from '@tpukit/core/internal';
import type { E } from './vecBuilder';
import type { KernelScope } from './kernelScope';

const { OP, SIMD } = wasm;

export function columnReduceKernel(k: KernelScope): void {
  const { f, b, plan, at, I, item, r, rowBase, j, j0, j1, ej, ej4, rem, s, L, i32, set, rowSetup, columns, storeOut, forItems, chunkRange, hiHalf, f64Const } = k;
const init = plan.isMax ? -Infinity : 0;
// Column reduction: scratch[g*W + j] (float64) accumulates over the K reduced rows.
const G = plan.groups;
const W = plan.groupWidth;
const cpr = plan.chunksPerRow;
const g = I();
const sp = I();
const op = plan.isMax ? SIMD.f64x2_max : SIMD.f64x2_add;
forItems(() => {
  set(g, () => f.get(item).i32Const(cpr).op(OP.i32_div_u));
  chunkRange(() => f.get(item).get(g).i32Const(cpr).op(OP.i32_mul).op(OP.i32_sub));
  // Initialise the chunk's scratch (whole vectors: the group is padded to W columns).
  f.get(j0).set(j);
  f.block().loop();
  f.get(j).get(j1).op(OP.i32_ge_u).brIf(1);
  set(sp, () => f.get(g).i32Const(W).op(OP.i32_mul).get(j).op(OP.i32_add).i32Const(3).op(OP.i32_shl));
  for (const off of [0, 16]) {
    f.get(sp);
    f64Const(init)();
    f.simdMem(SIMD.v128_store, at.scratch + off, 16);
  }
  f.get(j).i32Const(4).op(OP.i32_add).set(j).br(0);
  f.end().end();
  if (plan.K > 0) {
    set(s, () => i32(0));
    f.loop();
    set(r, () => f.get(s).i32Const(G).op(OP.i32_mul).get(g).op(OP.i32_add));
    rowSetup();
    const acc = (v: E): void => {
      const x = b.let(v);
      set(sp, () => f.get(g).i32Const(W).op(OP.i32_mul).get(j).op(OP.i32_add).i32Const(3).op(OP.i32_shl));
      f.get(sp);
      b.op(op, () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch, 16), b.op(SIMD.f64x2_promote_low_f32x4, x))();
      f.simdMem(SIMD.v128_store, at.scratch, 16);
      f.get(sp);
      b.op(op, () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch + 16, 16), b.op(SIMD.f64x2_promote_low_f32x4, hiHalf(x)))();
      f.simdMem(SIMD.v128_store, at.scratch + 16, 16);
    };
    columns(acc, acc);
    f.get(s).i32Const(1).op(OP.i32_add).tee(s).i32Const(plan.K).op(OP.i32_lt_s).brIf(0);
    f.end();
  }
  // out[g*L + j] = float32(scratch[g*W + j]) over the chunk.
  set(rowBase, () => f.get(g).i32Const(L).op(OP.i32_mul));
  const fromScratch = (): E => {
    set(sp, () => f.get(g).i32Const(W).op(OP.i32_mul).get(j).op(OP.i32_add).i32Const(3).op(OP.i32_shl));
    const lo2 = b.op(SIMD.f32x4_demote_f64x2_zero, () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch, 16));
    const hi2 = b.op(SIMD.f32x4_demote_f64x2_zero, () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch + 16, 16));
    return b.let(b.shuffle(lo2, hi2, [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]));
  };
  f.get(j0).set(j);
  f.block().loop();
  f.get(j1).get(j).op(OP.i32_sub).i32Const(4).op(OP.i32_lt_s).brIf(1);
  set(ej, () => f.get(rowBase).get(j).op(OP.i32_add));
  set(ej4, () => f.get(ej).i32Const(2).op(OP.i32_shl));
  storeOut(fromScratch(), false, at.out);
  f.get(j).i32Const(4).op(OP.i32_add).set(j).br(0);
  f.end().end();
  f.get(j).get(j1).op(OP.i32_lt_s).if();
  set(rem, () => f.get(j1).get(j).op(OP.i32_sub));
  set(ej, () => f.get(rowBase).get(j).op(OP.i32_add));
  set(ej4, () => f.get(ej).i32Const(2).op(OP.i32_shl));
  storeOut(fromScratch(), true, at.out);
  f.end();
});
}
