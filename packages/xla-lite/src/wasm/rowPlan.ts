/**
 * The stage structure of a row fusion (`kRow`, see passes/rowFusion.ts) for the WebAssembly
 * row kernel (`rowsKernel.ts`), on the levels the JavaScript row kernel
 * (`rowKernel.ts`) uses too (`rowLevels.ts`): a parameter has level 0, a row reduction one more
 * than its operand, anything else the largest level of its operands. Per row, stage L computes the row values of
 * level L (one per row, held splatted in a vector), then walks the row computing the full
 * values of level L and accumulating the reductions of level L+1; full values a later stage
 * reads are kept in a scratch row. Returns null where the wasm emitter does not cover the body
 * (an op without an element emitter, bool values that would have to be stored, a parameter
 * broadcast that is neither along the row nor constant along it): the JS row kernel runs then.
 */
import { type HloComputation, type HloInstruction, numel } from '../hlo';
import { type RowLevels, isReduce, rowLevels } from '../js/rowLevels';
import { FUSED_OPS } from '../passes/fusion';

export interface RowStage {
  /** Row values of this level (computed once per row, before the walk). */
  rowValues: HloInstruction[];
  /** Reductions whose operand has this level (accumulated during the walk). */
  reduces: HloInstruction[];
  /** Full values computed during the walk that must be kept: scratch, extra outputs, the root. */
  targets: HloInstruction[];
}

/** The levels (rowLevels.ts) and, per stage, what the wasm row kernel computes. */
export interface RowStructure extends RowLevels {
  stages: RowStage[];
}

export function rowStructure(body: HloComputation): RowStructure | null {
  const root = body.outputs[0];
  const levels = rowLevels(body);
  if (!levels) return null;
  const { R, C, reduces, full, level, last, stored } = levels;
  for (const m of body.instructions) {
    if (m.opcode === 'parameter' || isReduce(m)) continue;
    if (!m.prim || (!FUSED_OPS.has(m.prim.name) && m.prim.name !== 'reshape')) return null;
    if (m.shape.dtype !== 'float32' && m.shape.dtype !== 'bool') return null;
    // Bool row values would need a per-row mask; leave them to the JS kernel.
    if (!full(m) && (m.shape.dtype !== 'float32' || m.prim?.name === 'iota')) return null;
  }
  for (const p of body.params) if (p.shape.dtype !== 'float32' && numel(p.shape) !== R * C && numel(p.shape) !== 1) return null;
  for (const o of body.outputs) if (o.isTuple || o.shape.dtype !== 'float32') return null;
  for (const m of stored.keys()) if (m.shape.dtype !== 'float32') return null;
  // Everything must be computed by some stage (the root reduction after the last one).
  for (const m of body.instructions) {
    if (m.opcode === 'parameter' || m === root) continue;
    if ((isReduce(m) ? level.get(m.operands[0])! : level.get(m)!) > last) return null;
  }
  const extra = new Set(body.outputs.slice(1));
  const stages: RowStage[] = [];
  for (let L = 0; L <= last; L++) {
    const rowValues = body.instructions.filter((m) => m.opcode !== 'parameter' && !full(m) && !isReduce(m) && level.get(m) === L);
    const rs = reduces.filter((r) => level.get(r.operands[0]) === L);
    const targets = body.instructions.filter((m) => full(m) && level.get(m) === L && (stored.has(m) || extra.has(m) || (m === root && L === last)));
    stages.push({ rowValues, reduces: rs, targets });
  }
  return { ...levels, stages };
}
