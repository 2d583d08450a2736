/**
 * The WebAssembly kernels of the fused attention (attention.ts drives them), generated per
 * head dim H (padded to `hp`, a multiple of 8) and padded key count `sp` (a multiple of 8), so every
 * address offset inside a block is a constant and the head-dim loops are unrolled. Operands are
 * f32 in wasm memory holding bf16-representable values (the MXU's operand rounding is done when
 * they are staged, or by `round` below for P and dS); products accumulate in f32 (relaxed FMA
 * when the runtime has it). All kernels work on blocks of 4 query rows:
 *
 * - `scores(a, bt, out, nb)`: out[4, sp] (cols 0..8nb) = A[4, hp] . BT  (Q K^T, dO V^T), with BT
 *   [hp, sp] packed as sp/8 panels of [hp, 8] (each 8-key block's operand contiguous)
 * - `rowsTimes(a, b, out, nk, stride)`: out[4, hp] = A[4, sp] (cols 0..nk) . B[sp, hp]   (P V,
 *   dS K), out's rows `stride` bytes apart (the scratch's, or the result's own rows: `resultSettings`)
 * - `transGemm(a, b, out, causal, t0, rows, fresh, dst, dkeys, dstride)`: out[sp, hp] +=
 *   A[rows, sp]^T B[t0.., hp] (= with `fresh`) for one chunk of QB query rows (dS^T Q, P^T dO; the
 *   backward's blocks keep their dS and P rows in chunks [QB, sp], so its scratch does not grow
 *   with T), chunk after chunk in query order; the sums of keys below dkeys stored at dst instead
 *   (key j's row at dst + j dstride: the result's rows, after the last chunk)
 * - `softmaxBlock(s, p, n, scale, mlOut, bf16, keep, c0..c3, mrow0..mrow3, neg0..neg3)`: a
 *   block's 4 rows in lockstep, each: logits = s * scale over its first c columns, P = exp(logits
 *   - max) / sum rounded to bf16 into p (zeros up to n), and max and sum written at mlOut + 8 r
 *   (`lseRows` forms the logsumexp). With `bf16`, mask rows and neg as in `gradRow`.
 * - `lseRows(src, dst, n)`: dst[i] = max + log(sum) (f32) for the n (max, sum) pairs at src.
 * - `gradRow(s, dp, c, n, scale, lse, bf16, mrow, neg)`: one row of the backward pass: P =
 *   exp(s * scale - lse) (0 past c), D = sum P dP, then dp <- bf16(P (dP - D) scale) and s <- bf16(P).
 *   With `bf16` set the logits and dP are first rounded to bf16 (the composite's bf16 matmul
 *   results). In a masked module the logits whose mask byte (from address `mrow` on) is 0 become
 *   `neg` (the masked logit, or 0 for a row that sees no key: its softmax is uniform); modules
 *   built without a mask ignore both.
 * - `gradRowsP(src, s, dp, n, bf16, scale0..scale3)`: the same for a block's 4 rows (in lockstep,
 *   each with its dS scale) from a P the forward kept (its rows of probs at src when they are
 *   [4, sp], else read into s by `loadRows` and src = s), bf16(P) into s: no logits, mask or
 *   exp. `softmaxBlock`'s `keep` leaves the rows' f32 P in s, and `saveRows` writes a block's
 *   rows of it into probs [.., S], zeros at the keys past the block's (none under DESC.PROBS 2,
 *   `probsVisibleOnly`: the rows end at the block's panel).
 */
import { FunctionBuilder, ModuleBuilder, OP, SIMD } from '../../wasm/assembler';
import { WA, type WasmModule } from '../../wasm/webassemblyTypes';
import { MASKED_LOGIT as MASKED } from '../../lax/attention';
import { envSwitch } from '../../env';
import { convert, shuffle32, sumForNaN, twoPassConvert } from './packKernels';

/** Rows per block: every kernel computes or consumes 4 query rows. */
export const ROWS = 4;

/**
 * Query rows per chunk of the backward's rows of dS and P (a power of 2, a multiple of ROWS):
 * their scratch is [QB, sp] each per thread, and dK, dV take one `transGemm` per chunk.
 */
export const QB = 128;

/** Maximum pages of the (shared) memory the modules import: 1 GiB. */
export const MAX_PAGES = 16384;

/** exp's lower clamp: round(-88 log2 e) = -127, whose 2^n has all bits 0, so exp gives +0 at and below it (and for NaN). */
const EXP_MIN = -88;
/** exp's upper clamp (the backward's rows: logsumexp is an operand there). */
const EXP_MAX = 88.3;
const LOG2E = 1.4426950408889634;
const LN2_HI = 0.693359375;
const LN2_LO = -2.12194440e-4;
/**
 * exp(r) = 1 + r + r^2 P(r) on |r| <= ln2 / 2 with P of degree 4, highest coefficient first
 * (fitted to the least maximum relative error of exp, 3.1e-9 in exact arithmetic; in f32 the
 * result is within 2 ulp of exp, see the tests). Cephes' P of degree 5 is more than f32 needs.
 */
const EXP_POLY = [0.0013814519786259922, 0.00836874362005683, 0.04166839094707451, 0.16666520411684735, 0.4999999343218045];

/** Emits `acc + a * b` for three v128 locals (leaves the sum on the stack). */
/** Emits `emit(true)` where the i32 local `flag` is non-zero and `emit(false)` elsewhere (a loop compiled once per case, not a test per vector). */
function perCase(f: FunctionBuilder, flag: number, emit: (on: boolean) => void): void {
  f.get(flag).if();
  emit(true);
  f.else();
  emit(false);
  f.end();
}

function madd(f: FunctionBuilder, relaxed: boolean, a: number, b: number, acc: number): void {
  if (relaxed) f.get(a).get(b).get(acc).simd(SIMD.f32x4_relaxed_madd);
  else f.get(a).get(b).simd(SIMD.f32x4_mul).get(acc).simd(SIMD.f32x4_add);
}

const splatF = (f: FunctionBuilder, v: number): FunctionBuilder => f.f32Const(v).simd(SIMD.f32x4_splat);

/** One v128 local per function for `roundBf16`'s NaN lanes (each rounding sets it before it reads it). */
const nanLocals = new WeakMap<FunctionBuilder, number>();

/**
 * Rounds the v128 on the stack to bf16 as the MXU's operand conversion does (the packing kernels'
 * `convert`: nearest even, NaN kept quiet, 9 operations); uses local `t` and the function's NaN
 * local (one for all its roundings, rather than a new local each).
 */
function roundBf16(f: FunctionBuilder, t: number): void {
  let nan = nanLocals.get(f);
  if (nan === undefined) nanLocals.set(f, (nan = f.local('v128')));
  convert(f, t, false, false, nan);
}

/**
 * Rounds the v128 on the stack to bf16, nearest even, for values that are never a NaN with a
 * payload (P: quotients and exps of finite or default-NaN values; dS where its block's D and
 * scales hold no NaN, see `gradRowFinish`); uses local `t`. 5 operations against `roundBf16`'s 9:
 * a default quiet NaN (0x7fc00000 or 0xffc00000) stays itself.
 */
function roundBf16Plain(f: FunctionBuilder, t: number): void {
  f.tee(t).v128Const([0x7fff, 0x7fff, 0x7fff, 0x7fff]).simd(SIMD.i32x4_add);
  f.get(t).i32Const(16).simd(SIMD.i32x4_shr_u).v128Const([1, 1, 1, 1]).simd(SIMD.v128_and).simd(SIMD.i32x4_add);
  f.v128Const([0xffff0000, 0xffff0000, 0xffff0000, 0xffff0000]).simd(SIMD.v128_and);
}

/** 1.5 * 2^23: adding it rounds a float of magnitude below 2^22 to an integer (nearest even) held in the low mantissa bits. */
const MAGIC = 12582912;

/** a * b + c for the v128s the three callbacks push (fused with relaxed SIMD), left on the stack. */
function fma(f: FunctionBuilder, relaxed: boolean, a: () => void, b: () => void, c: () => void): void {
  a();
  b();
  if (relaxed) {
    c();
    f.simd(SIMD.f32x4_relaxed_madd);
  } else {
    f.simd(SIMD.f32x4_mul);
    c();
    f.simd(SIMD.f32x4_add);
  }
}

/** c - a * b for local a, constant b and local c (fused with relaxed SIMD), left on the stack. */
function fnma(f: FunctionBuilder, relaxed: boolean, a: number, b: number, c: number): void {
  if (relaxed) {
    splatF(f.get(a), b).get(c).simd(SIMD.f32x4_relaxed_nmadd);
  } else {
    splatF(f.get(c).get(a), b).simd(SIMD.f32x4_mul).simd(SIMD.f32x4_sub);
  }
}

/**
 * exp of the v128 on the stack, left on the stack; uses v128 locals x, n, t. The input is
 * clamped to [EXP_MIN, EXP_MAX] (EXP_MAX only with `upper`; NaN becomes EXP_MIN), so inputs at
 * or below EXP_MIN and NaN give +0. n = round(x log2 e) comes from adding 1.5 * 2^23 (the sum's
 * bits give 2^n directly; no f32x4.nearest or trunc_sat, long sequences in V8); r = x - n ln2 in
 * two steps (Cody and Waite); exp(r) by EXP_POLY; then times 2^n. With relaxed SIMD the products
 * and sums are fused (FMA where the runtime fuses them).
 */
function expV(f: FunctionBuilder, relaxed: boolean, upper: boolean, x: number, n: number, t: number): void {
  f.set(x);
  splatF(f, EXP_MIN).get(x).simd(SIMD.f32x4_pmax); // (pmax(a, b) is a < b ? b : a: NaN gives a)
  if (upper) splatF(f, EXP_MAX).simd(SIMD.f32x4_pmin);
  f.set(x);
  fma(f, relaxed, () => f.get(x), () => splatF(f, LOG2E), () => splatF(f, MAGIC));
  f.tee(t);
  splatF(f, MAGIC).simd(SIMD.f32x4_sub).set(n);
  fnma(f, relaxed, n, LN2_HI, x);
  f.set(x);
  fnma(f, relaxed, n, LN2_LO, x);
  f.set(x);
  splatF(f, EXP_POLY[0]);
  for (let i = 1; i < EXP_POLY.length; i++) {
    f.set(n); // (n is free from here on: the polynomial's running value)
    fma(f, relaxed, () => f.get(n), () => f.get(x), () => splatF(f, EXP_POLY[i]));
  }
  // P r^2 + r + 1
  f.set(n);
  fma(f, relaxed, () => f.get(n), () => f.get(x).get(x).simd(SIMD.f32x4_mul), () => f.get(x));
  splatF(f, 1).simd(SIMD.f32x4_add);
  // * 2^n: the bits of t are MAGIC's plus n, and MAGIC's bits vanish under the shift by 23
  f.get(t).v128Const([127, 127, 127, 127]).simd(SIMD.i32x4_add).i32Const(23).simd(SIMD.i32x4_shl);
  f.simd(SIMD.f32x4_mul);
}

// Scalar f64 and conversion opcodes the logarithm uses.
const F64 = { sub: 0xa1, mul: 0xa2, div: 0xa3, gt: 0x64, f32Gt: 0x5e, convertI32: 0xb7, const: 0x44, reinterpretF32: 0xbc, f32ReinterpretI32: 0xbe } as const;
const f64Const = (f: FunctionBuilder, v: number): FunctionBuilder => f.op(F64.const, ...new Uint8Array(new Float64Array([v]).buffer));

/**
 * Pushes the f32 `mx + log(sum)` for f32 locals mx and sum (sum 0 or at least 1, as a softmax
 * row's sum of exps: never NaN, never subnormal), evaluated in f64 and rounded once, as
 * `Math.fround(mx + Math.log(sum))` is (they differ only where the f64 results straddle an f32
 * rounding tie): sum = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m - 1)
 * / (m + 1) by its series to s^19 (|s| <= 0.172: the next term is below 2^-53). sum 0 gives
 * mx - inf. Uses locals e (i32), m, s, z (f64).
 */
function logSumExp(f: FunctionBuilder, mx: number, sum: number, e: number, m: number, s: number, z: number): void {
  f.get(sum).f32Const(0).op(F64.f32Gt).if('f64');
  f.get(sum).op(F64.reinterpretF32).tee(e).i32Const(0x7fffff).op(OP.i32_and).i32Const(0x3f800000).op(OP.i32_or).op(F64.f32ReinterpretI32).op(OP.f64_promote_f32).set(m);
  f.get(e).i32Const(23).op(OP.i32_shr_u).i32Const(127).op(OP.i32_sub).set(e);
  f64Const(f.get(m), Math.SQRT2).op(F64.gt).if();
  f64Const(f.get(m), 0.5).op(F64.mul).set(m);
  f.get(e).i32Const(1).op(OP.i32_add).set(e);
  f.end();
  f64Const(f.get(m), 1).op(F64.sub);
  f64Const(f.get(m), 1).op(OP.f64_add).op(F64.div).tee(s).get(s).op(F64.mul).set(z);
  f64Const(f, 1 / 19);
  for (let k = 8; k >= 0; k--) f64Const(f.get(z).op(F64.mul), 1 / (2 * k + 1)).op(OP.f64_add);
  // 2 s p + e ln2
  f.get(s).op(F64.mul);
  f64Const(f, 2).op(F64.mul);
  f.get(e).op(F64.convertI32);
  f64Const(f, Math.LN2).op(F64.mul).op(OP.f64_add);
  f.else();
  f64Const(f, -Infinity);
  f.end();
  f.get(mx).op(OP.f64_promote_f32).op(OP.f64_add).op(OP.f32_demote_f64);
}

/**
 * `logSumExp` for 4 rows at once, as two f64x2 halves: the same operations in the same order
 * on each lane, so each lane's result is bit-for-bit the scalar one's. For v128 locals mx and sum
 * (4 f32 each), leaves the 4 f32 results on the stack; uses v128 locals e, m, lo (and the f64
 * scratch locals s, z). m > sqrt 2 is compared in f32 (no f32 lies between fround(sqrt 2), which
 * is below sqrt 2, and sqrt 2: the same answer as the scalar f64 compare).
 */
function logSumExp4(f: FunctionBuilder, mx: number, sum: number, e: number, m: number, lo: number, s: number, z: number): void {
  const f64s = (v: number): FunctionBuilder => f64Const(f, v).simd(SIMD.f64x2_splat);
  // e = exponent, m = mantissa in [1, 2); then [sqrt(1/2), sqrt(2)) and e + 1 where halved
  f.get(sum).i32Const(23).simd(SIMD.i32x4_shr_u).v128Const([127, 127, 127, 127]).simd(SIMD.i32x4_sub).set(e);
  f.get(sum).v128Const([0x7fffff, 0x7fffff, 0x7fffff, 0x7fffff]).simd(SIMD.v128_and).v128Const([0x3f800000, 0x3f800000, 0x3f800000, 0x3f800000]).simd(SIMD.v128_or).set(m);
  f.get(m);
  splatF(f, Math.SQRT2).simd(SIMD.f32x4_gt).set(lo);
  f.get(m);
  splatF(f, 0.5).simd(SIMD.f32x4_mul).get(m).get(lo).simd(SIMD.v128_bitselect).set(m);
  f.get(e).get(lo).simd(SIMD.i32x4_sub).set(e);
  for (const half of [0, 1]) {
    const low = (v: number): FunctionBuilder => (half === 0 ? f.get(v) : (f.get(v).get(v), shuffle32(f, [2, 3, 2, 3]), f));
    low(m).simd(SIMD.f64x2_promote_low_f32x4).set(s);
    // z = s^2 for s = (m - 1) / (m + 1) (m, then s, in local s)
    f.get(s);
    f64s(1).simd(SIMD.f64x2_sub).get(s);
    f64s(1).simd(SIMD.f64x2_add).simd(SIMD.f64x2_div).tee(s).get(s).simd(SIMD.f64x2_mul).set(z);
    f64s(1 / 19);
    for (let k = 8; k >= 0; k--) {
      f.get(z).simd(SIMD.f64x2_mul);
      f64s(1 / (2 * k + 1)).simd(SIMD.f64x2_add);
    }
    f.get(s).simd(SIMD.f64x2_mul);
    f64s(2).simd(SIMD.f64x2_mul);
    low(e).simd(SIMD.f64x2_convert_low_i32x4_s);
    f64s(Math.LN2).simd(SIMD.f64x2_mul).simd(SIMD.f64x2_add);
    low(mx).simd(SIMD.f64x2_promote_low_f32x4).simd(SIMD.f64x2_add).simd(SIMD.f32x4_demote_f64x2_zero);
    if (half === 0) f.set(lo);
  }
  f.set(m);
  f.get(lo).get(m);
  shuffle32(f, [0, 1, 4, 5]);
  // rows whose sum is not > 0 (0, or NaN): mx - inf, as the scalar's f64 -inf + mx rounds
  f.get(mx);
  splatF(f, -Infinity).simd(SIMD.f32x4_add);
  f.get(sum).v128Const([0, 0, 0, 0]).simd(SIMD.f32x4_gt).simd(SIMD.v128_bitselect);
}

/**
 * `lseRows(src, dst, n)`: the logsumexp of n softmax rows from their (max, sum) pairs, 4 rows at
 * a time (`logSumExp4`) and the last n mod 4 one by one (`logSumExp`, bit-identical per row).
 */
function buildLseRows(m: ModuleBuilder): number {
  return m.addFunction('lseRows', ['i32', 'i32', 'i32'], [], (f) => {
    const [src, dst, n] = [0, 1, 2];
    const [i, n4, mx, sum] = [f.local('i32'), f.local('i32'), f.local('f32'), f.local('f32')];
    const [e, lm, ls, lz] = [f.local('i32'), f.local('f64'), f.local('f64'), f.local('f64')];
    const [vmx, vsum, ve, vm, vlo, vs, vz] = Array.from({ length: 7 }, () => f.local('v128'));
    f.get(n).i32Const(2).op(OP.i32_shr_u).set(n4);
    forLoop(f, i, n4, () => {
      f.get(src).simdMem(SIMD.v128_load).get(src).simdMem(SIMD.v128_load, 16).set(vsum).set(vmx);
      f.get(vmx).get(vsum);
      shuffle32(f, [1, 3, 5, 7]);
      f.get(vmx).get(vsum);
      shuffle32(f, [0, 2, 4, 6]);
      f.set(vmx).set(vsum);
      f.get(dst);
      logSumExp4(f, vmx, vsum, ve, vm, vlo, vs, vz);
      f.simdMem(SIMD.v128_store);
      bump(f, src, 32);
      bump(f, dst, 16);
    });
    f.get(n).i32Const(3).op(OP.i32_and).set(n4);
    forLoop(f, i, n4, () => {
      f.get(src).mem(OP.f32_load).set(mx);
      f.get(src).mem(OP.f32_load, 4).set(sum);
      f.get(dst);
      logSumExp(f, mx, sum, e, lm, ls, lz);
      f.mem(OP.f32_store);
      bump(f, src, 8);
      bump(f, dst, 4);
    });
  });
}

/** Horizontal reduction of v128 local `v` with a scalar f32 op (max or add). */
function horizontal(f: FunctionBuilder, v: number, op: number): void {
  f.get(v).simd(SIMD.f32x4_extract_lane).op(0);
  for (let l = 1; l < 4; l++) f.get(v).simd(SIMD.f32x4_extract_lane).op(l).op(op);
}

/** A counted loop `for (i = from; i < n; i++) body` over local i (n and `from` locals; from 0 when not given); `body` must not branch out. */
function forLoop(f: FunctionBuilder, i: number, n: number, body: () => void, from?: number): void {
  if (from === undefined) f.i32Const(0).set(i);
  else f.get(from).set(i);
  f.block().get(i).get(n).op(OP.i32_ge_s).brIf(0).loop();
  body();
  f.get(i).i32Const(1).op(OP.i32_add).tee(i).get(n).op(OP.i32_lt_s).brIf(0);
  f.end().end();
}

/** Adds `bytes` to pointer local p. */
const bump = (f: FunctionBuilder, p: number, bytes: number): void => {
  f.get(p).i32Const(bytes).op(OP.i32_add).set(p);
};

/** The 4 x 8 micro-kernel's registers (the GEMM's shape: 8 accumulators, 2 B vectors, 1 splat). */
interface Micro {
  pa: number;
  pb: number;
  i: number;
  n: number;
  acc: number[];
  b0: number;
  b1: number;
  s: number;
}

function microLocals(f: FunctionBuilder): Micro {
  const L = (t: 'i32' | 'v128') => f.local(t);
  return { pa: L('i32'), pb: L('i32'), i: L('i32'), n: L('i32'), acc: Array.from({ length: 8 }, () => L('v128')), b0: L('v128'), b1: L('v128'), s: L('v128') };
}

/**
 * acc[r][0..8] = init + sum over n steps of A[r] * B, from pa and pb on: A's 4 rows are `aRow`
 * bytes apart (one f32 per step, splatted), B's 8 floats per step contiguous; per step pa +=
 * `aStep` (default 4) and pb += `bStep`. `init` zero, or the 4 x 8 block at `init.out + init.at` (rows `init.row`
 * bytes apart: the accumulation goes on from what is there), or zero where the i32 local
 * `init.fresh` is non-zero. A plain loop: V8 spills the accumulators of an unrolled one.
 */
function micro4x8(f: FunctionBuilder, relaxed: boolean, r: Micro, aRow: number, bStep: number, init?: { out: number; row: number; at: number; fresh?: number }, aStep = 4): void {
  const zeros = (): void => {
    for (const x of r.acc) f.v128Const([0, 0, 0, 0]).set(x);
  };
  if (init === undefined) zeros();
  else {
    const load = (): void => {
      for (let i = 0; i < ROWS; i++) {
        f.get(init.out).simdMem(SIMD.v128_load, i * init.row + init.at).set(r.acc[2 * i]);
        f.get(init.out).simdMem(SIMD.v128_load, i * init.row + init.at + 16).set(r.acc[2 * i + 1]);
      }
    };
    if (init.fresh === undefined) load();
    else perCase(f, init.fresh, (fresh) => (fresh ? zeros() : load()));
  }
  forLoop(f, r.i, r.n, () => {
    f.get(r.pb).simdMem(SIMD.v128_load).set(r.b0);
    f.get(r.pb).simdMem(SIMD.v128_load, 16).set(r.b1);
    for (let row = 0; row < ROWS; row++) {
      f.get(r.pa).simdMem(SIMD.v128_load32_splat, row * aRow, 4).set(r.s);
      madd(f, relaxed, r.s, r.b0, r.acc[2 * row]);
      f.set(r.acc[2 * row]);
      madd(f, relaxed, r.s, r.b1, r.acc[2 * row + 1]);
      f.set(r.acc[2 * row + 1]);
    }
    bump(f, r.pa, aStep);
    bump(f, r.pb, bStep);
  });
}

/** Stores the micro-kernel's accumulators at `out` + `at`, rows `row` bytes apart. */
function store4x8(f: FunctionBuilder, r: Micro, out: number, row: number, at: number): void {
  for (let i = 0; i < ROWS; i++) {
    f.get(out).get(r.acc[2 * i]).simdMem(SIMD.v128_store, i * row + at);
    f.get(out).get(r.acc[2 * i + 1]).simdMem(SIMD.v128_store, i * row + at + 16);
  }
}

/**
 * Stores the micro-kernel's accumulators at `at` bytes past row pointers `row` bytes apart, row 0
 * at i32 local `ptr` (moved on to row 3's; the row stride in i32 local `row`: a result's rows in
 * place, not only a scratch's).
 */
function store4x8Strided(f: FunctionBuilder, r: Micro, ptr: number, row: number, at: number): void {
  for (let i = 0; i < ROWS; i++) {
    if (i > 0) f.get(ptr).get(row).op(OP.i32_add).set(ptr);
    f.get(ptr).get(r.acc[2 * i]).simdMem(SIMD.v128_store, at);
    f.get(ptr).get(r.acc[2 * i + 1]).simdMem(SIMD.v128_store, at + 16);
  }
}

function buildScores(m: ModuleBuilder, hp: number, sp: number, relaxed: boolean): number {
  return m.addFunction('scores', ['i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [a, bt, out, nb] = [0, 1, 2, 3];
    const jb = f.local('i32');
    const r = microLocals(f);
    f.i32Const(hp).set(r.n);
    forLoop(f, jb, nb, () => {
      f.get(a).set(r.pa);
      f.get(bt).set(r.pb);
      micro4x8(f, relaxed, r, hp * 4, 32);
      store4x8(f, r, out, sp * 4, 0);
      bump(f, bt, hp * 32);
      bump(f, out, 32);
    });
  });
}

function buildRowsTimes(m: ModuleBuilder, hp: number, sp: number, relaxed: boolean): number {
  return m.addFunction('rowsTimes', ['i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [a, b, out, nk, stride] = [0, 1, 2, 3, 4];
    const r = microLocals(f);
    const ptr = f.local('i32');
    f.get(nk).set(r.n);
    for (let cp = 0; cp < hp / 8; cp++) {
      f.get(a).set(r.pa);
      f.get(b).i32Const(cp * 32).op(OP.i32_add).set(r.pb);
      micro4x8(f, relaxed, r, sp * 4, hp * 4);
      f.get(out).set(ptr);
      store4x8Strided(f, r, ptr, stride, cp * 32);
    }
  });
}

/**
 * `transGemm(a, b, out, causal, t0, rows, fresh, dst, dkeys, dstride)`: out[sp, hp] += A[t0..t0+rows, sp]^T B[t0..t0+rows,
 * hp] (dK += dS^T Q and dV += P^T dO over one chunk of query rows, with A the chunk's rows of dS
 * or P as the row kernels left them, [QB, sp] with row t - t0 at a, and b the head's whole [tp,
 * hp] operand): 4 x 8 tiles in registers, the 4 keys' A values splatted from one row of A per
 * step (A is read untransposed: no transposed copy), accumulating over t in increasing order
 * onto what out holds (the earlier chunks, then the previous query head of the group): called
 * chunk after chunk, each element's f32 sum runs over t in the same order as one GEMM over all
 * rows would. With `causal` set, keys j0..j0+3 start at row max(t0, floor8(j0)): the first query
 * block whose logits reach them (the rows before see none of them; A is not written there). With
 * `fresh` non-zero the sums start at 0 instead of at what out holds (the first chunk of an item's
 * first query head: out need not be zeroed first; every element of out is stored, those with no
 * row in the chunk as 0, and 0 + a b rounds as a b does). The tiles of keys below `dkeys` (a
 * multiple of 4; 0: none) are stored at dst + j0 dstride (row j of the tile dstride bytes after
 * row j - 1) instead of into out: the caller's last chunk of its last query head stores dK and dV
 * into the result's rows (`resultSettings`), out then holds only the keys from dkeys on.
 */
function buildTransGemm(m: ModuleBuilder, hp: number, sp: number, relaxed: boolean): number {
  return m.addFunction('transGemm', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [a, b, out, causal, t0, rows, fresh, dst, dkeys, dstride] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    const [j0, ts, ptr] = [f.local('i32'), f.local('i32'), f.local('i32')];
    const r = microLocals(f);
    f.i32Const(0).set(j0);
    f.loop();
    // ts = max(t0, causal ? j0 & ~7 : 0); n = t0 + rows - ts (at most 0: nothing to add)
    f.get(j0).i32Const(-8).op(OP.i32_and).i32Const(0).get(causal).op(OP.select).tee(ts);
    f.get(t0).get(ts).get(t0).op(OP.i32_gt_s).op(OP.select).set(ts); // (select: ts > t0 ? ts : t0)
    f.get(t0).get(rows).op(OP.i32_add).get(ts).op(OP.i32_sub).set(r.n);
    for (let cp = 0; cp < hp / 8; cp++) {
      // pa = a + (ts - t0) sp 4 + j0 4: A[ts, j0], the 4 keys 4 bytes apart, rows sp * 4 bytes apart
      f.get(a).get(ts).get(t0).op(OP.i32_sub).i32Const(sp * 4).op(OP.i32_mul).op(OP.i32_add).get(j0).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(r.pa);
      f.get(b).get(ts).i32Const(hp * 4).op(OP.i32_mul).op(OP.i32_add).i32Const(cp * 32).op(OP.i32_add).set(r.pb);
      micro4x8(f, relaxed, r, 4, hp * 4, { out, row: hp * 4, at: cp * 32, fresh }, sp * 4);
      // keys j0..j0 + 3 below dkeys: into the result's rows (dst + j0 dstride on), else into out
      f.get(j0).get(dkeys).op(OP.i32_lt_s).if();
      f.get(dst).get(j0).get(dstride).op(OP.i32_mul).op(OP.i32_add).set(ptr);
      store4x8Strided(f, r, ptr, dstride, cp * 32);
      f.else();
      store4x8(f, r, out, hp * 4, cp * 32);
      f.end();
    }
    bump(f, out, ROWS * hp * 4);
    f.get(j0).i32Const(ROWS).op(OP.i32_add).tee(j0).i32Const(sp).op(OP.i32_lt_s).brIf(0);
    f.end();
  });
}

/**
 * The logit rule, one vector of 4 columns (`rowPrologue`'s and `softmaxBlock`'s, so that the
 * forward and the recomputing backward form the same logits): the v128 at `ptr` + `at` (rounded to
 * bf16 when `rounded`: the composite's bf16 matmul result) times the splatted scale `sc`; in a
 * masked module (`mask` given) `negv` where the 4 mask bytes at `mp` are 0 (mp then moves on 4);
 * with `tail` -inf where the column indices `idx` are not below `lim` (the row's visible keys).
 * Leaves the logits in v128 local `v`; uses local `t`.
 */
function logits(f: FunctionBuilder, ptr: number, at: number, rounded: boolean, t: number, sc: number, v: number, mask: { negv: number; mp: number } | null, tail: { idx: number; lim: number } | null): void {
  f.get(ptr).simdMem(SIMD.v128_load, at);
  if (rounded) roundBf16(f, t);
  f.get(sc).simd(SIMD.f32x4_mul).set(v);
  if (mask) {
    // v = mask byte ? v : neg (4 bytes widened to 4 lanes)
    f.get(v).get(mask.negv).get(mask.mp).simdMem(SIMD.v128_load32_zero, 0, 1).simd(SIMD.i16x8_extend_low_i8x16_u).simd(SIMD.i32x4_extend_low_i16x8_u);
    f.v128Const([0, 0, 0, 0]).simd(SIMD.i32x4_ne).simd(SIMD.v128_bitselect).set(v);
    bump(f, mask.mp, 4);
  }
  if (tail) {
    f.get(v);
    splatF(f, -Infinity).get(tail.idx).get(tail.lim).simd(SIMD.i32x4_lt_s).simd(SIMD.v128_bitselect).set(v);
  }
}

/** The locals of `rowPrologue` (used by `gradRow`, the recompute path's gradient row). */
interface RowLocals {
  i: number;
  p: number;
  v: number;
  t: number;
  nv: number;
  idx: number;
  lim: number;
  mp: number;
  negv: number;
  nf: number;
  /** scale splatted */
  sc: number;
}

function rowLocals(f: FunctionBuilder, i: number, p: number, v: number, t: number, nv: number): RowLocals {
  return { i, p, v, t, nv, idx: f.local('v128'), lim: f.local('v128'), mp: f.local('i32'), negv: f.local('v128'), nf: f.local('i32'), sc: f.local('v128') };
}

/**
 * The start of `gradRow`: every 4-column vector of the row's n columns, as logits (`logits`: s,
 * rounded to bf16 when `bf16`, times scale; `neg` where the mask bytes from `mrow` on are 0 when
 * mrow is not 0; -inf at columns c and past), is handed to `each` in local `v`, with the vector's
 * address in local `p` (`each` is emitted once per loop and bf16 case, which it is told).
 */
function rowPrologue(f: FunctionBuilder, s: number, c: number, n: number, scale: number, bf16: number, mrow: number, neg: number, masked: boolean, locals: RowLocals, each: (rounded: boolean) => void): void {
  const { i, p, v, t, nv, idx, lim, mp, negv, nf, sc } = locals;
  f.get(n).i32Const(2).op(OP.i32_shr_u).set(nv);
  // nf = min(c, n) / 4: the vectors before it are all visible (no -inf to put in)
  f.get(c).get(n).get(c).get(n).op(OP.i32_lt_s).op(OP.select).i32Const(2).op(OP.i32_shr_u).set(nf);
  f.get(s).set(p);
  f.get(c).simd(SIMD.i32x4_splat).set(lim);
  if (masked) {
    f.get(mrow).set(mp);
    f.get(neg).simd(SIMD.f32x4_splat).set(negv);
  }
  f.get(scale).simd(SIMD.f32x4_splat).set(sc);
  const vector = (tail: boolean, rounded: boolean): void => {
    logits(f, p, 0, rounded, t, sc, v, masked ? { negv, mp } : null, tail ? { idx, lim } : null);
    if (tail) f.get(idx).v128Const([4, 4, 4, 4]).simd(SIMD.i32x4_add).set(idx);
    each(rounded);
    bump(f, p, 16);
  };
  // (one loop per bf16 case: no branch per vector)
  const loops = (rounded: boolean): void => {
    forLoop(f, i, nf, () => vector(false, rounded));
    // the rest: column indices 4 nf + (0, 1, 2, 3) on
    f.get(nf).i32Const(2).op(OP.i32_shl).simd(SIMD.i32x4_splat).v128Const([0, 1, 2, 3]).simd(SIMD.i32x4_add).set(idx);
    forLoop(f, i, nv, () => vector(true, rounded), nf);
  };
  perCase(f, bf16, loops);
}

/** `expv(src, dst, nv, upper)`: dst = exp(src) over nv 4-float vectors, the row kernels' exp (`upper`: with the upper clamp), for its accuracy test. */
function buildExp(m: ModuleBuilder, relaxed: boolean): void {
  m.addFunction('expv', ['i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [src, dst, nv, upper] = [0, 1, 2, 3];
    const [i, x, n, t] = [f.local('i32'), f.local('v128'), f.local('v128'), f.local('v128')];
    forLoop(f, i, nv, () => {
      f.get(upper).if();
      f.get(dst).get(src).simdMem(SIMD.v128_load);
      expV(f, relaxed, true, x, n, t);
      f.simdMem(SIMD.v128_store).else();
      f.get(dst).get(src).simdMem(SIMD.v128_load);
      expV(f, relaxed, false, x, n, t);
      f.simdMem(SIMD.v128_store).end();
      bump(f, src, 16);
      bump(f, dst, 16);
    });
  });
}

/**
 * Transposes the 4 x 4 f32 lanes of v128 locals `a` into locals `out` (out[l] = lane l of a[0..3]),
 * through locals `tmp` (4).
 */
function transpose4(f: FunctionBuilder, a: readonly number[], out: readonly number[], tmp: readonly number[]): void {
  for (const [x, y, t, lanes] of [[0, 1, 0, [0, 4, 1, 5]], [0, 1, 1, [2, 6, 3, 7]], [2, 3, 2, [0, 4, 1, 5]], [2, 3, 3, [2, 6, 3, 7]]] as const) {
    f.get(a[x]).get(a[y]);
    shuffle32(f, lanes);
    f.set(tmp[t]);
  }
  for (const [x, y, o, lanes] of [[0, 2, 0, [0, 1, 4, 5]], [0, 2, 1, [2, 3, 6, 7]], [1, 3, 2, [0, 1, 4, 5]], [1, 3, 3, [2, 3, 6, 7]]] as const) {
    f.get(tmp[x]).get(tmp[y]);
    shuffle32(f, lanes);
    f.set(out[o]);
  }
}

/**
 * Reduces the lanes of each of the 4 v128 locals `a` with the f32x4 op `op` (max or add), as
 * `horizontal` does one vector (((l0 op l1) op l2) op l3, the same scalar operations lane by
 * lane): the 4 results in lanes 0..3 of local `out`; uses locals `t` (4) and `tmp` (4).
 */
function horizontal4(f: FunctionBuilder, a: readonly number[], op: number, out: number, t: readonly number[], tmp: readonly number[]): void {
  transpose4(f, a, t, tmp);
  f.get(t[0]).get(t[1]).simd(op).get(t[2]).simd(op).get(t[3]).simd(op).set(out);
}

/** Splats lane `lane` of v128 local `v` into local `out`. */
function splatLane(f: FunctionBuilder, v: number, lane: number, out: number): void {
  f.get(v).get(v);
  shuffle32(f, [lane, lane, lane, lane]);
  f.set(out);
}

/**
 * `softmaxBlock(s, p, n, scale, mlOut, bf16, keep, c0..c3, mrow0..mrow3, neg0..neg3)`: the
 * block's 4 rows of the forward softmax in lockstep, row r at s + r sp 4 and p + r sp 4 with its
 * own c, mask row and masked value, its (max, sum) at mlOut + 8 r. Per row the operations and
 * their order are those of one row kernel (`logits`, as `rowPrologue`'s, then P): logits = s (rounded
 * to bf16 when `bf16`) * scale over the first c columns, `neg` where the row's mask bytes are 0
 * (masked modules), -inf from c on; max; e = exp(logit - max) into p, sum (4 lanes, then lane 0 +
 * 1 + 2 + 3); p = bf16(e / sum), and with `keep` also s = e / sum (f32). Each vector index takes
 * the 4 rows' vectors in turn, so the running max and sum are 4 independent chains and the 4
 * rows' exps interleave; one call and one transposed horizontal reduction per block.
 */
function buildSoftmaxBlock(m: ModuleBuilder, sp: number, masked: boolean, relaxed: boolean): number {
  const I = 'i32' as const;
  const params = [I, I, I, 'f32', I, I, I, I, I, I, I, I, I, I, I, 'f32', 'f32', 'f32', 'f32'] as const;
  return m.addFunction('softmaxBlock', params, [], (f) => {
    const [s, p, n, scale, ml, bf16, keep] = [0, 1, 2, 3, 4, 5, 6];
    const cs = [7, 8, 9, 10];
    const mrows = [11, 12, 13, 14];
    const negs = [15, 16, 17, 18];
    const V = (): number => f.local('v128');
    const [i, ptr, nv, nf, q] = [f.local(I), f.local(I), f.local(I), f.local(I), f.local(I)];
    const mp = cs.map(() => f.local(I));
    const [acc, lim, negv, mx, sums, tr, tmp] = Array.from({ length: 7 }, () => cs.map(V));
    const [sc, idx, v, t, x, en, et, red] = Array.from({ length: 8 }, V);
    const row = (r: number): number => r * sp * 4;
    f.get(n).i32Const(2).op(OP.i32_shr_u).set(nv);
    // nf = min over the rows of min(c, n), / 4: the vectors before it are all visible in every row
    f.get(n).set(nf);
    for (const c of cs) f.get(c).get(nf).get(c).get(nf).op(OP.i32_lt_s).op(OP.select).set(nf);
    f.get(nf).i32Const(2).op(OP.i32_shr_u).set(nf);
    cs.forEach((c, r) => {
      f.get(c).simd(SIMD.i32x4_splat).set(lim[r]);
      if (masked) {
        f.get(mrows[r]).set(mp[r]);
        f.get(negs[r]).simd(SIMD.f32x4_splat).set(negv[r]);
      }
      splatF(f, -Infinity).set(acc[r]);
    });
    f.get(scale).simd(SIMD.f32x4_splat).set(sc);
    // pass 1: logits in place, running max per row
    const vector = (tail: boolean, rounded: boolean): void => {
      for (let r = 0; r < ROWS; r++) {
        logits(f, ptr, row(r), rounded, t, sc, v, masked ? { negv: negv[r], mp: mp[r] } : null, tail ? { idx, lim: lim[r] } : null);
        f.get(ptr).get(v).simdMem(SIMD.v128_store, row(r));
        f.get(acc[r]).get(v).simd(SIMD.f32x4_pmax).set(acc[r]);
      }
      if (tail) f.get(idx).v128Const([4, 4, 4, 4]).simd(SIMD.i32x4_add).set(idx);
      bump(f, ptr, 16);
    };
    f.get(s).set(ptr);
    perCase(f, bf16, (rounded) => {
      forLoop(f, i, nf, () => vector(false, rounded));
      // the rest: column indices 4 nf + (0, 1, 2, 3) on
      f.get(nf).i32Const(2).op(OP.i32_shl).simd(SIMD.i32x4_splat).v128Const([0, 1, 2, 3]).simd(SIMD.i32x4_add).set(idx);
      forLoop(f, i, nv, () => vector(true, rounded), nf);
    });
    horizontal4(f, acc, SIMD.f32x4_max, red, tr, tmp);
    mx.forEach((loc, r) => splatLane(f, red, r, loc));
    // pass 2: e = exp(logit - max) into p, running sum per row
    for (const a of acc) f.v128Const([0, 0, 0, 0]).set(a);
    f.get(s).set(ptr);
    f.get(p).set(q);
    forLoop(f, i, nv, () => {
      for (let r = 0; r < ROWS; r++) {
        f.get(q).get(ptr).simdMem(SIMD.v128_load, row(r)).get(mx[r]).simd(SIMD.f32x4_sub);
        expV(f, relaxed, false, x, en, et);
        f.tee(v).simdMem(SIMD.v128_store, row(r));
        f.get(acc[r]).get(v).simd(SIMD.f32x4_add).set(acc[r]);
      }
      bump(f, ptr, 16);
      bump(f, q, 16);
    });
    horizontal4(f, acc, SIMD.f32x4_add, v, tr, tmp);
    // (max, sum) of the 4 rows: pairs at ml, ml + 8, ...
    f.get(ml).get(red).get(v);
    shuffle32(f, [0, 4, 1, 5]);
    f.simdMem(SIMD.v128_store);
    f.get(ml).get(red).get(v);
    shuffle32(f, [2, 6, 3, 7]);
    f.simdMem(SIMD.v128_store, 16);
    sums.forEach((loc, r) => splatLane(f, v, r, loc));
    // pass 3: p = bf16(e / sum); with keep, also s = e / sum (P in f32, for the probs result)
    f.get(p).set(q);
    f.get(s).set(ptr);
    perCase(f, keep, (kept) =>
      forLoop(f, i, nv, () => {
        for (let r = 0; r < ROWS; r++) {
          f.get(q).get(q).simdMem(SIMD.v128_load, row(r)).get(sums[r]).simd(SIMD.f32x4_div);
          if (kept) f.tee(v).get(ptr).get(v).simdMem(SIMD.v128_store, row(r));
          roundBf16Plain(f, t);
          f.simdMem(SIMD.v128_store, row(r));
        }
        if (kept) bump(f, ptr, 16);
        bump(f, q, 16);
      }),
    );
  });
}

function buildGradRow(m: ModuleBuilder, masked: boolean, relaxed: boolean, dsPlain: boolean): number {
  // (s, dp, c, n, scale, lse, bf16, mrow, neg)
  return m.addFunction('gradRow', ['i32', 'i32', 'i32', 'i32', 'f32', 'f32', 'i32', 'i32', 'f32'], [], (f) => {
    const [s, dp, c, n, scale, lse, bf16, mrow, neg] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
    const [i, ptr, nv, q] = [f.local('i32'), f.local('i32'), f.local('i32'), f.local('i32')];
    const [v, t, acc, x, en, et, l, g, dd] = Array.from({ length: 9 }, () => f.local('v128'));
    const locals = rowLocals(f, i, ptr, v, t, nv);
    f.get(lse).simd(SIMD.f32x4_splat).set(l);
    f.v128Const([0, 0, 0, 0]).set(acc);
    f.get(dp).set(q);
    // pass 1: P = exp(logit - lse) into s, dP (rounded when bf16) in place, D = sum P dP
    rowPrologue(f, s, c, n, scale, bf16, mrow, neg, masked, locals, (rounded) => {
      f.get(ptr).get(v).get(l).simd(SIMD.f32x4_sub);
      expV(f, relaxed, true, x, en, et);
      f.tee(v).simdMem(SIMD.v128_store);
      accumulatePdP(f, q, rounded, { v, g, t, acc });
      bump(f, q, 16);
    });
    gradRowFinish(f, s, dp, [scale], 0, { i, ptr, nv, q, v, t, acc: [acc], dd: [dd], l: [l], exact: dsPlain ? f.local('i32') : undefined });
  });
}

/**
 * Both gradient row kernels' pass-1 step for 4 lanes, with the lanes' P in v128 local v: g <-
 * dP at q + `at` (rounded to bf16 and stored back when `bf16`: the code is emitted per case),
 * acc += P dP.
 */
function accumulatePdP(f: FunctionBuilder, q: number, bf16: boolean, r: { v: number; g: number; t: number; acc: number }, at = 0): void {
  const { v, g, t, acc } = r;
  f.get(q).simdMem(SIMD.v128_load, at).set(g);
  if (bf16) {
    f.get(g);
    roundBf16(f, t);
    f.set(g).get(q).get(g).simdMem(SIMD.v128_store, at);
  }
  madd(f, false, v, g, acc);
  f.set(acc);
}

/**
 * The end of the gradient row kernels, for one row or a block's 4 (row k at s and dp plus k
 * `rowBytes`, dS scale in f32 local `scales[k]`), from the rows' P (in s, f32) and dP (in dp, rounded
 * when bf16) with the partial sums of P dP in v128 locals `acc[k]`: D = sum P dP per row (lanes
 * added 0 + 1 + 2 + 3; the 4 rows' at once on their transposed lanes), then pass 2: dp <-
 * bf16(P (dP - D) scale), s <- bf16(P), the rows' vectors in turn per vector index.
 */
function gradRowFinish(f: FunctionBuilder, s: number, dp: number, scales: readonly number[], rowBytes: number, r: { i: number; ptr: number; nv: number; q: number; v: number; t: number; acc: readonly number[]; dd: readonly number[]; l: readonly number[]; tr?: readonly number[]; tmp?: readonly number[]; src?: number; out?: number; exact?: number }): void {
  const { i, ptr, nv, q, v, t, acc, dd, l } = r;
  const rows = acc.length;
  if (rows === 1) {
    horizontal(f, acc[0], OP.f32_add);
    f.simd(SIMD.f32x4_splat).set(dd[0]);
  } else {
    if (rows !== ROWS || r.tr === undefined || r.tmp === undefined) {
      throw new Error(`gradRowFinish: rows must be 1, or ${ROWS} with the transpose locals tr and tmp; got ${rows} rows${r.tr === undefined ? ' without tr' : ''}${r.tmp === undefined ? ' without tmp' : ''}`);
    }
    horizontal4(f, acc, SIMD.f32x4_add, v, r.tr, r.tmp);
    dd.forEach((loc, k) => splatLane(f, v, k, loc));
  }
  scales.forEach((sc, k) => f.get(sc).simd(SIMD.f32x4_splat).set(l[k]));
  // exact: whether dS needs the NaN-handling rounding. D = sum P dP is NaN when a P or dP of the
  // row is (both passes read the same n columns); when no D and no dS scale is NaN, no operand of
  // dS = P (dP - D) scale is, so a NaN in dS can only come from inf - inf or 0 inf: a canonical NaN
  // (WebAssembly's rule for NaN results from non-NaN operands), which `roundBf16Plain` keeps as it
  // is, as `roundBf16` does. Then dS takes the plain rounding (5 operations, not 9): the same bits.
  const exact = r.exact;
  if (exact !== undefined) {
    if (rows === 1) f.get(dd[0]).get(dd[0]).simd(SIMD.f32x4_ne).simd(SIMD.v128_any_true);
    else f.get(v).get(v).simd(SIMD.f32x4_ne).simd(SIMD.v128_any_true);
    for (const sc of scales) f.get(sc).get(sc).op(F32_NE).op(OP.i32_or);
    f.set(exact);
  }
  // (P read at src, its bf16 rounding written at s: both s unless the caller reads P elsewhere,
  // src moving in ptr and the s row in out, then)
  const apart = r.src !== undefined && r.out !== undefined;
  if (apart) {
    f.get(r.src!).set(ptr);
    f.get(s).set(r.out!);
  } else f.get(s).set(ptr);
  f.get(dp).set(q);
  const pass2 = (dsExact: boolean): void =>
    forLoop(f, i, nv, () => {
      for (let k = 0; k < rows; k++) {
        const at = k * rowBytes;
        f.get(ptr).simdMem(SIMD.v128_load, at).set(v);
        f.get(q).get(q).simdMem(SIMD.v128_load, at).get(dd[k]).simd(SIMD.f32x4_sub).get(v).simd(SIMD.f32x4_mul).get(l[k]).simd(SIMD.f32x4_mul);
        if (dsExact) roundBf16(f, t);
        else roundBf16Plain(f, t);
        f.simdMem(SIMD.v128_store, at);
        f.get(apart ? r.out! : ptr).get(v);
        roundBf16Plain(f, t);
        f.simdMem(SIMD.v128_store, at);
      }
      bump(f, ptr, 16);
      if (apart) bump(f, r.out!, 16);
      bump(f, q, 16);
    });
  if (exact !== undefined) perCase(f, exact, pass2);
  else pass2(true);
}

/** f32.ne (scalar). */
const F32_NE = 0x5c;

/**
 * Whether the gradient rows round dS without NaN handling where no NaN can reach it with a payload
 * (`gradRowFinish`; default; `TPUKIT_ATTN_DS_PLAIN=0`: always with it), read when a module is
 * built (the module cache's key holds it).
 */
export const gradRowSettings = { dsPlain: envSwitch('TPUKIT_ATTN_DS_PLAIN', true) };

/**
 * `gradRowsP(src, s, dp, n, bf16, scale0..scale3)`: `gradRow` for a block's 4 rows whose P the
 * forward pass kept (src holds it, f32, 0 at hidden keys: the rows of probs, or s after
 * `loadRows`; row k at src + k sp 4, bf16(P) written at s + k sp 4, its dP at dp + k sp 4, its
 * dS scale `scale k`: 0 for a row that sees no key), in lockstep: no logits, mask or
 * exp; per vector index the 4 rows' dP in turn (rounded to bf16 when `bf16`), 4 independent
 * chains of D = sum P dP, then `gradRowFinish` for the 4 rows. Each row's operations and their
 * order are those of one row.
 */
function buildGradRowsP(m: ModuleBuilder, sp: number, dsPlain: boolean): number {
  return m.addFunction('gradRowsP', ['i32', 'i32', 'i32', 'i32', 'i32', 'f32', 'f32', 'f32', 'f32'], [], (f) => {
    const [src, s, dp, n, bf16] = [0, 1, 2, 3, 4];
    const scales = [5, 6, 7, 8];
    const [i, ptr, nv, q, out] = [f.local('i32'), f.local('i32'), f.local('i32'), f.local('i32'), f.local('i32')];
    const V = (): number => f.local('v128');
    const [v, t, g] = [V(), V(), V()];
    const [acc, dd, l, tr, tmp] = Array.from({ length: 5 }, () => scales.map(V));
    f.get(n).i32Const(2).op(OP.i32_shr_u).set(nv);
    for (const a of acc) f.v128Const([0, 0, 0, 0]).set(a);
    f.get(src).set(ptr);
    f.get(dp).set(q);
    // (one loop per bf16 case: no branch per vector)
    const pass1 = (rounded: boolean): void =>
      forLoop(f, i, nv, () => {
        for (let k = 0; k < ROWS; k++) {
          f.get(ptr).simdMem(SIMD.v128_load, k * sp * 4).set(v);
          accumulatePdP(f, q, rounded, { v, g, t, acc: acc[k] }, k * sp * 4);
        }
        bump(f, ptr, 16);
        bump(f, q, 16);
      });
    perCase(f, bf16, pass1);
    gradRowFinish(f, s, dp, scales, sp * 4, { i, ptr, nv, q, v, t, acc, dd, l, tr, tmp, src, out, exact: dsPlain ? f.local('i32') : undefined });
  });
}

/**
 * Copies between a block's [4, sp] scratch rows and rows of probs [.., S] (row stride S floats),
 * for `rows` rows and the first n columns of each:
 * - `saveRows(src, dst, rows, n, S, z)`: dst row = src row up to min(n, S), zeros up to z (S: so
 *   each line of probs is written once; min(n, S): none)
 * - `loadRows(src, dst, rows, n, S)`: dst row = src row up to min(n, S), zeros up to n; dst rows
 *   rows..4 all zeros (padding rows: P = 0)
 */
function buildProbsRows(m: ModuleBuilder, sp: number): { saveRows: number; loadRows: number } {
  const build = (name: 'saveRows' | 'loadRows'): number =>
    m.addFunction(name, ['i32', 'i32', 'i32', 'i32', 'i32', ...(name === 'saveRows' ? (['i32'] as const) : [])], [], (f) => {
      const [src, dst, rows, n, S, z] = [0, 1, 2, 3, 4, 5];
      const [r, j, lim, four] = [f.local('i32'), f.local('i32'), f.local('i32'), f.local('i32')];
      const save = name === 'saveRows';
      const [srcRow, dstRow] = save ? [sp * 4, -1] : [-1, sp * 4];
      f.i32Const(ROWS).set(four);
      // lim = min(n, S): copied; then zeros from lim up to n (load) or S (save)
      f.get(n).get(S).get(n).get(S).op(OP.i32_lt_s).op(OP.select).set(lim);
      // (a vector loop while 4 more fit, then one by one: never past a row's end)
      const span = (from: number | null, to: number, body: (vec: boolean) => void): void => {
        if (from === null) f.i32Const(0).set(j);
        f.block().loop();
        f.get(j).i32Const(4).op(OP.i32_add).get(to).op(OP.i32_gt_s).brIf(1);
        body(true);
        f.get(j).i32Const(4).op(OP.i32_add).set(j);
        f.br(0);
        f.end().end();
        f.block().loop();
        f.get(j).get(to).op(OP.i32_ge_s).brIf(1);
        body(false);
        f.get(j).i32Const(1).op(OP.i32_add).set(j);
        f.br(0);
        f.end().end();
      };
      const at = (base: number): FunctionBuilder => f.get(base).get(j).i32Const(2).op(OP.i32_shl).op(OP.i32_add);
      // dst row's columns from j (null: 0) up to `upto` all zeros
      const zeros = (from: number | null, upto = n): void =>
        span(from, upto, (vec) => {
          at(dst);
          if (vec) f.v128Const([0, 0, 0, 0]).simdMem(SIMD.v128_store);
          else f.f32Const(0).mem(OP.f32_store);
        });
      forLoop(f, r, four, () => {
        f.get(r).get(rows).op(OP.i32_lt_s).if();
        span(null, lim, (vec) => {
          at(dst);
          at(src);
          if (vec) f.simdMem(SIMD.v128_load).simdMem(SIMD.v128_store);
          else f.mem(OP.f32_load).mem(OP.f32_store);
        });
        if (save) zeros(j, z);
        else {
          zeros(j);
          f.else();
          zeros(null);
        }
        f.end();
        for (const [ptr, row] of [[src, srcRow], [dst, dstRow]] as const) {
          f.get(ptr);
          if (row < 0) f.get(S).i32Const(2).op(OP.i32_shl);
          else f.i32Const(row);
          f.op(OP.i32_add).set(ptr);
        }
      });
    });
  return { saveRows: build('saveRows'), loadRows: build('loadRows') };
}

/** `memory.fill` (0xfc 11, memory 0): fills [dst, dst + bytes) with a byte value (stack: dst, value, bytes). */
const memoryFill = (f: FunctionBuilder): FunctionBuilder => f.op(0xfc, 0x0b, 0x00);

/** A scalar f32 at `addr + off` as lane 0 of a v128 (load32_zero). */
const loadScalar = (f: FunctionBuilder, addr: number, off: number): FunctionBuilder => f.get(addr).simdMem(SIMD.v128_load32_zero, off, 4);

/** Stores lane `lane` of the v128 on the stack (after the address) at `off`. */
const storeLane = (f: FunctionBuilder, off: number, lane: number): FunctionBuilder => f.simdMem(SIMD.v128_store32_lane, off, 4).op(lane);

/**
 * The staging kernels (operands into the kernels' padded layouts, rounded to bf16; results back):
 * - `stageRows(src, stride, rows, dst, rowsPadded)`: dst[r, 0..hp] = bf16(src + r*stride)[0..H], zero padded
 * - `stageCols(src, stride, rows, dst)`: BT panels (see `scores`) of bf16(src + r*stride)[h], rows padded to sp
 * - `unstageRows(src, rows, dst, stride)`: (dst + r*stride)[0..H] = src[r, 0..H]
 *
 * The staging kernels round in two passes (`twoPassConvert`, as the GEMM's packing kernels do):
 * the first without NaN handling (5 operations a vector, not `roundBf16`'s 9) while it sums its
 * source; only when that sum is NaN does the second pass stage the same rows again with
 * `roundBf16`, so the staged bytes are always the exact rounding's (`TPUKIT_ATTN_STAGE_NAN_PASS=0`
 * builds the one-pass kernels). A row's H values are read as whole vectors at 0, 4, .., and, when
 * H is not a multiple of 4 (and at least 4), one more vector of its last 4 values (they overlap the
 * one before it and are stored over the same places with the same bits); H < 4 goes one value at
 * a time. `stageCols` takes 4 rows (keys) at a time: their vectors transposed, one v128 store per
 * h of 4 keys' values (4 consecutive floats of a panel's row), rather than 4 lane stores per
 * vector; the rows past the last group of 4 one at a time.
 */
/** The vector starts (element offsets) of a staged row of H values: 0, 4, .. and H - 4 when H mod 4 is not 0; none for H < 4. */
const rowStarts = (H: number): number[] => (H < 4 ? [] : [...Array.from({ length: H >> 2 }, (_, c) => 4 * c), ...(H % 4 ? [H - 4] : [])]);

/** Rounds the v128 on the stack to bf16: exactly (`roundBf16`), or, in a two-pass kernel's first pass (`fast`), without NaN handling. */
function roundStaged(f: FunctionBuilder, t: number, fast: boolean): void {
  if (fast) convert(f, t, false, false, undefined, true);
  else roundBf16(f, t);
}

/**
 * Elements 0..H (H < 4) of a staged row one by one (rounded; summed into `acc` in the fast pass),
 * then zeros from `zerosFrom` up to hp; element h at dst + h * step.
 */
function stageScalars(f: FunctionBuilder, src: number, dst: number, t: number, x: number, acc: number, fast: boolean, H: number, hp: number, step: number, zerosFrom: number): void {
  for (let h = 0; h < (H < 4 ? H : 0); h++) {
    loadScalar(f, src, h * 4).set(x);
    if (fast) sumForNaN(f, acc, [x]);
    f.get(dst).get(x);
    roundStaged(f, t, fast);
    storeLane(f, h * step, 0);
  }
  for (let h = zerosFrom; h < hp; h++) f.get(dst).f32Const(0).mem(OP.f32_store, h * step);
}

/**
 * `nanPass`: the staging kernels round in two passes (default; `TPUKIT_ATTN_STAGE_NAN_PASS=0`:
 * one, with NaN handling), read when a module is built (part of its cache key: tests build both).
 */
export const stagingSettings = { nanPass: envSwitch('TPUKIT_ATTN_STAGE_NAN_PASS', true) };

function buildStaging(m: ModuleBuilder, H: number, hp: number, sp: number, nanPass: boolean): { stageRows: number; stageCols: number; unstageRows: number } {
  const full = H >> 2;
  const starts = rowStarts(H);
  /** `pass(fast)` once (exact) or as `twoPassConvert`'s two passes; `acc` the NaN check's sum. */
  const passes = (f: FunctionBuilder, acc: number, pass: (fast: boolean) => void): void => {
    if (nanPass) twoPassConvert(f, acc, pass);
    else pass(false);
  };
  const stageRows = m.addFunction('stageRows', ['i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [src, stride, rows, dst, rp] = [0, 1, 2, 3, 4];
    const [r, s, d] = [f.local('i32'), f.local('i32'), f.local('i32')];
    const [t, x, acc] = [f.local('v128'), f.local('v128'), f.local('v128')];
    // a row's vectors in groups of 4: loaded, summed (fast pass), rounded and stored
    const w = Array.from({ length: Math.min(4, starts.length) }, () => f.local('v128'));
    passes(f, acc, (fast) => {
      f.get(src).set(s);
      f.get(dst).set(d);
      forLoop(f, r, rows, () => {
        for (let g = 0; g < starts.length; g += 4) {
          const group = starts.slice(g, g + 4);
          group.forEach((h, j) => f.get(s).simdMem(SIMD.v128_load, h * 4).set(w[j]));
          if (fast) sumForNaN(f, acc, w.slice(0, group.length));
          group.forEach((h, j) => {
            f.get(d).get(w[j]);
            roundStaged(f, t, fast);
            f.simdMem(SIMD.v128_store, h * 4);
          });
        }
        stageScalars(f, s, d, t, x, acc, fast, H, hp, 4, H);
        bump(f, d, hp * 4);
        f.get(s).get(stride).op(OP.i32_add).set(s);
      });
    });
    // padding rows rows..rp: zeros
    f.get(dst).get(rows).i32Const(hp * 4).op(OP.i32_mul).op(OP.i32_add).set(d);
    forLoop(f, r, rp, () => {
      for (let c = 0; c < hp / 4; c++) f.get(d).v128Const([0, 0, 0, 0]).simdMem(SIMD.v128_store, c * 16);
      bump(f, d, hp * 4);
    }, rows);
  });
  const stageCols = m.addFunction('stageCols', ['i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [src, stride, rows, dst] = [0, 1, 2, 3];
    const [r, n, s, d, r4] = [f.local('i32'), f.local('i32'), f.local('i32'), f.local('i32'), f.local('i32')];
    const [t, x, acc] = [f.local('v128'), f.local('v128'), f.local('v128')];
    const [w, tmp, out] = [0, 1, 2].map(() => [0, 1, 2, 3].map(() => f.local('v128')));
    const p = [0, 1, 2, 3].map(() => f.local('i32'));
    // r4: the rows in groups of 4 (H >= 4), the rest one at a time
    if (starts.length) f.get(rows).i32Const(-4).op(OP.i32_and).set(r4);
    else f.i32Const(0).set(r4);
    passes(f, acc, (fast) => {
      // groups of 4 keys (r, r + 1, r + 2, r + 3: lanes r mod 8.. of their panel): per vector
      // start h, the 4 rows' vectors transposed into 4 vectors of 4 keys' values at h..h + 3
      f.get(src).set(s);
      f.i32Const(0).set(r);
      f.block().get(r).get(r4).op(OP.i32_ge_s).brIf(0).loop();
      // d = dst + (r >> 3) hp 32 + (r & 4) 4; p[j] = s + j stride
      f.get(dst).get(r).i32Const(3).op(OP.i32_shr_u).i32Const(hp * 32).op(OP.i32_mul).op(OP.i32_add);
      f.get(r).i32Const(4).op(OP.i32_and).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(d);
      p.forEach((pj, j) => (j === 0 ? f.get(s) : f.get(p[j - 1]).get(stride).op(OP.i32_add)).set(pj));
      for (const h of starts) {
        p.forEach((pj, j) => f.get(pj).simdMem(SIMD.v128_load, h * 4).set(w[j]));
        if (fast) sumForNaN(f, acc, w);
        for (const x4 of w) {
          f.get(x4);
          roundStaged(f, t, fast);
          f.set(x4);
        }
        transpose4(f, w, out, tmp);
        out.forEach((o, l) => f.get(d).get(o).simdMem(SIMD.v128_store, (h + l) * 32));
      }
      for (let h = H; h < hp; h++) f.get(d).v128Const([0, 0, 0, 0]).simdMem(SIMD.v128_store, h * 32);
      f.get(p[3]).get(stride).op(OP.i32_add).set(s);
      f.get(r).i32Const(4).op(OP.i32_add).tee(r).get(r4).op(OP.i32_lt_s).brIf(0);
      f.end().end();
      // the rows left (fewer than 4, or all of them for H < 4), one at a time: each vector's 4 lanes stored apart
      f.get(dst).get(r4).i32Const(3).op(OP.i32_shr_u).i32Const(hp * 32).op(OP.i32_mul).op(OP.i32_add);
      f.get(r4).i32Const(7).op(OP.i32_and).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(d);
      forLoop(f, r, rows, () => {
        for (const h of starts) {
          f.get(s).simdMem(SIMD.v128_load, h * 4).set(x);
          if (fast) sumForNaN(f, acc, [x]);
          f.get(x);
          roundStaged(f, t, fast);
          f.set(x);
          for (let l = 0; l < 4; l++) storeLane(f.get(d).get(x), (h + l) * 32, l);
        }
        stageScalars(f, s, d, t, x, acc, fast, H, hp, 32, H);
        // next column of the panel, or the first of the next panel
        bump(f, d, 4);
        f.get(r).i32Const(7).op(OP.i32_and).i32Const(7).op(OP.i32_eq).if();
        bump(f, d, hp * 32 - 32);
        f.end();
        f.get(s).get(stride).op(OP.i32_add).set(s);
      }, r4);
    });
    // padding rows (keys) rows..sp: zeros in their lanes of every h
    f.i32Const(sp).set(n);
    forLoop(f, r, n, () => {
      for (let h = 0; h < hp; h++) f.get(d).f32Const(0).mem(OP.f32_store, h * 32);
      bump(f, d, 4);
      f.get(r).i32Const(7).op(OP.i32_and).i32Const(7).op(OP.i32_eq).if();
      bump(f, d, hp * 32 - 32);
      f.end();
    }, rows);
  });
  const unstageRows = m.addFunction('unstageRows', ['i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [src, rows, dst, stride] = [0, 1, 2, 3];
    const r = f.local('i32');
    forLoop(f, r, rows, () => {
      for (let c = 0; c < full; c++) f.get(dst).get(src).simdMem(SIMD.v128_load, c * 16).simdMem(SIMD.v128_store, c * 16);
      for (let h = full * 4; h < H; h++) f.get(dst).get(src).mem(OP.f32_load, h * 4).mem(OP.f32_store, h * 4);
      bump(f, src, hp * 4);
      f.get(dst).get(stride).op(OP.i32_add).set(dst);
    });
  });
  return { stageRows, stageCols, unstageRows };
}

/**
 * `direct`: the products that end a result's rows store them there (default; `TPUKIT_ATTN_DIRECT=0`:
 * into the scratch, then `unstageRows`): P V the forward's O, dS K the backward's dQ, a block's 4
 * rows at a time where all 4 are real rows; the last query head's last `transGemm` dK and dV, keys
 * 0..floor4(S). The rows left (T and S mod 4) are unstaged. Only where a result's row is its
 * scratch row's first H values (H a multiple of 8: no padding columns). Read when a module is
 * built (the module cache's key holds it).
 */
export const resultSettings = { direct: envSwitch('TPUKIT_ATTN_DIRECT', true) };

/** Whether a module for head dim H (padded to hp) stores results in place (`resultSettings`). */
const directResults = (H: number, hp: number): boolean => resultSettings.direct && H === hp;

/** The job descriptor (i32 slots from the byte address the item drivers are given) they read; attention.ts writes it. */
export const DESC = {
  T: 0, N: 1, S: 2, K: 3, G: 4, TP: 5, CAUSAL: 6, BF16: 7, SCALE: 8,
  /** raw operands and results (byte addresses): q, k, v, out | dOut, ml | lse, dq, dk, dv */
  QR: 9, KR: 10, VR: 11, OR: 12, ML: 13, DQR: 14, DKR: 15, DVR: 16,
  /** row strides in bytes of the query-shaped and key-shaped operands */
  QSTRIDE: 17, KSTRIDE: 18,
  /** thread 0's scratch, bytes per thread */
  SCRATCH: 19, SCRATCH_BYTES: 20,
  /** offsets inside a thread's scratch, one slot per `SCRATCH` region (21..33) */
  OFF: 21,
  /**
   * the mask (byte addresses; MR 0 when there is none): mask bytes [B|1, N|1, T, S], one flag
   * byte per (mask item, padded row) set where the row sees no key, TP of them per item; the
   * byte strides of a batch item and of a head in both (0 where the mask broadcasts); a row of
   * zero bytes (the mask of a row that sees no key)
   */
  MR: 34, FR: 35, MB: 36, MN: 37, FB: 38, FN: 39, ZR: 40,
  /**
   * 1: P is kept (`saveProbs`): the forward writes it, f32 [B, N, T, S], at the raw slot after
   * lse (DQR's); the backward reads it from the residual slot (ML's) instead of recomputing it.
   * 2 (forward, `probsVisibleOnly`): as 1, but each block's rows only up to its last visible key's
   * panel (cols), no zeros past it (the backward reads no further)
   */
  PROBS: 41,
} as const;

/**
 * The scratch regions' order in `DESC.OFF` slots: Q, DO, KT, KB, V (or V^T), O (or dQ), DK, DV,
 * S and P (a block's 4 rows, forward only), ML, and chunks of rows of dS (dP first) and P
 * ([QB, sp], backward only: a backward block's S and P rows are its rows of these).
 */
export const SCRATCH = ['q', 'do', 'kt', 'kb', 'v', 'o', 'dk', 'dv', 's', 'p', 'ml', 'dsc', 'pc'] as const;
if (DESC.OFF + SCRATCH.length > DESC.MR) throw new Error('attentionModule: DESC.OFF slots overlap the mask slots');

interface Fns {
  scores: number;
  rowsTimes: number;
  transGemm: number;
  softmaxBlock: number;
  gradRow: number;
  gradRowsP: number;
  saveRows: number;
  loadRows: number;
  lseRows: number;
  stageRows: number;
  stageCols: number;
  unstageRows: number;
}

/**
 * The item drivers `fwdItem(item, tid, desc, next)` and `bwdItem(...)`: one (batch, key/value
 * head) item of the job in the descriptor at `desc`, with thread `tid`'s scratch; while its blocks
 * compute, they load one word of each cache line of item `next`'s operand rows, and of its result
 * rows unless `direct` (when next >= 0: the item the thread most likely takes next), so that its
 * staging and unstaging find them in the cache (BENCHMARKS.md, attn13). With P kept, the backward
 * also touches the rows of probs of the current item's next block, whatever `next` is (the last
 * item included). With `direct` (`resultSettings`) the products that end a result store its rows
 * there: P V and dS K a block's 4 rows of O or dQ when all 4 are real rows, the last query head's
 * last transGemm dK and dV for keys 0..floor4(S); only the rows past floor4(T) and floor4(S) are
 * unstaged from the scratch. Items are independent (each writes its own rows of the results), so
 * threads may take them in any order; `next` changes no result.
 */
function buildDrivers(m: ModuleBuilder, H: number, hp: number, sp: number, masked: boolean, fn: Fns, direct: boolean): void {
  for (const dir of ['fwd', 'bwd'] as const) {
    m.addFunction(`${dir}Item`, ['i32', 'i32', 'i32', 'i32'], [], (f) => {
      const [item, tid, desc, next] = [0, 1, 2, 3];
      const L = (): number => f.local('i32');
      const [b, kh, g, n, t0, r, t, cols, c, scr, T, S, N, K, G, tp, causal, bf16] = Array.from({ length: 18 }, L);
      const [koff, qoff, i, probs, prow, psrc] = [L(), L(), L(), L(), L(), L()];
      const [mbase, fbase, mrow] = [L(), L(), L()];
      // (direct) whether the block's 4 rows of O or dQ go straight into the result's rows: all 4 real
      const whole = L();
      // the next item's operand and result rows to touch (`touchRows`): its first key row's and
      // this head's first query row's offsets, the key rows touched so far, a row index and a row's
      // address, and the loaded words' xor (stored at the end, so that no load is dead)
      const [nkoff, nqoff, kr, tr, ra, touched] = [L(), L(), L(), L(), L(), L()];
      // the raw regions whose rows are touched: query-shaped (row stride QSTRIDE) and key-shaped (KSTRIDE); the
      // results' only where they are unstaged (a burst of stores at the item's end: BENCHMARKS.md, attn13). With
      // `direct` the products store them a block at a time among their other work, and stores into lines not in
      // the cache do not hold up the instructions after them as loads of such lines do (attn18)
      const touchQ = dir === 'fwd' ? [DESC.QR, ...(direct ? [] : [DESC.OR])] : [DESC.QR, DESC.OR, ...(direct ? [] : [DESC.DQR])];
      const touchK = dir === 'fwd' ? [DESC.KR, DESC.VR] : [DESC.KR, DESC.VR, ...(direct ? [] : [DESC.DKR, DESC.DVR])];
      // ROWS (a loop bound), and the forward's per-row arguments of softmaxBlock
      const four = L();
      const [rowC, rowM] = [[L(), L(), L(), L()], [L(), L(), L(), L()]];
      const rowNeg = [0, 1, 2, 3].map(() => f.local('f32'));
      // the backward's (P kept) dS scales of gradRowsP
      const rowScale = [0, 1, 2, 3].map(() => f.local('f32'));
      // the block's rows of S and P (dP, then dS): the forward's 4-row scratch, or the backward's rows of its chunks
      const [sb, pb] = [L(), L()];
      const scale = f.local('f32');
      const [rscale, neg] = [f.local('f32'), f.local('f32')];
      const off: Record<(typeof SCRATCH)[number], number> = Object.fromEntries(SCRATCH.map((k) => [k, L()])) as never;
      const slot = (k: number): FunctionBuilder => f.get(desc).mem(OP.i32_load, k * 4);
      for (const [loc, k] of [[T, DESC.T], [S, DESC.S], [N, DESC.N], [K, DESC.K], [G, DESC.G], [tp, DESC.TP], [causal, DESC.CAUSAL], [bf16, DESC.BF16], [probs, DESC.PROBS]] as const) slot(k).set(loc);
      f.get(desc).mem(OP.f32_load, DESC.SCALE * 4).set(scale);
      f.i32Const(ROWS).set(four);
      slot(DESC.SCRATCH);
      f.get(tid);
      slot(DESC.SCRATCH_BYTES).op(OP.i32_mul).op(OP.i32_add).set(scr);
      SCRATCH.forEach((k, j) => {
        f.get(scr);
        slot(DESC.OFF + j).op(OP.i32_add).set(off[k]);
      });
      f.get(item).get(K).op(OP.i32_div_u).set(b);
      f.get(item).get(b).get(K).op(OP.i32_mul).op(OP.i32_sub).set(kh);
      // koff = (b*S*K + kh) * H * 4: item (b, kh)'s first key row
      f.get(b).get(S).op(OP.i32_mul).get(K).op(OP.i32_mul).get(kh).op(OP.i32_add).i32Const(H * 4).op(OP.i32_mul).set(koff);
      // the next item (next >= 0): nkoff its first key row's offset (tr holds its batch index meanwhile; nqoff is formed per
      // query head below); no key rows touched yet
      f.i32Const(0).set(kr);
      f.i32Const(0).set(touched);
      f.get(next).i32Const(0).op(OP.i32_ge_s).if();
      f.get(next).get(K).op(OP.i32_div_u).set(tr);
      f.get(tr).get(S).op(OP.i32_mul).get(K).op(OP.i32_mul).get(next).get(tr).get(K).op(OP.i32_mul).op(OP.i32_sub).op(OP.i32_add).i32Const(H * 4).op(OP.i32_mul).set(nkoff);
      f.end();
      /**
       * Loads one word of every cache line of rows [from, to) (locals) of the raw regions in desc
       * slots `slots` from offset local `at` on (row stride in desc slot `stride`), xor-ing them into
       * `touched`: brings the next item's rows into the cache while this item computes
       * (WebAssembly has no prefetch instruction), so that its staging and unstaging do not wait
       * for memory. A row's H * 4 bytes: the words at 0, 64, ... and its last word.
       */
      const touchRows = (slots: readonly number[], stride: number, at: number, from: number, to: number): void => {
        if (H === 0) return; // (rows of no bytes)
        const offsets = [...Array.from({ length: Math.ceil((H * 4) / 64) }, (_, j) => 64 * j), ...((H * 4) % 64 === 4 ? [] : [H * 4 - 4])];
        forLoop(f, tr, to, () => {
          for (const sl of slots) {
            slot(sl).get(at).op(OP.i32_add).get(tr);
            slot(stride).op(OP.i32_mul).op(OP.i32_add).set(ra);
            offsets.forEach((o, j) => {
              f.get(ra).mem(OP.i32_load, o);
              if (j > 0) f.op(OP.i32_xor);
            });
            f.get(touched).op(OP.i32_xor).set(touched);
          }
        }, from);
      };
      /**
       * `unstageRows` of a result's `n` rows (local) from scratch `src` (local) into its raw slot `res` + `at` (local),
       * row stride in desc slot `stride`; with `direct`, only rows floor4(n)..n (the others were stored in place).
       */
      const unstageFrom = (src: number, n: number, res: number, at: number, stride: number): void => {
        if (!direct) {
          f.get(src).get(n);
          slot(res).get(at).op(OP.i32_add);
          slot(stride).call(fn.unstageRows);
          return;
        }
        f.get(src).get(n).i32Const(-ROWS).op(OP.i32_and).i32Const(hp * 4).op(OP.i32_mul).op(OP.i32_add);
        f.get(n).i32Const(ROWS - 1).op(OP.i32_and);
        slot(res).get(at).op(OP.i32_add).get(n).i32Const(-ROWS).op(OP.i32_and);
        slot(stride).op(OP.i32_mul).op(OP.i32_add);
        slot(stride).call(fn.unstageRows);
      };
      const stageKV = (dst: keyof typeof off, src: number, cols: boolean): void => {
        slot(src).get(koff).op(OP.i32_add);
        slot(DESC.KSTRIDE).get(S).get(off[dst]);
        if (cols) f.call(fn.stageCols);
        else f.i32Const(sp).call(fn.stageRows);
      };
      if (dir === 'fwd') {
        stageKV('kt', DESC.KR, true);
        stageKV('v', DESC.VR, false);
      } else {
        // (with P kept there is no Q K^T to form: K^T is not staged)
        f.get(probs).i32Const(0).op(OP.i32_eq).if();
        stageKV('kt', DESC.KR, true);
        f.end();
        stageKV('kb', DESC.KR, false);
        stageKV('v', DESC.VR, true);
        // (dK and dV are not zeroed: the first query head's first chunk's transGemm starts them at 0)
      }
      const stageQ = (dst: keyof typeof off, src: number): void => {
        slot(src).get(qoff).op(OP.i32_add);
        slot(DESC.QSTRIDE).get(T).get(off[dst]).get(tp).call(fn.stageRows);
      };
      // the i32 on the stack (a count of rows of probs [.., S] f32) times their bytes, S * 4
      const probsBytes = (): void => {
        f.get(S).op(OP.i32_mul).i32Const(4).op(OP.i32_mul);
      };
      // pushes the row index (b*N + n)*T + t (t a local, or null: the i32 on the stack), for the ML / lse slot
      const rowIndex = (tl: number | null): void => {
        if (tl !== null) f.get(tl);
        f.get(b).get(N).op(OP.i32_mul).get(n).op(OP.i32_add).get(T).op(OP.i32_mul).op(OP.i32_add);
      };
      forLoop(f, g, G, () => {
        f.get(kh).get(G).op(OP.i32_mul).get(g).op(OP.i32_add).set(n);
        // qoff = (b*T*N + n) * H * 4
        f.get(b).get(T).op(OP.i32_mul).get(N).op(OP.i32_mul).get(n).op(OP.i32_add).i32Const(H * 4).op(OP.i32_mul).set(qoff);
        // the next item's query head g: nqoff = (nb*T*N + nkh*G + g) * H * 4
        f.get(next).i32Const(0).op(OP.i32_ge_s).if();
        f.get(next).get(K).op(OP.i32_div_u).tee(tr).get(T).op(OP.i32_mul).get(N).op(OP.i32_mul);
        f.get(next).get(tr).get(K).op(OP.i32_mul).op(OP.i32_sub).get(G).op(OP.i32_mul).get(g).op(OP.i32_add).op(OP.i32_add).i32Const(H * 4).op(OP.i32_mul).set(nqoff);
        f.end();
        // this (b, n)'s mask rows and flags: base + b * batch stride + n * head stride
        for (const [loc, base, bs, ns] of masked ? ([[mbase, DESC.MR, DESC.MB, DESC.MN], [fbase, DESC.FR, DESC.FB, DESC.FN]] as const) : []) {
          slot(base).get(b);
          slot(bs).op(OP.i32_mul).op(OP.i32_add).get(n);
          slot(ns).op(OP.i32_mul).op(OP.i32_add).set(loc);
        }
        stageQ('q', DESC.QR);
        if (dir === 'bwd') stageQ('do', DESC.OR);
        // this head's first row of probs (used only when P is kept; each block moves it on ROWS rows)
        slot(dir === 'fwd' ? DESC.DQR : DESC.ML);
        f.i32Const(0);
        rowIndex(null);
        probsBytes();
        f.op(OP.i32_add).set(prow);
        f.i32Const(0).set(t0);
        f.block().loop();
        // cols = causal ? ceil8(max(1, min(S, t0 + 4))) : sp
        f.get(t0).i32Const(ROWS).op(OP.i32_add).tee(c).get(S).get(c).get(S).op(OP.i32_lt_s).op(OP.select).tee(c);
        f.i32Const(1).get(c).i32Const(1).op(OP.i32_ge_s).op(OP.select).i32Const(7).op(OP.i32_add).i32Const(-8).op(OP.i32_and);
        f.i32Const(sp).get(causal).op(OP.select).set(cols);
        // a block with a row that sees no key covers every key (that row's softmax is uniform)
        if (masked) f.get(fbase).get(t0).op(OP.i32_add).mem(OP.i32_load).if().i32Const(sp).set(cols).end();
        if (dir === 'fwd') {
          f.get(off.s).set(sb);
          f.get(off.p).set(pb);
        } else {
          for (const [loc, chunk] of [[sb, off.pc], [pb, off.dsc]] as const) f.get(chunk).get(t0).i32Const(QB - 1).op(OP.i32_and).i32Const(sp * 4).op(OP.i32_mul).op(OP.i32_add).set(loc);
        }
        const rowBlock = (k: keyof typeof off): void => {
          f.get(off[k]).get(t0).i32Const(hp * 4).op(OP.i32_mul).op(OP.i32_add);
        };
        // rowsTimes' out, nk (cols) and row stride for the block's rows of O (forward) or dQ (backward, `res` their raw
        // slot): with `direct`, the result's rows t0.. themselves when the block's 4 rows are all real, else the
        // scratch's (unstaged at the end)
        const resultBlock = (res: number): void => {
          if (direct) {
            f.get(T).get(t0).op(OP.i32_sub).i32Const(ROWS).op(OP.i32_ge_s).set(whole);
            slot(res).get(qoff).op(OP.i32_add).get(t0);
            slot(DESC.QSTRIDE).op(OP.i32_mul).op(OP.i32_add);
            rowBlock('o');
            f.get(whole).op(OP.select);
            f.get(cols);
            slot(DESC.QSTRIDE).i32Const(hp * 4).get(whole).op(OP.select);
          } else {
            rowBlock('o');
            f.get(cols).i32Const(hp * 4);
          }
          f.call(fn.rowsTimes);
        };
        // The next item's rows while this one computes: query rows t0..min(t0 + 4, T) of each query head, and the key rows from kr on,
        // 4 a block (the rest in the last block of the last head). Backward with P kept, also the next block's rows of probs up to its
        // visible keys (causal) or all of them.
        f.get(next).i32Const(0).op(OP.i32_ge_s).if();
        f.get(t0).i32Const(ROWS).op(OP.i32_add).tee(c).get(T).get(c).get(T).op(OP.i32_lt_s).op(OP.select).set(c);
        touchRows(touchQ, DESC.QSTRIDE, nqoff, t0, c);
        f.get(kr).i32Const(ROWS).op(OP.i32_add).tee(c).get(S).get(c).get(S).op(OP.i32_lt_s).op(OP.select).set(c);
        f.get(t0).i32Const(ROWS).op(OP.i32_add).get(tp).op(OP.i32_ge_s).get(g).i32Const(1).op(OP.i32_add).get(G).op(OP.i32_eq).op(OP.i32_and).if().get(S).set(c).end();
        touchRows(touchK, DESC.KSTRIDE, nkoff, kr, c);
        f.get(c).set(kr);
        f.end();
        if (dir === 'bwd') {
          f.get(probs).if();
          // c = bytes per row, t = the last row + 1
          f.get(cols).i32Const(8).op(OP.i32_add).tee(c).get(S).get(c).get(S).op(OP.i32_lt_s).op(OP.select).get(S).get(causal).op(OP.select).i32Const(4).op(OP.i32_mul).set(c);
          f.get(t0).i32Const(2 * ROWS).op(OP.i32_add).tee(t).get(T).get(t).get(T).op(OP.i32_lt_s).op(OP.select).set(t);
          f.get(t0).i32Const(ROWS).op(OP.i32_add).set(tr);
          f.get(prow).i32Const(ROWS * 4).get(S).op(OP.i32_mul).op(OP.i32_add).set(r);
          f.block().get(tr).get(t).op(OP.i32_ge_s).brIf(0).loop();
          f.i32Const(0).set(i);
          f.loop();
          f.get(r).get(i).op(OP.i32_add).mem(OP.i32_load).get(touched).op(OP.i32_xor).set(touched);
          f.get(i).i32Const(64).op(OP.i32_add).tee(i).get(c).op(OP.i32_lt_s).brIf(0);
          f.end();
          f.get(r).get(c).op(OP.i32_add).i32Const(4).op(OP.i32_sub).mem(OP.i32_load).get(touched).op(OP.i32_xor).set(touched);
          f.get(r).get(S).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(r);
          f.get(tr).i32Const(1).op(OP.i32_add).tee(tr).get(t).op(OP.i32_lt_s).brIf(0);
          f.end().end();
          f.end();
        }
        // the block's rows of P (backward, kept) or its logits. Kept P is read where it is (psrc = its
        // rows of probs) when its rows are [4, sp] as the scratch's: S = sp and the block's 4 rows all
        // real (its values up to cols are the copy's, zeros at hidden keys included); else copied.
        if (dir === 'bwd') {
          f.get(probs).if();
          f.get(prow).set(psrc);
          f.get(S).i32Const(sp).op(OP.i32_ne).get(t0).i32Const(ROWS).op(OP.i32_add).get(T).op(OP.i32_gt_s).op(OP.i32_or).if();
          f.get(prow).get(sb).get(T).get(t0).op(OP.i32_sub).get(cols).get(S).call(fn.loadRows);
          f.get(sb).set(psrc);
          f.end();
          f.else();
        }
        rowBlock('q');
        f.get(off.kt).get(sb).get(cols).i32Const(3).op(OP.i32_shr_u).call(fn.scores);
        if (dir === 'bwd') f.end();
        if (dir === 'bwd') {
          rowBlock('do');
          f.get(off.v).get(pb).get(cols).i32Const(3).op(OP.i32_shr_u).call(fn.scores);
        }
        // row r's t, c (its visible keys), neg and dS scale (rscale), and mask row (masked modules)
        const rowSetup = (): void => {
          f.get(t0).get(r).op(OP.i32_add).set(t);
          // c = t >= T ? 0 : causal ? min(S, t + 1) : S
          f.get(t).i32Const(1).op(OP.i32_add).tee(c).get(S).get(c).get(S).op(OP.i32_lt_s).op(OP.select);
          f.get(S).get(causal).op(OP.select);
          f.i32Const(0).get(t).get(T).op(OP.i32_lt_s).op(OP.select).set(c);
          // the row's mask: its mask bytes, or (a row that sees no key) zeros with neg 0 over all
          // S keys: uniform P, and the backward pass scales dS by 0; padding rows read zeros
          // (their c is 0: nothing is visible anyway). Unmasked modules ignore mrow and neg.
          f.f32Const(MASKED).set(neg);
          f.get(scale).set(rscale);
          if (masked) {
            slot(DESC.ZR).set(mrow);
            f.get(t).get(T).op(OP.i32_lt_s).if();
            f.get(fbase).get(t).op(OP.i32_add).mem(OP.i32_load8_u, 0, 1).if();
            f.get(S).set(c);
            f.f32Const(0).set(neg);
            if (dir === 'bwd') f.f32Const(0).set(rscale);
            f.else();
            f.get(mbase).get(t).get(S).op(OP.i32_mul).op(OP.i32_add).set(mrow);
            f.end().end();
          }
        };
        if (dir === 'fwd') {
          // the block's 4 rows in one softmaxBlock call: each row's c, mask row and neg first
          for (let rr = 0; rr < ROWS; rr++) {
            f.i32Const(rr).set(r);
            rowSetup();
            f.get(c).set(rowC[rr]);
            f.get(mrow).set(rowM[rr]);
            f.get(neg).set(rowNeg[rr]);
          }
          // ((max, sum) of rows t0.. into this thread's scratch: lseRows takes them after the last block)
          f.get(sb).get(pb).get(cols).get(scale);
          f.get(off.ml).get(t0).i32Const(8).op(OP.i32_mul).op(OP.i32_add);
          f.get(bf16).get(probs);
          for (const loc of [...rowC, ...rowM, ...rowNeg]) f.get(loc);
          f.call(fn.softmaxBlock);
        }
        if (dir === 'bwd') {
          // P kept: the rows' P is in s already (0 at hidden keys, uniform in a row that sees none):
          // the block's 4 rows in one gradRowsP call, each row's dS scale first
          f.get(probs).if();
          for (let rr = 0; rr < ROWS; rr++) {
            f.i32Const(rr).set(r);
            rowSetup();
            f.get(rscale).set(rowScale[rr]);
          }
          f.get(psrc).get(sb).get(pb).get(cols).get(bf16);
          for (const loc of rowScale) f.get(loc);
          f.call(fn.gradRowsP);
          f.else();
        }
        if (dir === 'bwd') forLoop(f, r, four, () => {
          rowSetup();
          // the row's S and P (dP) addresses
          f.get(sb).get(r).i32Const(sp * 4).op(OP.i32_mul).op(OP.i32_add);
          f.get(pb).get(r).i32Const(sp * 4).op(OP.i32_mul).op(OP.i32_add);
          f.get(c).get(cols).get(rscale);
          slot(DESC.ML);
          // Padding rows (t >= T) load row T-1's value, which the select below discards: no read past the caller's lse.
          f.get(t).get(T).i32Const(1).op(OP.i32_sub).get(t).get(T).op(OP.i32_lt_s).op(OP.select);
          rowIndex(null);
          f.i32Const(4).op(OP.i32_mul).op(OP.i32_add).mem(OP.f32_load);
          f.f32Const(0).get(t).get(T).op(OP.i32_lt_s).op(OP.select);
          f.get(bf16).get(mrow).get(neg).call(fn.gradRow);
        });
        if (dir === 'bwd') f.end();
        if (dir === 'fwd') {
          // P kept: the block's real rows (f32, left in s by softmaxBlock) into probs
          f.get(probs).if();
          // (zeros up to S, or with PROBS 2 none: up to min(cols, S))
          f.get(sb).get(prow).get(T).get(t0).op(OP.i32_sub).get(cols).get(S);
          f.get(S).get(cols).get(S).get(cols).op(OP.i32_lt_s).op(OP.select).get(S).get(probs).i32Const(2).op(OP.i32_eq).op(OP.select);
          f.call(fn.saveRows);
          f.end();
          f.get(pb).get(off.v);
          resultBlock(DESC.OR);
        } else {
          f.get(pb).get(off.kb);
          resultBlock(DESC.DQR);
          // masked jobs' transGemm reads every key of every row (their rows may reach any key):
          // the block's rows of dS and P zero from cols to sp (nothing else writes there)
          if (masked) {
            forLoop(f, r, four, () => {
              for (const loc of [sb, pb]) {
                f.get(loc).get(r).i32Const(sp * 4).op(OP.i32_mul).op(OP.i32_add).get(cols).i32Const(4).op(OP.i32_mul).op(OP.i32_add);
                f.i32Const(0).i32Const(sp).get(cols).op(OP.i32_sub).i32Const(4).op(OP.i32_mul);
                memoryFill(f);
              }
            });
          }
          // a full chunk, or the last: dK += dS^T Q and dV += P^T dO over its rows
          f.get(t0).i32Const(ROWS).op(OP.i32_add).tee(c).i32Const(QB - 1).op(OP.i32_and).op(OP.i32_eqz).get(c).get(tp).op(OP.i32_ge_s).op(OP.i32_or).if();
          for (const [a, b, out] of [[off.dsc, off.q, off.dk], [off.pc, off.do, off.dv]] as const) {
            f.get(a).get(b).get(out);
            if (masked) f.i32Const(0);
            else f.get(causal);
            f.get(t0).i32Const(-QB).op(OP.i32_and);
            f.get(c).get(t0).i32Const(-QB).op(OP.i32_and).op(OP.i32_sub);
            // fresh: the first chunk (t0 < QB) of the first query head (g = 0)
            f.get(g).get(t0).i32Const(-QB).op(OP.i32_and).op(OP.i32_or).op(OP.i32_eqz);
            // with `direct`, the last chunk (c >= tp) of the last query head stores keys 0..floor4(S) into the
            // result's rows (dk, dv: their raw slot + koff, row stride KSTRIDE); the rest stays in out (unstaged at the end)
            slot(out === off.dk ? DESC.DKR : DESC.DVR).get(koff).op(OP.i32_add);
            if (direct) {
              f.get(S).i32Const(-ROWS).op(OP.i32_and).i32Const(0);
              f.get(c).get(tp).op(OP.i32_ge_s).get(g).i32Const(1).op(OP.i32_add).get(G).op(OP.i32_eq).op(OP.i32_and).op(OP.select);
            } else f.i32Const(0);
            slot(DESC.KSTRIDE);
            f.call(fn.transGemm);
          }
          f.end();
        }
        f.get(prow).i32Const(ROWS);
        probsBytes();
        f.op(OP.i32_add).set(prow);
        f.get(t0).i32Const(ROWS).op(OP.i32_add).tee(t0).get(tp).op(OP.i32_lt_s).brIf(0);
        f.end().end();
        if (dir === 'fwd') {
          // the logsumexp of the T real rows into ML[row]
          f.get(off.ml);
          slot(DESC.ML);
          f.i32Const(0);
          rowIndex(null);
          f.i32Const(4).op(OP.i32_mul).op(OP.i32_add).get(T).call(fn.lseRows);
        }
        // O or dQ: the rows from the scratch (with `direct`, only those past floor4(T): the blocks before wrote theirs in place)
        unstageFrom(off.o, T, dir === 'fwd' ? DESC.OR : DESC.DQR, qoff, DESC.QSTRIDE);
      });
      // (the touched words' xor into this thread's scratch, where the next item stages its q over it)
      f.get(off.q).get(touched).mem(OP.i32_store);
      if (dir === 'bwd') {
        // (with `direct`, only the keys past floor4(S): the last transGemm wrote the others in place)
        for (const [src, dst] of [[off.dk, DESC.DKR], [off.dv, DESC.DVR]] as const) unstageFrom(src, S, dst, koff, DESC.KSTRIDE);
      }
    });
  }
}

export interface AttentionKernels {
  scores(a: number, bt: number, out: number, nb: number): void;
  rowsTimes(a: number, b: number, out: number, nk: number, stride: number): void;
  transGemm(a: number, b: number, out: number, causal: number, t0: number, rows: number, fresh: number, dst: number, dkeys: number, dstride: number): void;
  softmaxBlock(s: number, p: number, n: number, scale: number, mlOut: number, bf16: number, keep: number, c0: number, c1: number, c2: number, c3: number, mrow0: number, mrow1: number, mrow2: number, mrow3: number, neg0: number, neg1: number, neg2: number, neg3: number): void;
  gradRow(s: number, dp: number, c: number, n: number, scale: number, lse: number, bf16: number, mrow: number, neg: number): void;
  gradRowsP(src: number, s: number, dp: number, n: number, bf16: number, scale0: number, scale1: number, scale2: number, scale3: number): void;
  saveRows(src: number, dst: number, rows: number, n: number, S: number, z: number): void;
  loadRows(src: number, dst: number, rows: number, n: number, S: number): void;
  lseRows(src: number, dst: number, n: number): void;
  stageRows(src: number, stride: number, rows: number, dst: number, rowsPadded: number): void;
  stageCols(src: number, stride: number, rows: number, dst: number): void;
  unstageRows(src: number, rows: number, dst: number, stride: number): void;
  fwdItem(item: number, tid: number, desc: number, next: number): void;
  bwdItem(item: number, tid: number, desc: number, next: number): void;
  expv(src: number, dst: number, nv: number, upper: number): void;
}

/** A compiled kernel module, its bytes (for worker threads, which compile their own) and a process-unique id. */
export interface AttentionModule {
  readonly module: WasmModule;
  readonly bytes: Uint8Array;
  readonly id: number;
}

const modules = new Map<string, AttentionModule>();

/** How many kernel modules have been compiled (one per head dim, padded key count and variant). */
export const compiledAttentionModules = (): number => modules.size;

/**
 * The compiled kernel module for head dim `H` (padded to hp, a multiple of 8) and padded key
 * count `sp` (a multiple of 8), cached; the query count is the job's (any T runs on one
 * module); `masked`: with the mask code (a job without a mask runs a module without it).
 */
export function attentionModule(H: number, sp: number, relaxed: boolean, shared: boolean, masked = false, maxPages = MAX_PAGES): AttentionModule {
  const hp = Math.ceil(Math.max(H, 1) / 8) * 8;
  if (sp % 8 !== 0 || sp === 0) throw new RangeError(`attentionModule: sp (${sp}) must be a positive multiple of 8`);
  const nanPass = stagingSettings.nanPass;
  const key = `${H},${sp},${relaxed},${shared},${masked},${maxPages},${nanPass},${gradRowSettings.dsPlain},${resultSettings.direct}`;
  let mod = modules.get(key);
  if (!mod) {
    const m = new ModuleBuilder();
    m.importMemory('env', 'mem', shared ? { initial: 1, maximum: maxPages, shared: true } : { initial: 1 });
    const fns: Fns = {
      scores: buildScores(m, hp, sp, relaxed),
      rowsTimes: buildRowsTimes(m, hp, sp, relaxed),
      transGemm: buildTransGemm(m, hp, sp, relaxed),
      softmaxBlock: buildSoftmaxBlock(m, sp, masked, relaxed),
      gradRow: buildGradRow(m, masked, relaxed, gradRowSettings.dsPlain),
      gradRowsP: buildGradRowsP(m, sp, gradRowSettings.dsPlain),
      ...buildProbsRows(m, sp),
      lseRows: buildLseRows(m),
      ...buildStaging(m, H, hp, sp, nanPass),
    };
    buildDrivers(m, H, hp, sp, masked, fns, directResults(H, hp));
    buildExp(m, relaxed);
    const bytes = m.toBytes();
    mod = { module: new WA.Module(bytes), bytes, id: modules.size + 1 };
    modules.set(key, mod);
  }
  return mod;
}
