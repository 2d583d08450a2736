/**
 * What every fusion kind's loops share (`emitKernel.ts`): the kernel's locals, scalar splats,
 * broadcast bases, the column walk, output stores and the reduction accumulators. The locals
 * are declared here, before any kind's own, in a fixed order (the generated code depends on it).
 */
import { wasm } from '@tpukit/core/internal';
import { type HloInstruction, numel } from '../hlo';
import { type FusionPlan, iotaPlaceable, type KernelAddresses } from './fusionPlan';
import { emitElement, type ExprOptions } from './emitExpr';
import { type E, VecBuilder } from './vecBuilder';

const { OP, SIMD } = wasm;

/** A reduction's accumulator locals (`newAcc`). */
export type Acc = readonly [number, number, number];

/** Declares the shared locals and helpers of kernel `f` (params lo, hi[, thread]) for `plan`. */
export function kernelScope(f: wasm.FunctionBuilder, plan: FusionPlan, at: KernelAddresses, opts: ExprOptions) {
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
  const { body, L, d, shape } = plan;
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
  // Iotas (float32, loop shape) along a row dim [0, d): their coordinate, splatted once per row.
  // Along the last dim they need d = R - 1: the column index j + lane (fusionPlan.ts's `iotaPlaceable`, which the plans ensure).
  const iotaRow = new Map<HloInstruction, number>();
  for (const m of body.instructions) {
    if (m.prim?.name !== 'iota') continue;
    const t = (m.params as { dimension: number }).dimension;
    if (t < d) iotaRow.set(m, f.local('v128'));
    else if (!iotaPlaceable(t, d, shape.length)) throw new Error(`xla-lite wasm kernel: iota.${m.id} of ${body.name} runs along dim ${t} inside a row of dims ${d}..`);
  }
  const rowSetup = (): void => {
    // rowBase = r * L; broadcast bases from r's coordinates over dims [0, d).
    set(rowBase, () => f.get(r).i32Const(L).op(OP.i32_mul));
    for (const [m, l] of iotaRow) {
      const t = (m.params as { dimension: number }).dimension;
      const inner = shape.slice(t + 1, d).reduce((a, c) => a * c, 1);
      f.get(r).i32Const(inner).op(OP.i32_div_u).i32Const(shape[t]).op(OP.i32_rem_u).simd(SIMD.i32x4_splat).simd(SIMD.f32x4_convert_i32x4_s).set(l);
    }
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
    iota: (m: HloInstruction): E => {
      const l = iotaRow.get(m);
      if (l !== undefined) return b.get(l);
      return b.let(b.op(SIMD.f32x4_convert_i32x4_s, b.op(SIMD.i32x4_add, b.op(SIMD.i32x4_splat, () => void f.get(j)), () => void f.v128Const([0, 1, 2, 3]))));
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
  /**
   * The vector loop over columns [j0, j1) of the current row: `step(false)` per 4 columns, `step(true)` once for the last 1-3 (`rem` of them);
   * `between`, if given, is emitted after the full vectors (j at the first column past them) and before the last 1-3.
   */
  const walk = (step: (partial: boolean) => void, at: () => void = position, between?: () => void): void => {
    f.get(j0).set(j);
    f.block().loop();
    f.get(j1).get(j).op(OP.i32_sub).i32Const(4).op(OP.i32_lt_s).brIf(1);
    at();
    step(false);
    f.get(j).i32Const(4).op(OP.i32_add).set(j).br(0);
    f.end().end();
    between?.();
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
  /** The loop over items [lo, hi): `each` at every `item`, then `advance` (default: the next item; a column reduction's span loop jumps past its span). */
  const forItems = (each: () => void, advance: () => void = () => void f.get(item).i32Const(1).op(OP.i32_add).set(item)): void => {
    f.get(lo).set(item);
    f.block().loop();
    f.get(item).get(hi).op(OP.i32_ge_u).brIf(1);
    each();
    advance();
    f.br(0);
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
  const laneMask = (): E => b.op(SIMD.i32x4_lt_s, () => void f.v128Const([0, 1, 2, 3]), b.op(SIMD.i32x4_splat, () => void f.get(rem)));
  const hiHalf = (v: E): E => b.shuffle(v, v, [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15]);
  const f64Const = (c: number): E => () => {
    const w = new Uint32Array(new Float64Array([c, c]).buffer);
    f.v128Const([w[0], w[1], w[2], w[3]]);
  };
  /**
   * A reduction's accumulator locals: a sum's two f64x2 partial sums (a0, a1); a max's f32x4
   * running maximum (a0) and two lane masks, NaN seen (a1) and +0 seen (a2).
   */
  const newAcc = (): Acc => [f.local('v128'), f.local('v128'), f.local('v128')];
  /**
   * Accumulates `v` into `acc`: a sum in four float64 partial sums; a max with `f32x4.pmax`
   * (acc < v ? v : acc, one instruction), the NaN and +0 lanes it does not propagate kept
   * in masks that `horizontal` applies once per row. `f32x4.max` itself (NaN-propagating,
   * max(-0, +0) = +0) is about eight instructions on x64 in one dependency chain through the
   * accumulator: a row max took ~1 ns per element against ~0.35 for a row sum (BENCHMARKS.md,
   * "vm10"). Same results: each lane's maximum is the same number, NaN if it saw a NaN, +0
   * for a zero maximum if it saw +0 (pmax keeps the first of equal values, -0 or +0).
   */
  const accumulateInto = (isMax: boolean, [a0, a1, a2]: Acc, v: E): void => {
    const x = b.let(v);
    if (isMax) {
      b.setTo(a0, b.op(SIMD.f32x4_pmax, b.get(a0), x));
      b.setTo(a1, b.or(b.get(a1), b.op(SIMD.f32x4_ne, x, x)));
      b.setTo(a2, b.or(b.get(a2), b.op(SIMD.i32x4_eq, x, b.ki(0))));
    } else {
      b.setTo(a0, b.op(SIMD.f64x2_add, b.get(a0), b.op(SIMD.f64x2_promote_low_f32x4, x)));
      b.setTo(a1, b.op(SIMD.f64x2_add, b.get(a1), b.op(SIMD.f64x2_promote_low_f32x4, hiHalf(x))));
    }
  };
  /**
   * Adds (`op`: f64x2 add or max) the four float32 lanes of `x` (a value in a local, `b.let`),
   * promoted, into the two float64 vectors at `base` past the address in local `ptr`.
   */
  const accumulateAt = (ptr: number, base: number, x: E, op: number): void => {
    for (const [off, half] of [[0, x], [16, hiHalf(x)]] as const) {
      f.get(ptr);
      b.op(op, () => void f.get(ptr).simdMem(SIMD.v128_load, base + off, 16), b.op(SIMD.f64x2_promote_low_f32x4, half))();
      f.simdMem(SIMD.v128_store, base + off, 16);
    }
  };
  /** Pushes the float32 horizontal reduction of `acc`. */
  const horizontal = (isMax: boolean, [a0, a1, a2]: Acc): void => {
    if (isMax) {
      // Lanes that saw a NaN are NaN; a zero maximum is +0 where the lane saw +0.
      b.setTo(a0, b.sel(b.get(a1), b.k(NaN), b.get(a0)));
      b.setTo(a0, b.sel(b.and(b.get(a2), b.op(SIMD.f32x4_eq, b.get(a0), b.k(0))), b.k(0), b.get(a0)));
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
  const initAcc = (isMax: boolean, [a0, a1, a2]: Acc): void => {
    if (isMax) {
      b.setTo(a0, b.k(-Infinity));
      b.setTo(a1, b.ki(0));
      b.setTo(a2, b.ki(0));
    } else {
      b.setTo(a0, f64Const(0));
      b.setTo(a1, f64Const(0));
    }
  };
  return { f, b, plan, at, opts, lo, hi, I, item, r, rr, rowBase, j, j0, j1, ej, ej4, rem, s, body, L, d, shape, i32, set, scalar, addrOf, rowSetup, position, reads, value, walk, columns, laneStores, storeOut, forItems, chunkRange, laneMask, hiHalf, f64Const, newAcc, accumulateInto, accumulateAt, horizontal, initAcc };
}

/** The shared scope the kernel of each fusion kind is written against. */
export type KernelScope = ReturnType<typeof kernelScope>;
