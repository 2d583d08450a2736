/**
 * Sharding propagation (XLA's `ShardingPropagation` in miniature): gives every value of the
 * entry computation an HloSharding, starting from the parameters' (fixed by in_shardings or
 * the arguments' shardings) and the requested output shardings.
 *
 * Sharding constraints (a `sharding_constraint` primitive whose `sharding` parameter is a core
 * Sharding, as mesh's `lax.withShardingConstraint` binds it) are fixed like parameters.
 *
 * 1. Forward, operands -> result: elementwise ops take their most finely tiled operand's
 *    layout; broadcast, transpose and reshape move the boxes to the result's dimensions
 *    (reshape only where a split dimension stays the major one of its group); reductions drop
 *    the reduced dimensions (devices that summed different parts now replicate the result);
 *    dot_general takes the result of the cheapest dot plan (see `planDot`); gather passes
 *    its indices' batch split and the split of operand dimensions it takes whole (an
 *    embedding table split on its feature dimension) to the result; while / scan / cond pass
 *    their operands' layouts through their bodies (`controlLayouts`). Every other op
 *    (scatter, sort, slicing, cumulative ops, ...) yields a replicated result: the
 *    partitioner runs it whole on every device.
 * 2. Backward, users -> operand: a cheap op (elementwise, broadcast, transpose, reshape,
 *    constant, iota) whose every use wants a finer layout (an output with an out_sharding,
 *    or a user that needs its operand split) is computed in that finer layout instead, so the
 *    work is split rather than sliced afterwards; this walks back through chains of such ops.
 * 3. Forward again for the values after those, keeping what step 2 decided.
 */
import type { HloComputation, HloInstruction } from '../hlo';
import { type Box, HloSharding, type Layout } from './hloSharding';
import { broadcastBackward, broadcastForward, type DimensionNumbers, fullLayout, gatherBackward, type GatherDims, gatherDims, gatherForward, layoutKey, layoutWithin, planDot, reduceLayout, reshapeLayout, sliceKeeps, sliceLayout, transposeBackward, transposeForward } from './layoutRules';

/** Core primitives that apply elementwise (their operands and result share one shape). */
export const ELEMENTWISE = new Set(
  ('abs acos acosh add and asin asinh atan atan2 atanh bitcast_convert_type cbrt ceil convert_element_type cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt ' +
    'integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter not or pow rem round round_nearest_even rsqrt select_n shift_left ' +
    'shift_right_arithmetic shift_right_logical sign sin sinh sqrt square sub tan tanh xor stop_gradient').split(' '),
);
/** Control flow the partitioner runs with partitioned bodies. */
export const CONTROL = new Set(['while', 'scan', 'cond']);
export const REDUCTIONS: Readonly<Record<string, string>> = { reduce_sum: 'add', reduce_max: 'max', reduce_min: 'min', reduce_prod: 'mul', reduce_and: 'and', reduce_or: 'or' };

/** How an instruction is partitioned: its own rule, or run whole on every device. */
export function ruleOf(i: HloInstruction): 'constraint' | 'control' | 'elementwise' | 'broadcast' | 'transpose' | 'reshape' | 'reduce' | 'dot' | 'gather' | 'slice' | 'whole' {
  const name = i.prim?.name ?? '';
  if (CONTROL.has(name)) return 'control';
  if (i.isTuple) return 'whole';
  if (name === 'sharding_constraint') return 'constraint';
  if (ELEMENTWISE.has(name) && i.operands.length > 0 && i.operands.every((o) => !o.isTuple && o.shape.shape.join() === i.shape.shape.join())) return 'elementwise';
  if (name === 'broadcast_in_dim') return 'broadcast';
  if (name === 'transpose') return 'transpose';
  if (name === 'reshape') return 'reshape';
  if (REDUCTIONS[name]) return 'reduce';
  if (name === 'dot_general') return 'dot';
  if (name === 'gather' && gatherInfo(i)) return 'gather';
  if (name === 'slice' || name === 'concatenate' || name === 'pad') return 'slice';
  return 'whole';
}

const p = (i: HloInstruction) => i.params as Record<string, any>;

/**
 * Which dims a slice, concatenate or pad keeps as they are (the others it cuts, joins or pads:
 * those must not be split, the kept ones carry their split through).
 */
export function sliceKeepsOf(i: HloInstruction): boolean[] {
  const shape = i.operands[0].shape.shape;
  if (i.prim?.name === 'concatenate') return shape.map((_, d) => d !== p(i).dimension);
  if (i.prim?.name === 'pad') return (p(i).paddingConfig as number[][]).map((c) => c.every((v) => v === 0));
  return sliceKeeps(shape, p(i).startIndices, p(i).limitIndices, p(i).strides ?? null);
}

/** A gather's dimension mapping (null when it has operand batching dims: run whole). */
export const gatherInfo = (i: HloInstruction) => gatherDims(p(i).dimensionNumbers as GatherDims, p(i).sliceSizes, i.operands[0].shape.shape, i.shape.shape.length);

/** The result layout an instruction gets from its operands' layouts (null: replicated). */
export function forwardLayout(i: HloInstruction, ins: Layout[], n: number): Layout | null {
  const shape = i.shape.shape;
  switch (ruleOf(i)) {
    case 'elementwise': {
      let best = ins[0];
      const size = (l: Layout) => l[0].reduce((a, [s, e]) => a * (e - s), 1);
      for (const l of ins) if (size(l) < size(best)) best = l;
      return best;
    }
    case 'broadcast':
      return broadcastForward(ins[0], i.operands[0].shape.shape, shape, p(i).broadcastDimensions);
    case 'transpose':
      return transposeForward(ins[0], p(i).permutation);
    case 'reshape':
      return reshapeLayout(ins[0], i.operands[0].shape.shape, shape);
    case 'reduce':
      return reduceLayout(ins[0], i.operands[0].shape.shape, p(i).axes).out;
    case 'dot':
      return planDot(ins[0], ins[1], i.operands[0].shape.shape, i.operands[1].shape.shape, p(i).dimensionNumbers as DimensionNumbers).out;
    case 'gather':
      return gatherForward(ins[0], ins[1], shape, gatherInfo(i)!);
    case 'slice':
      return sliceLayout(ins[0], i.operands[0].shape.shape, shape, sliceKeepsOf(i));
    default:
      return null;
  }
}

/** The layout a user wants for its operand `k` given its own result layout (null: no preference). */
function operandWant(u: HloInstruction, k: number, l: Layout): Layout | null {
  const o = u.operands[k];
  if (o.isTuple) return null;
  switch (ruleOf(u)) {
    case 'elementwise':
    case 'constraint':
      return l;
    case 'broadcast':
      return broadcastBackward(l, o.shape.shape, u.shape.shape, p(u).broadcastDimensions);
    case 'transpose':
      return transposeBackward(l, p(u).permutation);
    case 'reshape':
      return reshapeLayout(l, u.shape.shape, o.shape.shape);
    case 'gather': {
      const need = gatherBackward(l, u.operands[0].shape.shape, u.operands[1].shape.shape, gatherInfo(u)!);
      return k === 0 ? need.op : need.idx;
    }
    case 'slice':
      // A pad's padding value is a scalar.
      return o.shape.shape.length === u.shape.shape.length ? sliceLayout(l, u.shape.shape, o.shape.shape, sliceKeepsOf(u)) : null;
    default:
      return null;
  }
}

const CHEAP = new Set(['elementwise', 'broadcast', 'transpose', 'reshape', 'slice']);
/** Ops that may take a finer layout their users want: cheap local ops, and dots/reductions (whose partial sums then reduce-scatter). */
const isCheap = (i: HloInstruction): boolean => i.opcode === 'constant' || i.prim?.name === 'iota' || CHEAP.has(ruleOf(i)) || ruleOf(i) === 'dot' || ruleOf(i) === 'reduce';

/**
 * Shardings for every single-output instruction of `c`. `params[k]` is parameter k's
 * sharding; `outputs[k]` the sharding requested for output k (null: let propagation choose).
 */
export function propagateShardings(
  c: HloComputation,
  params: readonly HloSharding[],
  outputs: readonly (HloSharding | null)[],
  n: number,
  /** Shardings fixed inside the program (sharding constraints). */
  constraints: ReadonlyMap<HloInstruction, HloSharding> = new Map(),
): Map<HloInstruction, HloSharding> {
  const layout = new Map<HloInstruction, Layout>();
  const fixed = new Set<HloInstruction>();
  const lay = (i: HloInstruction): Layout => layout.get(i) ?? fullLayout(i.shape.shape, n);
  for (const i of c.params) {
    layout.set(i, params[i.paramIndex].layout(i.shape.shape, `parameter ${i.paramIndex}`));
    fixed.add(i);
  }
  for (const [i, s] of constraints) {
    layout.set(i, s.layout(i.shape.shape, 'sharding constraint'));
    fixed.add(i);
  }
  const tuples = new Map<HloInstruction, Layout[]>();
  const forward = (): void => {
    for (const i of c.instructions) {
      if (fixed.has(i)) continue;
      if (ruleOf(i) === 'control') {
        const outs = controlLayouts(i, i.operands.map(lay), n);
        if (i.isTuple) tuples.set(i, outs);
        else layout.set(i, outs[0]);
        continue;
      }
      if (i.isTuple) continue;
      if (i.opcode === 'get-tuple-element') {
        const t = tuples.get(i.operands[0]);
        if (t) layout.set(i, t[(i.params as { index: number }).index]);
        continue; // of a whole op: replicated
      }
      const l = forwardLayout(i, i.operands.map(lay), n);
      if (l) layout.set(i, l);
    }
  };
  forward();
  // Backward: cheap ops whose every use wants a finer layout are computed in it.
  const users = c.users();
  const outPos = new Map<HloInstruction, number[]>();
  c.outputs.forEach((o, k) => outPos.set(o, [...(outPos.get(o) ?? []), k]));
  for (let j = c.instructions.length - 1; j >= 0; j--) {
    const i = c.instructions[j];
    if (fixed.has(i) || i.isTuple || !isCheap(i)) continue;
    const cur = lay(i);
    const wants: Layout[] = [];
    let ok = true;
    for (const u of users.get(i) ?? []) {
      if (u === null) continue;
      const ks = u.operands.map((o, k) => (o === i ? k : -1)).filter((k) => k >= 0);
      for (const k of ks) {
        const w = u.isTuple ? null : operandWant(u, k, lay(u));
        if (w === null) ok = false;
        else wants.push(w);
      }
    }
    for (const k of outPos.get(i) ?? []) {
      const s = outputs[k];
      wants.push(s ? s.layout(i.shape.shape, `output ${k}`) : cur);
    }
    if (!ok || wants.length === 0) continue;
    const key = layoutKey(wants[0]);
    if (wants.some((w) => layoutKey(w) !== key) || key === layoutKey(cur) || !layoutWithin(wants[0], cur)) continue;
    layout.set(i, wants[0]);
    fixed.add(i);
  }
  forward();
  const out = new Map<HloInstruction, HloSharding>();
  for (const i of c.instructions) {
    if (i.isTuple) continue;
    out.set(i, HloSharding.fromBoxes(lay(i), i.shape.shape) ?? HloSharding.replicated(i.shape.shape.length, n));
  }
  return out;
}

const shardingOf = (l: Layout, shape: readonly number[], n: number): HloSharding => HloSharding.fromBoxes(l, shape) ?? HloSharding.replicated(shape.length, n);

/** The called computation of a control-flow op that came from parameter `key` (lowering names it `<prim>_<key>...`). */
export const calledFrom = (i: HloInstruction, key: string): HloComputation[] => i.called.filter((c) => c.name.startsWith(`${i.prim!.name}_${key}`));

/**
 * Output layouts of while / scan / cond from their operands' layouts: a loop's carries keep
 * their initial layouts (the body's results are resharded to them); a scan's stacked outputs
 * take the body's per-iteration layout below an unsplit leading dimension; a cond's outputs
 * take its first branch's propagated output layouts.
 */
export function controlLayouts(i: HloInstruction, ins: Layout[], n: number): Layout[] {
  const p = i.params as Record<string, number>;
  const shapes = i.operands.map((o) => o.shape.shape);
  switch (i.prim!.name) {
    case 'while':
      return ins.slice(p.condNconsts + p.bodyNconsts);
    case 'scan': {
      const nc = p.numConsts + p.numCarry;
      const body = calledFrom(i, 'jaxpr')[0];
      const bodyIn = ins.map((l, k) => (k < nc ? shardingOf(l, shapes[k], n) : shardingOf(l.map((b) => b.slice(1)), shapes[k].slice(1), n)));
      const sh = propagateShardings(body, bodyIn, body.outputs.map((_, k) => (k < p.numCarry ? bodyIn[p.numConsts + k] : null)), n);
      const ys = body.outputs.slice(p.numCarry).map((o) => sh.get(o)!.layout(o.shape.shape).map((b): Box => [[0, p.length], ...b]));
      return [...ins.slice(p.numConsts, nc), ...ys];
    }
    default: {
      const branch = calledFrom(i, 'branches')[0];
      const sh = propagateShardings(branch, ins.slice(1).map((l, k) => shardingOf(l, shapes[k + 1], n)), branch.outputs.map(() => null), n);
      return branch.outputs.map((o) => sh.get(o)!.layout(o.shape.shape));
    }
  }
}
