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
 * - column reduction (reduced axes leading): (group of L output columns, chunk of 64 columns);
 *   each chunk accumulates in a float64 scratch row over the K reduced rows in order.
 * - rows (a kRow fusion, `rowPlan.ts`): one row each; per stage, row values splatted, then a
 *   walk of the row computing that stage's full values (those a later stage reads go to the
 *   thread's scratch rows, `k(lo, hi, thread)`), writing outputs and accumulating the next
 *   reductions the same way as the row reduction above.
 * Max is NaN-propagating (`f32x4.max`), like the reference; it returns +0 for max(−0, +0).
 */
import { wasm } from '@tpukit/core';
import { type HloComputation, type HloInstruction, numel } from '../hlo';
import { stridesOf } from '../js/kernel';
import { type ElementReads, emitElement, emitElements, type ExprOptions, wasmCovers } from './emitExpr';
import { type RowStructure, rowStructure } from './rowPlan';
import { type E, VecBuilder } from './vecBuilder';

const { OP, SIMD } = wasm;

/** Columns per loop work item (a multiple of 4). */
export const CHUNK = 4096;
/** Columns per column-reduction work item (a multiple of 4; its float64 scratch stays in L1). */
export const COL_CHUNK = 64;

export interface Broadcast {
  inst: HloInstruction;
  /** Index of the broadcast's source parameter. */
  param: number;
  /** Element stride of each outer (row-index) loop dim into the source. */
  outer: number[];
  /** Whether the source runs along the row (else it is constant along it). */
  contiguous: boolean;
}

export interface FusionPlan {
  kind: 'loop' | 'row' | 'col' | 'rows';
  body: HloComputation;
  reduce: HloInstruction | null;
  isMax: boolean;
  /** Loop shape, and the split into rows: `rows` rows of `L` elements (dims [0, d) index rows). */
  shape: readonly number[];
  d: number;
  L: number;
  rows: number;
  /** Work items, and per kind: loop chunks per row; row: rows per output; col: groups and padded group width. */
  items: number;
  chunksPerRow: number;
  rowsPerOutput: number;
  K: number;
  groups: number;
  groupWidth: number;
  broadcasts: Broadcast[];
  /** Columns per work item (loop and column kinds). */
  chunk: number;
  /** Bytes of float64 scratch (column reductions). */
  scratchBytes: number;
  /** Elements of the loop space, weighted for transcendentals (to decide on threads). */
  work: number;
  /** Row fusions (kind 'rows'): the stage structure, the scratch bytes of one thread, and the threads scratch is laid out for. */
  rowsOf: RowStructure | null;
  scratchRowBytes: number;
  scratchThreads: number;
}

/** Threads a row kernel with scratch rows may use (each has its own scratch rows in the arena)... */
export const ROW_SCRATCH_THREADS = 16;
/** ...and fewer when their scratch would pass this many bytes (very long rows), at least one. */
export const ROW_SCRATCH_BYTES = 8 << 20;

const TRANSCENDENTAL = new Set(['exp', 'log', 'tanh', 'logistic', 'log1p', 'expm1', 'sin', 'cos']);

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
  if (body.outputs.length !== 1 || root.isTuple) return null;
  const rname = root.prim?.name;
  const reduce = rname === 'reduce_sum' || rname === 'reduce_max' ? root : null;
  if (!wasmCovers(body, reduce ?? undefined)) return null;
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
    axes = [...(reduce.params as { axes: readonly number[] }).axes].sort((a, b) => a - b);
    kind = axes[axes.length - 1] === R - 1 ? 'row' : 'col';
  }
  const minD = kind === 'row' ? axes[0] : kind === 'col' ? axes[axes.length - 1] + 1 : 0;
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
  const weight = 1 + 8 * body.instructions.filter((m) => m.prim && TRANSCENDENTAL.has(m.prim.name)).length;
  const plan: FusionPlan = { kind, body, reduce, isMax: rname === 'reduce_max', shape, d, L, rows, items: 0, chunksPerRow: 0, rowsPerOutput: 0, K: 0, groups: 0, groupWidth: 0, broadcasts, chunk: kind === 'col' ? COL_CHUNK : CHUNK, scratchBytes: 0, work: n * weight, rowsOf: null, scratchRowBytes: 0, scratchThreads: 0 };
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
    plan.chunksPerRow = Math.ceil(L / COL_CHUNK);
    plan.items = plan.groups * plan.chunksPerRow;
    plan.scratchBytes = plan.groups * plan.groupWidth * 8;
  }
  return plan;
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
  const broadcasts: Broadcast[] = bst.map(({ inst, param, st }) => ({ inst, param, outer: st.slice(0, d), contiguous: st.slice(d).some((s, k) => s !== 0 && shape[d + k] > 1) }));
  const weight = 1 + 8 * body.instructions.filter((m) => m.prim && TRANSCENDENTAL.has(m.prim.name)).length;
  const scratchRowBytes = rs.stored.size * Math.ceil(rs.C / 4) * 16;
  const scratchThreads = scratchRowBytes === 0 ? 0 : Math.max(1, Math.min(ROW_SCRATCH_THREADS, Math.floor(ROW_SCRATCH_BYTES / scratchRowBytes)));
  return {
    kind: 'rows', body, reduce: null, isMax: false, shape, d, L: rs.C, rows: rs.R, items: rs.R, chunksPerRow: 1, rowsPerOutput: 0, K: 0, groups: 0, groupWidth: 0,
    broadcasts, chunk: rs.C, scratchBytes: scratchRowBytes * scratchThreads, work: n * weight * rs.stages.length, rowsOf: rs, scratchRowBytes, scratchThreads,
  };
}

/** Where a fused computation's operands come from: an arena address, or a scalar immediate. */
export type ParamSource = { addr: number } | { imm: number };

export interface KernelAddresses {
  params: ParamSource[];
  out: number;
  scratch: number;
  /** Extra outputs of a multi-output (row) fusion. */
  more?: number[];
}


/** Adds `k<index>(lo, hi)` for `plan` to module `m`. */
export function emitKernel(m: wasm.ModuleBuilder, index: number, plan: FusionPlan, at: KernelAddresses, opts: ExprOptions): void {
  // Row kernels take the thread's index (0 = the calling thread), which picks its scratch rows.
  m.addFunction(`k${index}`, plan.kind === 'rows' ? ['i32', 'i32', 'i32'] : ['i32', 'i32'], [], (f) => {
    const b = new VecBuilder(f);
    const [lo, hi] = [0, 1];
    const I = f.local.bind(f, 'i32');
    const item = I();
    const r = I();
    const rr = I();
    const rowBase = I();
    const j = I();
    const j0 = I();
    const j1 = I();
    const ej = I();
    const ej4 = I();
    const rem = I();
    const s = I();
    const { body, kind, L, d, shape } = plan;
    const i32 = (v: number): void => void f.i32Const(v);
    const set = (l: number, emit: () => void): void => {
      emit();
      f.set(l);
    };

    // Scalars: splatted once per call.
    const scalar = new Map<HloInstruction, number>();
    for (const p of body.params) {
      if (numel(p.shape) !== 1) continue;
      const src = at.params[p.paramIndex];
      const l = f.local('v128');
      if ('imm' in src) b.setTo(l, p.shape.dtype === 'bool' ? b.ki(src.imm ? -1 : 0) : b.k(src.imm));
      else if (p.shape.dtype === 'bool') b.setTo(l, b.op(SIMD.i32x4_ne, () => void f.i32Const(0).simdMem(SIMD.v128_load8_splat, src.addr, 1), b.ki(0)));
      else b.setTo(l, () => void f.i32Const(0).simdMem(SIMD.v128_load32_splat, src.addr, 4));
      scalar.set(p, l);
    }
    const addrOf = (param: number): number => {
      const src = at.params[param];
      if (!('addr' in src)) throw new Error(`xla-lite wasm kernel: parameter ${param} of ${body.name} has no arena address`);
      return src.addr;
    };
    // Broadcast bases (element index into the source) per row; row-constant ones splatted per row.
    const bbase = plan.broadcasts.map(() => I());
    const bj4 = plan.broadcasts.map((bc) => (bc.contiguous ? I() : -1));
    const bconst = plan.broadcasts.map((bc) => (bc.contiguous ? -1 : f.local('v128')));
    const bIndex = new Map(plan.broadcasts.map((bc, k) => [bc.inst, k]));
    const rowSetup = (): void => {
      // rowBase = r * L; broadcast bases from r's coordinates over dims [0, d).
      set(rowBase, () => f.get(r).i32Const(L).op(OP.i32_mul));
      if (plan.broadcasts.length === 0) return;
      for (const l of bbase) set(l, () => i32(0));
      f.get(r).set(rr);
      for (let t = d - 1; t >= 0; t--) {
        const used = plan.broadcasts.some((bc) => bc.outer[t] !== 0);
        if (shape[t] === 1) continue;
        if (used) {
          plan.broadcasts.forEach((bc, k) => {
            if (bc.outer[t] === 0) return;
            set(bbase[k], () => f.get(bbase[k]).get(rr).i32Const(shape[t]).op(OP.i32_rem_u).i32Const(bc.outer[t]).op(OP.i32_mul).op(OP.i32_add));
          });
        }
        set(rr, () => f.get(rr).i32Const(shape[t]).op(OP.i32_div_u));
      }
      plan.broadcasts.forEach((bc, k) => {
        if (!bc.contiguous) b.setTo(bconst[k], () => void f.get(bbase[k]).i32Const(2).op(OP.i32_shl).simdMem(SIMD.v128_load32_splat, addrOf(bc.param), 4));
      });
    };
    // Addresses at column j of the current row.
    const position = (): void => {
      set(ej, () => f.get(rowBase).get(j).op(OP.i32_add));
      set(ej4, () => f.get(ej).i32Const(2).op(OP.i32_shl));
      plan.broadcasts.forEach((bc, k) => {
        if (bc.contiguous) set(bj4[k], () => f.get(bbase[k]).get(j).op(OP.i32_add).i32Const(2).op(OP.i32_shl));
      });
    };
    const reads = {
      param: (p: HloInstruction): E => {
        const sl = scalar.get(p);
        if (sl !== undefined) return b.get(sl);
        if (numel(p.shape) !== shape.reduce((a, c) => a * c, 1)) {
          // Read only through its broadcasts (which `broadcast` handles).
          return () => {
            throw new Error(`xla-lite wasm kernel: parameter ${p.paramIndex} of ${body.name} is not elementwise-aligned`);
          };
        }
        const A = addrOf(p.paramIndex);
        if (p.shape.dtype === 'bool') {
          return b.let(b.op(SIMD.i32x4_ne, b.op(SIMD.i32x4_extend_low_i16x8_u, b.op(SIMD.i16x8_extend_low_i8x16_u, () => void f.get(ej).simdMem(SIMD.v128_load32_zero, A, 4))), b.ki(0)));
        }
        return b.let(() => void f.get(ej4).simdMem(SIMD.v128_load, A, 16));
      },
      broadcast: (bi: HloInstruction): E => {
        const k = bIndex.get(bi)!;
        const bc = plan.broadcasts[k];
        if (!bc.contiguous) return b.get(bconst[k]);
        return b.let(() => void f.get(bj4[k]).simdMem(SIMD.v128_load, addrOf(bc.param), 16));
      },
    };
    const target = plan.reduce ? plan.reduce.operands[0] : body.outputs[0];
    const value = (): E => emitElement(b, body, reads, opts, target);
    /** The vector loop over columns [j0, j1) of the current row: `step(false)` per 4 columns, `step(true)` once for the last 1-3 (`rem` of them). */
    const walk = (step: (partial: boolean) => void, at: () => void = position): void => {
      f.get(j0).set(j);
      f.block().loop();
      f.get(j1).get(j).op(OP.i32_sub).i32Const(4).op(OP.i32_lt_s).brIf(1);
      at();
      step(false);
      f.get(j).i32Const(4).op(OP.i32_add).set(j).br(0);
      f.end().end();
      f.get(j).get(j1).op(OP.i32_lt_s).if();
      set(rem, () => f.get(j1).get(j).op(OP.i32_sub));
      at();
      step(true);
      f.end();
    };
    /** `walk` computing the body's value: `full` per 4 columns, `tail` once for the last 1-3. */
    const columns = (full: (v: E) => void, tail: (v: E) => void): void => walk((partial) => (partial ? tail : full)(value()));
    /** Stores lanes 1..rem-1 of a vector (lane 0 is stored by the caller) with `store(lane)`. */
    const laneStores = (store: (lane: number) => void): void => {
      store(0);
      for (let lane = 1; lane < 3; lane++) {
        f.get(rem).i32Const(lane).op(OP.i32_gt_s).if();
        store(lane);
        f.end();
      }
    };
    const bytesMask = [0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12];
    /** Stores an output vector at element index `ej` (full) or its first `rem` lanes. */
    const storeOut = (v: E, partial: boolean, base: number): void => {
      if (body.outputs[0].shape.dtype === 'bool' && !plan.reduce) {
        const bytes = b.let(b.shuffle(b.and(v, b.ki(1)), b.ki(0), bytesMask));
        if (!partial) {
          f.get(ej);
          bytes();
          f.simdMem(SIMD.v128_store32_lane, base, 4).op(0);
        } else
          laneStores((lane) => {
            f.get(ej);
            bytes();
            f.simdMem(SIMD.v128_store8_lane, base + lane, 1).op(lane);
          });
        return;
      }
      const val = b.let(v);
      if (!partial) {
        f.get(ej4);
        val();
        f.simdMem(SIMD.v128_store, base, 16);
      } else
        laneStores((lane) => {
          f.get(ej4);
          val();
          f.simdMem(SIMD.v128_store32_lane, base + 4 * lane, 4).op(lane);
        });
    };
    const forItems = (each: () => void): void => {
      f.get(lo).set(item);
      f.block().loop();
      f.get(item).get(hi).op(OP.i32_ge_u).brIf(1);
      each();
      f.get(item).i32Const(1).op(OP.i32_add).set(item).br(0);
      f.end().end();
    };
    const chunkRange = (chunk: () => void): void => {
      // j0 = chunk * CHUNK; j1 = min(L, j0 + CHUNK)
      set(j0, () => {
        chunk();
        f.i32Const(plan.chunk).op(OP.i32_mul);
      });
      set(j1, () => f.get(j0).i32Const(plan.chunk).op(OP.i32_add));
      f.get(j1).i32Const(L).op(OP.i32_gt_s).if().i32Const(L).set(j1).end();
    };

    if (kind === 'loop') {
      const cpr = plan.chunksPerRow;
      forItems(() => {
        set(r, () => f.get(item).i32Const(cpr).op(OP.i32_div_u));
        chunkRange(() => f.get(item).get(r).i32Const(cpr).op(OP.i32_mul).op(OP.i32_sub));
        rowSetup();
        columns(
          (v) => storeOut(v, false, at.out),
          (v) => storeOut(v, true, at.out),
        );
      });
      return;
    }
    const laneMask = (): E => b.op(SIMD.i32x4_lt_s, () => void f.v128Const([0, 1, 2, 3]), b.op(SIMD.i32x4_splat, () => void f.get(rem)));
    const hiHalf = (v: E): E => b.shuffle(v, v, [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15]);
    const f64Const = (c: number): E => () => {
      const w = new Uint32Array(new Float64Array([c, c]).buffer);
      f.v128Const([w[0], w[1], w[2], w[3]]);
    };
    /** Accumulates `v` into a0 (max: f32x4 lanes) or a0/a1 (sum: four float64 partial sums). */
    const accumulateInto = (isMax: boolean, a0: number, a1: number, v: E): void => {
      if (isMax) b.setTo(a0, b.op(SIMD.f32x4_max, b.get(a0), v));
      else {
        const x = b.let(v);
        b.setTo(a0, b.op(SIMD.f64x2_add, b.get(a0), b.op(SIMD.f64x2_promote_low_f32x4, x)));
        b.setTo(a1, b.op(SIMD.f64x2_add, b.get(a1), b.op(SIMD.f64x2_promote_low_f32x4, hiHalf(x))));
      }
    };
    /** Pushes the float32 horizontal reduction of a0 (and a1). */
    const horizontal = (isMax: boolean, a0: number, a1: number): void => {
      if (isMax) {
        for (let lane = 0; lane < 4; lane++) {
          f.get(a0).simd(SIMD.f32x4_extract_lane).op(lane);
          if (lane > 0) f.op(OP.f32_max);
        }
      } else {
        b.setTo(a0, b.op(SIMD.f64x2_add, b.get(a0), b.get(a1)));
        f.get(a0).simd(SIMD.f64x2_extract_lane).op(0);
        f.get(a0).simd(SIMD.f64x2_extract_lane).op(1);
        f.op(OP.f64_add).op(OP.f32_demote_f64);
      }
    };
    const initAcc = (isMax: boolean, a0: number, a1: number): void => {
      if (isMax) b.setTo(a0, b.k(-Infinity));
      else {
        b.setTo(a0, f64Const(0));
        b.setTo(a1, f64Const(0));
      }
    };

    if (kind === 'rows') {
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
      const done = new Set<HloInstruction>();
      const tb = I();
      const sj = I();
      const r4 = I();
      set(tb, () => f.get(2).i32Const(plan.scratchRowBytes).op(OP.i32_mul));
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
          if (slot !== undefined && rs.level.get(m)! < stage) return b.let(() => void f.get(sj).simdMem(SIMD.v128_load, at.scratch + slot * rowBytes, 16));
          if (m.prim?.name === 'broadcast_in_dim' && rs.full(m) && m.operands[0].opcode !== 'parameter' && !rs.full(m.operands[0])) return knownRow(m.operands[0]);
          return undefined;
        },
      };
      /** Stores a row value (splatted) into an R-element output. */
      const storeRow = (m: HloInstruction, addr: number): void => {
        f.get(r4).get(splat.get(m)!).simd(SIMD.f32x4_extract_lane).op(0);
        f.mem(0x38 /* f32.store */, addr, 4);
      };
      const acc = new Map<HloInstruction, [number, number]>();
      for (const st of rs.stages) for (const red of st.reduces) acc.set(red, [f.local('v128'), f.local('v128')]);
      if (splat.has(root) && !acc.has(root)) acc.set(root, [f.local('v128'), f.local('v128')]);
      const stages = rs.stages.map((st, L) => ({ ...st, reduces: L === rs.stages.length - 1 && acc.has(root) && !st.reduces.includes(root) ? [...st.reduces, root] : st.reduces }));
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
          for (const red of st.reduces) initAcc(red.prim!.name === 'reduce_max', ...acc.get(red)!);
          const operands = st.reduces.map((red) => red.operands[0]);
          const targets = [...new Set([...st.targets, ...operands])];
          walk(
            (partial) => {
              const vs = emitElements(b, body, fullReads, opts, targets);
              const val = new Map(targets.map((m, q) => [m, vs[q]]));
              for (const m of st.targets) {
                const slot = rs.stored.get(m);
                if (slot !== undefined) {
                  f.get(sj);
                  val.get(m)!();
                  f.simdMem(SIMD.v128_store, at.scratch + slot * rowBytes, 16);
                }
                if (extra.has(m)) storeOut(val.get(m)!, partial, extra.get(m)!);
                if (m === root) storeOut(val.get(m)!, partial, at.out);
              }
              for (const red of st.reduces) {
                const isMax = red.prim!.name === 'reduce_max';
                const v = val.get(red.operands[0])!;
                accumulateInto(isMax, ...acc.get(red)!, partial ? b.sel(laneMask(), v, isMax ? b.k(-Infinity) : b.k(0)) : v);
              }
            },
            () => {
              position();
              set(sj, () => f.get(tb).get(j).i32Const(2).op(OP.i32_shl).op(OP.i32_add));
            },
          );
          for (const red of st.reduces) {
            const isMax = red.prim!.name === 'reduce_max';
            horizontal(isMax, ...acc.get(red)!);
            f.simd(SIMD.f32x4_splat).set(splat.get(red)!);
            done.add(red);
            if (extra.has(red)) storeRow(red, extra.get(red)!);
          }
        }
        if (splat.has(root)) storeRow(root, at.out);
        done.clear();
      });
      return;
    }
    const init = plan.isMax ? -Infinity : 0;
    if (kind === 'row') {
      const q = plan.rowsPerOutput;
      const a0 = f.local('v128');
      const a1 = f.local('v128');
      const accumulate = (v: E): void => accumulateInto(plan.isMax, a0, a1, v);
      forItems(() => {
        initAcc(plan.isMax, a0, a1);
        if (q > 0) {
          set(s, () => i32(0));
          f.loop();
          set(r, () => f.get(item).i32Const(q).op(OP.i32_mul).get(s).op(OP.i32_add));
          rowSetup();
          set(j0, () => i32(0));
          set(j1, () => i32(L));
          columns(accumulate, (v) => accumulate(b.sel(laneMask(), v, plan.isMax ? b.k(-Infinity) : b.k(0))));
          f.get(s).i32Const(1).op(OP.i32_add).tee(s).i32Const(q).op(OP.i32_lt_s).brIf(0);
          f.end();
        }
        // out[item] = horizontal reduction
        f.get(item).i32Const(2).op(OP.i32_shl);
        horizontal(plan.isMax, a0, a1);
        f.mem(0x38 /* f32.store */, at.out, 4);
      });
      return;
    }
    // Column reduction: scratch[g*W + j] (float64) accumulates over the K reduced rows.
    const G = plan.groups;
    const W = plan.groupWidth;
    const cpr = plan.chunksPerRow;
    const g = I();
    const sp = I();
    const op = plan.isMax ? SIMD.f64x2_max : SIMD.f64x2_add;
    forItems(() => {
      set(g, () => f.get(item).i32Const(cpr).op(OP.i32_div_u));
      chunkRange(() => f.get(item).get(g).i32Const(cpr).op(OP.i32_mul).op(OP.i32_sub));
      // Initialise the chunk's scratch (whole vectors: the group is padded to W columns).
      f.get(j0).set(j);
      f.block().loop();
      f.get(j).get(j1).op(OP.i32_ge_u).brIf(1);
      set(sp, () => f.get(g).i32Const(W).op(OP.i32_mul).get(j).op(OP.i32_add).i32Const(3).op(OP.i32_shl));
      for (const off of [0, 16]) {
        f.get(sp);
        f64Const(init)();
        f.simdMem(SIMD.v128_store, at.scratch + off, 16);
      }
      f.get(j).i32Const(4).op(OP.i32_add).set(j).br(0);
      f.end().end();
      if (plan.K > 0) {
        set(s, () => i32(0));
        f.loop();
        set(r, () => f.get(s).i32Const(G).op(OP.i32_mul).get(g).op(OP.i32_add));
        rowSetup();
        const acc = (v: E): void => {
          const x = b.let(v);
          set(sp, () => f.get(g).i32Const(W).op(OP.i32_mul).get(j).op(OP.i32_add).i32Const(3).op(OP.i32_shl));
          f.get(sp);
          b.op(op, () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch, 16), b.op(SIMD.f64x2_promote_low_f32x4, x))();
          f.simdMem(SIMD.v128_store, at.scratch, 16);
          f.get(sp);
          b.op(op, () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch + 16, 16), b.op(SIMD.f64x2_promote_low_f32x4, hiHalf(x)))();
          f.simdMem(SIMD.v128_store, at.scratch + 16, 16);
        };
        columns(acc, acc);
        f.get(s).i32Const(1).op(OP.i32_add).tee(s).i32Const(plan.K).op(OP.i32_lt_s).brIf(0);
        f.end();
      }
      // out[g*L + j] = float32(scratch[g*W + j]) over the chunk.
      set(rowBase, () => f.get(g).i32Const(L).op(OP.i32_mul));
      const fromScratch = (): E => {
        set(sp, () => f.get(g).i32Const(W).op(OP.i32_mul).get(j).op(OP.i32_add).i32Const(3).op(OP.i32_shl));
        const lo2 = b.op(SIMD.f32x4_demote_f64x2_zero, () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch, 16));
        const hi2 = b.op(SIMD.f32x4_demote_f64x2_zero, () => void f.get(sp).simdMem(SIMD.v128_load, at.scratch + 16, 16));
        return b.let(b.shuffle(lo2, hi2, [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]));
      };
      f.get(j0).set(j);
      f.block().loop();
      f.get(j1).get(j).op(OP.i32_sub).i32Const(4).op(OP.i32_lt_s).brIf(1);
      set(ej, () => f.get(rowBase).get(j).op(OP.i32_add));
      set(ej4, () => f.get(ej).i32Const(2).op(OP.i32_shl));
      storeOut(fromScratch(), false, at.out);
      f.get(j).i32Const(4).op(OP.i32_add).set(j).br(0);
      f.end().end();
      f.get(j).get(j1).op(OP.i32_lt_s).if();
      set(rem, () => f.get(j1).get(j).op(OP.i32_sub));
      set(ej, () => f.get(rowBase).get(j).op(OP.i32_add));
      set(ej4, () => f.get(ej).i32Const(2).op(OP.i32_shl));
      storeOut(fromScratch(), true, at.out);
      f.end();
    });
  });
}
