/**
 * Optimization barriers (`opt-barrier`, core's `optimization_barrier`) are identities that the
 * simplification passes must not see through: common-subexpression elimination leaves them
 * alone (cse.ts), so a computation fed by a barrier is never merged with the same computation
 * on the barrier's operands. That is how `checkpoint` keeps its recomputation in the backward
 * pass. Once the passes that could merge are done (pipeline.ts), the barriers have no job left
 * and this pass drops them: every read of a barrier's result (directly, or through a
 * get-tuple-element) reads the barrier's operand, so the executable runs no identity and its
 * buffer plan never sees two names for one value. Returns how many barriers were dropped.
 */
import type { HloComputation, HloInstruction } from '../hlo';

export const BARRIER = 'opt-barrier';

export function dropBarriers(c: HloComputation): number {
  const through = new Map<HloInstruction, HloInstruction>();
  let n = 0;
  for (const i of c.instructions) {
    if (i.opcode === BARRIER) {
      n++;
      // A one-operand barrier is read directly (lower.ts binds a single output to the instruction).
      if (!i.isTuple) through.set(i, i.operands[0]);
    } else if (i.opcode === 'get-tuple-element' && i.operands[0].opcode === BARRIER) {
      through.set(i, i.operands[0].operands[i.params.index as number]);
    }
  }
  if (n === 0) return 0;
  // A barrier may read another barrier's result: follow the chain to a value that is not one.
  const resolve = (o: HloInstruction): HloInstruction => {
    let r = o;
    while (through.has(r)) r = through.get(r)!;
    return r;
  };
  for (const i of c.instructions) i.operands = i.operands.map(resolve);
  c.outputs = c.outputs.map(resolve);
  c.instructions = c.instructions.filter((i) => !through.has(i) && i.opcode !== BARRIER);
  return n;
}
