/**
 * The device program of `pnpm bench:mesh`: one data-parallel shard of a training step of
 * MaxText's decoder (@tpukit/maxtext-ts). A device worker loads this module (through
 * meshStep.cjs) and calls `gradStep` on its share of the batch; the loss and gradient are jitted
 * once per worker (xla-lite).
 */
import { type Array, np, setBackend, valueAndGrad } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import { type Batch, type ModelConfig, type Params, loss } from '@tpukit/maxtext-ts';

let compiled: { key: string; fn: (p: Params, b: Batch) => [Array, Params] } | null = null;

/** Loss and gradient of the mean loss on this device's rows of the batch. */
export function gradStep(params: Params, tokens: Array, segmentIds: Array, positions: Array, cfg: ModelConfig): { loss: Array; grads: Params } {
  const key = JSON.stringify(cfg);
  if (compiled?.key !== key) {
    setBackend('systolic');
    compiled = { key, fn: jit(valueAndGrad((p: Params, b: Batch) => loss(p, b, cfg))) as never };
  }
  const [value, grads] = compiled.fn(params, { tokens, segmentIds, positions });
  return { loss: value, grads };
}

/** Compute-bound work with no communication: `reps` chained [n,n] matmuls (systolic backend). */
export function matmulChain(x: Array, reps: number): Array {
  setBackend('systolic');
  let y = x;
  for (let i = 0; i < reps; i++) y = np.tanh(np.matmul(y, x));
  return np.sum(y);
}
