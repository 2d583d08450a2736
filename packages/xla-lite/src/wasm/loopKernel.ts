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
 * exp path (the first item of a call takes the call walk). With `opts.tanh.defer` (the default,
 * `TanhWalks` in emitKernel.ts) an item the 1/8 rule does not send inline is first walked with
 * no branch at all: the polynomial is the value, and a mask of the lanes with |x| < 0.625 is
 * ANDed over the item; if a lane failed it, the item is computed again by the call walk (only
 * in kernels whose outputs overlap no input). The GPT's GELU arguments are small: the defer walk
 * took it to within ~0.1-0.2 ms per call of a kernel of the same traffic without tanh
 * (BENCHMARKS.md, "loops17"). Every walk computes the same operations, so the values do not
 * depend on the walk, and so not on the thread split either.
 *
 * Outputs that share no computed value (`outputGroupsOf`: a horizontal merge's members,
 * passes/horizontalLoops.ts) are walked one group after another within each item.
 */
import { wasm } from '@tpukit/core/internal';
import { type HloComputation, type HloInstruction, numel } from '../hlo';
import { emitElements, type ExprOptions } from './emitExpr';
import { outputAddr } from './fusionPlan';
import type { KernelScope } from './kernelScope';

const { OP, SIMD } = wasm;

/** An item takes the inline walk when more than 1/INLINE_SHARE of the previous item's vectors took tanh's exp path. */
export const INLINE_SHARE = 8;

export function loopKernel(k: KernelScope): void {
  const { f, b, plan, at, opts, item, r, j0, j1, set, rowSetup, walk, reads, storeOut, forItems, chunkRange, laneMask } = k;
  const cpr = plan.chunksPerRow;
  const outs = plan.body.outputs;
  const call = opts.tanh?.call;
  const inline = call === undefined ? -1 : f.local('i32');
  const count = call === undefined ? -1 : f.local('i32');
  const small = opts.tanh?.defer === true ? f.local('v128') : -1;
  // Every output computed in one walk (one for a single-output fusion), each stored to its buffer
  // (`tail`: other options for the last partial vector).
  // Outputs that share no computed value (a horizontal merge's members) walk the item's columns
  // one group after another: a walk per member keeps its few memory streams, where one walk over
  // all of them would interleave 4 to 7 streams per member (BENCHMARKS.md, "loops17").
  const groups = outputGroupsOf(plan.body);
  const compute = (o: ExprOptions, tail?: (partial: boolean) => ExprOptions | undefined): void => {
    for (const g of groups) walk((partial) => emitElements(b, plan.body, reads, tail?.(partial) ?? o, g.map((q) => outs[q])).forEach((v, k) => storeOut(v, partial, outputAddr(at, g[k]))));
  };
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
    if (small < 0) compute({ ...opts, tanh: { call, count } });
    else {
      // No branch in the walk; if some lane needed the exp path, the item again by the call walk.
      b.setTo(small, b.ki(-1));
      compute({ ...opts, tanh: { smallLanes: small } }, (partial) => (partial ? { ...opts, tanh: { smallLanes: small, validLanes: laneMask() } } : undefined));
      b.op(SIMD.v128_any_true, b.op(SIMD.v128_not, b.get(small)))();
      f.if();
      compute({ ...opts, tanh: { call, count } });
      f.end();
    }
    f.end();
    // inline = count * 4 * INLINE_SHARE > (j1 - j0): more than 1/INLINE_SHARE of the item's vectors.
    set(inline, () => f.get(count).i32Const(4 * INLINE_SHARE).op(OP.i32_mul).get(j1).get(j0).op(OP.i32_sub).op(OP.i32_gt_u));
  });
}

/**
 * The outputs of a loop body (their indices) in groups that share no computed value (parameters
 * and scalar broadcasts aside), in output order: one group for a fusion's own outputs, one per
 * member for a horizontal merge (passes/horizontalLoops.ts). A loop kernel walks each group's
 * columns in turn.
 */
export function outputGroupsOf(body: HloComputation): number[][] {
  const up = new Map<HloInstruction, HloInstruction>();
  const find = (x: HloInstruction): HloInstruction => {
    let r = x;
    while (up.get(r) !== undefined && up.get(r) !== r) r = up.get(r)!;
    return r;
  };
  const scalarLike = (o: HloInstruction): boolean => o.opcode === 'parameter' || numel(o.shape) === 1 || (o.prim?.name === 'broadcast_in_dim' && numel(o.operands[0].shape) === 1);
  for (const m of body.instructions) {
    if (scalarLike(m)) continue;
    up.set(m, up.get(m) ?? m);
    for (const o of m.operands) if (!scalarLike(o)) up.set(find(o), find(m));
  }
  const groups = new Map<HloInstruction, number[]>();
  body.outputs.forEach((o, q) => {
    const r = find(o);
    const g = groups.get(r);
    if (g) g.push(q);
    else groups.set(r, [q]);
  });
  return [...groups.values()];
}
