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
 * fusion takes the later one's place (a horizontal merge, below, the earlier one's) and the
 * computation is re-sorted topologically. At most `MAX_SIBLING_OUTPUTS` outputs per fusion (each
 * keeps a float64 scratch row per column span). Runs after elementwise and output fusion
 * (pipeline.ts), so it changes no decision of theirs.
 *
 * Horizontal merges (`horizontal`, pipeline option `horizontalSums`, default on; env
 * TPUKIT_HORIZONTAL_SUMS=0 off): two such reductions that share no array also merge when every
 * operand of both is an output of ONE multi-output instruction that is not a fusion (read
 * through get-tuple-element and reshapes; `tupleSource`): the GPT step's q/k/v bias gradients, column sums over the fused attention
 * backward's dq, dk and dv. As XLA's horizontal input fusion does for independent reductions,
 * the kernel then walks the three arrays in one pass over the rows: the same bytes, but three
 * streams in flight instead of one at a time, and those arrays come from main memory (the
 * attention backward's 4 MiB of saved probabilities evicted them; in the step each 1 MiB sum
 * took ~0.19 ms against ~0.04 ms warm). The merged fusion takes the EARLIER sum's place: the
 * later sum's operands are get-tuple-element/reshape aliases of outputs of the one producer, which
 * comes before the earlier sum, so moving them up computes nothing earlier and makes no buffer live
 * longer (a reshape or get-tuple-element aliases its operand); only the later sum's small result
 * (one row) lives longer. At the later one's place the sums would run wherever the last of them
 * was (in the GPT step the v bias sum's: after the v weight gradient and the layer-norm backward,
 * where the q and k sums ran right after the attention backward). The same bits (each output its
 * own column sum, rows in order).
 *
 * A horizontal merge is skipped when a row fusion reads an operand of either sum
 * (`readByRowFusion`): rows14's pairing also computes a sum over a row fusion's operands in the
 * row kernel (`planRowColumnSum`, TPUKIT_ROW_OPERAND_SUMS), and a merged sum would no longer pair.
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
export function fuseSiblingReductions(c: HloComputation, mod?: HloModule, horizontal = true): number {
  let merged = 0;
  for (;;) {
    const pair = findSiblings(c, horizontal);
    if (!pair) return merged;
    spliceMerged(c, pair[0], pair[1], pair[2], mod, pair[3]);
    merged++;
  }
}

/** Row blocks the kernel of fusion body `body` splits its rows into (1: not split, or no wasm kernel). */
const rowBlocksOf = (body: HloComputation): number => planFusion(body)?.rowBlocks ?? 1;

/**
 * The one multi-output instruction, not a fusion, that every operand of `f` is an output of (each
 * read through a get-tuple-element and any reshapes), or null (see the module comment:
 * horizontal merges). Not a fusion: the sums of a row fusion's outputs are computed by its own
 * kernel as it writes them (`planRowColumnSum` in the wasm program), which a merge with another
 * sum can prevent (measured: the GPT step's layer-norm gamma/beta sums then ran on their own).
 */
export function tupleSource(f: HloInstruction): HloInstruction | null {
  let src: HloInstruction | null = null;
  for (const o of f.operands) {
    let x = o;
    while (x.opcode === 'reshape') x = x.operands[0];
    if (x.opcode !== 'get-tuple-element' || x.operands[0].opcode === 'fusion' || (src !== null && x.operands[0] !== src)) return null;
    src = x.operands[0];
  }
  return src;
}

/** The first mergeable pair (earlier, later) in program order and their merged body, or null. */
function findSiblings(c: HloComputation, horizontal: boolean): [HloInstruction, HloInstruction, Merged, boolean] | null {
  const pos = new Map(c.instructions.map((x, j) => [x, j]));
  const users = c.users();
  const cands = c.instructions.filter((f) => columnReduction(f) !== null && (!f.isTuple || users.get(f)!.every((u) => u !== null && u.opcode === 'get-tuple-element')));
  for (let a = 0; a < cands.length; a++) {
    const e = cands[a];
    const key = columnReduction(e);
    const n = loopSize(e);
    const shared = new Set(e.operands.filter((o) => numel(o.shape) === n));
    const source = horizontal ? tupleSource(e) : null;
    for (let b = a + 1; b < cands.length; b++) {
      const l = cands[b];
      if (columnReduction(l) !== key || e.shapes.length + l.shapes.length > MAX_SIBLING_OUTPUTS) continue;
      const across = !l.operands.some((o) => shared.has(o));
      if (across && (source === null || tupleSource(l) !== source || readByRowFusion(e, users) || readByRowFusion(l, users))) continue;
      if (dependsOn(l, e, pos) || c.instructions.slice(pos.get(e)! + 1, pos.get(l)!).some(hasEffect)) continue;
      const m = mergedBody(e, l);
      const blocks = rowBlocksOf(m.body);
      if (blocks === rowBlocksOf(e.called[0]) && blocks === rowBlocksOf(l.called[0])) return [e, l, m, across];
    }
  }
  return null;
}

/**
 * Whether a row fusion (kRow) reads one of `f`'s operands: the wasm program may then compute `f`
 * in that row kernel (rows14's pairing, `planRowColumnSum`, TPUKIT_ROW_OPERAND_SUMS), which a
 * horizontal merge would prevent (the merged sum reads arrays the row kernel does not).
 */
function readByRowFusion(f: HloInstruction, users: Map<HloInstruction, (HloInstruction | null)[]>): boolean {
  return f.operands.some((o) => (users.get(o) ?? []).some((u) => u !== null && u.opcode === 'fusion' && (u.params as { kind?: string }).kind === 'kRow'));
}

/** Whether `later` reads (through any chain of operands) the result of `earlier`, which comes before it. */
export function dependsOn(later: HloInstruction, earlier: HloInstruction, pos: Map<HloInstruction, number>): boolean {
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
export interface Merged {
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

/**
 * Replaces fusions `a` and `b` (b later) by one fusion of their merged body; readers read the
 * outputs through get-tuple-elements. The fusion takes b's place, or a's for a horizontal merge
 * (`early`: b's operands are then outputs of the producer a reads, through get-tuple-elements
 * and reshapes, which the re-sort moves up before it; the sums run as early as the first of them
 * did, while their operands are freshest, and not wherever the last one was placed). `kind`: the
 * merged fusion's kind (horizontalLoops.ts merges loop fusions with it).
 */
export function spliceMerged(c: HloComputation, a: HloInstruction, b: HloInstruction, { body, externals }: Merged, mod?: HloModule, early = false, kind: 'kInput' | 'kLoop' = 'kInput'): HloInstruction {
  const fusion = new HloInstruction('fusion', [...a.shapes, ...b.shapes], externals, { kind }, null);
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
  const [keep, drop] = early ? [a, b] : [b, a];
  c.instructions.splice(c.instructions.indexOf(drop), 1);
  c.instructions.splice(c.instructions.indexOf(keep), 1, fusion, ...gtes);
  // At b's place, a's readers may come before b; at a's place (early), b's operands (its
  // producer's get-tuple-elements and reshapes) may come after a: the topological re-sort moves
  // the merged fusion up to a's readers, or those operands up to the merged fusion.
  c.sort();
  return fusion;
}
