/**
 * The pass pipeline run by `Lowered.compile()`: algebraic simplification, constant folding,
 * CSE and DCE to a fixed point, then elementwise fusion, then DCE once more. Passes run on the
 * entry computation (sub-computations of control flow execute through their core primitive,
 * see `executable.ts`). Each pass reports how many rewrites it made, shown by `passStats`.
 */
import type { HloModule } from './hlo';
import { algebraicSimplify } from './passes/algebraic';
import { constantFold } from './passes/constantFolding';
import { cse } from './passes/cse';
import { dce } from './passes/dce';
import { fuseElementwise } from './passes/fusion';

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
}

export type PassStats = Record<'algebraic' | 'constantFold' | 'cse' | 'dce' | 'fusion', number>;

export function optimize(mod: HloModule, opts: PipelineOptions = {}): PassStats {
  const c = mod.entry;
  const stats: PassStats = { algebraic: 0, constantFold: 0, cse: 0, dce: 0, fusion: 0 };
  if (opts.simplify !== false) {
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
  } else stats.dce += dce(c);
  if (opts.fuse !== false) {
    stats.fusion = fuseElementwise(c, mod, opts.minFusionSize ?? 1);
    stats.dce += dce(c);
  }
  return stats;
}
