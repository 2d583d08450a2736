/**
 * Row reductions (reduced axes trailing): one output per work item; float32 max in f32x4
 * lanes (`pmax` and two masks, kernelScope.ts), sum in float64 (two f64x2 accumulators), then the horizontal reduction.
 */
import { wasm } from '@tpukit/core/internal';
import type { E } from './vecBuilder';
import type { KernelScope } from './kernelScope';

const { OP } = wasm;

export function rowReduceKernel(k: KernelScope): void {
  const { f, b, plan, at, item, r, j0, j1, s, L, i32, set, rowSetup, columns, forItems, laneMask, newAcc, accumulateInto, horizontal, initAcc } = k;
  const q = plan.rowsPerOutput;
  const acc = newAcc();
  const accumulate = (v: E): void => accumulateInto(plan.isMax, acc, v);
  forItems(() => {
    initAcc(plan.isMax, acc);
    if (q > 0) {
      set(s, () => i32(0));
      f.loop();
      set(r, () => f.get(item).i32Const(q).op(OP.i32_mul).get(s).op(OP.i32_add));
      rowSetup();
      set(j0, () => i32(0));
      set(j1, () => i32(L));
      columns(accumulate, (v) => accumulate(b.sel(laneMask(), v, plan.isMax ? b.k(-Infinity) : b.k(0))));
      f.get(s).i32Const(1).op(OP.i32_add).tee(s).i32Const(q).op(OP.i32_lt_s).brIf(0);
      f.end();
    }
    // out[item] = horizontal reduction
    f.get(item).i32Const(2).op(OP.i32_shl);
    horizontal(plan.isMax, acc);
    f.mem(0x38 /* f32.store */, at.out, 4);
  });
}
