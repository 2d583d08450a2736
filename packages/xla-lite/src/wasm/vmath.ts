/**
 * Vectorised float32 transcendentals for the WebAssembly kernels. WebAssembly has no exp, log
 * or sin instruction, so, as XLA's CPU and GPU backends do, each function is a range reduction
 * plus a short polynomial, emitted inline (four lanes at a time, f32x4) with `VecBuilder`.
 * The polynomials are the classic minimax fits for float32 (Cephes' `expf`, `logf`, `tanhf`,
 * `sinf`/`cosf` coefficients); everything else is derived here:
 *
 * - exp: x clamped to [-104, 89] (pmin/pmax), n = nearest(x·log2 e) (by the 1.5·2^23 rounding
 *   trick, which also gives n's integer bits), r = (x − n·C1) − n·C2 (C1 has 9
 *   significant bits, so n·C1 is exact), degree-6 polynomial, then scaled by 2^n as two
 *   exponent-field multiplies 2^(n>>1)·2^(n−(n>>1)) so overflow gives +Inf and the subnormal
 *   range is rounded once. NaN propagates.
 * - log: subnormals pre-scaled by 2^23; x = m·2^e with m in [√½, √2); degree-9 polynomial in
 *   m − 1; log(0) = −Inf, log(x<0) = NaN, log(+Inf) = +Inf.
 * - tanh: odd polynomial for |x| < 0.625, else sign(x)·(1 − 2/(exp(2|x|)+1)) (computed only
 *   for vectors with such a lane; in loop kernels, optionally by a call to a function of the
 *   module computing it, `TanhOptions`); its exp is `vexp`'s, trimmed to a non-negative
 *   argument clamped at 40 (`vexpTanh`: the same values).
 * - logistic: e = exp(−|x|); 1/(1+e) for x ≥ 0, e/(1+e) for x < 0 (as the reference does).
 * - log1p: u = 1+x; x when u = 1, else log(u)·x/(u−1) (Goldberg's correction).
 * - expm1: u = exp(x); x when u = 1, −1 when u−1 = −1, +Inf when u = +Inf, else
 *   (u−1)·(x/log(u)) (Kahan's correction).
 * - sin, cos: the quadrant q = nearest(|x|·2/π) and r = |x| − q·π/2 are computed in float64
 *   (f64x2, π/2 as a 33-bit head plus a tail, exact products for |x| < 2^19), then r is
 *   rounded to float32 for the polynomials. Lanes with |x| ≥ 2^19, Inf or NaN take the host's
 *   Math.sin/Math.cos (an imported function, per vector, rare).
 *
 * Error bounds, measured in float32 ulps against Math.fround(Math.f(x)) and asserted by
 * test/wasmMath.test.ts over dense sweeps, log-spaced magnitudes down to the subnormals and
 * random float32 values: exp ≤ 2, log ≤ 2, tanh ≤ 2, logistic ≤ 3, log1p ≤ 3, expm1 ≤ 3,
 * sin/cos ≤ 2 (the largest errors seen were 1, 1, 1, 2, 2, 2, 1, 1 ulp). Special values
 * (NaN, ±Inf, ±0, overflow to Inf, underflow through the subnormals to 0) match Math.*.
 */
import { wasm } from '@tpukit/core/internal';
import { type E, VecBuilder } from './vecBuilder';

const { SIMD } = wasm;

/** Indices of the imported host functions (f64 -> f64) the sin/cos fallback calls. */
export interface HostMath {
  sin: number;
  cos: number;
}

const LOG2E = 1.4426950408889634;
const LN2_HI = 0.693359375;
const LN2_LO = -2.12194440e-4;
const SQRTHF = 0.707106781186547524;
const ROUND_MAGIC = 12582912; // 1.5·2^23
const ROUND_MAGIC_BITS = 0x4b400000;

/**
 * exp's core for a clamped argument `xc`: t = xc·log2 e + 1.5·2^23, whose low mantissa bits are n
 * = nearest(xc·log2 e) as an integer (the sum's ulp is 1, so it rounds to the nearest integer,
 * ties to even, as f32x4.nearest, which spares the costly i32x4.trunc_sat: |xc·log2 e| < 151, far
 * inside the 2^22 range), and y = exp(xc − n·ln 2) by Cephes' polynomial; exp(xc) = y·2^n, which
 * the callers scale.
 */
function expReduced(b: VecBuilder, xc: E): { t: E; y: E } {
  const t = b.let(b.add(b.mul(xc, b.k(LOG2E)), b.k(ROUND_MAGIC)));
  const n = b.let(b.sub(t, b.k(ROUND_MAGIC)));
  const r = b.let(b.sub(b.sub(xc, b.mul(n, b.k(LN2_HI))), b.mul(n, b.k(LN2_LO))));
  const p = b.horner(r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1]);
  return { t, y: b.add(b.add(b.mul(p, b.mul(r, r)), r), b.k(1)) };
}

export function vexp(b: VecBuilder, x0: E, guardUnderflow = true): E {
  // Lanes below -104 (a masked score's -1e9) give exactly 0, as the clamped path does there;
  // they compute from 0 instead (x & ~mask, then the result & ~mask), because the clamped
  // path's last product (about 2^-150) is a float32 underflow, which x86 cores handle with a
  // slow microcode assist per lane (it was most of the extra time of a causal-masked softmax
  // row kernel over a plain one). Callers whose argument cannot be that small skip the guard.
  const x1 = b.let(x0);
  const under = guardUnderflow ? b.let(b.op(SIMD.f32x4_lt, x1, b.k(-104))) : null;
  const x = under ? b.op(SIMD.v128_andnot, x1, under) : x1;
  // The clamp with pmax/pmin (one instruction each on x64, where the IEEE min/max take about
  // eight): pmax(x, k) = x < k ? k : x and pmin(x, k) = k < x ? k : x keep a NaN x, as min/max
  // would, and equal them elsewhere (the bounds are not zeros, so no ±0 question arises).
  const xc = b.let(b.op(SIMD.f32x4_pmin, b.op(SIMD.f32x4_pmax, x, b.k(-104)), b.k(89)));
  const { t, y } = expReduced(b, xc);
  const ni = b.let(b.op(SIMD.i32x4_sub, t, b.ki(ROUND_MAGIC_BITS)));
  const n1 = b.let(b.op(SIMD.i32x4_shr_s, ni, () => void b.f.i32Const(1)));
  const n2 = b.op(SIMD.i32x4_sub, ni, n1);
  const pow2 = (k: E): E => b.op(SIMD.i32x4_shl, b.op(SIMD.i32x4_add, k, b.ki(127)), () => void b.f.i32Const(23));
  const e = b.mul(b.mul(y, pow2(n1)), pow2(n2));
  return b.let(under ? b.op(SIMD.v128_andnot, e, under) : e);
}

/**
 * exp of an argument known to be <= 0 or NaN (a value minus the maximum of a set holding it, as
 * a softmax's x − max(x)): `vexp`'s values for every such argument, 6 instructions fewer per
 * vector. (1) No clamp: pmin(x, 89) leaves x <= 0 as it is, and pmax(x, −104) leaves what the
 * underflow guard left (lanes below −104 computed from 0, the rest >= −104 or NaN). (2) The
 * scaling by 2^n (n in [−150, 0]) as y·2^(n+64)·2^−64: n + 64 >= −86, so 2^(n+64) is a normal
 * float32 made from t's bits in two integer steps (as `vexpTanh` does) and y·2^(n+64) is exact;
 * the multiply by 2^−64 then rounds once, to round(y·2^n), which is what `vexp`'s
 * y·2^(n>>1)·2^(n−(n>>1)) gives (its first product exact too). A NaN y stays NaN.
 */
export function vexpNonPositive(b: VecBuilder, x0: E): E {
  const x1 = b.let(x0);
  const under = b.let(b.op(SIMD.f32x4_lt, x1, b.k(-104)));
  const xc = b.let(b.op(SIMD.v128_andnot, x1, under));
  const { t, y } = expReduced(b, xc);
  // 2^(n+64)'s bits: (n + 64 + 127) << 23, n + 64 + 127 = t's bits − (1.5·2^23's bits − 191).
  const pow2 = b.op(SIMD.i32x4_shl, b.op(SIMD.i32x4_sub, t, b.ki(ROUND_MAGIC_BITS - 191)), () => void b.f.i32Const(23));
  return b.let(b.op(SIMD.v128_andnot, b.mul(b.mul(y, pow2), b.k(2 ** -64)), under));
}

export function vlog(b: VecBuilder, x0: E): E {
  const x = b.let(x0);
  // Subnormals: scale into the normal range first.
  const sub = b.let(b.op(SIMD.f32x4_lt, x, b.k(1.1754943508222875e-38)));
  const xs = b.let(b.sel(sub, b.mul(x, b.k(8388608)), x));
  const e0 = b.op(SIMD.i32x4_sub, b.op(SIMD.i32x4_shr_s, xs, () => void b.f.i32Const(23)), b.ki(126));
  const e1 = b.op(SIMD.i32x4_sub, e0, b.and(sub, b.ki(23)));
  const m0 = b.let(b.or(b.and(xs, b.ki(0x007fffff)), b.ki(0x3f000000)));
  const lt = b.let(b.op(SIMD.f32x4_lt, m0, b.k(SQRTHF)));
  // e -= 1 where m < sqrt(1/2) (the mask is -1 there), and m = 2m - 1 there, m - 1 elsewhere.
  const e = b.let(b.op(SIMD.f32x4_convert_i32x4_s, b.op(SIMD.i32x4_add, e1, lt)));
  const m = b.let(b.sub(b.add(m0, b.and(m0, lt)), b.k(1)));
  const z = b.let(b.mul(m, m));
  const p = b.horner(m, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1]);
  let y = b.mul(b.mul(p, m), z);
  y = b.add(y, b.mul(e, b.k(LN2_LO)));
  y = b.sub(y, b.mul(z, b.k(0.5)));
  let r = b.add(b.add(m, y), b.mul(e, b.k(LN2_HI)));
  r = b.sel(b.op(SIMD.f32x4_eq, x, b.k(0)), b.k(-Infinity), r);
  r = b.sel(b.op(SIMD.f32x4_lt, x, b.k(0)), b.k(NaN), r);
  r = b.sel(b.op(SIMD.f32x4_eq, x, b.k(Infinity)), b.k(Infinity), r);
  r = b.sel(b.op(SIMD.f32x4_ne, x, x), x, r);
  return b.let(r);
}

const SIGN = 0x80000000 | 0;

/**
 * Where tanh's exp path clamps its argument 2|x| (`vexpTanh`): past 2|x| = 18.03, exp(2|x|) + 1
 * passes 2^26 and 1 − 2/(exp(2|x|)+1) rounds to 1, so every argument from here up to `vexp`'s
 * own clamp (89, or +Inf past 88.72) gives 1, as this one does; and 2^round(40·log2 e) = 2^58
 * scales in one exponent-field multiply.
 */
export const TANH_EXP_MAX = 40;

/**
 * exp(x) for tanh's x = 2|x'| (>= 0, or NaN): `vexp`'s steps without those a non-negative
 * argument cannot need (the lower clamp, the underflow guard) and, the argument clamped at
 * TANH_EXP_MAX (`vtanhLarge` gives the same value for anything above), the scaling by 2^n as
 * ONE exponent-field multiply (n <= 58): y·2^n1·2^n2 with n1 + n2 = n is y·2^n exactly (no
 * overflow, no subnormal), so the values are `vexp`'s wherever tanh can tell (7 fewer
 * instructions per vector, and |x| computed once: test/wasmMath.test.ts checks every float32
 * exponent against the generic formula).
 */
function vexpTanh(b: VecBuilder, x0: E): E {
  // pmin(x, k) = k < x ? k : x: a NaN x stays NaN.
  const xc = b.let(b.op(SIMD.f32x4_pmin, x0, b.k(TANH_EXP_MAX)));
  const { t, y } = expReduced(b, xc);
  // 2^n's bits: (n + 127) << 23, n + 127 = t's bits − (1.5·2^23's bits − 127).
  const pow2 = b.op(SIMD.i32x4_shl, b.op(SIMD.i32x4_sub, t, b.ki(ROUND_MAGIC_BITS - 127)), () => void b.f.i32Const(23));
  return b.let(b.mul(y, pow2));
}

/** tanh's path for |x| >= 0.625 (and NaN): sign(x)·(1 − 2/(exp(2|x|)+1)); `a`: |x| when the caller has it. */
export function vtanhLarge(b: VecBuilder, x0: E, a0?: E): E {
  const x = b.let(x0);
  const a = a0 ?? b.let(b.abs(x));
  const s = vexpTanh(b, b.add(a, a));
  return b.let(b.or(b.sub(b.k(1), b.div(b.k(2), b.add(s, b.k(1)))), b.and(x, b.ki(SIGN))));
}

/** How a kernel emits tanh's exp path (`vtanh`). */
export interface TanhOptions {
  /** A function of the module computing `vtanhLarge` for one vector (v128 -> v128): called instead of the inline code. */
  call?: number;
  /** An i32 local counting the vectors that took the exp path. */
  count?: number;
  /** With `defer` ('defer' walks, `loopKernel.ts`): a v128 local of lane masks, ANDed with each vector's |x| < 0.625 (false for NaN); the polynomial alone is the value, with no exp path. */
  smallLanes?: number;
  /** With `smallLanes`, for a partial vector: the mask of its valid lanes (the others read past the row and do not count). */
  validLanes?: E;
  /** ('defer' walks are chosen by the kernel: `emitKernel.ts`.) */
  defer?: boolean;
}

export function vtanh(b: VecBuilder, x0: E, opts: TanhOptions = {}): E {
  const f = b.f;
  const x = b.let(x0);
  const a = b.let(b.abs(x));
  const z = b.let(b.mul(x, x));
  const small = b.let(b.add(b.mul(b.mul(b.horner(z, [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1]), z), x), x));
  const isSmall = b.let(b.op(SIMD.f32x4_lt, a, b.k(0.625)));
  if (opts.smallLanes !== undefined) {
    // No branch: the polynomial is the value where every lane is small, and the kernel computes
    // the vector again otherwise (a lane outside the mask never counts).
    const acc = opts.smallLanes;
    b.setTo(acc, b.and(b.get(acc), opts.validLanes ? b.or(isSmall, b.op(SIMD.v128_not, opts.validLanes)) : isSmall));
    return small;
  }
  // The exp path only when some lane needs it (|x| >= 0.625 or NaN): activations such as a
  // tanh-GELU's are mostly small, so most vectors skip it. Same values either way.
  const out = f.local('v128');
  b.op(SIMD.v128_any_true, b.op(SIMD.v128_not, isSmall))();
  f.if();
  const { call, count } = opts;
  if (count !== undefined) f.get(count).i32Const(1).op(wasm.OP.i32_add).set(count);
  const large = call !== undefined ? () => void (x(), f.call(call)) : vtanhLarge(b, x, a);
  b.setTo(out, b.sel(isSmall, small, large));
  f.else();
  b.setTo(out, small);
  f.end();
  return b.get(out);
}

export function vlogistic(b: VecBuilder, x0: E): E {
  const x = b.let(x0);
  const e = vexp(b, b.op(SIMD.f32x4_neg, b.abs(x)));
  const d = b.let(b.add(b.k(1), e));
  return b.let(b.sel(b.op(SIMD.f32x4_ge, x, b.k(0)), b.div(b.k(1), d), b.div(e, d)));
}

export function vlog1p(b: VecBuilder, x0: E): E {
  const x = b.let(x0);
  const u = b.let(b.add(b.k(1), x));
  const lu = vlog(b, u);
  let r = b.mul(lu, b.div(x, b.sub(u, b.k(1))));
  r = b.sel(b.op(SIMD.f32x4_eq, u, b.k(Infinity)), lu, r);
  r = b.sel(b.op(SIMD.f32x4_eq, u, b.k(1)), x, r);
  return b.let(r);
}

export function vexpm1(b: VecBuilder, x0: E): E {
  const x = b.let(x0);
  const u = vexp(b, x);
  const um1 = b.let(b.sub(u, b.k(1)));
  let r = b.mul(um1, b.div(x, vlog(b, u)));
  r = b.sel(b.op(SIMD.f32x4_eq, u, b.k(Infinity)), u, r);
  r = b.sel(b.op(SIMD.f32x4_eq, um1, b.k(-1)), um1, r);
  r = b.sel(b.op(SIMD.f32x4_eq, u, b.k(1)), x, r);
  return b.let(r);
}

/** |x| below this takes the vector path of sin/cos (q·PIO2_HI exact in float64). */
const TRIG_LIMIT = 524288;
const TWO_OVER_PI = 0.6366197723675814;
const PIO2_HI = 1.5707963267341256; // 33 significant bits
const PIO2_LO = 6.077100506506192e-11; // pi/2 - PIO2_HI

function vtrig(b: VecBuilder, host: HostMath, x0: E, cos: boolean): E {
  const f = b.f;
  const x = b.let(x0);
  const out = f.local('v128');
  // Any lane out of range (or Inf/NaN): the host function, lane by lane.
  b.op(SIMD.v128_any_true, b.op(SIMD.v128_not, b.op(SIMD.f32x4_lt, b.abs(x), b.k(TRIG_LIMIT))))();
  f.if();
  x();
  f.set(out);
  for (let lane = 0; lane < 4; lane++) {
    f.get(out);
    x();
    f.simd(SIMD.f32x4_extract_lane).op(lane).op(0xbb /* f64.promote_f32 */).call(cos ? host.cos : host.sin).op(0xb6 /* f32.demote_f64 */);
    f.simd(SIMD.f32x4_replace_lane).op(lane).set(out);
  }
  f.else();
  const a = b.let(b.abs(x));
  const q = b.let(b.op(SIMD.f32x4_nearest, b.mul(a, b.k(TWO_OVER_PI))));
  // r = a - q*pi/2 in float64, two lanes at a time.
  const hiHalf = (v: E): E => b.shuffle(v, v, [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15]);
  const reduce = (av: E, qv: E): E => {
    const ad = b.op(SIMD.f64x2_promote_low_f32x4, av);
    const qd = b.let(b.op(SIMD.f64x2_promote_low_f32x4, qv));
    const k1 = (c: number): E => () => {
      const bits = new Uint32Array(new Float64Array([c, c]).buffer);
      f.v128Const([bits[0], bits[1], bits[2], bits[3]]);
    };
    const rd = b.op(SIMD.f64x2_sub, b.op(SIMD.f64x2_sub, ad, b.op(SIMD.f64x2_mul, qd, k1(PIO2_HI))), b.op(SIMD.f64x2_mul, qd, k1(PIO2_LO)));
    return b.op(SIMD.f32x4_demote_f64x2_zero, rd);
  };
  const rlo = b.let(reduce(a, q));
  const rhi = b.let(reduce(hiHalf(a), hiHalf(q)));
  const r = b.let(b.shuffle(rlo, rhi, [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]));
  const z = b.let(b.mul(r, r));
  const sinP = b.let(b.add(b.mul(b.mul(b.horner(z, [-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1]), z), r), r));
  const cosP = b.let(b.add(b.sub(b.mul(b.mul(b.horner(z, [2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2]), z), z), b.mul(z, b.k(0.5))), b.k(1)));
  const qi = b.let(b.op(SIMD.i32x4_trunc_sat_f32x4_s, q));
  // Odd quadrants swap sin and cos; the sign flips in quadrants 2,3 (sin) or 1,2 (cos).
  const odd = b.op(SIMD.i32x4_shr_s, b.op(SIMD.i32x4_shl, qi, () => void f.i32Const(31)), () => void f.i32Const(31));
  if (!cos) {
    const flip = b.op(SIMD.i32x4_shl, b.and(qi, b.ki(2)), () => void f.i32Const(30));
    b.setTo(out, b.xor(b.xor(b.sel(odd, cosP, sinP), flip), b.and(x, b.ki(SIGN))));
  } else {
    const flip = b.op(SIMD.i32x4_shl, b.and(b.op(SIMD.i32x4_add, qi, b.ki(1)), b.ki(2)), () => void f.i32Const(30));
    b.setTo(out, b.xor(b.sel(odd, sinP, cosP), flip));
  }
  f.end();
  return b.get(out);
}

export const vsin = (b: VecBuilder, host: HostMath, x: E): E => vtrig(b, host, x, false);
export const vcos = (b: VecBuilder, host: HostMath, x: E): E => vtrig(b, host, x, true);
