/**
 * The pass pipeline run by `Lowered.compile()`: algebraic simplification, constant folding,
 * CSE and DCE to a fixed point; layout assignment for dots (transposes folded into dots, then
 * the simplification passes again); one-hot dots as gathers / segment sums (then simplification
 * again); explicit layout copies where a dot still needs one;
 * row fusion (softmax/norm patterns, kRow), elementwise fusion (kLoop/kInput), dot epilogue
 * fusion (kOutput), sibling multi-output fusion of column reductions, horizontal fusion of small
 * loop fusions of one shape, then DCE once more, and
 * last dot groups (independent dots recorded as groups, each run as one GEMM pool job at its last
 * member; the instruction order is unchanged). Passes run on the
 * entry computation (sub-computations of control flow execute through their core primitive,
 * see `executable.ts`). Each pass reports how many rewrites it made, shown by `passStats`.
 */
import type { HloModule } from './hlo';
import { algebraicSimplify } from './passes/algebraic';
import { dropBarriers } from './passes/barriers';
import { constantFold } from './passes/constantFolding';
import { cse } from './passes/cse';
import { dce } from './passes/dce';
import { fuseElementwise } from './passes/fusion';
import { foldDotTransposes, insertLayoutCopies } from './passes/layoutAssignment';
import { fuseDotEpilogues } from './passes/outputFusion';
import { rewriteOneHotDots } from './passes/oneHotDot';
import { fuseRows } from './passes/rowFusion';
import { fuseSiblingReductions } from './passes/siblingFusion';
import { fuseHorizontalLoops } from './passes/horizontalLoops';
import { recomputeCenteredOutputs } from './passes/centeredOutputs';
import { groupDots } from './passes/dotGroups';

export interface PipelineOptions {
  /** Run elementwise fusion (default true). */
  fuse?: boolean;
  /** Run the simplification passes (default true). */
  simplify?: boolean;
  /**
   * Smallest group that gets a generated kernel (default 1: a lone elementwise op or reduction
   * also runs as a generated single-pass loop, which beats the generic primitive kernels).
   */
  minFusionSize?: number;
  /** Run layout assignment for dots (default true). */
  layout?: boolean;
  /** Fuse softmax/norm row patterns into kRow fusions (default true; needs `fuse`). */
  rowFusion?: boolean;
  /**
   * Drop a kRow fusion's extra outputs that the loop fusions reading them can recompute from
   * its other outputs (passes/rowFusion.ts `dropRecomputableOutputs`; default true; needs
   * `rowFusion`). Off: the row kernel writes them and its readers read them back.
   */
  rowRecompute?: boolean;
  /** Fuse dots with their elementwise epilogue into kOutput fusions (default true; needs `fuse`). */
  outputFusion?: boolean;
  /**
   * Recompute cheap elementwise values (add, mul, ...) inside every loop fusion reading them
   * instead of writing them once and reading them back (passes/fusion.ts `rematerializes`;
   * default true; `jit` and `Lowered.compile()` default to false when the environment sets
   * TPUKIT_FUSION_REMAT=0, through `envDefaults`, so the compile caches' keys see it).
   */
  rematerialize?: boolean;
  /**
   * Rewrite dots with a one-hot operand into row gathers / segment sums (passes/oneHotDot.ts;
   * default true; `jit` and `Lowered.compile()` default to false when the environment sets
   * TPUKIT_ONEHOT=0).
   */
  oneHot?: boolean;
  /**
   * Merge column-reduction fusions that read a common array into one multi-output kInput
   * fusion (passes/siblingFusion.ts; default true; needs `fuse`; `jit` and `Lowered.compile()`
   * default to false when the environment sets TPUKIT_SIBLING_FUSION=0).
   */
  siblingFusion?: boolean;
  /**
   * With `siblingFusion`: also merge column reductions that share no array when every operand
   * of both is an output of one multi-output instruction (horizontal merges, passes/siblingFusion.ts;
   * default true; `jit` and `Lowered.compile()` default to false when the environment sets
   * TPUKIT_HORIZONTAL_SUMS=0).
   */
  horizontalSums?: boolean;
  /**
   * Merge small independent loop fusions whose outputs have one shape into one multi-output
   * loop fusion (passes/horizontalLoops.ts: one kernel launch, large enough for the kernel pool;
   * default true; needs `fuse`; `jit` and `Lowered.compile()` default to false when the
   * environment sets TPUKIT_HORIZONTAL_LOOPS=0).
   */
  horizontalLoops?: boolean;
  /**
   * A row fusion writing a value a and a - broadcast(m) (m one of its row values: a layer norm's
   * h and x - mean) writes m instead, and the fusions reading the centered value compute it from a
   * and m (passes/centeredOutputs.ts; same bits; default true; needs `rowFusion`; `jit` and
   * `Lowered.compile()` default to false when the environment sets TPUKIT_CENTERED_OUTPUTS=0). The
   * exporters print the computation as before it.
   */
  centeredOutputs?: boolean;
  /**
   * Record groups of independent dots and run each group at
   * its last member with one core `evalDotsInto` call (passes/dotGroups.ts; default true; `jit` and `Lowered.compile()` default to false when
   * the environment sets TPUKIT_DOT_GROUPS=0). Runs last, on the final schedule.
   */
  dotGroups?: boolean;
  /**
   * Start each dot group before, and join it after, the instructions that follow it and need
   * none of its results, moving the column sums between its members that no member needs into
   * that window (passes/dotGroups.ts `dotGroupJoinsOf`; the executable runs them on the calling
   * thread while the pool's workers claim the group's products). Default true; the environment's
   * TPUKIT_ASYNC_GROUPS=0 makes `jit` and `Lowered.compile()` default to false. The text exporters
   * print the order before the windows moved anything (`exportOrderOf`), so the exported module is
   * the same with and without them.
   */
  asyncDotGroups?: boolean;
}

export type PassStats = Record<'algebraic' | 'constantFold' | 'cse' | 'dce' | 'oneHot' | 'barriers' | 'layout' | 'rowFusion' | 'fusion' | 'outputFusion' | 'siblingFusion' | 'horizontalLoops' | 'centeredOutputs' | 'dotGroups', number>;

export const emptyPassStats = (): PassStats => ({ algebraic: 0, constantFold: 0, cse: 0, dce: 0, oneHot: 0, barriers: 0, layout: 0, rowFusion: 0, fusion: 0, outputFusion: 0, siblingFusion: 0, horizontalLoops: 0, centeredOutputs: 0, dotGroups: 0 });

export function optimize(mod: HloModule, opts: PipelineOptions = {}): PassStats {
  const c = mod.entry;
  const stats = emptyPassStats();
  const simplify = (): void => {
    for (let round = 0; round < 8; round++) {
      const a = algebraicSimplify(c);
      const f = constantFold(c);
      const s = cse(c);
      const d = dce(c);
      stats.algebraic += a;
      stats.constantFold += f;
      stats.cse += s;
      stats.dce += d;
      if (a + f + s + d === 0) break;
    }
  };
  if (opts.simplify !== false) simplify();
  else stats.dce += dce(c);
  if (opts.layout !== false) {
    // Folding exposes more (a reduction over a dot's batch dims becomes a new dot, whose
    // result transpose can fold in turn), so fold and simplify alternate; copies come last.
    for (let round = 0; round < 4; round++) {
      const n = foldDotTransposes(c);
      stats.layout += n;
      if (n === 0 || opts.simplify === false) break;
      simplify();
    }
  }
  // After folding: backprop's `one_hot^T @ dH` is a plain dot over the token dims only then.
  if (opts.oneHot !== false) {
    stats.oneHot = rewriteOneHotDots(c);
    // The one-hots the dots read are dead now; the index reshapes simplify.
    if (stats.oneHot) {
      if (opts.simplify !== false) simplify();
      else stats.dce += dce(c);
    }
  }
  // No pass below merges equal computations (CSE ran above): the optimization barriers have done
  // their job. (Sibling fusion below merges two different reductions of a common array into one
  // kernel at the later one's place, which can keep the earlier one's other operands alive longer.)
  stats.barriers = dropBarriers(c);
  if (opts.layout !== false) stats.layout += insertLayoutCopies(c);
  if (opts.fuse !== false) {
    if (opts.rowFusion !== false) stats.rowFusion = fuseRows(c, mod, opts.rowRecompute ?? true);
    stats.fusion = fuseElementwise(c, mod, opts.minFusionSize ?? 1, opts.rematerialize ?? true);
    if (opts.outputFusion !== false) stats.outputFusion = fuseDotEpilogues(c, mod);
    if (opts.siblingFusion !== false) stats.siblingFusion = fuseSiblingReductions(c, mod, opts.horizontalSums !== false);
    if (opts.horizontalLoops !== false) {
      // (the fusions earlier passes left without readers go first: a merge would keep them)
      stats.dce += dce(c);
      stats.horizontalLoops = fuseHorizontalLoops(c, mod);
    }
    if (opts.rowFusion !== false && opts.centeredOutputs !== false) stats.centeredOutputs = recomputeCenteredOutputs(c, mod);
    stats.dce += dce(c);
  }
  if (opts.dotGroups !== false) stats.dotGroups = groupDots(c, opts.asyncDotGroups !== false);
  return stats;
}
