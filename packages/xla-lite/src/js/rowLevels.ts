/**
 * The stage structure both row kernel generators share (a `kRow` fusion body, see
 * passes/rowFusion.ts; JavaScript in rowKernel.ts, WebAssembly in wasm/rowPlan.ts): the loop
 * shape S = [rows..., row...] split into R rows of C elements, which values are full (one per
 * element of S), each value's level (a parameter 0, a row reduction one more than its operand,
 * anything else the largest level of its operands), the last stage, and the full values a later
 * stage reads, each given a scratch row. The generators differ only in what they emit per stage.
 */
import { type HloComputation, type HloInstruction, numel } from '../hlo';
import { isIndexValue } from '../passes/fusion';

/** A reduction (sum or max) of a fusion body: a row fusion's row reductions, a column fusion's outputs. */
export const isReduce = (m: HloInstruction): boolean => m.prim?.name === 'reduce_sum' || m.prim?.name === 'reduce_max';

export interface RowLevels {
  /** The loop shape S, its row dims k, rows R and row length C. */
  S: readonly number[];
  k: number;
  R: number;
  C: number;
  /** The body's row reductions, in order. */
  reduces: HloInstruction[];
  /** Whether `m` is a full value (shape S, computed per element). */
  full(m: HloInstruction): boolean;
  level: Map<HloInstruction, number>;
  /** The last stage: the root's level, or its operand's where the root is a row reduction. */
  last: number;
  /** Full values read by a later stage, by scratch slot (not index values: those are recomputed, see passes/fusion.ts). */
  stored: Map<HloInstruction, number>;
}

/** The levels of a row fusion body; null when it has no row reduction. */
export function rowLevels(body: HloComputation): RowLevels | null {
  const root = body.outputs[0];
  const reduces = body.instructions.filter(isReduce);
  if (reduces.length === 0) return null;
  const S = reduces[0].operands[0].shape.shape;
  const k = S.length - (reduces[0].params as { axes: readonly number[] }).axes.length;
  const R = S.slice(0, k).reduce((a, b) => a * b, 1);
  const C = S.slice(k).reduce((a, b) => a * b, 1);
  const full = (m: HloInstruction): boolean => m.opcode !== 'parameter' && !isReduce(m) && numel(m.shape) === R * C;
  const level = new Map<HloInstruction, number>();
  for (const m of body.instructions) {
    if (m.opcode === 'parameter') level.set(m, 0);
    else if (isReduce(m)) level.set(m, level.get(m.operands[0])! + 1);
    else level.set(m, Math.max(0, ...m.operands.map((o) => level.get(o)!)));
  }
  const last = isReduce(root) ? level.get(root)! - 1 : level.get(root)!;
  const stored = new Map<HloInstruction, number>();
  for (const m of body.instructions) {
    if (!full(m)) continue;
    // Index values (iotas, masks from iotas) are recomputed where a later stage reads them.
    for (const o of m.operands) if (full(o) && level.get(o)! < level.get(m)! && !stored.has(o) && !isIndexValue(o)) stored.set(o, stored.size);
  }
  return { S, k, R, C, reduces, full, level, last, stored };
}
