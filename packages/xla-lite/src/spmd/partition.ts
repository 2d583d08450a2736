/**
 * The SPMD partitioner: rewrites the entry computation into the one program every device runs
 * on its shards (shard shapes), given each value's sharding from propagation. Each
 * instruction is computed in a layout its rule can run locally, and values are moved between
 * layouts by `reshard`, which emits, in order of preference:
 *   - nothing (same layout),
 *   - `dynamic-slice` (each device keeps a part of what it already holds: no communication),
 *   - `collective-permute` (same boxes, held by other devices),
 *   - `all-to-all` (the split moves from one dimension to another),
 *   - `all-gather` along each dimension that must grow, then a local slice.
 * Reductions over a split dimension and dots contracting a split dimension leave partial sums,
 * combined by `reduce-scatter` when the wanted layout splits the result across exactly the
 * devices holding the partials, else by `all-reduce`. while / scan / cond get partitioned
 * bodies (see `control`); a scatter-add with batch-split indices adds locally into zeros and
 * combines the partial tables (see `scatterAdd`). Ops without a rule run whole: their operands are all-gathered and
 * every device computes the full result.
 *
 * Collectives are HloInstructions without a core primitive (`prim === null`) whose params
 * hold their replica groups; every instruction's `sharding` param is the XLA text of its
 * sharding (plain JSON, so partitioned modules go to the persistent cache); `dynamic-slice` holds each device's offsets (where XLA computes
 * them from `partition-id` and a table). The executor (executor.ts) runs them.
 */
import { np } from '@tpukit/core';
import { getPrimitive, type ShapedArray } from '@tpukit/core/internal';
import { HloComputation, HloInstruction, HloModule } from '../hlo';
import { type Box, boxKey, HloSharding, type Layout } from './hloSharding';
import { broadcastBackward, type DimensionNumbers, fullLayout, gatherBackward, partialGroups, layoutKey, layoutWithin, planDot, reduceLayout, reshapeLayout, sliceLayout, transposeBackward } from './layoutRules';
import { calledFrom, gatherInfo, propagateShardings, REDUCTIONS, ruleOf, sliceKeepsOf } from './propagation';

export const COLLECTIVES = new Set(['all-reduce', 'all-gather', 'reduce-scatter', 'all-to-all', 'collective-permute']);

interface Value {
  inst: HloInstruction;
  layout: Layout;
  /** Per output, for tuple-shaped control flow. */
  tuple?: Layout[];
}

const local = (s: ShapedArray, box: Box): ShapedArray => ({ shape: box.map(([a, b]) => b - a), dtype: s.dtype, weakType: s.weakType });

export interface PartitionResult {
  module: HloModule;
  /** The sharding of each output as produced (equal to the requested one when given). */
  outShardings: HloSharding[];
}

/**
 * Partitions `mod`'s entry over `n` devices. `params[k]` and `shardings` come from
 * propagation; `outputs[k]` is the requested output sharding (null: keep the propagated one).
 */
export function partitionModule(mod: HloModule, shardings: Map<HloInstruction, HloSharding>, params: readonly HloSharding[], outputs: readonly (HloSharding | null)[], n: number): PartitionResult {
  const subs: HloComputation[] = [];
  const { comp, outShardings } = partitionComputation(mod.entry, shardings, params, outputs, n, subs);
  const m = new HloModule(`${mod.name}.spmd`, comp);
  m.computations = [...mod.computations.filter((x) => x !== mod.entry), ...subs, comp];
  return { module: m, outShardings };
}

/** Propagates and partitions a called computation (a loop body, a branch). */
function partitionCalled(src: HloComputation, params: readonly HloSharding[], outputs: readonly (HloSharding | null)[], n: number, subs: HloComputation[]): { comp: HloComputation; outShardings: HloSharding[] } {
  const r = partitionComputation(src, propagateShardings(src, params, outputs, n), params, outputs, n, subs);
  subs.push(r.comp);
  return r;
}

function partitionComputation(src: HloComputation, shardings: Map<HloInstruction, HloSharding>, params: readonly HloSharding[], outputs: readonly (HloSharding | null)[], n: number, subs: HloComputation[]): { comp: HloComputation; outShardings: HloSharding[] } {
  const c = new HloComputation(`${src.name}.spmd`);
  const env = new Map<HloInstruction, Value>();
  const memo = new Map<string, Value>();
  const emit = (opcode: string, shape: ShapedArray, operands: HloInstruction[], params: Record<string, unknown>, prim: HloInstruction['prim'] = null): HloInstruction =>
    c.add(new HloInstruction(opcode, [shape], operands, params, prim));
  const shardOf = (l: Layout, shape: readonly number[]): HloSharding => HloSharding.fromBoxes(l, shape) ?? HloSharding.replicated(shape.length, n);

  /** The value `v` (of global shape `g`) moved to layout `to`. */
  const reshard = (v: Value, to: Layout, g: ShapedArray): Value => {
    if (layoutKey(v.layout) === layoutKey(to)) return v;
    const key = `${v.inst.id}>${layoutKey(to)}`;
    const hit = memo.get(key);
    if (hit) return hit;
    let cur = v;
    const withShape = (inst: HloInstruction, layout: Layout): Value => {
      inst.params.sharding = String(shardOf(layout, g.shape));
      return { inst, layout };
    };
    const slice = (from: Value): Value =>
      withShape(emit('dynamic-slice', local(g, to[0]), [from.inst], { offsets: to.map((b, d) => b.map(([s], j) => s - from.layout[d][j][0])), sizes: to[0].map(([s, e]) => e - s) }), to);
    if (layoutWithin(to, cur.layout)) cur = slice(cur);
    else {
      const permuted = permutePairs(cur.layout, to);
      const a2a = permuted ? null : allToAllPlan(cur.layout, to);
      if (permuted) cur = withShape(emit('collective-permute', local(g, to[0]), [cur.inst], { sourceTargetPairs: permuted }), to);
      else if (a2a) cur = withShape(emit('all-to-all', local(g, to[0]), [cur.inst], { replicaGroups: a2a.groups, splitDimension: a2a.split, concatDimension: a2a.concat }), to);
      else {
        for (let a = 0; a < g.shape.length; a++) {
          if (to.every((b, d) => b[a][0] >= cur.layout[d][a][0] && b[a][1] <= cur.layout[d][a][1])) continue;
          const { groups, layout } = gatherPlan(cur.layout, a, g.shape[a]);
          cur = withShape(emit('all-gather', local(g, layout[0]), [cur.inst], { replicaGroups: groups, dimensions: [a] }), layout);
        }
        if (layoutKey(cur.layout) !== layoutKey(to)) cur = slice(cur);
      }
    }
    memo.set(key, cur);
    return cur;
  };

  /** Combines partial sums (`groups`) towards layout `to`: reduce-scatter when it lands exactly there, else all-reduce. */
  const combine = (v: Value, groups: number[][], op: string, to: Layout, g: ShapedArray): Value => {
    if (groups.length === 0) return v;
    const rs = op === 'add' ? scatterDim(v.layout, groups, to) : -1;
    if (rs >= 0) {
      const inst = emit('reduce-scatter', local(g, to[0]), [v.inst], { replicaGroups: groups, dimensions: [rs], toApply: op });
      inst.params.sharding = String(shardOf(to, g.shape));
      return { inst, layout: to };
    }
    const inst = emit('all-reduce', local(g, v.layout[0]), [v.inst], { replicaGroups: groups, toApply: op });
    inst.params.sharding = String(shardOf(v.layout, g.shape));
    return { inst, layout: v.layout };
  };

  for (const i of src.instructions) {
    const target = i.isTuple ? null : shardings.get(i)!.layout(i.shape.shape);
    if (i.isTuple && ruleOf(i) === 'control') {
      env.set(i, control(i));
      continue;
    }
    const opnd = (k: number, l: Layout): HloInstruction => reshard(env.get(i.operands[k])!, l, i.operands[k].shape).inst;
    let v: Value;
    if (i.opcode === 'parameter') {
      const lay = params[i.paramIndex].layout(i.shape.shape);
      const inst = c.addParameter(local(i.shape, lay[0]));
      inst.params.sharding = String(params[i.paramIndex]);
      v = { inst, layout: lay };
    } else if (i.opcode === 'constant') {
      const inst = emit('constant', i.shape, [], {});
      inst.literal = i.literal;
      v = { inst, layout: fullLayout(i.shape.shape, n) };
    } else if (i.opcode === 'get-tuple-element') {
      const t = env.get(i.operands[0])!;
      const layout = t.tuple?.[(i.params as { index: number }).index] ?? fullLayout(i.shape.shape, n);
      const inst = emit('get-tuple-element', local(i.shape, layout[0]), [t.inst], { ...i.params });
      v = { inst, layout };
    } else {
      const rule = ruleOf(i);
      const pp = i.params as Record<string, any>;
      const make = (ins: HloInstruction[], layout: Layout, params: Record<string, unknown> = pp): Value => ({ inst: emit(i.opcode, local(i.shape, layout[0]), ins, { ...params }, i.prim), layout });
      switch (rule) {
        case 'constraint':
          v = env.get(i.operands[0])!;
          break;
        case 'control':
          v = control(i);
          break;
        case 'elementwise':
          v = make(i.operands.map((_, k) => opnd(k, target!)), target!);
          break;
        case 'broadcast': {
          const need = broadcastBackward(target!, i.operands[0].shape.shape, i.shape.shape, pp.broadcastDimensions);
          v = make([opnd(0, need)], target!, { ...pp, shape: target![0].map(([s, e]) => e - s) });
          break;
        }
        case 'transpose':
          v = make([opnd(0, transposeBackward(target!, pp.permutation))], target!);
          break;
        case 'reshape': {
          const need = reshapeLayout(target!, i.shape.shape, i.operands[0].shape.shape);
          if (need) v = make([opnd(0, need)], target!, { ...pp, newSizes: target![0].map(([s, e]) => e - s) });
          else v = whole(i);
          break;
        }
        case 'reduce': {
          const x = env.get(i.operands[0])!;
          const { out, groups } = reduceLayout(x.layout, i.operands[0].shape.shape, pp.axes);
          v = combine(make([x.inst], out), groups, REDUCTIONS[i.prim!.name], target!, i.shape);
          break;
        }
        case 'dot': {
          const [l, r] = [env.get(i.operands[0])!, env.get(i.operands[1])!];
          const plan = planDot(l.layout, r.layout, i.operands[0].shape.shape, i.operands[1].shape.shape, pp.dimensionNumbers as DimensionNumbers, target);
          v = combine(make([opnd(0, plan.lhs), opnd(1, plan.rhs)], plan.out), plan.groups, 'add', target!, i.shape);
          break;
        }
        case 'gather': {
          const g = gatherInfo(i)!;
          const need = gatherBackward(target!, i.operands[0].shape.shape, i.operands[1].shape.shape, g);
          const sliceSizes = (pp.sliceSizes as number[]).map((s, od) => need.op[0][od][1] - need.op[0][od][0] < i.operands[0].shape.shape[od] ? need.op[0][od][1] - need.op[0][od][0] : s);
          v = make([opnd(0, need.op), opnd(1, need.idx)], target!, { ...pp, sliceSizes });
          break;
        }
        case 'slice': {
          // slice / concatenate / pad on the dims they leave alone stay split: each device works on its
          // block (a slice's limits shrunk to the block); the padding value is a replicated scalar.
          const keeps = sliceKeepsOf(i);
          const needs = i.operands.map((o) => (o.shape.shape.length === i.shape.shape.length ? sliceLayout(target!, i.shape.shape, o.shape.shape, keeps) : fullLayout(o.shape.shape, n)));
          if (needs.every((l) => l !== null)) {
            const params = i.prim!.name === 'slice' ? { ...pp, limitIndices: (pp.limitIndices as number[]).map((l, d) => (keeps[d] ? target![0][d][1] - target![0][d][0] : l)) } : pp;
            v = make(needs.map((l, k) => opnd(k, l!)), target!, params);
          } else v = whole(i);
          break;
        }
        default:
          v = (i.prim?.name === 'scatter-add' && scatterAdd(i, target!)) || whole(i);
      }
    }
    v.inst.params.sharding ??= i.isTuple ? undefined : String(shardOf(v.layout, i.shape.shape));
    if (v.inst.params.sharding === undefined) delete v.inst.params.sharding;
    env.set(i, target ? reshard(v, target, i.shape) : v);
  }

  function whole(i: HloInstruction): Value {
    const ins = i.operands.map((o) => (o.isTuple ? env.get(o)!.inst : reshard(env.get(o)!, fullLayout(o.shape.shape, n), o.shape).inst));
    const inst = c.add(new HloInstruction(i.opcode, i.shapes, ins, { ...i.params }, i.prim));
    inst.called = i.called;
    return { inst, layout: i.isTuple ? [] : fullLayout(i.shape.shape, n) };
  }

  /**
   * scatter-add whose indices are split along their batch dims (an embedding gradient under
   * data parallelism): each device adds its own updates into zeros, the partial tables are
   * combined (all-reduce, or reduce-scatter into the wanted split), then the operand is added.
   * Null when the indices are not split (nothing to gain) or batching dims are used.
   */
  function scatterAdd(i: HloInstruction, target: Layout): Value | null {
    const pp = i.params as Record<string, any>;
    const dn = pp.dimensionNumbers as { updateWindowDims: number[]; operandBatchingDims: number[] };
    const [op, idx, upd] = i.operands;
    const idxLay = env.get(idx)!.layout;
    const nb = idx.shape.shape.length - 1;
    if (dn.operandBatchingDims.length || !['float32', 'bfloat16', 'float16'].includes(i.shape.dtype)) return null;
    if (idxLay.every((b) => b.every(([s, e], d) => s === 0 && e === idx.shape.shape[d]))) return null;
    // Indices keep their batch split (index vector whole); updates follow on their scatter dims.
    const idxNeed = idxLay.map((b) => b.map(([s, e], d): [number, number] => (d < nb ? [s, e] : [0, idx.shape.shape[d]])));
    const scatterDims = upd.shape.shape.map((_, d) => d).filter((d) => !dn.updateWindowDims.includes(d));
    const updNeed = idxNeed.map((b) => upd.shape.shape.map((n, d): [number, number] => {
      const k = scatterDims.indexOf(d);
      return k >= 0 ? [b[k][0], b[k][1]] : [0, n];
    }));
    const full = fullLayout(i.shape.shape, n);
    const zero = emit('constant', { shape: [], dtype: i.shape.dtype, weakType: false }, [], {});
    zero.literal = np.zeros([], i.shape.dtype);
    const zeros = emit('broadcast', i.shape, [zero], { shape: i.shape.shape, broadcastDimensions: [] }, getPrimitive('broadcast_in_dim'));
    const local = emit(i.opcode, i.shape, [zeros, reshard(env.get(idx)!, idxNeed, idx.shape).inst, reshard(env.get(upd)!, updNeed, upd.shape).inst], { ...pp }, i.prim);
    const groups = partialGroups(full, idxNeed.map((b) => b.slice(0, nb)), idx.shape.shape.slice(0, nb).reduce((a, b) => a * b, 1));
    if (groups === null) return null;
    const summed = combine({ inst: local, layout: full }, groups, 'add', target, i.shape);
    const inst = emit('add', { ...i.shape, shape: summed.layout[0].map(([s, e]) => e - s) }, [reshard(env.get(op)!, summed.layout, op.shape).inst, summed.inst], {}, getPrimitive('add'));
    return { inst, layout: summed.layout };
  }

  /**
   * while / scan / cond with partitioned bodies: loop carries keep their layouts (each body
   * result is resharded to its carry's), a scan's stacked inputs are split below their leading
   * (iteration) dimension only, a cond's branches all produce the first branch's layouts and
   * its index is replicated.
   */
  function control(i: HloInstruction): Value {
    const pp = i.params as Record<string, any>;
    const name = i.prim!.name;
    const sh = (l: Layout, shape: readonly number[]): HloSharding => shardOf(l, shape);
    const lays = i.operands.map((o) => env.get(o)!.layout);
    let called: HloComputation[];
    let outs: Layout[];
    if (name === 'while') {
      const carry = lays.slice(pp.condNconsts + pp.bodyNconsts);
      const carrySh = carry.map((l, k) => sh(l, i.operands[pp.condNconsts + pp.bodyNconsts + k].shape.shape));
      const ins = (from: number, count: number) => lays.slice(from, from + count).map((l, k) => sh(l, i.operands[from + k].shape.shape));
      const cond = partitionCalled(calledFrom(i, 'condJaxpr')[0], [...ins(0, pp.condNconsts), ...carrySh], [HloSharding.replicated(0, n)], n, subs);
      const body = partitionCalled(calledFrom(i, 'bodyJaxpr')[0], [...ins(pp.condNconsts, pp.bodyNconsts), ...carrySh], carrySh, n, subs);
      called = [cond.comp, body.comp];
      outs = carry;
    } else if (name === 'scan') {
      const nc = pp.numConsts + pp.numCarry;
      lays.forEach((l, k) => {
        if (k >= nc) lays[k] = l.map((b): Box => [[0, pp.length], ...b.slice(1)]);
      });
      const bodyIn = lays.map((l, k) => (k < nc ? sh(l, i.operands[k].shape.shape) : sh(lays[k].map((b) => b.slice(1)), i.operands[k].shape.shape.slice(1))));
      const body = partitionCalled(calledFrom(i, 'jaxpr')[0], bodyIn, [...bodyIn.slice(pp.numConsts, nc), ...i.shapes.slice(pp.numCarry).map(() => null)], n, subs);
      called = [body.comp];
      const ys = body.outShardings.slice(pp.numCarry).map((s, k) => s.layout(i.shapes[pp.numCarry + k].shape.slice(1)).map((b): Box => [[0, pp.length], ...b]));
      outs = [...lays.slice(pp.numConsts, nc), ...ys];
    } else {
      lays[0] = fullLayout([], n);
      const opsSh = lays.slice(1).map((l, k) => sh(l, i.operands[k + 1].shape.shape));
      const branches = calledFrom(i, 'branches');
      const first = partitionCalled(branches[0], opsSh, branches[0].outputs.map(() => null), n, subs);
      called = [first.comp, ...branches.slice(1).map((b) => partitionCalled(b, opsSh, first.outShardings, n, subs).comp)];
      outs = first.outShardings.map((s, k) => s.layout(i.shapes[k].shape));
    }
    const ins = i.operands.map((o, k) => reshard(env.get(o)!, lays[k], o.shape).inst);
    const inst = c.add(new HloInstruction(i.opcode, i.shapes.map((s, k) => local(s, outs[k][0])), ins, { ...pp, spmd: true }, i.prim));
    inst.called = called;
    return i.isTuple ? { inst, layout: [], tuple: outs } : { inst, layout: outs[0] };
  }

  const outShardings: HloSharding[] = [];
  c.outputs = src.outputs.map((o, k) => {
    const want = outputs[k] ?? shardings.get(o)!;
    outShardings.push(want);
    return reshard(env.get(o)!, want.layout(o.shape.shape, `output ${k}`), o.shape).inst;
  });
  c.sort();
  return { comp: c, outShardings };
}

/** Pairs (source, target) when every device's wanted box is held whole by some device. */
function permutePairs(from: Layout, to: Layout): [number, number][] | null {
  const holder = new Map<string, number>();
  from.forEach((b, d) => {
    const k = boxKey(b);
    if (!holder.has(k)) holder.set(k, d);
  });
  const pairs: [number, number][] = [];
  for (let d = 0; d < to.length; d++) {
    const k = boxKey(to[d]);
    const s = boxKey(from[d]) === k ? d : holder.get(k);
    if (s === undefined) return null;
    pairs.push([s, d]);
  }
  return pairs;
}

/**
 * All-to-all from `from` to `to`: groups of devices that hold consecutive pieces along
 * `concat` and, afterwards, consecutive pieces along `split`, the rest of their boxes equal.
 */
function allToAllPlan(from: Layout, to: Layout): { groups: number[][]; split: number; concat: number } | null {
  const rank = from[0].length;
  for (let concat = 0; concat < rank; concat++) {
    for (let split = 0; split < rank; split++) {
      if (split === concat) continue;
      const byKey = new Map<string, number[]>();
      from.forEach((b, d) => {
        const k = `${boxKey(b.filter((_, j) => j !== concat))}/${boxKey(to[d].filter((_, j) => j !== split))}`;
        byKey.set(k, [...(byKey.get(k) ?? []), d]);
      });
      const groups: number[][] = [];
      let ok = true;
      for (const g of byKey.values()) {
        g.sort((x, y) => from[x][concat][0] - from[y][concat][0]);
        const k = g.length;
        const [s0] = from[g[0]][concat];
        const e1 = from[g[k - 1]][concat][1];
        const [ss, se] = from[g[0]][split];
        const w = (se - ss) / k;
        ok = k > 1 && g.every((d, j) => {
          const t = to[d];
          return (j === 0 || from[d][concat][0] === from[g[j - 1]][concat][1]) && t[concat][0] === s0 && t[concat][1] === e1 && t[split][0] === ss + j * w && t[split][1] === ss + (j + 1) * w;
        });
        if (!ok) break;
        groups.push(g);
      }
      if (ok) return { groups, split, concat };
    }
  }
  return null;
}

/** All-gather along `a`: devices with the same box elsewhere, one per piece of `a`, in order. */
function gatherPlan(from: Layout, a: number, size: number): { groups: number[][]; layout: Layout } {
  const byRest = new Map<string, Map<number, number[]>>();
  from.forEach((b, d) => {
    const k = boxKey(b.filter((_, j) => j !== a));
    let m = byRest.get(k);
    if (!m) byRest.set(k, (m = new Map()));
    m.set(b[a][0], [...(m.get(b[a][0]) ?? []), d]);
  });
  const groups: number[][] = [];
  for (const m of byRest.values()) {
    const starts = [...m.keys()].sort((x, y) => x - y);
    const r = m.get(starts[0])!.length;
    for (let i = 0; i < r; i++) groups.push(starts.map((s) => m.get(s)![i]));
  }
  const layout = from.map((b) => b.map(([s, e], j): [number, number] => (j === a ? [0, size] : [s, e])));
  return { groups, layout };
}

/** The dimension a reduce-scatter over `groups` splits so that member k lands on its box in `to`, or -1. */
function scatterDim(from: Layout, groups: number[][], to: Layout): number {
  const rank = from[0].length;
  for (let a = 0; a < rank; a++) {
    const ok = groups.every((g) => {
      const b = from[g[0]];
      const w = (b[a][1] - b[a][0]) / g.length;
      return g.every((d, k) => to[d].every(([s, e], j) => (j === a ? s === b[a][0] + k * w && e === b[a][0] + (k + 1) * w : s === b[j][0] && e === b[j][1])));
    });
    if (ok) return a;
  }
  return -1;
}
