/**
 * Algebraic simplification, the rewrites XLA's AlgebraicSimplifier does first:
 *   x * 1 -> x, 1 * x -> x, x + 0 -> x, 0 + x -> x, x - 0 -> x, x / 1 -> x (when the result
 *   type equals x's, so no broadcast or promotion is lost);
 *   transpose(transpose(x)) -> one transpose; identity transpose -> x;
 *   reshape(reshape(x)) -> one reshape; reshape to the same shape -> x;
 *   broadcast(broadcast(x)) -> one broadcast; identity broadcast -> x;
 *   convert to the same type -> x.
 * A "one"/"zero" is a constant whose elements all equal it, or a broadcast of one. Returns the
 * number of rewrites; run to a fixed point by the pipeline.
 */
import { type HloComputation, HloInstruction } from '../hlo';

function splat(i: HloInstruction): number | null {
  if (i.opcode === 'constant') {
    const l = i.literal!;
    if (l.size > 4096 || l.dtype === 'bool') return null;
    const v = l.dataSync() as ArrayLike<number>;
    if (v.length === 0) return null;
    for (let k = 1; k < v.length; k++) if (v[k] !== v[0]) return null;
    return v[0];
  }
  if (i.prim?.name === 'broadcast_in_dim') return splat(i.operands[0]);
  return null;
}

const sameType = (a: HloInstruction, b: HloInstruction): boolean =>
  !a.isTuple && !b.isTuple && a.shape.dtype === b.shape.dtype && a.shape.shape.join() === b.shape.shape.join() && a.shape.weakType === b.shape.weakType;

function simplifyOne(i: HloInstruction): HloInstruction | null {
  const name = i.prim?.name;
  const [a, b] = i.operands;
  const p = i.params as Record<string, any>;
  switch (name) {
    case 'mul':
      if (splat(b) === 1 && sameType(a, i)) return a;
      if (splat(a) === 1 && sameType(b, i)) return b;
      return null;
    case 'add':
      if (splat(b) === 0 && sameType(a, i)) return a;
      if (splat(a) === 0 && sameType(b, i)) return b;
      return null;
    case 'sub':
      return splat(b) === 0 && sameType(a, i) ? a : null;
    case 'div':
      return splat(b) === 1 && sameType(a, i) ? a : null;
    case 'transpose': {
      const perm: number[] = p.permutation;
      if (perm.every((d, k) => d === k)) return a;
      if (a.prim?.name === 'transpose') {
        const inner: number[] = (a.params as any).permutation;
        return new HloInstruction('transpose', i.shapes, [a.operands[0]], { permutation: perm.map((d) => inner[d]) }, i.prim);
      }
      return null;
    }
    case 'reshape':
      if (sameType(a, i)) return a;
      if (a.prim?.name === 'reshape') return new HloInstruction('reshape', i.shapes, [a.operands[0]], { ...p }, i.prim);
      return null;
    case 'broadcast_in_dim': {
      if (sameType(a, i)) return a;
      if (a.prim?.name === 'broadcast_in_dim') {
        const innerDims: number[] = (a.params as any).broadcastDimensions;
        const outerDims: number[] = p.broadcastDimensions;
        return new HloInstruction('broadcast', i.shapes, [a.operands[0]], { shape: p.shape, broadcastDimensions: innerDims.map((d) => outerDims[d]) }, i.prim);
      }
      return null;
    }
    case 'convert_element_type':
      return sameType(a, i) ? a : null;
    default:
      return null;
  }
}

export function algebraicSimplify(c: HloComputation): number {
  let n = 0;
  for (const i of [...c.instructions]) {
    const r = simplifyOne(i);
    if (!r) continue;
    if (!c.instructions.includes(r)) c.instructions.splice(c.instructions.indexOf(i), 0, r);
    c.replaceUses(i, r);
    n++;
  }
  if (n) c.sort();
  return n;
}
