/**
 * Column reductions (reduced axes leading): work items are (group of L output columns, chunk
 * of COL_ITEM columns); a kernel call sums each run of consecutive items of one group (at most
 * COL_CHUNK columns) as one span: a float64 scratch row per output (a sibling fusion has several,
 * passes/siblingFusion.ts) accumulates over the K reduced rows in order, then rounds to float32
 * once. Each column is summed the same way whatever the span, so
 * how the pool hands items to threads never changes a result.
 *
 * Split by rows (`plan.rowBlocks` = B > 1, opt-in: `setColumnRowBlocks` in emitKernel.ts): items
 * [0, items) are (group, chunk, block of ceil(K / B) rows), each summing its rows in order into
 * the block's own scratch; items [items, items + finalItems) are (group, chunk) again, adding
 * the B blocks' float64 sums in block order and rounding once. The caller runs the final items
 * after every other item is done (`program.ts`); on one thread `k(0, items + finalItems)` does
 * both in order.
 *
 * Four rows at a time (`plain`: a body that reads only whole parameters and scalars, no
 * broadcast or iota, as a bias gradient's sum): each column vector's float64 partial sums are
 * loaded from the scratch once, the four rows' values added in row order in registers, and
 * stored once, instead of a scratch load and store per row (the same additions in the same
 * order: the same bits). The rows' reads are one load each at a constant offset (row stride
 * G x L floats); an output that sums a parameter itself reads it as two 64-bit halves, each
 * widened as loaded, with no shuffle for the upper half. The last K mod 4 rows go one by one.
 * `TPUKIT_COL_ROWS4=0` (or `setColumnRows4(false)` before building) turns it off (an A/B switch).
 *
 * A dot epilogue with its column sum (`plan.side`, `planEpilogueColumnSum` in emitKernel.ts):
 * the reduced operand is the epilogue's value, which the walk also stores (only the row's
 * columns) at `at.side`, the dot's result buffer it read that element from (in place: each
 * element is read, then written, by the one item that owns its column). One row at a time.
 */
import { envSwitch, wasm } from '@tpukit/core/internal';
import { numel } from '../hlo';
import type { E } from './vecBuilder';
import { type ElementReads, emitElements } from './emitExpr';
import type { KernelScope } from './kernelScope';
import { COL_CHUNK, outputAddr } from './fusionPlan';

const { OP, SIMD } = wasm;

let rows4 = envSwitch('TPUKIT_COL_ROWS4', true);

/** Turns the four-rows-at-a-time accumulation on or off for kernels built afterwards (on by default; `TPUKIT_COL_ROWS4=0`). */
export function setColumnRows4(on: boolean): void {
  rows4 = on;
}

export function columnRows4(): boolean {
  return rows4;
}

/** Rows a plain column reduction accumulates per scratch round trip. */
const ROWS = 4;

export function columnReduceKernel(k: KernelScope): void {
  const { f, b, plan, at, opts, hi, I, item, r, rowBase, j, j0, j1, ej, ej4, rem, s, L, i32, set, rowSetup, walk, reads, storeOut, forItems, chunkRange, hiHalf, f64Const, scalar, addrOf, accumulateAt } = k;
  const init = plan.isMax ? -Infinity : 0;
  // Column reduction: scratch[blk][g*W + j] (float64) accumulates over the block's reduced rows.
  const G = plan.groups;
  const W = plan.groupWidth;
  const cpr = plan.chunksPerRow;
  const B = plan.rowBlocks;
  const split = B > 1;
  const blockRows = Math.ceil(plan.K / B);
  const blockBytes = G * W * 8;
  // Several outputs (a sibling fusion, every one the same reduction): each has its own scratch,
  // B blocks long, and output address; all are accumulated in the same walk over the rows.
  const outs = plan.body.outputs;
  const outBytes = blockBytes * B;
  const outAddr = (q: number): number => outputAddr(at, q);
  const g = I();
  const sp = I();
  // Split only: the item's (group, chunk) index, block, its scratch offset and its last row.
  const gc = split ? I() : -1;
  const blk = split ? I() : -1;
  const sb = split ? I() : -1;
  const sEnd = split ? I() : -1;
  const op = plan.isMax ? SIMD.f64x2_max : SIMD.f64x2_add;
  // A dot epilogue with its column sum (`plan.side`) also stores the reduced operand (its one output's) elementwise there.
  const side = plan.side ? at.side : undefined;
  if (plan.side && (side === undefined || outs.length !== 1)) throw new Error(`xla-lite wasm kernel: ${plan.body.name}: a column reduction storing its operand needs one output and a side address`);
  // A plain body (whole f32 parameters and scalars only): ROWS rows per scratch round trip. Not
  // with a side store: four rows of the GELU' epilogue's inputs and result per step measured
  // 15-25% slower than one row (1.07-1.17 against 0.90-0.94 ms per f32[2048, 512] call, BENCHMARKS.md "fuse13").
  const plain =
    side === undefined &&
    rows4 &&
    plan.broadcasts.length === 0 &&
    !plan.body.instructions.some((m) => m.prim?.name === 'iota') &&
    plan.body.params.every((p) => numel(p.shape) === 1 || (p.shape.dtype === 'float32' && numel(p.shape) === plan.shape.reduce((a, c) => a * c, 1)));
  const accs = plain ? outs.map(() => [f.local('v128'), f.local('v128')] as const) : [];
  /** The body's reads `off` bytes further on (a later row of the same columns). */
  const rowReads = (off: number): ElementReads => ({
    param: (p) => {
      const sl = scalar.get(p);
      if (sl !== undefined) return b.get(sl);
      const A = addrOf(p.paramIndex) + off;
      return b.let(() => void f.get(ej4).simdMem(SIMD.v128_load, A, 16));
    },
    broadcast: () => {
      throw new Error(`xla-lite wasm kernel: ${plan.body.name}: a broadcast in a plain column reduction`);
    },
  });
  /** sp = byte offset of scratch[g*W + j] (in the item's block when split). */
  const scratchAt = (): void =>
    set(sp, () => {
      f.get(g).i32Const(W).op(OP.i32_mul).get(j).op(OP.i32_add).i32Const(3).op(OP.i32_shl);
      if (split) f.get(sb).op(OP.i32_add);
    });
  /** g and the chunk's columns [j0, j1) from a (group, chunk) index. */
  const groupChunk = (index: () => void): void => {
    set(g, () => {
      index();
      f.i32Const(cpr).op(OP.i32_div_u);
    });
    chunkRange(() => {
      index();
      f.get(g).i32Const(cpr).op(OP.i32_mul).op(OP.i32_sub);
    });
  };
  /** out_q[g*L + j] = float32(scratch_q[g*W + j]) for every output q over the chunk, adding the B blocks in order first. */
  const writeOut = (): void => {
    set(rowBase, () => f.get(g).i32Const(L).op(OP.i32_mul));
    const half = (off: number): E => {
      let v: E = () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch + off, 16);
      for (let q = 1; q < B; q++) v = b.op(op, v, () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch + q * blockBytes + off, 16));
      return b.op(SIMD.f32x4_demote_f64x2_zero, v);
    };
    const fromScratch = (q: number): E => {
      set(sp, () => f.get(g).i32Const(W).op(OP.i32_mul).get(j).op(OP.i32_add).i32Const(3).op(OP.i32_shl));
      const lo2 = half(q * outBytes);
      const hi2 = half(q * outBytes + 16);
      return b.let(b.shuffle(lo2, hi2, [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]));
    };
    const store = (partial: boolean): void => outs.forEach((_, q) => storeOut(fromScratch(q), partial, outAddr(q)));
    f.get(j0).set(j);
    f.block().loop();
    f.get(j1).get(j).op(OP.i32_sub).i32Const(4).op(OP.i32_lt_s).brIf(1);
    set(ej, () => f.get(rowBase).get(j).op(OP.i32_add));
    set(ej4, () => f.get(ej).i32Const(2).op(OP.i32_shl));
    store(false);
    f.get(j).i32Const(4).op(OP.i32_add).set(j).br(0);
    f.end().end();
    f.get(j).get(j1).op(OP.i32_lt_s).if();
    set(rem, () => f.get(j1).get(j).op(OP.i32_sub));
    set(ej, () => f.get(rowBase).get(j).op(OP.i32_add));
    set(ej4, () => f.get(ej).i32Const(2).op(OP.i32_shl));
    store(true);
    f.end();
  };
  /** Sums the item's rows (all K, or its block's) of its chunk into its scratch. */
  const accumulate = (): void => {
    // Initialise the chunk's scratch (whole vectors: the group is padded to W columns).
    f.get(j0).set(j);
    f.block().loop();
    f.get(j).get(j1).op(OP.i32_ge_u).brIf(1);
    scratchAt();
    for (let q = 0; q < outs.length; q++)
      for (const off of [0, 16]) {
        f.get(sp);
        f64Const(init)();
        f.simdMem(SIMD.v128_store, at.scratch + q * outBytes + off, 16);
      }
    f.get(j).i32Const(4).op(OP.i32_add).set(j).br(0);
    f.end().end();
    if (plan.K === 0) return;
    // Rows [s, end): every block has at least one row (COL_BLOCK_ROWS rows or more per block, at most 16 blocks).
    if (split) {
      set(s, () => f.get(blk).i32Const(blockRows).op(OP.i32_mul));
      set(sEnd, () => f.get(s).i32Const(blockRows).op(OP.i32_add));
      f.get(sEnd).i32Const(plan.K).op(OP.i32_gt_s).if().i32Const(plan.K).set(sEnd).end();
    } else set(s, () => i32(0));
    if (plain) {
      // ROWS rows per scratch round trip while that many are left, then one at a time.
      const end = (): void => void (split ? f.get(sEnd) : f.i32Const(plan.K));
      for (const n of [ROWS, 1]) {
        f.block().loop();
        end();
        f.get(s).op(OP.i32_sub).i32Const(n).op(OP.i32_lt_s).brIf(1);
        set(r, () => f.get(s).i32Const(G).op(OP.i32_mul).get(g).op(OP.i32_add));
        rowSetup();
        walk(() => {
          scratchAt();
          outs.forEach((_, q) => {
            f.get(sp).simdMem(SIMD.v128_load, at.scratch + q * outBytes, 16).set(accs[q][0]);
            f.get(sp).simdMem(SIMD.v128_load, at.scratch + q * outBytes + 16, 16).set(accs[q][1]);
          });
          for (let i = 0; i < n; i++) {
            // An output summing a parameter itself reads its two halves as 64-bit loads, each
            // widened as it is (no shuffle for the upper half: x64 runs shuffles and the
            // conversions' other half on one port, which bounded this loop).
            const direct = outs.map((o) => o.operands[0].opcode === 'parameter' && !scalar.has(o.operands[0]));
            const vs = emitElements(b, plan.body, i === 0 ? reads : rowReads(i * G * L * 4), opts, outs.filter((_, q) => !direct[q]).map((o) => o.operands[0]));
            let next = 0;
            outs.forEach((o, q) => {
              let lo: E;
              let hi2: E;
              if (direct[q]) {
                const A = addrOf(o.operands[0].paramIndex) + i * G * L * 4;
                lo = b.op(SIMD.f64x2_promote_low_f32x4, () => void f.get(ej4).simdMem(SIMD.v128_load64_zero, A, 8));
                hi2 = b.op(SIMD.f64x2_promote_low_f32x4, () => void f.get(ej4).simdMem(SIMD.v128_load64_zero, A + 8, 8));
              } else {
                const x = b.let(vs[next++]);
                lo = b.op(SIMD.f64x2_promote_low_f32x4, x);
                hi2 = b.op(SIMD.f64x2_promote_low_f32x4, hiHalf(x));
              }
              b.setTo(accs[q][0], b.op(op, b.get(accs[q][0]), lo));
              b.setTo(accs[q][1], b.op(op, b.get(accs[q][1]), hi2));
            });
          }
          outs.forEach((_, q) => {
            f.get(sp).get(accs[q][0]).simdMem(SIMD.v128_store, at.scratch + q * outBytes, 16);
            f.get(sp).get(accs[q][1]).simdMem(SIMD.v128_store, at.scratch + q * outBytes + 16, 16);
          });
        });
        f.get(s).i32Const(n).op(OP.i32_add).set(s);
        f.br(0);
        f.end().end();
      }
      return;
    }
    f.loop();
    set(r, () => f.get(s).i32Const(G).op(OP.i32_mul).get(g).op(OP.i32_add));
    rowSetup();
    const acc = (v: E, base: number): void => accumulateAt(sp, base, b.let(v), op);
    // Every output's operand computed in one walk (the tail's read-past lanes land in the padded
    // scratch; the side store keeps to the row's columns).
    walk((partial) => {
      const vs = emitElements(b, plan.body, reads, opts, outs.map((o) => o.operands[0]));
      if (side !== undefined) {
        vs[0] = b.let(vs[0]);
        storeOut(vs[0], partial, side);
      }
      scratchAt();
      vs.forEach((v, q) => acc(v, at.scratch + q * outBytes));
    });
    f.get(s).i32Const(1).op(OP.i32_add).tee(s);
    if (split) f.get(sEnd);
    else f.i32Const(plan.K);
    f.op(OP.i32_lt_s).brIf(0);
    f.end();
  };
  if (!split) {
    // Items [lo, hi) in spans: the run of consecutive items of one group, at most `span` of
    // them, is one pass over the K rows (a thread reads its columns of each row front to back;
    // one thread gets the same spans as before the columns were split into narrow items).
    const span = Math.max(1, Math.floor(COL_CHUNK / plan.chunk));
    const e = I();
    forItems(
      () => {
        groupChunk(() => void f.get(item));
        // e = min(hi, item + span, end of g's items); j1 = the span's end column.
        set(e, () => f.get(item).i32Const(span).op(OP.i32_add));
        f.get(e).get(hi).op(OP.i32_gt_u).if().get(hi).set(e).end();
        f.get(e).get(g).i32Const(cpr).op(OP.i32_mul).i32Const(cpr).op(OP.i32_add).tee(sp).op(OP.i32_gt_u).if().get(sp).set(e).end();
        set(j1, () => f.get(e).get(g).i32Const(cpr).op(OP.i32_mul).op(OP.i32_sub).i32Const(plan.chunk).op(OP.i32_mul));
        f.get(j1).i32Const(L).op(OP.i32_gt_s).if().i32Const(L).set(j1).end();
        accumulate();
        writeOut();
      },
      () => void f.get(e).set(item),
    );
    return;
  }
  forItems(() => {
    f.get(item).i32Const(plan.items).op(OP.i32_lt_u).if();
    // (group, chunk, block) = item: accumulate the block into its own scratch.
    set(gc, () => f.get(item).i32Const(B).op(OP.i32_div_u));
    set(blk, () => f.get(item).get(gc).i32Const(B).op(OP.i32_mul).op(OP.i32_sub));
    set(sb, () => f.get(blk).i32Const(blockBytes).op(OP.i32_mul));
    groupChunk(() => void f.get(gc));
    accumulate();
    f.else();
    // A final item: (group, chunk) = item - items; add the blocks in order, write the output.
    set(gc, () => f.get(item).i32Const(plan.items).op(OP.i32_sub));
    groupChunk(() => void f.get(gc));
    writeOut();
    f.end();
  });
}
