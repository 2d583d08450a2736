/**
 * Horizontal loop fusion (XLA's HorizontalLoopFusion, in the simple form this IR allows): small
 * independent kLoop fusions whose outputs are all float32 of ONE shape become one multi-output
 * kLoop fusion, its body the members' bodies copied unchanged side by side (parameters shared
 * where they read the same array). The wasm kernel walks each member's columns in turn per work
 * item: one launch instead of one per member. The target is an optimizer update: the GPT step's
 * Adam is one 3-output fusion per parameter tensor (68 of them, [128] to [512,128], all at the
 * end of the step), each below the pool's work threshold. A merged kernel's work is its loop's,
 * as for any fusion (`planFusion`), so the merges run on the calling thread as their members
 * did: counting each member's work put the larger merges on the kernel pool, which measured
 * slower on two threads (BENCHMARKS.md, "loops17", on a loaded machine).
 *
 * The same bits: each output is computed by its own member's element code, unchanged (the
 * relaxed-madd contraction in `emitExpr.ts` looks at uses inside that code only), at the same
 * element positions.
 *
 * Members: kLoop fusions with a wasm loop plan (`planFusion`) whose work is below the pool's
 * threshold (`getParallelWork`: larger ones already split over the pool), whose outputs are
 * float32 of the same shape and results of the computation only (an update's new state: live to
 * the end anyway, where a merged fusion's outputs would otherwise hold arena memory that its
 * members' results released after their last reader). Two merge when neither depends on the
 * other and no instruction between them has an effect; the merged fusion takes the later one's
 * place (the computation is then re-sorted topologically), up to `MAX_HORIZONTAL_OUTPUTS`
 * outputs (the kernel's code grows with every member). The kernel walks each member's columns
 * in turn per work item (`loopKernel.ts`): one walk over all members at once interleaved 7
 * memory streams per Adam member and ran 1.7x slower at 4 members (BENCHMARKS.md, "loops17").
 * The HLO text and StableHLO exporters print the computation as it was before the merges
 * (`exportViewOf`): the same exported module with and without them. Pipeline option
 * `horizontalLoops` (default true; env TPUKIT_HORIZONTAL_LOOPS=0 off).
 */
import { hasEffect } from '../effects';
import { HloComputation as Comp, HloInstruction, type HloComputation, type HloModule } from '../hlo';
import { planFusion } from '../wasm/emitKernel';
import { getParallelWork } from '../wasm/fusionPlan';
import { keepExportView } from './exportView';
import { fusedComputationName } from './fusion';
import { dependsOn, spliceMerged } from './siblingFusion';

/** Most outputs of a horizontally merged fusion. */
export const MAX_HORIZONTAL_OUTPUTS = 48;

/** The loop shape key of a mergeable member (`128,512`), or null. */
function memberKey(f: HloInstruction, users: Map<HloInstruction, (HloInstruction | null)[]>): string | null {
  if (f.opcode !== 'fusion' || (f.params as { kind?: string }).kind !== 'kLoop') return null;
  const shapes = f.shapes;
  if (!shapes.every((s) => s.dtype === 'float32' && !s.weakType && s.shape.join() === shapes[0].shape.join())) return null;
  // Results of the computation only (read by its outputs, through get-tuple-elements when a
  // tuple): live to the end anyway, so the merged fusion's outputs, each in an arena region of
  // its own (wasm/program.ts), hold no memory longer than the members' did. (A dead fusion
  // would come back to life in a merge.)
  const us = users.get(f)!;
  const results = (xs: (HloInstruction | null)[]): boolean => xs.length > 0 && xs.every((u) => u === null);
  if (f.isTuple ? !(us.length > 0 && us.every((u) => u !== null && u.opcode === 'get-tuple-element' && results(users.get(u)!))) : !results(us)) return null;
  const plan = planFusion(f.called[0]);
  if (plan === null || plan.kind !== 'loop' || plan.work >= getParallelWork()) return null;
  return shapes[0].shape.join();
}

/** Merges horizontal loop fusions of `c` (see the module comment); returns the number of merges (each removes one fusion). */
export function fuseHorizontalLoops(c: HloComputation, mod?: HloModule): number {
  let merged = 0;
  for (;;) {
    const pair = findPair(c);
    if (!pair) break;
    // The exporters print the computation as it was (passes/exportView.ts): the merge is this
    // executable's schedule, and the exported optimised module stays the one XLA was checked on.
    if (merged === 0) keepExportView(c);
    // (At b's place; a's readers may come before it: the re-sort moves the merged fusion up to them.)
    spliceMerged(c, pair[0], pair[1], pair[2], mod, false, 'kLoop');
    merged++;
  }
  return merged;
}

function findPair(c: HloComputation): [HloInstruction, HloInstruction, { body: HloComputation; externals: HloInstruction[] }] | null {
  const pos = new Map(c.instructions.map((x, j) => [x, j]));
  const users = c.users();
  const cands: [HloInstruction, string][] = [];
  for (const f of c.instructions) {
    const key = memberKey(f, users);
    if (key !== null) cands.push([f, key]);
  }
  for (let a = 0; a < cands.length; a++) {
    const [e, key] = cands[a];
    for (let b = a + 1; b < cands.length; b++) {
      const [l, key2] = cands[b];
      if (key2 !== key || e.shapes.length + l.shapes.length > MAX_HORIZONTAL_OUTPUTS) continue;
      if (dependsOn(l, e, pos) || c.instructions.slice(pos.get(e)! + 1, pos.get(l)!).some(hasEffect)) continue;
      const m = mergedBody(e, l);
      if (planFusion(m.body)?.kind === 'loop') return [e, l, m];
    }
  }
  return null;
}

/** The body of fusions `a` and `b` merged: outputs a's then b's, parameters their operands (each array once), copies of both bodies. */
function mergedBody(a: HloInstruction, b: HloInstruction): { body: HloComputation; externals: HloInstruction[] } {
  const body = new Comp(fusedComputationName());
  const externals: HloInstruction[] = [];
  const param = new Map<HloInstruction, HloInstruction>();
  for (const o of [...a.operands, ...b.operands]) {
    if (param.has(o)) continue;
    const p = body.addParameter(o.shape);
    param.set(o, p);
    externals.push(o);
  }
  const outputs: HloInstruction[] = [];
  for (const f of [a, b]) {
    const src = f.called[0];
    src.params.forEach((p, k) => {
      param.get(f.operands[k])!.layout = p.layout;
    });
    outputs.push(...body.addCopies(src, new Map(src.params.map((p, k) => [p, param.get(f.operands[k])!]))));
  }
  body.outputs = outputs;
  return { body, externals };
}
