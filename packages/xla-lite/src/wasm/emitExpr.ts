/**
 * The per-element half of WebAssembly code generation: turns the elementwise instructions of a
 * fused computation into SIMD code computing four elements (one f32x4) at the current loop
 * position. It knows nothing about loops: operand reads come from an `ElementReads` the loop
 * emitter (`emitKernel.ts`) supplies (a vector load, a splat of a scalar, a broadcast row read),
 * so any loop structure (elementwise, row or column reductions, and other fusion kinds) can
 * reuse it. float32 values are f32x4 lanes; bool values are i32x4 lane masks (all ones for
 * true), which is what the SIMD compares produce and `v128.bitselect` consumes.
 *
 * Rounding matches the JavaScript kernel (`kernel.ts`) and eager execution: +, −, ×, ÷, sqrt,
 * min, max, floor, ceil, compares and selects are exact float32 operations, so identical;
 * transcendentals use `vmath.ts` (bounds stated there); `rsqrt` is 1/sqrt in float32 (two
 * roundings, ≤ 1 ulp from the reference's double-then-round), `integer_pow` multiplies by
 * repeated squaring in float32 (≤ |y|−1 extra roundings). With relaxed SIMD, `a*b + c` whose
 * product has no other use is contracted to `f32x4.relaxed_madd` (one rounding instead of two,
 * a difference of at most half an ulp of the product).
 */
import { envSwitch, wasm } from '@tpukit/core/internal';
import { type HloComputation, type HloInstruction, numel } from '../hlo';
import { FUSED_OPS } from '../passes/fusion';
import type { E, VecBuilder } from './vecBuilder';
import { type HostMath, type TanhOptions, vcos, vexp, vexpm1, vexpNonPositive, vlog, vlog1p, vlogistic, vsin, vtanh } from './vmath';

const { SIMD } = wasm;

/** How the loop emitter reads operands at the current position. */
export interface ElementReads {
  /** A fused-computation parameter read directly (elementwise-aligned or scalar). */
  param(p: HloInstruction): E;
  /** A `broadcast_in_dim` of a non-scalar parameter to the loop shape. */
  broadcast(b: HloInstruction): E;
  /** A float32 `iota` of the loop shape: its coordinate along the iota's dim (see `kernelScope.ts`). */
  iota?(m: HloInstruction): E;
  /**
   * A value the loop computed elsewhere, if any (a row kernel's row reductions, per-row values
   * and values of earlier stages, see `rowPlan.ts`): used as is, and nothing it depends on is
   * emitted.
   */
  known?(m: HloInstruction): E | undefined;
}

export interface ExprOptions {
  relaxed: boolean;
  host: HostMath;
  /** How tanh emits its exp path (default: inline). */
  tanh?: TanhOptions;
}

/**
 * Primitives this emitter expands into a polynomial or range-reduction sequence rather than a
 * few SIMD instructions: a kernel's work is weighted by them when deciding on threads.
 */
export const POLYNOMIAL: ReadonlySet<string> = new Set(['exp', 'log', 'tanh', 'logistic', 'log1p', 'expm1', 'sin', 'cos']);

const COMPARE: Record<string, number> = { eq: SIMD.f32x4_eq, ne: SIMD.f32x4_ne, lt: SIMD.f32x4_lt, le: SIMD.f32x4_le, gt: SIMD.f32x4_gt, ge: SIMD.f32x4_ge };
const ARITH: Record<string, number> = { add: SIMD.f32x4_add, sub: SIMD.f32x4_sub, mul: SIMD.f32x4_mul, div: SIMD.f32x4_div, max: SIMD.f32x4_max, min: SIMD.f32x4_min };

let shiftedExp = envSwitch('TPUKIT_EXP_SHIFTED', true);

/**
 * Whether an `exp` of `a − max(a)` (`shiftedByMax`) is emitted without the clamp
 * (`vexpNonPositive`: the same values), for kernels emitted afterwards (tests and A/B runs; on
 * by default, off with env `TPUKIT_EXP_SHIFTED=0`).
 */
export function setShiftedExp(on: boolean): void {
  shiftedExp = on;
}

/**
 * Whether `x` is `a − B` where every element of B is the maximum of the reduce_max of `a` over
 * the slice holding that element's position (B reached from `reduce_max(a)` through reshapes
 * that only add or drop unit dims, stop_gradient and broadcast_in_dim, each non-reduced dim of
 * `a` carried to itself): then x <= 0 or NaN everywhere (a float32 a <= m gives a − m <= 0).
 */
export function shiftedByMax(x: HloInstruction): boolean {
  if (x.prim?.name !== 'sub' || x.shape.dtype !== 'float32') return false;
  const [a, b0] = x.operands;
  // Per dim of the current value: the dim of the reduction's result it carries, or -1 (unit).
  let b = b0;
  const chain: HloInstruction[] = [];
  while (b.prim?.name === 'broadcast_in_dim' || b.prim?.name === 'reshape' || b.prim?.name === 'stop_gradient') {
    chain.push(b);
    b = b.operands[0];
  }
  if (b.prim?.name !== 'reduce_max' || b.operands[0] !== a) return false;
  const S = a.shape.shape;
  if (x.shape.shape.length !== S.length || x.shape.shape.some((d, i) => d !== S[i])) return false;
  const axes = new Set((b.params as { axes: readonly number[] }).axes);
  const kept = S.map((_, i) => i).filter((i) => !axes.has(i));
  let shape = b.shape.shape;
  if (shape.length !== kept.length || shape.some((d, i) => d !== S[kept[i]])) return false;
  let map = shape.map((d, i) => (d === 1 ? -1 : i));
  for (const m of chain.reverse()) {
    const out = m.shape.shape;
    if (m.prim!.name === 'reshape') {
      // Only unit dims added or dropped: the non-unit dims keep their order.
      const src = shape.flatMap((d, i) => (d === 1 ? [] : [map[i]]));
      if (shape.filter((d) => d !== 1).join() !== out.filter((d) => d !== 1).join()) return false;
      let q = 0;
      map = out.map((d) => (d === 1 ? -1 : src[q++]));
    } else if (m.prim!.name === 'broadcast_in_dim') {
      const dims = (m.params as { broadcastDimensions: readonly number[] }).broadcastDimensions;
      if (dims.length !== shape.length) return false;
      const next = out.map(() => -1);
      for (let i = 0; i < dims.length; i++) {
        if (shape[i] === 1) continue;
        if (shape[i] !== out[dims[i]]) return false;
        next[dims[i]] = map[i];
      }
      map = next;
    } else if (out.join() !== shape.join()) return false;
    shape = out;
  }
  if (shape.length !== S.length || shape.some((d, i) => d !== S[i])) return false;
  // Each non-reduced dim of a (of size > 1) must carry the reduction's dim for it, the reduced ones none.
  return S.every((d, i) => (axes.has(i) ? map[i] === -1 : d === 1 || (map[i] >= 0 && kept[map[i]] === i)));
}

/** Whether every instruction of `body` (the reduction roots in `skip` aside) has an element emitter. */
export function wasmCovers(body: HloComputation, skip: readonly HloInstruction[] = []): boolean {
  return body.instructions.every((m) => m.opcode === 'parameter' || skip.includes(m) || (m.prim !== null && FUSED_OPS.has(m.prim.name)));
}

const numelOf = (i: HloInstruction): number => numel(i.shape);

/** True for a value held as a lane mask. */
const isMask = (i: HloInstruction): boolean => i.shape.dtype === 'bool';

/**
 * Emits the element computation of `body` up to `target` (default: the body's output; a
 * reduction's operand for reductions) and returns `target`'s value. Call once per emitted copy
 * of the loop body; each call declares its own locals.
 */
export function emitElement(b: VecBuilder, body: HloComputation, reads: ElementReads, opts: ExprOptions, target: HloInstruction = body.outputs[0]): E {
  return emitElements(b, body, reads, opts, [target])[0];
}

/**
 * Emits what `targets` need (in program order; values `reads.known` supplies and their
 * producers are not emitted, nor the sources of broadcasts read through `reads.broadcast`) and
 * returns the targets' values.
 */
export function emitElements(b: VecBuilder, body: HloComputation, reads: ElementReads, opts: ExprOptions, targets: readonly HloInstruction[]): E[] {
  const known = new Map<HloInstruction, E>();
  const needed = new Set<HloInstruction>();
  const need = (m: HloInstruction): void => {
    if (needed.has(m)) return;
    needed.add(m);
    const k = reads.known?.(m);
    if (k) {
      known.set(m, k);
      return;
    }
    if (m.prim?.name === 'broadcast_in_dim') {
      const sn = numelOf(m.operands[0]);
      if (sn !== 1 && sn !== numelOf(m)) return;
    }
    m.operands.forEach(need);
  };
  targets.forEach(need);
  const isTarget = new Set(targets);
  const uses = new Map<HloInstruction, number>();
  for (const m of body.instructions) for (const o of m.operands) uses.set(o, (uses.get(o) ?? 0) + 1);
  for (const o of body.outputs) uses.set(o, (uses.get(o) ?? 0) + 1);
  const val = new Map<HloInstruction, E>();
  /** Products kept unevaluated so that their single add/sub user can contract them. */
  const products = new Map<HloInstruction, [E, E]>();
  const v = (o: HloInstruction): E => {
    const p = products.get(o);
    return p ? b.mul(p[0], p[1]) : val.get(o)!;
  };
  const one = b.k(1);
  for (const m of body.instructions) {
    if (!needed.has(m)) continue;
    const k = known.get(m);
    if (k) {
      val.set(m, k);
      continue;
    }
    if (m.opcode === 'parameter') {
      val.set(m, reads.param(m));
      continue;
    }
    const name = m.prim!.name;
    const [x, y, z] = m.operands;
    let e: E;
    switch (name) {
      case 'broadcast_in_dim':
        val.set(m, x.shape.shape.reduce((a, d) => a * d, 1) === 1 || x.shape.shape.reduce((a, d) => a * d, 1) === m.shape.shape.reduce((a, d) => a * d, 1) ? v(x) : reads.broadcast(m));
        continue;
      case 'iota':
        if (!reads.iota) throw new Error(`xla-lite wasm kernel: iota.${m.id} of ${body.name} is not a full value`);
        val.set(m, reads.iota(m));
        continue;
      case 'convert_element_type':
        val.set(m, isMask(x) ? b.let(b.and(v(x), one)) : v(x));
        continue;
      case 'stop_gradient':
      case 'reshape': // (row values of a row kernel only: one value per row, splatted)
        val.set(m, v(x));
        continue;
      case 'neg':
        e = b.op(SIMD.f32x4_neg, v(x));
        break;
      case 'abs':
        e = b.abs(v(x));
        break;
      case 'sqrt':
        e = b.op(SIMD.f32x4_sqrt, v(x));
        break;
      case 'rsqrt':
        e = b.div(one, b.op(SIMD.f32x4_sqrt, v(x)));
        break;
      case 'floor':
        e = b.op(SIMD.f32x4_floor, v(x));
        break;
      case 'ceil':
        e = b.op(SIMD.f32x4_ceil, v(x));
        break;
      case 'square':
        e = b.mul(v(x), v(x));
        break;
      case 'sign': {
        // ±1 with x's sign where x is nonzero and not NaN; x itself (±0, NaN) elsewhere.
        const nz = b.and(b.op(SIMD.f32x4_ne, v(x), b.k(0)), b.op(SIMD.f32x4_eq, v(x), v(x)));
        e = b.sel(nz, b.or(b.and(v(x), b.ki(0x80000000 | 0)), one), v(x));
        break;
      }
      case 'integer_pow': {
        const n = Number((m.params as { y: number }).y);
        let k = Math.abs(n);
        let acc: E | null = null;
        let sq = v(x);
        while (k > 0) {
          if (k & 1) acc = acc ? b.let(b.mul(acc, sq)) : sq;
          k >>= 1;
          if (k > 0) sq = b.let(b.mul(sq, sq));
        }
        const pos = acc ?? one;
        e = n < 0 ? b.div(one, pos) : pos;
        break;
      }
      case 'exp':
        e = shiftedExp && shiftedByMax(x) ? vexpNonPositive(b, v(x)) : vexp(b, v(x));
        break;
      case 'log':
        e = vlog(b, v(x));
        break;
      case 'tanh':
        e = vtanh(b, v(x), opts.tanh);
        break;
      case 'logistic':
        e = vlogistic(b, v(x));
        break;
      case 'log1p':
        e = vlog1p(b, v(x));
        break;
      case 'expm1':
        e = vexpm1(b, v(x));
        break;
      case 'sin':
        e = vsin(b, opts.host, v(x));
        break;
      case 'cos':
        e = vcos(b, opts.host, v(x));
        break;
      case 'select_n':
        e = b.sel(v(x), v(z), v(y));
        break;
      case 'mul':
        if (opts.relaxed && uses.get(m) === 1 && !isTarget.has(m)) {
          const user = body.instructions.find((u) => needed.has(u) && u.operands.includes(m))!;
          const un = user.prim?.name;
          if (un === 'add' || (un === 'sub' && user.operands[1] === m && user.operands[0] !== m)) {
            products.set(m, [v(x), v(y)]);
            continue;
          }
        }
        e = b.mul(v(x), v(y));
        break;
      case 'add':
      case 'sub': {
        const px = products.get(x);
        const py = products.get(y);
        if (name === 'add' && (px || py)) {
          const [a, c] = px ? [px, v(y)] : [py!, v(x)];
          e = b.op(SIMD.f32x4_relaxed_madd, a[0], a[1], c);
        } else if (name === 'sub' && py) {
          e = b.op(SIMD.f32x4_relaxed_madd, b.op(SIMD.f32x4_neg, py[0]), py[1], v(x));
        } else e = b.op(ARITH[name], v(x), v(y));
        break;
      }
      default:
        if (name in ARITH) e = b.op(ARITH[name], v(x), v(y));
        else if (name in COMPARE) e = b.op(COMPARE[name], v(x), v(y));
        else throw new Error(`xla-lite wasm kernel: no element emitter for ${name} (fusion ${body.name})`);
    }
    val.set(m, b.let(e));
  }
  return targets.map(v);
}

