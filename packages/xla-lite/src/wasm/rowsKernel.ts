/**
 * Row fusions (kRow, `rowPlan.ts`): one row per work item. Per stage, the row values
 * (splatted), then a walk of the row computing that stage's full values (those a later stage
 * reads go to the thread's scratch rows, except broadcasts of parameters, read again there),
 * writing outputs (not those only its own column sums read) and accumulating the next reductions.
 */
import { envSwitch, wasm } from '@tpukit/core/internal';
import { type HloInstruction, numel } from '../hlo';
import { type ElementReads, emitElements, POLYNOMIAL, setShiftedExp } from './emitExpr';
import type { E } from './vecBuilder';
import type { Acc, KernelScope } from './kernelScope';

const { OP, SIMD } = wasm;

let skipSumOnly = envSwitch('TPUKIT_ROW_SUM_ONLY_SKIP', true);
let rereadBroadcasts = envSwitch('TPUKIT_ROW_REREAD', true);
let deferSums = envSwitch('TPUKIT_ROW_DEFER_SUMS', true);
let recompute = envSwitch('TPUKIT_ROW_RECOMPUTE', true);

/**
 * The row kernel's two store-saving paths, for kernels emitted afterwards (tests and A/B runs;
 * both on by default, off with env `TPUKIT_ROW_SUM_ONLY_SKIP=0` / `TPUKIT_ROW_REREAD=0`):
 * `skipSumOnly`, the kernel with column sums leaves the outputs only those sums read unwritten
 * (`FusionPlan.sumOnlyOutputs`); `reread`, a broadcast of a parameter that a later stage reads
 * (a layer norm's gamma and beta along the row) is read again from the parameter there instead
 * of kept in a scratch row (a store and a load per vector, and the copy's stores in the first walk).
 * `deferSums` (env `TPUKIT_ROW_DEFER_SUMS=0` off): in a walk that computes a polynomial (exp, log,
 * ...), a row sum of a value the walk stores (an output or a scratch row) is accumulated by a
 * second walk over the stored vectors instead of in the first (whose accumulators V8 otherwise
 * spills: the exp's constants take the registers), the last 1-3 columns in the first walk's tail
 * as before, so every float64 chain adds the same values in the same order.
 * `recompute` (env `TPUKIT_ROW_RECOMPUTE=0` off): a value a later stage reads that is an add or a
 * subtract of full parameters and row values (a softmax's x − max) is computed again there from
 * them, as `reread` does for broadcasts, instead of kept in a scratch row (a store per vector, and
 * a register held across the walk until that store).
 * `shiftedExp` (`emitExpr.ts` `setShiftedExp`, env `TPUKIT_EXP_SHIFTED=0` off): exp(x − max(x)) without the clamp.
 * Every path gives the same values: the same bits.
 */
export function setRowKernelPaths(o: { skipSumOnly?: boolean; reread?: boolean; deferSums?: boolean; shiftedExp?: boolean; recompute?: boolean }): void {
  if (o.recompute !== undefined) recompute = o.recompute;
  if (o.skipSumOnly !== undefined) skipSumOnly = o.skipSumOnly;
  if (o.reread !== undefined) rereadBroadcasts = o.reread;
  if (o.deferSums !== undefined) deferSums = o.deferSums;
  if (o.shiftedExp !== undefined) setShiftedExp(o.shiftedExp);
}

export function rowsKernel(k: KernelScope): void {
  const { f, b, plan, at, opts, I, item, r, rowBase, j, j0, j1, body, L, i32, set, scalar, addrOf, rowSetup, position, reads, walk, storeOut, forItems, laneMask, newAcc, accumulateInto, accumulateAt, horizontal, initAcc, f64Const } = k;
  // Row fusion: per row (one work item), each stage computes its row values (splatted),
  // then walks the row computing its full values, keeping those later stages read in this
  // thread's scratch rows, writing outputs, and accumulating the next level's reductions.
  const rs = plan.rowsOf!;
  const root = body.outputs[0];
  const rowBytes = Math.ceil(rs.C / 4) * 16;
  const extra = new Map(body.outputs.slice(1).map((o, k) => [o, at.more![k]]));
  const splat = new Map<HloInstruction, number>();
  for (const st of rs.stages) for (const m of [...st.rowValues, ...st.reduces]) splat.set(m, f.local('v128'));
  if (root.prim?.name === 'reduce_sum' || root.prim?.name === 'reduce_max') splat.set(root, f.local('v128'));
  // Outputs nothing but this kernel's column sums reads: computed (for the sums), never stored.
  const sumOnly = new Set(skipSumOnly && (plan.sums?.length ?? 0) > 0 ? (plan.sumOnlyOutputs ?? []).map((q) => body.outputs[q]) : []);
  for (const [q, o] of body.outputs.entries()) if (sumOnly.has(o) && !plan.sumOnlyOutputs!.includes(q)) sumOnly.delete(o);
  /** A stored value that a later stage reads again from its parameter (a broadcast of one) instead of a scratch row. */
  const reread = (m: HloInstruction): boolean => (rereadBroadcasts && m.prim?.name === 'broadcast_in_dim' && m.operands[0].opcode === 'parameter') || (recompute && cheap(m));
  /** An add or subtract of full parameters, row values and broadcasts of either: recomputed by a later stage instead of kept in scratch. */
  function cheap(m: HloInstruction): boolean {
    if (m.prim?.name !== 'add' && m.prim?.name !== 'sub') return false;
    return m.operands.every((o) => {
      if (o.opcode === 'parameter') return o.shape.dtype === 'float32' && (numel(o.shape) === rs.R * rs.C || numel(o.shape) === 1);
      if (!rs.full(o)) return true; // a row value (splatted, computed before any walk that reads m)
      // a broadcast of a row value, or of a parameter (read again where needed, as `reread` does)
      return o.prim?.name === 'broadcast_in_dim' && (o.operands[0].opcode === 'parameter' || !rs.full(o.operands[0]));
    });
  }
  /** Where the walk stores full value `m` (a scratch row, an output, the root), if it does. */
  const storedAt = (m: HloInstruction): { base: number; scratch: boolean } | undefined => {
    const slot = rs.stored.get(m);
    if (slot !== undefined && !reread(m)) return { base: at.scratch + slot * rowBytes, scratch: true };
    if (sumOnly.has(m)) return undefined;
    if (extra.has(m)) return { base: extra.get(m)!, scratch: false };
    if (m === root && !splat.has(root)) return { base: at.out, scratch: false };
    return undefined;
  };
  /** Whether stage `L`'s walk computes a polynomial (exp, log, ...) for `targets`. */
  const heavy = (L: number, targets: readonly HloInstruction[]): boolean => {
    const seen = new Set<HloInstruction>();
    const visit = (m: HloInstruction): boolean => {
      if (seen.has(m) || !rs.full(m) || rs.level.get(m) !== L) return false;
      seen.add(m);
      return POLYNOMIAL.has(m.prim?.name ?? '') || m.operands.some(visit);
    };
    return targets.some(visit);
  };
  const done = new Set<HloInstruction>();
  const tb = I();
  let jT = -1;
  const sj = I();
  const r4 = I();
  set(tb, () => f.get(2).i32Const(plan.scratchRowBytes).op(OP.i32_mul));
  /** Pushes column j's byte offset in this thread's scratch rows (tb + 4 j; `sj` holds it during a walk). */
  const scratchAt = (): void => void f.get(tb).get(j).i32Const(2).op(OP.i32_shl).op(OP.i32_add);
  const knownRow = (m: HloInstruction): E | undefined => (done.has(m) ? b.get(splat.get(m)!) : undefined);
  const rowReads: ElementReads = {
    param: (p) => {
      const sl = scalar.get(p);
      if (sl !== undefined) return b.get(sl);
      return b.let(() => void f.get(r4).simdMem(SIMD.v128_load32_splat, addrOf(p.paramIndex), 4));
    },
    broadcast: () => {
      throw new Error(`xla-lite wasm row kernel: ${body.name} broadcasts a non-scalar to a row value`);
    },
    known: knownRow,
  };
  let stage = 0;
  const fullReads: ElementReads = {
    ...reads,
    known: (m) => {
      const v = knownRow(m);
      if (v) return v;
      const slot = rs.stored.get(m);
      if (slot !== undefined && rs.level.get(m)! < stage && !reread(m)) return b.let(() => void f.get(sj).simdMem(SIMD.v128_load, at.scratch + slot * rowBytes, 16));
      if (m.prim?.name === 'broadcast_in_dim' && rs.full(m) && m.operands[0].opcode !== 'parameter' && !rs.full(m.operands[0])) return knownRow(m.operands[0]);
      return undefined;
    },
  };
  /** Stores a row value (splatted) into an R-element output. */
  const storeRow = (m: HloInstruction, addr: number): void => {
    if (sumOnly.has(m)) return;
    f.get(r4).get(splat.get(m)!).simd(SIMD.f32x4_extract_lane).op(0);
    f.mem(0x38 /* f32.store */, addr, 4);
  };
  const acc = new Map<HloInstruction, Acc>();
  for (const st of rs.stages) for (const red of st.reduces) acc.set(red, newAcc());
  if (splat.has(root) && !acc.has(root)) acc.set(root, newAcc());
  const stages = rs.stages.map((st, L) => ({ ...st, reduces: L === rs.stages.length - 1 && acc.has(root) && !st.reduces.includes(root) ? [...st.reduces, root] : st.reduces }));
  // Column sums (`plan.sums`, `planRowColumnSum`): float64 per column and output, zeroed first;
  // each sum's values computed in its stage's walk by its own element code and added as the walk
  // passes (rows in order: the kernel runs on one thread over every row), rounded once after the
  // last row. A partial vector's lanes past the row land in the scratch's padding.
  const sums = plan.sums ?? [];
  const cs = at.colSums;
  const slots = sums.reduce((a, x) => a + x.body.outputs.length, 0);
  if (sums.length > 0 && (cs === undefined || cs.outs.length !== slots)) throw new Error(`xla-lite wasm row kernel: ${body.name}: its column sums need their scratch and ${slots} output addresses`);
  const slotBytes = Math.ceil(L / 4) * 32;
  const sj8 = sums.length > 0 ? I() : -1;
  const columnVectors = (each: () => void): void => {
    set(sj8, () => i32(0));
    f.block().loop();
    f.get(sj8).i32Const(slotBytes).op(OP.i32_ge_u).brIf(1);
    each();
    f.get(sj8).i32Const(32).op(OP.i32_add).set(sj8).br(0);
    f.end().end();
  };
  if (sums.length > 0)
    columnVectors(() => {
      for (let q = 0; q < slots; q++)
        for (const off of [0, 16]) {
          f.get(sj8);
          f64Const(0)();
          f.simdMem(SIMD.v128_store, cs!.scratch + q * slotBytes + off, 16);
        }
    });
  /** The values a full output of the row body has in the current walk (the sums' `value` arguments). */
  const summedValues = new Set(sums.flatMap((x) => x.args.flatMap((a) => ('value' in a ? [a.value] : []))));
  /** Adds each sum of stage `L`'s values at column j (`val`: the walk's values) into its scratch. */
  const sumStage = (L: number, val: Map<HloInstruction, E>): void => {
    let slot = 0;
    for (const x of sums) {
      const first = slot;
      slot += x.body.outputs.length;
      if (x.stage !== L) continue;
      const rowParam = (p: HloInstruction): HloInstruction => {
        const a = x.args[p.paramIndex];
        if (!('param' in a)) throw new Error(`xla-lite wasm row kernel: ${body.name}: parameter ${p.paramIndex} of ${x.body.name} is not one of its operands`);
        return body.params[a.param];
      };
      const sumReads: ElementReads = {
        param: (p) => {
          const a = x.args[p.paramIndex];
          if ('value' in a) return val.get(a.value)!;
          const rp = body.params[a.param];
          const sl = scalar.get(rp);
          if (sl !== undefined) return b.get(sl);
          return reads.param(rp);
        },
        broadcast: (m) => {
          const A = addrOf(rowParam(m.operands[0]).paramIndex);
          if (x.broadcasts.get(m) === 'row') return b.let(() => void f.get(r4).simdMem(SIMD.v128_load32_splat, A, 4));
          return b.let(() => void f.get(j).i32Const(2).op(OP.i32_shl).simdMem(SIMD.v128_load, A, 16));
        },
      };
      const vs = emitElements(b, x.body, sumReads, opts, x.body.outputs.map((o) => o.operands[0]));
      vs.forEach((v, q) => {
        const y = b.let(v);
        set(sj8, () => f.get(j).i32Const(3).op(OP.i32_shl));
        accumulateAt(sj8, cs!.scratch + (first + q) * slotBytes, y, SIMD.f64x2_add);
      });
    }
  };
  forItems(() => {
    set(r, () => f.get(item));
    set(r4, () => f.get(item).i32Const(2).op(OP.i32_shl));
    rowSetup();
    set(j0, () => i32(0));
    set(j1, () => i32(L));
    for (stage = 0; stage < stages.length; stage++) {
      const st = stages[stage];
      if (st.rowValues.length) {
        const vs = emitElements(b, body, rowReads, opts, st.rowValues);
        st.rowValues.forEach((m, q) => {
          b.setTo(splat.get(m)!, vs[q]);
          done.add(m);
          if (extra.has(m)) storeRow(m, extra.get(m)!);
        });
      }
      for (const red of st.reduces) initAcc(red.prim!.name === 'reduce_max', acc.get(red)!);
      const operands = st.reduces.map((red) => red.operands[0]);
      // (a reread broadcast kept only for a later stage is not computed here)
      const kept = st.targets.filter((m) => !reread(m) || extra.has(m) || m === root);
      const targets = [...new Set([...kept, ...operands])];
      const deferred = deferSums && heavy(stage, targets) ? st.reduces.filter((red) => red.prim!.name === 'reduce_sum' && kept.includes(red.operands[0]) && storedAt(red.operands[0]) !== undefined) : [];
      walk(
        (partial) => {
          const vs = emitElements(b, body, fullReads, opts, targets);
          const val = new Map(targets.map((m, q) => [m, vs[q]]));
          for (const m of kept) if (summedValues.has(m)) val.set(m, b.let(val.get(m)!));
          for (const m of kept) {
            const slot = rs.stored.get(m);
            if (slot !== undefined && !reread(m)) {
              f.get(sj);
              val.get(m)!();
              f.simdMem(SIMD.v128_store, at.scratch + slot * rowBytes, 16);
            }
            if (sumOnly.has(m)) continue;
            if (extra.has(m)) storeOut(val.get(m)!, partial, extra.get(m)!);
            if (m === root) storeOut(val.get(m)!, partial, at.out);
          }
          sumStage(stage, val);
          for (const red of st.reduces) {
            if (!partial && deferred.includes(red)) continue;
            const isMax = red.prim!.name === 'reduce_max';
            const v = val.get(red.operands[0])!;
            accumulateInto(isMax, acc.get(red)!, partial ? b.sel(laneMask(), v, isMax ? b.k(-Infinity) : b.k(0)) : v);
          }
        },
        () => {
          position();
          set(sj, scratchAt);
        },
        deferred.length === 0
          ? undefined
          : () => {
              // The deferred sums over the full vectors just stored, in column order; then the tail as before.
              if (jT < 0) jT = I();
              set(jT, () => f.get(j));
              f.get(j0).set(j);
              f.block().loop();
              f.get(j).get(jT).op(OP.i32_ge_s).brIf(1);
              for (const red of deferred) {
                const { base, scratch } = storedAt(red.operands[0])!;
                // (the output's element (rowBase + j) as `position` computes it, without its broadcast bases)
                const v = b.let(() => {
                  if (scratch) scratchAt();
                  else f.get(rowBase).get(j).op(OP.i32_add).i32Const(2).op(OP.i32_shl);
                  f.simdMem(SIMD.v128_load, base, 16);
                });
                accumulateInto(false, acc.get(red)!, v);
              }
              f.get(j).i32Const(4).op(OP.i32_add).set(j).br(0);
              f.end().end();
              f.get(jT).set(j);
            },
      );
      for (const red of st.reduces) {
        const isMax = red.prim!.name === 'reduce_max';
        horizontal(isMax, acc.get(red)!);
        f.simd(SIMD.f32x4_splat).set(splat.get(red)!);
        done.add(red);
        if (extra.has(red)) storeRow(red, extra.get(red)!);
      }
    }
    if (splat.has(root)) storeRow(root, at.out);
    done.clear();
  });
  if (sums.length > 0)
    columnVectors(() => {
      // out[j..j+3] = float32 of the scratch, per output (the output regions are padded to whole vectors)
      for (let q = 0; q < slots; q++) {
        f.get(sj8).i32Const(1).op(OP.i32_shr_u);
        const at8 = cs!.scratch + q * slotBytes;
        b.shuffle(b.op(SIMD.f32x4_demote_f64x2_zero, () => void f.get(sj8).simdMem(SIMD.v128_load, at8, 16)), b.op(SIMD.f32x4_demote_f64x2_zero, () => void f.get(sj8).simdMem(SIMD.v128_load, at8 + 16, 16)), [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23])();
        f.simdMem(SIMD.v128_store, cs!.outs[q], 16);
      }
    });
}
