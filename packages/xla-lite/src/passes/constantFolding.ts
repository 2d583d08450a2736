/**
 * Constant folding: an instruction whose operands are all constants is evaluated at compile
 * time (by its core primitive on the current backend) and replaced by a `constant`. As in XLA,
 * broadcasts and iotas are not folded (they would only turn a cheap op into a large literal),
 * nor are results above `maxElements`, nor instructions that call computations, nor effects
 * (a debug callback on constants must still run at run time, every call).
 */
import { evalPrimitive } from '@tpukit/core/internal';
import { hasEffect } from '../effects';
import { type HloComputation, HloInstruction, numel } from '../hlo';

// The device-program primitives of a partitioned program (see spmd/deviceProgram.ts) differ per device and meet the other devices.
const NEVER = new Set(['broadcast_in_dim', 'iota', 'random_bits', 'threefry2x32', 'spmd_collective', 'spmd_device_slice']);

export function constantFold(c: HloComputation, maxElements = 1024): number {
  let n = 0;
  for (const i of [...c.instructions]) {
    if (!i.prim || i.called.length || i.isTuple || NEVER.has(i.prim.name) || hasEffect(i)) continue;
    if (!i.operands.every((o) => o.opcode === 'constant')) continue;
    if (numel(i.shape) > maxElements) continue;
    const [val] = evalPrimitive(i.prim, i.operands.map((o) => o.literal!), i.params);
    const k = new HloInstruction('constant', [i.shape], [], {}, null);
    k.literal = val;
    c.instructions[c.instructions.indexOf(i)] = k;
    c.replaceUses(i, k);
    n++;
  }
  return n;
}
