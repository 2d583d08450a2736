/**
 * Sibling multi-output fusion of column reductions (XLA's MultiOutputFusion for siblings):
 * two kInput fusions that reduce the same way (every output a float32 `reduce_sum`, or every
 * one a `reduce_max`, over the same leading axes of operands of one shape) and read a common
 * array of that shape become one kInput fusion with a tuple output, so the kernel reads the
 * shared array once for all of them (LayerNorm backward's dgamma = sum(dy * xhat) and dbeta =
 * sum(dy) both read dy; a dot's result read by two bias-like sums). Each output is still its
 * own column sum, accumulated over the rows in the same order in float64, from the same
 * element code (each fusion's body is copied unchanged, only parameters are shared): results
 * are bit-identical to the unmerged program.
 *
 * A pair is merged only when neither depends on the other (no path from one's output to the
 * other's operands), no instruction between them has an effect (the re-sort below may move the
 * later one's operands up, and effects keep their order: effects.ts), and the merged kernel
 * splits its rows into as many blocks as each one's own kernel would (`TPUKIT_COL_ROW_BLOCKS`:
 * the split depends on the body's cost, and a split changes the summation order); the merged
 * fusion takes the later one's place and the computation is re-sorted topologically. At most `MAX_SIBLING_OUTPUTS` outputs per fusion (each keeps a
 * float64 scratch row per column span). Runs after elementwise and output fusion
 * (pipeline.ts), so it changes no decision of theirs.
 */
import { hasEffect } from '../effects';
import { HloComputation as Comp, HloInstruction, type HloComputation, type HloModule, numel } from '../hlo';
import { planFusion } from '../wasm/emitKernel';
import { fusedComputationName, isFusibleReduce, reductionKey, sortedAxes } from './fusion';

/** Most outputs a merged sibling fusion gets. */
export const MAX_SIBLING_OUTPUTS = 8;

/**
 * How a column-reduction fusion reduces (`reduce_sum|2048,128|0`), or null when `f` is not a
 * kInput fusion whose outputs are all float32 reductions of one kind over the same leading
 * (not trailing) axes of operands of one shape.
 */
export function columnReduction(f: HloInstruction): string | null {
  if (f.opcode !== 'fusion' || (f.params as { kind?: string }).kind !== 'kInput') return null;
  let key: string | null = null;
  for (const o of f.called[0].outputs) {
    // (a leading run of axes, not the last: a column reduction, not a row one)
    const axes = isFusibleReduce(o) ? sortedAxes(o) : [];
    if (axes[0] !== 0 || axes[axes.length - 1] === o.operands[0].shape.shape.length - 1) return null;
    const k = reductionKey(o);
    if (key !== null && k !== key) return null;
    key = k;
  }
  return key;
}

/** Number of elements a column-reduction fusion's loop runs over (its reductions' operand shape). */
const loopSize = (f: HloInstruction): number => numel(f.called[0].outputs[0].operands[0].shape);

/**
 * Merges sibling column reductions of `c` (see the module comment); returns the number of
 * merges made (each removes one fusion).
 */
export function fuseSiblingReductions(c: HloComputation, mod?: HloModule): number {
  let merged = 0;
  for (;;) {
    const pair = findSiblings(c);
    if (!pair) return merged;
    spliceMerged(c, pair[0], pair[1], pair[2], mod);
    merged++;
  }
}

/** Row blocks the kernel of fusion body `body` splits its rows into (1: not split, or no wasm kernel). */
const rowBlocksOf = (body: HloComputation): number => planFusion(body)?.rowBlocks ?? 1;

/** The first mergeable pair (earlier, later) in program order and their merged body, or null. */
function findSiblings(c: HloComputation): [HloInstruction, HloInstruction, Merged] | null {
  const pos = new Map(c.instructions.map((x, j) => [x, j]));
  const users = c.users();
  const cands = c.instructions.filter((f) => columnReduction(f) !== null && (!f.isTuple || users.get(f)!.every((u) => u !== null && u.opcode === 'get-tuple-element')));
  for (let a = 0; a < cands.length; a++) {
    const e = cands[a];
    const key = columnReduction(e);
    const n = loopSize(e);
    const shared = new Set(e.operands.filter((o) => numel(o.shape) === n));
    for (let b = a + 1; b < cands.length; b++) {
      const l = cands[b];
      if (columnReduction(l) !== key || e.shapes.length + l.shapes.length > MAX_SIBLING_OUTPUTS) continue;
      if (!l.operands.some((o) => shared.has(o))) continue;
      if (dependsOn(l, e, pos) || c.instructions.slice(pos.get(e)! + 1, pos.get(l)!).some(hasEffect)) continue;
      const m = mergedBody(e, l);
      const blocks = rowBlocksOf(m.body);
      if (blocks === rowBlocksOf(e.called[0]) && blocks === rowBlocksOf(l.called[0])) return [e, l, m];
    }
  }
  return null;
}

/** Whether `later` reads (through any chain of operands) the result of `earlier`, which comes before it. */
function dependsOn(later: HloInstruction, earlier: HloInstruction, pos: Map<HloInstruction, number>): boolean {
  const from = pos.get(earlier)!;
  const seen = new Set<HloInstruction>();
  const stack = [...later.operands];
  while (stack.length) {
    const x = stack.pop()!;
    if (x === earlier) return true;
    if (seen.has(x) || pos.get(x)! < from) continue;
    seen.add(x);
    stack.push(...x.operands);
  }
  return false;
}

/** A merged sibling fusion's body and its operands (the arrays its parameters stand for). */
interface Merged {
  body: HloComputation;
  externals: HloInstruction[];
}

/** The body of fusions `a` and `b` merged: outputs a's then b's, parameters their operands (each array once), copies of both bodies. */
function mergedBody(a: HloInstruction, b: HloInstruction): Merged {
  const body = new Comp(fusedComputationName());
  const externals: HloInstruction[] = [];
  const param = new Map<HloInstruction, HloInstruction>();
  // Parameters first (one per distinct operand), then each body's instructions.
  for (const o of [...a.operands, ...b.operands]) {
    if (param.has(o)) continue;
    param.set(o, body.addParameter(o.shape));
    externals.push(o);
  }
  const outputs: HloInstruction[] = [];
  for (const f of [a, b]) {
    const src = f.called[0];
    outputs.push(...body.addCopies(src, new Map(src.params.map((p, k) => [p, param.get(f.operands[k])!]))));
  }
  body.outputs = outputs;
  return { body, externals };
}

/** Replaces fusions `a` and `b` (b later) by one fusion of their merged body; readers read the outputs through get-tuple-elements. */
function spliceMerged(c: HloComputation, a: HloInstruction, b: HloInstruction, { body, externals }: Merged, mod?: HloModule): HloInstruction {
  const fusion = new HloInstruction('fusion', [...a.shapes, ...b.shapes], externals, { kind: 'kInput' }, null);
  fusion.called = [body];
  if (mod) {
    mod.computations = mod.computations.filter((x) => x !== a.called[0] && x !== b.called[0]);
    mod.computations.unshift(body);
  }
  const users = c.users();
  const gtes: HloInstruction[] = [];
  const rewire = (f: HloInstruction, offset: number): void => {
    if (f.isTuple) {
      // Its readers are get-tuple-elements (findSiblings checks): they now index the merged tuple.
      for (const g of users.get(f)!) {
        g!.operands = [fusion];
        g!.params = { index: (g!.params as { index: number }).index + offset };
      }
      return;
    }
    const g = new HloInstruction('get-tuple-element', [f.shape], [fusion], { index: offset }, null);
    gtes.push(g);
    c.replaceUses(f, g);
  };
  rewire(a, 0);
  rewire(b, a.shapes.length);
  const at = c.instructions.indexOf(b);
  c.instructions.splice(at, 1, fusion, ...gtes);
  c.instructions.splice(c.instructions.indexOf(a), 1);
  // a's readers may come before b: the topological re-sort moves the merged fusion up to them.
  c.sort();
  return fusion;
}
