/**
 * Loop fusions (planned by `emitKernel.ts`): work items are (row, chunk of CHUNK columns); each computes
 * the body's value (values, for a multi-output fusion) over its columns and stores it.
 */
import { wasm } from '@tpukit/core/internal';
import { emitElements } from './emitExpr';
import { outputAddr } from './fusionPlan';
import type { KernelScope } from './kernelScope';

const { OP } = wasm;

export function loopKernel(k: KernelScope): void {
  const { f, b, plan, at, opts, item, r, set, rowSetup, walk, reads, storeOut, forItems, chunkRange } = k;
  const cpr = plan.chunksPerRow;
  const outs = plan.body.outputs;
  forItems(() => {
    set(r, () => f.get(item).i32Const(cpr).op(OP.i32_div_u));
    chunkRange(() => f.get(item).get(r).i32Const(cpr).op(OP.i32_mul).op(OP.i32_sub));
    rowSetup();
    // Every output computed in one walk (one for a single-output fusion), each stored to its buffer.
    walk((partial) => emitElements(b, plan.body, reads, opts, outs).forEach((v, q) => storeOut(v, partial, outputAddr(at, q))));
  });
}
