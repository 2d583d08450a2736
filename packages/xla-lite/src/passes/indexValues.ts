/**
 * Index values (iotas and what is computed from them alone) made fusible, so that masks and
 * one-hot encodings are computed inside the kernels that read them instead of being built by
 * separate integer kernels and materialised every call:
 *
 * 1. An integer compare with an iota on one side becomes a float32 compare: the iota becomes a
 *    float32 iota and the other side is converted (through broadcasts and reshapes, so the
 *    conversion runs on the small operand: `one_hot(x)` converts x, not the broadcast). This
 *    is exact: the iota's values 0..n-1 (n <= 2^24) are float32 integers, and int32 -> float32
 *    rounds monotonically, so an int32 v compares with such a k as float32(v) does (|v| <= 2^24
 *    is exact; larger |v| round to at least 2^24 in magnitude, still on the same side of k).
 * 2. A broadcast of a value computed from iotas (and scalars) alone is rebuilt at the
 *    broadcast's shape (each iota counting along the dim its dim maps to), as XLA sinks
 *    broadcasts into iotas: the causal mask `broadcast(le(iota, iota))` becomes `le(iota',
 *    iota'')` at the attention scores' shape, which the softmax's row fusion then computes per
 *    element from the loop position instead of reading a materialised [B,H,T,T] mask.
 *
 * Fusion (passes/fusion.ts, passes/rowFusion.ts) treats a float32 iota as an elementwise op
 * without operands; both kernel generators compute it from the loop coordinates.
 */
import { type HloComputation, type HloInstruction, makeInstruction as make } from '../hlo';
import { COMPARE, EXACT_F32_INT, generated } from './fusion';

const dimsOf = (b: HloInstruction): readonly number[] => (b.params as { broadcastDimensions: readonly number[] }).broadcastDimensions;
const iotaParams = (i: HloInstruction): { dtype: string; shape: readonly number[]; dimension: number } => i.params as { dtype: string; shape: readonly number[]; dimension: number };

/** An int32 iota (possibly broadcast or reshaped) whose values are exact float32 integers. */
function isIndex(i: HloInstruction): boolean {
  if (i.isTuple || i.shape.dtype !== 'int32') return false;
  const name = i.prim?.name;
  if (name === 'iota') {
    const { shape, dimension } = iotaParams(i);
    return shape[dimension] <= EXACT_F32_INT;
  }
  if (name === 'broadcast_in_dim' || name === 'reshape') return isIndex(i.operands[0]);
  return false;
}

/** `x` (int32) as float32, its new instructions appended to `added` (iotas become float32 iotas; the conversion runs below broadcasts and reshapes). */
function toFloat(x: HloInstruction, added: HloInstruction[]): HloInstruction {
  const name = x.prim?.name;
  let r: HloInstruction;
  if (name === 'iota') r = make('iota', [], { ...x.params, dtype: 'float32' });
  else if (name === 'broadcast_in_dim' || name === 'reshape') r = make(name, [toFloat(x.operands[0], added)], x.params);
  else r = make('convert_element_type', [x], { newDtype: 'float32', weakType: false });
  added.push(r);
  return r;
}

/** `x` (generated) rebuilt at `shape`, its dim d mapped to `dims[d]`, appended to `added`. */
function rebuild(x: HloInstruction, shape: readonly number[], dims: readonly number[], added: HloInstruction[], memo = new Map<HloInstruction, HloInstruction>()): HloInstruction {
  // (Generated values share operands: each is rebuilt once, not once per path to it.)
  const done = memo.get(x);
  if (done !== undefined) return done;
  const r = rebuildOne(x, shape, dims, added, memo);
  memo.set(x, r);
  return r;
}

function rebuildOne(x: HloInstruction, shape: readonly number[], dims: readonly number[], added: HloInstruction[], memo: Map<HloInstruction, HloInstruction>): HloInstruction {
  const name = x.prim?.name;
  if (x.opcode === 'constant' || name === 'broadcast_in_dim') {
    // A scalar (see `generated`), broadcast to the new shape.
    const r = make('broadcast_in_dim', [x.opcode === 'constant' ? x : x.operands[0]], { shape, broadcastDimensions: [] });
    added.push(r);
    return r;
  }
  let r: HloInstruction;
  if (name === 'iota') {
    const p = iotaParams(x);
    r = make('iota', [], { ...p, shape, dimension: dims[p.dimension] });
  } else r = make(name!, x.operands.map((o) => rebuild(o, shape, dims, added, memo)), x.params);
  added.push(r);
  return r;
}

/** Rewrites 1 and 2 over `c` (see the file comment); returns the number of rewrites. */
export function floatIndexValues(c: HloComputation): number {
  let n = 0;
  for (const i of [...c.instructions]) {
    const name = i.prim?.name;
    const added: HloInstruction[] = [];
    let r: HloInstruction | null = null;
    if (name && COMPARE.has(name) && i.operands.every((o) => !o.isTuple && o.shape.dtype === 'int32') && i.operands.some(isIndex)) {
      r = make(name, i.operands.map((o) => toFloat(o, added)), i.params);
    } else if (name === 'broadcast_in_dim' && !i.isTuple && generated(i.operands[0])) {
      const x = i.operands[0];
      // (A broadcast of a scalar constant is already as cheap as it gets.)
      if (x.opcode === 'constant' || x.prim?.name === 'broadcast_in_dim') continue;
      // Only broadcasts that keep every source dim (size-1 dims dropped would change the iota's extent).
      if (x.shape.shape.every((sz, d) => sz === i.shape.shape[dimsOf(i)[d]])) r = rebuild(x, i.shape.shape, dimsOf(i), added);
    }
    if (!r) continue;
    if (r !== added[added.length - 1]) added.push(r);
    c.instructions.splice(c.instructions.indexOf(i), 0, ...added);
    c.replaceUses(i, r);
    c.instructions.splice(c.instructions.indexOf(i), 1);
    n++;
  }
  return n;
}
