/**
 * Common-subexpression elimination: two instructions with the same opcode, primitive,
 * parameters and operands compute the same value (every core primitive is pure), so later
 * copies are replaced by the first. Constants are merged by value (small ones only), and
 * instructions that call computations or have effects (two identical `debug.print`s print
 * twice) are left alone, and so are optimization barriers. Returns how many were replaced.
 */
import { BARRIER } from './barriers';
import { hasEffect } from '../effects';
import type { HloComputation, HloInstruction } from '../hlo';

const MAX_CONST_KEY = 64;

function paramKey(p: Record<string, unknown>): string | null {
  try {
    return JSON.stringify(p, (_k, v) => (typeof v === 'function' ? `fn:${v.name}` : v));
  } catch {
    return null;
  }
}

function key(i: HloInstruction, ids: Map<HloInstruction, number>): string | null {
  // Two optimization barriers over the same values stay two (passes/barriers.ts).
  if (i.opcode === 'parameter' || i.opcode === BARRIER || i.called.length || hasEffect(i)) return null;
  if (i.opcode === 'constant') {
    const l = i.literal!;
    if (l.size > MAX_CONST_KEY) return null;
    return `const|${l.dtype}|${l.weakType}|${l.shape.join(',')}|${globalThis.Array.from(l.dataSync() as ArrayLike<number>).join(',')}`;
  }
  const pk = paramKey(i.params);
  if (pk === null) return null;
  const shapes = i.shapes.map((s) => `${s.dtype}${s.weakType ? 'w' : ''}[${s.shape.join(',')}]`).join(';');
  return `${i.opcode}|${i.prim?.name ?? ''}|${shapes}|${pk}|${i.operands.map((o) => ids.get(o)).join(',')}`;
}

export function cse(c: HloComputation): number {
  const canon = new Map<HloInstruction, number>();
  const seen = new Map<string, HloInstruction>();
  const replaced = new Map<HloInstruction, HloInstruction>();
  let n = 0;
  for (const i of c.instructions) {
    i.operands = i.operands.map((o) => replaced.get(o) ?? o);
    const k = key(i, canon);
    const prev = k === null ? undefined : seen.get(k);
    if (prev) {
      replaced.set(i, prev);
      n++;
      continue;
    }
    if (k !== null) seen.set(k, i);
    canon.set(i, i.id);
  }
  c.outputs = c.outputs.map((o) => replaced.get(o) ?? o);
  c.instructions = c.instructions.filter((i) => !replaced.has(i));
  return n;
}
