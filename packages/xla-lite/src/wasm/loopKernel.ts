/**
 * Loop fusions (planned by `emitKernel.ts`): work items are (row, chunk of CHUNK columns); each computes
 * the body's value over its columns and stores it.
 */
import { wasm } from '@tpukit/core/internal';
import type { KernelScope } from './kernelScope';

const { OP } = wasm;

export function loopKernel(k: KernelScope): void {
  const { f, plan, at, item, r, set, rowSetup, columns, storeOut, forItems, chunkRange } = k;
  const cpr = plan.chunksPerRow;
  forItems(() => {
    set(r, () => f.get(item).i32Const(cpr).op(OP.i32_div_u));
    chunkRange(() => f.get(item).get(r).i32Const(cpr).op(OP.i32_mul).op(OP.i32_sub));
    rowSetup();
    columns(
      (v) => storeOut(v, false, at.out),
      (v) => storeOut(v, true, at.out),
    );
  });
}
