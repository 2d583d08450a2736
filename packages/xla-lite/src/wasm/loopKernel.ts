/**
 * Loop fusions (planned by `emitKernel.ts`): work items are (row, chunk of CHUNK columns); each computes
 * the body's value (values, for a multi-output fusion) over its columns and stores it.
 *
 * tanh: its exp path (|x| >= 0.625) is a branch per vector around ~40 instructions. Inline, its
 * mere presence in the loop costs the vectors that skip it (register pressure around the
 * branch): a tanh-GELU kernel whose arguments are small took 1.60 ns per element, 0.97 without
 * the exp path (BENCHMARKS.md, "vm10"). With `opts.tanh.call` the kernel has two walks: one
 * calling a function of the module for the exp path (1.29 ns there), one with it inline (as
 * fast as before where most vectors take it; the call costs ~1 ns per element more then).
 * Each item takes the call walk unless at least 1/8 of the previous item's vectors took the
 * exp path (the first item of a call takes the call walk). Both compute the same operations,
 * so the values do not depend on the walk, and so not on the thread split either.
 */
import { wasm } from '@tpukit/core/internal';
import { emitElements, type ExprOptions } from './emitExpr';
import { outputAddr } from './fusionPlan';
import type { KernelScope } from './kernelScope';

const { OP } = wasm;

/** An item takes the inline walk when more than 1/INLINE_SHARE of the previous item's vectors took tanh's exp path. */
export const INLINE_SHARE = 8;

export function loopKernel(k: KernelScope): void {
  const { f, b, plan, at, opts, item, r, j0, j1, set, rowSetup, walk, reads, storeOut, forItems, chunkRange } = k;
  const cpr = plan.chunksPerRow;
  const outs = plan.body.outputs;
  const call = opts.tanh?.call;
  const inline = call === undefined ? -1 : f.local('i32');
  const count = call === undefined ? -1 : f.local('i32');
  // Every output computed in one walk (one for a single-output fusion), each stored to its buffer.
  const compute = (o: ExprOptions): void => walk((partial) => emitElements(b, plan.body, reads, o, outs).forEach((v, q) => storeOut(v, partial, outputAddr(at, q))));
  forItems(() => {
    set(r, () => f.get(item).i32Const(cpr).op(OP.i32_div_u));
    chunkRange(() => f.get(item).get(r).i32Const(cpr).op(OP.i32_mul).op(OP.i32_sub));
    rowSetup();
    if (call === undefined) {
      compute(opts);
      return;
    }
    set(count, () => f.i32Const(0));
    f.get(inline).if();
    compute({ ...opts, tanh: { count } });
    f.else();
    compute({ ...opts, tanh: { call, count } });
    f.end();
    // inline = count * 4 * INLINE_SHARE > (j1 - j0): more than 1/INLINE_SHARE of the item's vectors.
    set(inline, () => f.get(count).i32Const(4 * INLINE_SHARE).op(OP.i32_mul).get(j1).get(j0).op(OP.i32_sub).op(OP.i32_gt_u));
  });
}
