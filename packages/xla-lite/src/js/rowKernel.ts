/**
 * Code generation for row fusions (`kRow`, see passes/rowFusion.ts): one JavaScript function per
 * fused body that walks the rows of the loop shape S = [rows..., row...] one at a time. Each
 * value gets a level: a parameter 0, a row reduction one more than its operand, anything else
 * the largest level of its operands. Per row, stage L first computes the row values of level L
 * (once per row), then loops over the row's C elements computing the full values of level L and
 * accumulating the reductions of level L+1; the last stage writes the output (each element, or
 * the row's reduction). A full value needed by a later stage is kept in a scratch row of C
 * float32s, so the row stays in cache and nothing full-size is written but the result (and
 * the extra outputs of a multi-output fusion, written where they are computed). The levels
 * and scratch rows are rowLevels.ts's (shared with the WebAssembly row kernel, wasm/rowPlan.ts)
 * and the per-element code is kernel.ts's (`elementStatement`, `expr`, `reduceStep`); this file
 * only emits the JavaScript of each stage.
 */
import { type HloComputation, type HloInstruction, numel } from '../hlo';
import { coordsCode, elementStatement, expr, type FusedKernel, reduceInit, reduceStep } from './kernel';
import { isIndexValue } from '../passes/fusion';
import { isReduce, rowLevels } from './rowLevels';

/** The generated source of a row fusion body, and the scratch rows it needs. */
export function rowKernelSource(body: HloComputation): { source: string; scratchRows: number; rowLength: number } {
  const root = body.outputs[0];
  // Levels and scratch rows (see the file comment and rowLevels.ts).
  const levels = rowLevels(body);
  if (!levels) throw new Error(`xla-lite row kernel: ${body.name} has no row reduction`);
  const { S, k, R, C, reduces, full, level, last, stored } = levels;
  const idx = new Map(body.instructions.map((m, j) => [m, j]));
  const pre: string[] = [];
  body.params.forEach((p, j) => pre.push(numel(p.shape) === 1 ? `const p${j} = ins[${j}][0];` : `const in${j} = ins[${j}];`));
  for (const [m, s] of stored) pre.push(`const s${idx.get(m)} = scratch[${s}];`);
  // Extra outputs of a multi-output fusion: written where their value is computed.
  const extra = new Map(body.outputs.slice(1).map((m, k) => [m, `o${k}`]));
  extra.forEach((o, m) => pre.push(`const ${o} = more[${o.slice(1)}];`));
  const store = (m: HloInstruction, v: string, at: string): string[] => (extra.has(m) ? [`${extra.get(m)}[${at}] = ${v};`] : []);
  let stage = 0;
  const readFull = (o: HloInstruction): string => {
    if (o.opcode === 'parameter') return numel(o.shape) === 1 ? `p${o.paramIndex}` : `in${o.paramIndex}[i]`;
    if (!full(o)) return `u${idx.get(o)}`;
    // (A full value of an earlier stage is kept in scratch exactly when rowLevels stored it.)
    return level.get(o)! < stage && stored.has(o) ? `s${idx.get(o)}[j]` : `t${idx.get(o)}`;
  };
  const readRow = (o: HloInstruction): string => (o.opcode === 'parameter' ? (numel(o.shape) === 1 ? `p${o.paramIndex}` : `in${o.paramIndex}[row]`) : `u${idx.get(o)}`);
  // Broadcasts of inputs along the rows (a scale or shift of the row's length: `in[j]`) or
  // across them (one value per row: `in[row]`) are indexed directly; others need coordinates.
  const direct = new Map<HloInstruction, string>();
  for (const m of body.instructions) {
    const src = m.operands[0];
    if (!full(m) || m.prim?.name !== 'broadcast_in_dim' || src.opcode !== 'parameter' || numel(src.shape) === 1) continue;
    const dims = (m.params as { broadcastDimensions: readonly number[] }).broadcastDimensions;
    const live = src.shape.shape.map((sz, j) => (sz === 1 ? -1 : dims[j])).filter((d) => d >= 0);
    const rowDims = S.map((sz, d) => (sz === 1 ? -1 : d)).filter((d) => d >= k);
    const leadDims = S.map((sz, d) => (sz === 1 ? -1 : d)).filter((d) => d >= 0 && d < k);
    if (numel(src.shape) === C && live.join() === rowDims.join()) direct.set(m, `in${src.paramIndex}[j]`);
    else if (numel(src.shape) === R && live.join() === leadDims.join()) direct.set(m, `in${src.paramIndex}[row]`);
  }
  const needsCoords = body.instructions.some((m) => full(m) && !direct.has(m) && (m.prim?.name === 'iota' || (m.prim?.name === 'broadcast_in_dim' && m.operands[0].opcode === 'parameter' && numel(m.operands[0].shape) !== 1)));
  const rowLoop: string[] = [];
  for (stage = 0; stage <= last; stage++) {
    // Row values of this level, once per row.
    for (const m of body.instructions) {
      if (m.opcode === 'parameter' || full(m) || isReduce(m) || level.get(m) !== stage) continue;
      const name = m.prim!.name;
      const v = `u${idx.get(m)}`;
      rowLoop.push(name === 'reshape' || name === 'broadcast_in_dim' ? `const ${v} = ${readRow(m.operands[0])};` : `const ${v} = ${expr(m, m.operands.map(readRow))};`, ...store(m, v, 'row'));
    }
    const accs = reduces.filter((r) => level.get(r.operands[0]) === stage);
    // Index values (iotas, masks from iotas) are computed again in every stage instead of kept.
    const fulls = body.instructions.filter((m) => full(m) && (level.get(m) === stage || isIndexValue(m)));
    for (const r of accs) rowLoop.push(`let a${idx.get(r)} = ${reduceInit(r)};`);
    const inner: string[] = ['const i = base + j;'];
    if (needsCoords) inner.push(...coordsCode(S));
    for (const m of fulls) {
      const v = `t${idx.get(m)}`;
      const src = m.operands[0];
      if (direct.has(m)) inner.push(`const ${v} = ${direct.get(m)};`);
      else if (m.prim!.name === 'broadcast_in_dim' && src.opcode !== 'parameter' && !full(src)) inner.push(`const ${v} = ${readRow(src)};`);
      else inner.push(elementStatement(m, v, readFull));
      if (stored.has(m)) inner.push(`s${idx.get(m)}[j] = ${v};`);
      inner.push(...store(m, v, 'i'));
    }
    for (const r of accs) inner.push(reduceStep(r, `a${idx.get(r)}`, readFull(r.operands[0])));
    if (stage === last && !isReduce(root)) inner.push(`out[i] = ${readFull(root)};`);
    rowLoop.push(`for (let j = 0; j < ${C}; j++) {\n    ${inner.join('\n    ')}\n  }`);
    for (const r of accs) rowLoop.push(`const u${idx.get(r)} = Math.fround(a${idx.get(r)});`, ...store(r, `u${idx.get(r)}`, 'row'));
  }
  if (isReduce(root)) rowLoop.push(`out[row] = u${idx.get(root)};`);
  const source = `${pre.join('\n')}\nfor (let row = 0; row < ${R}; row++) {\n  const base = row * ${C};\n  ${rowLoop.join('\n  ')}\n}`;
  return { source, scratchRows: stored.size, rowLength: C };
}

/** Builds the row kernel of a kRow fusion body (once, at compile time); it allocates nothing per call. */
export function compileRowKernel(body: HloComputation): FusedKernel {
  const { source, scratchRows, rowLength } = rowKernelSource(body);
  const scratch = Array.from({ length: scratchRows }, () => new Float32Array(rowLength));
  const fn = new Function('ins', 'out', 'n', 'more', 'scratch', source) as (ins: ArrayLike<number>[], out: Float32Array | Uint8Array, n: number, more: (Float32Array | Uint8Array)[] | undefined, scratch: Float32Array[]) => void;
  return (ins, out, n, more) => fn(ins, out, n, more, scratch);
}
