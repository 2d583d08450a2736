/**
 * The loop half of WebAssembly code generation: one exported function `k<i>(lo, hi)` per fused
 * computation, computing work items [lo, hi) so that a thread pool can split a kernel by items
 * (`pool.ts`). Every value lives at a fixed byte address of the executable's arena (`program.ts`),
 * baked into the code as load/store offsets.
 *
 * The loop space (the output's shape for loop fusions, the reduced operand's for reductions) is
 * viewed as rows of L contiguous elements: the trailing dims are merged into a row as far as
 * every non-scalar broadcast operand either runs contiguously along them or is constant along
 * them, so a broadcast reads one vector per step (or one splat per row) and its row base is
 * recomputed per row only. Inside a row the loop takes four elements per step (f32x4) and ends
 * with one partial vector: it reads past the row (the arena pads every buffer and its end, so
 * such reads stay in memory and their lanes are discarded) and stores only the valid lanes,
 * so the tail uses the same code, and therefore the same rounding, as the body.
 *
 * Kinds and their work items (each output element is computed by exactly one item, with the
 * same operation order whatever the split, so results do not depend on the thread count):
 * - loop: (row, chunk of CHUNK columns);
 * - row reduction (reduced axes trailing): one output each; float32 max in f32x4 lanes,
 *   sum in float64 (two f64x2 accumulators, i.e. four interleaved float64 partial sums, then
 *   added; this differs from the reference's sequential float64 sum by at most about
 *   K·2^-53·Σ|x| before the final rounding to float32);
 * - column reduction (reduced axes leading): (group of L output columns, chunk of COL_ITEM
 *   columns); a call's consecutive items of one group (up to COL_CHUNK columns) accumulate as
 *   one span in a float64 scratch row over the K reduced rows in order; with few column
 *   chunks, split instead by (chunk of COL_CHUNK columns, block of rows): each block sums into
 *   its own scratch row, and final items add the blocks in order and write the output (opt-in,
 *   `setColumnRowBlocks`).
 * - rows (a kRow fusion, `rowPlan.ts`): one row each; per stage, row values splatted, then a
 *   walk of the row computing that stage's full values (those a later stage reads go to the
 *   thread's scratch rows, `k(lo, hi, thread)`), writing outputs and accumulating the next
 *   reductions the same way as the row reduction above.
 * Max is NaN-propagating, like the reference, and returns +0 for max(−0, +0) (accumulated with
 * `f32x4.pmax` plus NaN and +0 masks, `kernelScope.ts`).
 */
import { wasm } from '@tpukit/core/internal';
import { HloComputation, HloInstruction, numel } from '../hlo';
import { reductionKey, sortedAxes } from '../passes/fusion';
import { stridesOf } from '../js/kernel';
import { columnReduceKernel } from './columnReduceKernel';
import { type ExprOptions, POLYNOMIAL, wasmCovers } from './emitExpr';
import { type Broadcast, COL_CHUNK, COL_ITEM, type FusionPlan, getParallelWork, iotaPlaceable, type KernelAddresses, minIotaSplit, outputAddr, type RowColumnSum } from './fusionPlan';
import { kernelScope } from './kernelScope';
import { VecBuilder } from './vecBuilder';
import { vtanhLarge } from './vmath';
import { loopKernel } from './loopKernel';
import { rowReduceKernel } from './rowReduceKernel';
import { rowStructure } from './rowPlan';
import { rowsKernel } from './rowsKernel';
import { envNumber, envSwitch } from '@tpukit/core/internal';

/** Columns per loop work item (a multiple of 4). */
export const CHUNK = 4096;

/**
 * Column reductions split by rows (opt-in): a reduction with fewer (group, span) items (spans
 * of COL_CHUNK columns) than the block limit, large enough to run on threads (`getParallelWork`:
 * a split reduction runs on threads from that work, so a smaller one is not split), is split into at most that
 * many blocks of at least COL_BLOCK_ROWS reduced rows each. The block count depends on the shape
 * and the limit only, never on the thread count, and the blocks' float64 sums are added in block
 * order, so results are the same on any number of threads (but not bit-identical to the unsplit
 * sum). Off (limit 1) by default: on the 2-vCPU bench machine the split GPT step's 42 column sums
 * took longer on two threads than unsplit (BENCHMARKS.md, "par3").
 */
export const COL_BLOCK_ROWS = 256;
let colBlockLimit = envNumber('TPUKIT_COL_ROW_BLOCKS', 1, 16) ?? 1;

/** Most row blocks a column reduction is split into (1 = not split, the default; env `TPUKIT_COL_ROW_BLOCKS`); applies to executables built afterwards. */
export function setColumnRowBlocks(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > 16) throw new RangeError(`setColumnRowBlocks: n must be an integer in 1..16; got ${n}`);
  colBlockLimit = n;
}

export function getColumnRowBlocks(): number {
  return colBlockLimit;
}

/** Row blocks of a column reduction over K rows with `items` (group, span) items and `work` (see setColumnRowBlocks). */
export function colRowBlocks(K: number, items: number, work: number): number {
  if (items >= colBlockLimit || work < getParallelWork()) return 1;
  return Math.max(1, Math.min(colBlockLimit, Math.floor(K / COL_BLOCK_ROWS)));
}

/**
 * How loop kernels with tanh walk its exp path (`loopKernel.ts`; the same values every way):
 * 'inline' (a branch per vector around the inline exp path), 'call' (that branch calls a
 * function of the module for it, or takes the inline walk after an item where many vectors
 * needed it) and 'defer' (the default: items walk without any branch, computing only the
 * polynomial and noting whether a lane needed the exp path, and an item where one did is
 * computed again by the 'call' walk's rules; where an output overlaps an input, 'call').
 * Env `TPUKIT_TANH_DEFER=0` gives 'call'; `TPUKIT_TANH_CALL=0` gives 'inline' (whatever `TPUKIT_TANH_DEFER` says).
 * Applies to executables built afterwards.
 */
export type TanhWalks = 'inline' | 'call' | 'defer';

const envTanhWalks = (): TanhWalks => (!envSwitch('TPUKIT_TANH_CALL', true) ? 'inline' : envSwitch('TPUKIT_TANH_DEFER', true) ? 'defer' : 'call');
let tanhWalks: TanhWalks = envTanhWalks();

/** Sets the loop kernels' tanh walks (`TanhWalks`); null restores the environment's choice. */
export function setTanhWalks(w: TanhWalks | null): void {
  if (w !== null && w !== 'inline' && w !== 'call' && w !== 'defer') throw new RangeError(`setTanhWalks: expected 'inline', 'call', 'defer' or null; got ${String(w)}`);
  tanhWalks = w ?? envTanhWalks();
}

/** Threads a row kernel with scratch rows may use (each has its own scratch rows in the arena)... */
export const ROW_SCRATCH_THREADS = 16;
/** ...and fewer when their scratch would pass this many bytes (very long rows), at least one. */
export const ROW_SCRATCH_BYTES = 8 << 20;
/** A cache line (bytes): the unit two threads' written memory must not share. */
export const LINE = 64;

let rowScratchLines = envSwitch('TPUKIT_ROW_SCRATCH_ALIGN', true);

/**
 * Whether row kernels planned afterwards give each thread's scratch rows whole cache lines (on by
 * default, off with env `TPUKIT_ROW_SCRATCH_ALIGN=0`; tests and A/B runs): each thread's block
 * rounded up to a multiple of LINE bytes and the region placed at a LINE-aligned arena address
 * (`FusionPlan.scratchAlign`), so two threads never write the same line on every row (false
 * sharing). Off, the PR-14 layout: blocks of 16-byte multiples from a 16-byte aligned address.
 * Only addresses move: the same bits.
 */
export function setRowScratchAlign(on: boolean): void {
  rowScratchLines = on;
}


/**
 * Broadcasts of non-scalar parameters that need index arithmetic: the element stride of each
 * loop dim into the source. Broadcasts of other values make the body uncovered (null), or, with
 * `rowValues`, are skipped (a row kernel reads them as its splatted row values).
 */
function broadcastStrides(body: HloComputation, shape: readonly number[], rowValues: boolean): { inst: HloInstruction; param: number; st: number[] }[] | null {
  const R = shape.length;
  const n = shape.reduce((a, b) => a * b, 1);
  const bst: { inst: HloInstruction; param: number; st: number[] }[] = [];
  for (const m of body.instructions) {
    if (m.prim?.name !== 'broadcast_in_dim') continue;
    const src = m.operands[0];
    const sn = numel(src.shape);
    if (sn === 1 || sn === n || (rowValues && numel(m.shape) !== n)) continue;
    if (src.opcode !== 'parameter') {
      if (rowValues) continue;
      return null;
    }
    const dims = (m.params as { broadcastDimensions: readonly number[] }).broadcastDimensions;
    const sst = stridesOf(src.shape.shape);
    const st = new globalThis.Array<number>(R).fill(0);
    src.shape.shape.forEach((sz, j) => {
      if (sz !== 1) st[dims[j]] = sst[j];
    });
    bst.push({ inst: m, param: src.paramIndex, st });
  }
  return bst;
}

/** Plans the loops of a fused computation, or null when the wasm emitter does not cover it. */
export function planFusion(body: HloComputation): FusionPlan | null {
  const root = body.outputs[0];
  if (root.isTuple) return null;
  const rname = root.prim?.name;
  const reduce = rname === 'reduce_sum' || rname === 'reduce_max' ? root : null;
  // A multi-output loop fusion: every output float32 over the loop shape (stored side by side);
  // a multi-output column reduction (sibling fusion): every output the same reduction of an operand of the same shape.
  const sameReduction = (o: HloInstruction): boolean => !o.isTuple && reductionKey(o) === reductionKey(reduce!);
  if (body.outputs.length > 1 && (reduce ? !body.outputs.every(sameReduction) : body.outputs.some((o) => o.isTuple || o.shape.dtype !== 'float32' || o.shape.shape.join() !== root.shape.shape.join()))) return null;
  if (!wasmCovers(body, reduce ? body.outputs : [])) return null;
  for (const m of body.instructions) {
    const dt = m.isTuple ? null : m.shape.dtype;
    if (dt !== 'float32' && dt !== 'bool') return null;
  }
  const shape = (reduce ? reduce.operands[0].shape : root.shape).shape;
  const R = shape.length;
  const n = shape.reduce((a, b) => a * b, 1);
  const loopSt = stridesOf(shape);
  const bst = broadcastStrides(body, shape, false);
  if (!bst) return null;
  let axes: number[] = [];
  let kind: FusionPlan['kind'] = 'loop';
  if (reduce) {
    axes = sortedAxes(reduce);
    kind = axes[axes.length - 1] === R - 1 ? 'row' : 'col';
    if (kind === 'row' && body.outputs.length > 1) return null;
  }
  // Iotas need a split where they are placeable (fusionPlan.ts's rule, shared with planRowFusion).
  const minD = Math.max(kind === 'row' ? axes[0] : kind === 'col' ? axes[axes.length - 1] + 1 : 0, minIotaSplit(body, R));
  // The smallest d >= minD where every broadcast is contiguous or constant along dims [d, R).
  const fits = (d: number): boolean =>
    bst.every(({ st }) => {
      const live = [];
      for (let t = d; t < R; t++) if (shape[t] > 1) live.push(t);
      return live.every((t) => st[t] === 0) || live.every((t) => st[t] === loopSt[t]);
    });
  let d = minD;
  while (d < R && !fits(d)) d++;
  const rows = shape.slice(0, d).reduce((a, b) => a * b, 1);
  const L = shape.slice(d).reduce((a, b) => a * b, 1);
  const broadcasts: Broadcast[] = bst.map(({ inst, param, st }) => ({ inst, param, outer: st.slice(0, d), contiguous: st.slice(d).some((s, k) => s !== 0 && shape[d + k] > 1) }));
  const weight = 1 + 8 * body.instructions.filter((m) => m.prim && POLYNOMIAL.has(m.prim.name)).length;
  const plan: FusionPlan = { kind, body, reduce, isMax: rname === 'reduce_max', shape, d, L, rows, items: 0, finalItems: 0, rowBlocks: 1, side: false, sums: null, chunksPerRow: 0, rowsPerOutput: 0, K: 0, groups: 0, groupWidth: 0, broadcasts, chunk: CHUNK, scratchBytes: 0, work: n * weight, rowsOf: null, scratchRowBytes: 0, scratchThreads: 0, scratchAlign: 16 };
  if (kind === 'loop') {
    plan.chunksPerRow = Math.ceil(L / CHUNK);
    plan.items = rows * plan.chunksPerRow;
  } else if (kind === 'row') {
    const N = numel(root.shape);
    plan.K = axes.reduce((a, t) => a * shape[t], 1);
    plan.rowsPerOutput = L === 0 ? 0 : plan.K / L;
    plan.items = N;
  } else {
    const N = numel(root.shape);
    plan.K = axes.reduce((a, t) => a * shape[t], 1);
    plan.groups = L === 0 ? 0 : N / L;
    plan.groupWidth = Math.ceil(L / 4) * 4;
    plan.rowBlocks = colRowBlocks(plan.K, plan.groups * Math.ceil(L / COL_CHUNK), plan.work);
    // Unsplit: narrow items, summed in spans of up to COL_CHUNK columns (columnReduceKernel.ts);
    // split by rows: one item per COL_CHUNK columns and block.
    plan.chunk = plan.rowBlocks > 1 ? COL_CHUNK : COL_ITEM;
    plan.chunksPerRow = Math.ceil(L / plan.chunk);
    const columnItems = plan.groups * plan.chunksPerRow;
    plan.items = columnItems * plan.rowBlocks;
    plan.finalItems = plan.rowBlocks > 1 ? columnItems : 0;
    // One scratch per output (a multi-output column reduction accumulates each in its own).
    plan.scratchBytes = plan.groups * plan.groupWidth * 8 * plan.rowBlocks * body.outputs.length;
  }
  return plan;
}

/** Whether `sum` is one `reduce_sum` of its only parameter and nothing else (the reductions `planEpilogueColumnSum` and `planRowColumnSum` pair). */
function isPlainColumnSum(sum: HloComputation): boolean {
  const red = sum.outputs[0];
  return sum.outputs.length === 1 && !red.isTuple && red.prim?.name === 'reduce_sum' && sum.params.length === 1 && red.operands[0] === sum.params[0] && sum.instructions.every((m) => m === red || m.opcode === 'parameter');
}

/**
 * Plans a dot epilogue that also computes its result's column sum, in one pass (a multi-output
 * kernel, as XLA fuses a reduction into its producer): `epilogue` is the epilogue's loop body
 * (param 0 the dot's result, `splitOutputFusion`), `sum` a column reduction's body that is
 * one float32 `reduce_sum` of its only parameter, the epilogue's result, over leading axes.
 * The kernel is that column reduction over the epilogue's values which also stores every value
 * (`plan.side`, at `KernelAddresses.side`). Per column it adds the same float32 values in the
 * same row order in float64 as the separate reduction over the stored result, with the same
 * spans and rounds once: the same bits. Null when the pair has another form or the column
 * kernel does not cover it.
 */
export function planEpilogueColumnSum(epilogue: HloComputation, sum: HloComputation): FusionPlan | null {
  if (!isPlainColumnSum(sum)) return null;
  const red = sum.outputs[0];
  const root = epilogue.outputs[0];
  if (epilogue.outputs.length !== 1 || root.isTuple || root.shape.dtype !== 'float32' || red.shape.dtype !== 'float32' || root.shape.shape.join() !== sum.params[0].shape.shape.join()) return null;
  const body = new HloComputation(`${epilogue.name}.colsum`);
  const map = new Map<HloInstruction, HloInstruction>();
  for (const p of epilogue.params) {
    const q = body.addParameter(p.shape);
    q.layout = p.layout;
    map.set(p, q);
  }
  const [value] = body.addCopies(epilogue, map);
  body.outputs = [body.add(new HloInstruction(red.opcode, red.shapes, [value], red.params, red.prim))];
  const plan = planFusion(body);
  if (plan === null || plan.kind !== 'col' || plan.isMax) return null;
  plan.side = true;
  return plan;
}

/**
 * Plans a column reduction `sum` (its body, planned as `sumPlan`, reading `sumOperands`) as
 * part of the row kernel of a row fusion (`rowPlan`, reading `rowOperands`), or null when the
 * pair has another form. Every output of the sum must be a float32 `reduce_sum` over the leading
 * axes of the row fusion's loop shape (K = its rows, L = its row length), and every operand of
 * the sum one of the row fusion's operands (read at the row kernel's address for it: elementwise,
 * a scalar, or through a broadcast that is the row's value or runs along the row) or one of its
 * full outputs (`outputOf(o)`: its index, else -1; a value the walk of some stage computes).
 * The row kernel, on one thread over every row, computes the summed values in that stage's
 * walk (the one of the outputs read, else the first) with the sum's own element code, and adds
 * each into a float64 scratch per column, rows in order, rounded once after the last row: the
 * same float32 values and the same additions as the column reduction (which sums each column
 * over the rows in order in float64 and rounds once): the same bits. The row fusion must run
 * before the sum (the caller checks the order).
 */
export function planRowColumnSum(rowPlan: FusionPlan, rowOperands: readonly HloInstruction[], outputOf: (o: HloInstruction) => number, sum: HloComputation, sumPlan: FusionPlan, sumOperands: readonly HloInstruction[]): RowColumnSum | null {
  if (rowPlan.kind !== 'rows' || sumPlan.kind !== 'col' || sumPlan.isMax || sumPlan.rowBlocks !== 1 || sumPlan.groups !== 1 || sumPlan.K !== rowPlan.rows || sumPlan.L !== rowPlan.L) return null;
  if (sumPlan.shape.join() !== rowPlan.shape.join() || sumOperands.length !== sum.params.length) return null;
  if (!sum.outputs.every((o) => !o.isTuple && o.prim?.name === 'reduce_sum' && o.shape.dtype === 'float32')) return null;
  // (the row kernel's walk has no coordinate read for the sum's body: an iota stays in its own kernel)
  if (sum.instructions.some((m) => m.prim?.name === 'iota')) return null;
  const rs = rowPlan.rowsOf!;
  const rowBody = rowPlan.body;
  const R = rowPlan.rows;
  const C = rowPlan.L;
  const stageOf = (m: HloInstruction): number => rs.stages.findIndex((st) => st.targets.includes(m));
  const args: RowColumnSum['args'][number][] = [];
  let stage = -1;
  for (const p of sum.params) {
    const o = sumOperands[p.paramIndex];
    if (p.shape.dtype !== 'float32' || o.isTuple) return null;
    const n = numel(p.shape);
    const i = rowOperands.indexOf(o);
    if (i >= 0) {
      const rp = rowBody.params[i];
      if (rp === undefined || rp.shape.dtype !== 'float32' || numel(rp.shape) !== n) return null;
      if (n !== 1 && n !== R * C && n !== R && n !== C) return null;
      args.push({ param: i });
      continue;
    }
    const q = outputOf(o);
    const out = q >= 0 ? rowBody.outputs[q] : undefined;
    if (out === undefined || out.isTuple || out.shape.dtype !== 'float32' || numel(out.shape) !== R * C || n !== R * C) return null;
    // (a full output is computed by the walk of the stage that has it as a target)
    const st = stageOf(out);
    if (st < 0 || (stage >= 0 && st !== stage)) return null;
    stage = st;
    args.push({ value: out });
  }
  // Broadcasts of the sum's non-scalar parameters: the row's value or along the row, nothing else.
  const shape = rowPlan.shape;
  const d = rowPlan.d;
  const bst = broadcastStrides(sum, shape, false);
  if (bst === null) return null;
  const lead = stridesOf(shape.slice(0, d));
  const loopSt = stridesOf(shape);
  const broadcasts = new Map<HloInstruction, 'row' | 'column'>();
  for (const { inst, param, st } of bst) {
    const n = numel(sum.params[param].shape);
    const same = (t: number, want: number): boolean => shape[t] === 1 || st[t] === want;
    const isRow = n === R && shape.every((_, t) => same(t, t < d ? lead[t] : 0));
    const isColumn = n === C && shape.every((_, t) => same(t, t < d ? 0 : loopSt[t]));
    if (!isRow && !isColumn) return null;
    if (!('param' in args[param])) return null;
    broadcasts.set(inst, isRow ? 'row' : 'column');
  }
  // Parameters of R or C elements only through those broadcasts; full ones elementwise.
  for (const m of sum.instructions)
    for (const o of m.operands) {
      if (o.opcode !== 'parameter') continue;
      const n = numel(o.shape);
      if (n !== 1 && n !== R * C && !(m.prim?.name === 'broadcast_in_dim' && broadcasts.has(m))) return null;
    }
  return { body: sum, args, stage: Math.max(0, stage), broadcasts };
}

/**
 * Plans the row kernel of a row fusion (kRow), or null when the wasm emitter does not cover it
 * (see `rowPlan.ts`), or a parameter broadcast is neither along the row nor constant along it.
 * Work items are rows: each row is computed by one thread, start to end.
 */
export function planRowFusion(body: HloComputation): FusionPlan | null {
  const rs = rowStructure(body);
  if (!rs) return null;
  const shape = body.instructions.find((m) => m.prim?.name === 'reduce_sum' || m.prim?.name === 'reduce_max')!.operands[0].shape.shape;
  const n = rs.R * rs.C;
  const bst = broadcastStrides(body, shape, true);
  if (!bst) return null;
  const d = rs.k;
  const loopSt = stridesOf(shape);
  const live: number[] = [];
  for (let t = d; t < shape.length; t++) if (shape[t] > 1) live.push(t);
  if (!bst.every(({ st }) => live.every((t) => st[t] === 0) || live.every((t) => st[t] === loopSt[t]))) return null;
  // Iotas must be placeable at the row structure's split (fusionPlan.ts's rule, shared with planFusion).
  if (body.instructions.some((m) => m.prim?.name === 'iota' && !iotaPlaceable((m.params as { dimension: number }).dimension, d, shape.length))) return null;
  const broadcasts: Broadcast[] = bst.map(({ inst, param, st }) => ({ inst, param, outer: st.slice(0, d), contiguous: st.slice(d).some((s, k) => s !== 0 && shape[d + k] > 1) }));
  const weight = 1 + 8 * body.instructions.filter((m) => m.prim && POLYNOMIAL.has(m.prim.name)).length;
  const rowBytes = rs.stored.size * Math.ceil(rs.C / 4) * 16;
  const scratchRowBytes = rowScratchLines ? Math.ceil(rowBytes / LINE) * LINE : rowBytes;
  const scratchThreads = scratchRowBytes === 0 ? 0 : Math.max(1, Math.min(ROW_SCRATCH_THREADS, Math.floor(ROW_SCRATCH_BYTES / scratchRowBytes)));
  return {
    kind: 'rows', body, reduce: null, isMax: false, shape, d, L: rs.C, rows: rs.R, items: rs.R, finalItems: 0, rowBlocks: 1, side: false, sums: null, chunksPerRow: 1, rowsPerOutput: 0, K: 0, groups: 0, groupWidth: 0,
    broadcasts, chunk: rs.C, scratchBytes: scratchRowBytes * scratchThreads, work: n * weight * rs.stages.length, rowsOf: rs, scratchRowBytes, scratchThreads, scratchAlign: rowScratchLines ? LINE : 16,
  };
}

const tanhLargeOf = new WeakMap<wasm.ModuleBuilder, number>();

/** The function of module `m` computing tanh's exp path for one vector (`vtanhLarge`), added on first use. */
function tanhLargeFunction(m: wasm.ModuleBuilder): number {
  let i = tanhLargeOf.get(m);
  if (i === undefined) {
    i = m.addFunction(null, ['v128'], ['v128'], (f) => vtanhLarge(new VecBuilder(f), () => void f.get(0))());
    tanhLargeOf.set(m, i);
  }
  return i;
}

/**
 * Whether a loop kernel's outputs overlap the arena bytes of a parameter it reads (an in-place
 * kernel): an item computed again (`TanhWalks` 'defer') would then read its own first results.
 */
function outputsOverlapInputs(plan: FusionPlan, at: KernelAddresses): boolean {
  const bytes = numel(plan.body.outputs[0].shape) * 4;
  const outs = plan.body.outputs.map((_, q) => outputAddr(at, q));
  return plan.body.params.some((p) => {
    const src = at.params[p.paramIndex];
    if (!('addr' in src)) return false;
    const pb = Math.max(16, numel(p.shape) * (p.shape.dtype === 'bool' ? 1 : 4));
    return outs.some((o) => src.addr < o + bytes && o < src.addr + pb);
  });
}

/** Adds `k<index>(lo, hi)` for `plan` to module `m`: the shared scope, then the loops of its fusion kind. */
export function emitKernel(m: wasm.ModuleBuilder, index: number, plan: FusionPlan, at: KernelAddresses, opts0: ExprOptions): void {
  // Loop kernels with tanh get its exp path as a call too (`loopKernel.ts` picks per item).
  const tanhCall = plan.kind === 'loop' && tanhWalks !== 'inline' && plan.body.instructions.some((i) => i.prim?.name === 'tanh') ? tanhLargeFunction(m) : undefined;
  const defer = tanhCall !== undefined && tanhWalks === 'defer' && !outputsOverlapInputs(plan, at);
  const opts = tanhCall === undefined ? opts0 : { ...opts0, tanh: { call: tanhCall, defer } };
  // Row kernels take the thread's index (0 = the calling thread), which picks its scratch rows.
  m.addFunction(`k${index}`, plan.kind === 'rows' ? ['i32', 'i32', 'i32'] : ['i32', 'i32'], [], (f) => {
    const k = kernelScope(f, plan, at, opts);
    if (plan.kind === 'loop') loopKernel(k);
    else if (plan.kind === 'rows') rowsKernel(k);
    else if (plan.kind === 'row') rowReduceKernel(k);
    else columnReduceKernel(k);
  });
}
