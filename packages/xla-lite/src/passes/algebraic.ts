/**
 * Algebraic simplification, the rewrites XLA's AlgebraicSimplifier does first:
 *   x * 1 -> x, 1 * x -> x, x + 0 -> x, 0 + x -> x, x - 0 -> x, x / 1 -> x (when the result
 *   type equals x's, so no broadcast or promotion is lost);
 *   transpose(transpose(x)) -> one transpose; identity transpose -> x;
 *   reshape(reshape(x)) -> one reshape; reshape to the same shape -> x;
 *   broadcast(broadcast(x)) -> one broadcast; identity broadcast -> x;
 *   convert to the same type -> x;
 *   transpose(broadcast(x)) -> broadcast(x) (or broadcast of a smaller transpose of x);
 *   dot_general(a, broadcast(w)) whose batch dims only come from the broadcast -> a plain
 *   dot_general(a, w): the weight is not replicated per batch element and the GEMM gets
 *   taller (the mirror case, broadcast on the left, is not rewritten);
 *   reduce_sum over all batch dims of a dot_general -> a dot_general contracting them too
 *   (the transpose of the previous rewrite, as backprop produces it).
 * A "one"/"zero" is a constant whose elements all equal it, or a broadcast of one. Returns the
 * number of rewrites; run to a fixed point by the pipeline. Also runs `floatIndexValues`
 * (indexValues.ts: integer compares against iotas as float32 compares, broadcasts sunk into
 * iota expressions), which makes masks and one-hot encodings fusible.
 */
import { type HloComputation, type HloInstruction, makeInstruction } from '../hlo';
import { floatIndexValues } from './indexValues';

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

const isIota = (xs: readonly number[]): boolean => xs.every((d, k) => d === k);
const increasing = (xs: readonly number[]): boolean => xs.every((d, k) => k === 0 || d > xs[k - 1]);

/** A new instruction of `proto`'s primitive. */
const make = (proto: HloInstruction, operands: HloInstruction[], params: Record<string, unknown>): HloInstruction => makeInstruction(proto.prim!, operands, params);

/** dot_general(a, broadcast(w)) -> dot_general(a, w) when the rhs batch dims are exactly the broadcast's new dims. */
function dotOfBroadcast(i: HloInstruction): HloInstruction | null {
  const p = i.params as { dimensionNumbers: [[number[], number[]], [number[], number[]]]; precision: unknown; preferredElementType: unknown };
  const [[lc, rc], [lb, rb]] = p.dimensionNumbers;
  if (lb.length === 0) return null;
  const bc = i.operands[1];
  if (bc.prim?.name !== 'broadcast_in_dim') return null;
  const w = bc.operands[0];
  const dims = (bc.params as { broadcastDimensions: number[] }).broadcastDimensions;
  const added = bc.shape.shape.map((_, d) => d).filter((d) => !dims.includes(d));
  // The broadcast adds exactly the batch dims (leading, in order on both sides) and copies the
  // rest; then output [batch, lhs free, rhs free] == [lhs free incl. batch, w free].
  if (!isIota(rb) || !isIota(lb) || added.join() !== rb.join() || !increasing(dims)) return null;
  if (dims.some((d, j) => w.shape.shape[j] !== bc.shape.shape[d])) return null;
  const wC = rc.map((d) => dims.indexOf(d));
  return make(i, [i.operands[0], w], { ...p, dimensionNumbers: [[lc, wC], [[], []]] });
}

/** reduce_sum over exactly the batch dims of a dot_general -> contract them instead. */
function reduceOfDot(i: HloInstruction, users: Map<HloInstruction, (HloInstruction | null)[]> | null): HloInstruction | null {
  const d = i.operands[0];
  if (d.prim?.name !== 'dot_general' || !users || users.get(d)?.length !== 1) return null;
  const p = d.params as { dimensionNumbers: [[number[], number[]], [number[], number[]]] };
  const [[lc, rc], [lb, rb]] = p.dimensionNumbers;
  const axes = [...(i.params as { axes: number[] }).axes].sort((a, b) => a - b);
  if (lb.length === 0 || !isIota(axes) || axes.length !== lb.length) return null;
  return make(d, d.operands, { ...d.params, dimensionNumbers: [[[...lc, ...lb], [...rc, ...rb]], [[], []]] });
}

/** transpose(broadcast(x)) -> broadcast(x') with x' = x or a transpose of x (smaller). */
function transposeOfBroadcast(i: HloInstruction): HloInstruction | null {
  const bc = i.operands[0];
  if (bc.prim?.name !== 'broadcast_in_dim') return null;
  const perm = (i.params as { permutation: number[] }).permutation;
  const dims = (bc.params as { broadcastDimensions: number[] }).broadcastDimensions;
  const x = bc.operands[0];
  const newDims = dims.map((d) => perm.indexOf(d));
  const order = newDims.map((_, j) => j).sort((a, b) => newDims[a] - newDims[b]);
  const bcProto = bc;
  let src = x;
  if (!isIota(order)) src = make(i, [x], { permutation: order });
  return make(bcProto, [src], { shape: i.shape.shape, broadcastDimensions: order.map((j) => newDims[j]) });
}

let currentUsers: Map<HloInstruction, (HloInstruction | null)[]> | null = null;

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
    case 'dot_general':
      return dotOfBroadcast(i);
    case 'reduce_sum':
      return reduceOfDot(i, currentUsers);
    case 'transpose': {
      const perm: number[] = p.permutation;
      if (perm.every((d, k) => d === k)) return a;
      if (a.prim?.name === 'broadcast_in_dim') return transposeOfBroadcast(i);
      if (a.prim?.name === 'transpose') {
        const inner: number[] = (a.params as any).permutation;
        return make(i, [a.operands[0]], { permutation: perm.map((d) => inner[d]) });
      }
      return null;
    }
    case 'reshape':
      if (sameType(a, i)) return a;
      if (a.prim?.name === 'reshape') return make(i, [a.operands[0]], { ...p });
      return null;
    case 'broadcast_in_dim': {
      if (sameType(a, i)) return a;
      if (a.prim?.name === 'broadcast_in_dim') {
        const innerDims: number[] = (a.params as any).broadcastDimensions;
        const outerDims: number[] = p.broadcastDimensions;
        return make(i, [a.operands[0]], { shape: p.shape, broadcastDimensions: innerDims.map((d) => outerDims[d]) });
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
  currentUsers = c.users();
  for (const i of [...c.instructions]) {
    const r = simplifyOne(i);
    if (!r) continue;
    for (const extra of [...r.operands, r]) if (!c.instructions.includes(extra)) c.instructions.splice(c.instructions.indexOf(i), 0, extra);
    c.replaceUses(i, r);
    n++;
  }
  currentUsers = null;
  n += floatIndexValues(c);
  if (n) c.sort();
  return n;
}
