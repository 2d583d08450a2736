/**
 * One-hot dots as gathers (XLA rewrites `dot(one_hot(i), w)` into a gather the same way): a dot
 * one of whose operands is a one-hot encoding, `convert(eq(broadcast(index), iota))` to a float
 * type (exact 0/1 values; through transposes and reshapes that keep the class axis whole;
 * either compare operand order; an int or float iota), is rewritten into a primitive that moves rows instead of multiplying by zeros
 * (js/oneHotKernels.ts):
 *
 * - the one-hot contracted over its class dim (`one_hot(x) @ wte`, the embedding) becomes
 *   `onehot_gather(table, index)`: row index[m] of the table, the table being the other operand
 *   with its contracting dim moved first (a transpose when it is not) and its free dims merged;
 * - the one-hot contracted over all its other dims (`one_hot(x)^T @ dH`, the embedding's weight
 *   gradient) becomes `onehot_segment_sum(values, index)`: the other operand, its contracting
 *   dims ordered as the index's and moved first, summed into the rows its index picks.
 *
 * Reshapes and transposes around the new primitive restore the dot's output shape. The index
 * is the compare's broadcast operand with the dim that ran along the class dim dropped. Dots
 * with batch dims, other dtypes than float32/bfloat16, or a one-hot whose class dim is neither
 * the whole contraction nor all that is left free, are not rewritten. The new instruction keeps
 * the dot's precision (its kernels round as the dot does) and its FLOP count (`nominalFlops`,
 * which cost analysis reports). Runs after layout assignment has folded transposes into dots
 * (backprop's weight gradient is a plain token-axis dot only then) and before its layout
 * copies; `PipelineOptions.oneHot: false` turns it off, and so does TPUKIT_ONEHOT=0 in the
 * environment (read at each compile, by `jit` and by `Lowered.compile()`) unless the options
 * say `oneHot: true`.
 */
import { type HloComputation, type HloInstruction, makeInstruction, numel } from '../hlo';
import { EXACT_F32_INT } from './fusion';
import { type DotPrecision, isOneHotPrimitive, oneHotGatherP, oneHotSegmentSumP, type OneHotParams } from '../js/oneHotKernels';

type Dims = readonly number[];
type DotDims = readonly [readonly [Dims, Dims], readonly [Dims, Dims]];

/** A one-hot value X: X[..c..] = (J[rest] == c) along `classDim`, J of X's shape without that dim (row-major). */
interface OneHot {
  classDim: number;
  classes: number;
  /** Builds J (appending its instructions to `added`); only called once the rewrite is certain. */
  index(added: HloInstruction[]): HloInstruction;
}

/** Index and iota dtypes (eq needs equal dtypes; a narrow integer iota would wrap). */
const INDEX_DTYPES = new Set(['float32', 'int32', 'uint32']);

const params = <T>(i: HloInstruction): T => i.params as T;
const without = (xs: Dims, k: number): number[] => xs.filter((_, j) => j !== k);
const isIdentity = (p: Dims): boolean => p.every((d, k) => d === k);

function emit(added: HloInstruction[], prim: string, operands: HloInstruction[], p: Record<string, unknown>): HloInstruction {
  const r = makeInstruction(prim, operands, p);
  added.push(r);
  return r;
}
const reshape = (added: HloInstruction[], x: HloInstruction, shape: Dims): HloInstruction => (x.shape.shape.join() === shape.join() ? x : emit(added, 'reshape', [x], { newSizes: [...shape] }));
const transpose = (added: HloInstruction[], x: HloInstruction, perm: Dims): HloInstruction => (isIdentity(perm) ? x : emit(added, 'transpose', [x], { permutation: [...perm] }));

/**
 * The dim an iota (possibly broadcast from a vector iota) counts 0, 1, ... along, or null. A
 * broadcast vector iota counts along its dim only when its length is that dim's size: a
 * one-element iota stretched over the dim (broadcast_in_dim lets a size-1 dim stretch) is 0 in
 * every position, and comparing with it is no one-hot.
 */
function iotaDim(x: HloInstruction): number | null {
  const name = x.prim?.name;
  if (name === 'iota') return params<{ dimension: number }>(x).dimension;
  const v = x.operands[0];
  if (name !== 'broadcast_in_dim' || v.prim?.name !== 'iota' || v.shape.shape.length !== 1) return null;
  const d = params<{ broadcastDimensions: Dims }>(x).broadcastDimensions[0];
  return v.shape.shape[0] === x.shape.shape[d] ? d : null;
}

/** `eq(broadcast(src), iota)` (either order) as a one-hot along the iota's dim, or null. */
function compareOneHot(cmp: HloInstruction): OneHot | null {
  if (cmp.prim?.name !== 'eq' || cmp.operands.length !== 2) return null;
  for (const [a, b] of [cmp.operands, [...cmp.operands].reverse()]) {
    const c = iotaDim(a);
    if (c === null || b.prim?.name !== 'broadcast_in_dim') continue;
    // (A narrow integer iota would wrap: its values must be 0..n-1 exactly.)
    if (!INDEX_DTYPES.has(a.shape.dtype)) return null;
    const shape = cmp.shape.shape;
    if (shape[c] > EXACT_F32_INT) return null;
    const src = b.operands[0];
    if (src.isTuple || !INDEX_DTYPES.has(src.shape.dtype)) return null;
    const bd = params<{ broadcastDimensions: Dims }>(b).broadcastDimensions;
    const at = bd.indexOf(c);
    // The index must be constant along the class dim (a size-1 source dim may map onto it).
    if (at >= 0 && src.shape.shape[at] !== 1) return null;
    return {
      classDim: c,
      classes: shape[c],
      index(added) {
        const restShape = without(shape, c);
        const s = at >= 0 ? reshape(added, src, without(src.shape.shape, at)) : src;
        const dims = (at >= 0 ? without(bd, at) : [...bd]).map((d) => (d > c ? d - 1 : d));
        if (isIdentity(dims) && dims.length === restShape.length) return s;
        return emit(added, 'broadcast_in_dim', [s], { shape: restShape, broadcastDimensions: dims });
      },
    };
  }
  return null;
}

/** `x` as a one-hot (see the file comment), or null. */
export function oneHotOf(x: HloInstruction): OneHot | null {
  if (x.isTuple) return null;
  const name = x.prim?.name;
  if (name === 'convert_element_type') {
    const c = x.operands[0];
    if (c.isTuple || c.shape.dtype !== 'bool' || (x.shape.dtype !== 'float32' && x.shape.dtype !== 'bfloat16')) return null;
    return compareOneHot(c);
  }
  if (name === 'reshape') {
    // A reshape that keeps the class axis whole: [A..., V, C...] -> [A'..., V, C'...] with
    // |A| = |A'| (so |C| = |C'|); the index reshapes from [A..., C...] to [A'..., C'...].
    const inner = oneHotOf(x.operands[0]);
    if (!inner) return null;
    const from = x.operands[0].shape.shape;
    const to = x.shape.shape;
    const before = from.slice(0, inner.classDim).reduce((a, b) => a * b, 1);
    let classDim = -1;
    for (let k = 0, p = 1; k < to.length && p <= before; p *= to[k], k++) {
      if (p === before && to[k] === inner.classes) {
        classDim = k;
        break;
      }
    }
    if (classDim < 0) return null;
    return { classDim, classes: inner.classes, index: (added) => reshape(added, inner.index(added), without(to, classDim)) };
  }
  if (name === 'transpose') {
    const inner = oneHotOf(x.operands[0]);
    if (!inner) return null;
    const perm = params<{ permutation: Dims }>(x).permutation;
    const classDim = perm.indexOf(inner.classDim);
    // J_X = transpose(J_Y) over the remaining dims, renumbered.
    const rest = without(perm, classDim).map((d) => (d > inner.classDim ? d - 1 : d));
    return { classDim, classes: inner.classes, index: (added) => transpose(added, inner.index(added), rest) };
  }
  return null;
}

/** The rewrite of one dot (its new instructions appended to `added`), or null. */
function rewriteDot(dot: HloInstruction, added: HloInstruction[]): HloInstruction | null {
  const p = params<{ dimensionNumbers: DotDims; precision: DotPrecision; preferredElementType?: string | null }>(dot);
  const [[lc, rc], [lb, rb]] = p.dimensionNumbers;
  if (lb.length || rb.length || dot.isTuple) return null;
  const [L, R] = dot.operands;
  const dtype = dot.shape.dtype;
  if (L.shape.dtype !== R.shape.dtype || (L.shape.dtype !== 'float32' && L.shape.dtype !== 'bfloat16') || (dtype !== 'float32' && dtype !== 'bfloat16')) return null;
  const K = lc.reduce((a, d) => a * L.shape.shape[d], 1);
  const nominalFlops = 2 * numel(dot.shape) * K;
  for (const side of [0, 1] as const) {
    const x = dot.operands[side];
    const oh = oneHotOf(x);
    if (!oh) continue;
    const other = dot.operands[1 - side];
    const xc = side === 0 ? lc : rc;
    const oc = side === 0 ? rc : lc;
    const rank = x.shape.shape.length;
    const attrs: OneHotParams = { classes: oh.classes, precision: p.precision ?? null, dtype: dtype as OneHotParams['dtype'], nominalFlops };
    const otherFree = other.shape.shape.map((_, d) => d).filter((d) => !oc.includes(d));
    const freeSize = otherFree.reduce((a, d) => a * other.shape.shape[d], 1);
    let core: HloInstruction;
    if (xc.length === 1 && xc[0] === oh.classDim) {
      // Gather: the other operand is the table, its contracting dim first.
      const table = reshape(added, transpose(added, other, [oc[0], ...otherFree]), [oh.classes, freeSize]);
      const index = oh.index(added);
      core = emit(added, oneHotGatherP.name, [table, reshape(added, index, [numel(index.shape)])], attrs as unknown as Record<string, unknown>);
    } else if (xc.length === rank - 1 && !xc.includes(oh.classDim)) {
      // Segment sum: the other operand's contracting dims in the index's dim order, then its free dims.
      const tokenDims = x.shape.shape.map((_, d) => d).filter((d) => d !== oh.classDim);
      const order = tokenDims.map((d) => oc[xc.indexOf(d)]);
      const T = tokenDims.reduce((a, d) => a * x.shape.shape[d], 1);
      const values = reshape(added, transpose(added, other, [...order, ...otherFree]), [T, freeSize]);
      const index = oh.index(added);
      core = emit(added, oneHotSegmentSumP.name, [values, reshape(added, index, [T])], attrs as unknown as Record<string, unknown>);
    } else continue;
    // core is [one-hot side's free size, other side's free size]; the dot's output puts lhs free dims first.
    return reshape(added, side === 0 ? core : transpose(added, core, [1, 0]), dot.shape.shape);
  }
  return null;
}

/** Rewrites every one-hot dot of `c` (see the file comment); returns the number rewritten. */
export function rewriteOneHotDots(c: HloComputation): number {
  let n = 0;
  for (const i of [...c.instructions]) {
    if (i.prim?.name !== 'dot_general') continue;
    const added: HloInstruction[] = [];
    const r = rewriteDot(i, added);
    if (!r) continue;
    c.instructions.splice(c.instructions.indexOf(i), 0, ...added);
    c.replaceUses(i, r);
    c.instructions.splice(c.instructions.indexOf(i), 1);
    n++;
  }
  if (n) c.sort();
  return n;
}

/** Whether `i` is an instruction this pass made (its FLOPs are nominal: the replaced dot's). */
export function nominalFlopsOf(i: HloInstruction): number | null {
  return isOneHotPrimitive(i.prim?.name) ? (i.params as unknown as OneHotParams).nominalFlops : null;
}
