/**
 * Dead-code elimination: drops every instruction the computation's outputs do not depend on
 * (parameters stay, they are the signature). Effectful instructions (debug callbacks, or loops
 * and calls containing them, see `effects.ts`) are roots: kept with everything they read.
 * Returns how many instructions were removed.
 */
import { hasEffect } from '../effects';
import type { HloComputation, HloInstruction } from '../hlo';

export function dce(c: HloComputation): number {
  const live = new Set<HloInstruction>(c.params);
  const stack = [...c.outputs, ...c.instructions.filter(hasEffect)];
  while (stack.length) {
    const i = stack.pop()!;
    if (live.has(i) && i.opcode !== 'parameter') continue;
    live.add(i);
    for (const o of i.operands) if (!live.has(o)) stack.push(o);
  }
  const before = c.instructions.length;
  c.instructions = c.instructions.filter((i) => live.has(i));
  return before - c.instructions.length;
}
