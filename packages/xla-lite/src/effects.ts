/**
 * Side effects in the IR. An instruction has an effect when its core primitive is effectful
 * (`debug_callback`: a host callback such as `debug.print`) or when a computation it calls
 * (a loop body, a branch, a nested jit) contains one. Effectful instructions are roots for DCE,
 * never merged by CSE, never evaluated by constant folding, and never fused; passes keep their
 * relative order, so callbacks run in program order (JAX's `ordered=True` holds for all).
 */
import { debug } from '@tpukit/core';
import type { HloComputation, HloInstruction } from './hlo';

const computationEffects = new WeakMap<HloComputation, boolean>();

function computationHasEffect(c: HloComputation): boolean {
  let v = computationEffects.get(c);
  if (v === undefined) {
    computationEffects.set(c, false); // guards against cycles (there are none in valid modules)
    v = c.instructions.some(hasEffect);
    computationEffects.set(c, v);
  }
  return v;
}

export function hasEffect(i: HloInstruction): boolean {
  if (i.prim !== null && debug.isEffectful(i.prim)) return true;
  return i.called.some(computationHasEffect);
}
