/**
 * WebAssembly SIMD packing kernels, added to the GEMM module: they turn an operand already
 * copied into wasm memory (float32 or bf16 storage, row-major with strides) into the GEMM's
 * panel layout (panel p, then k, then R row values) and do the MXU's input conversion on the way:
 * float32 is rounded to bf16 (round to nearest even, NaN kept quiet), bf16 is widened, and the
 * `_flush` variants flush subnormal inputs to signed zero (the TPU's conversion).
 *
 * Two layouts cover every matmul operand without a gather:
 *   'rc' rows contiguous (row stride 1): each k yields R/4 vector loads;
 *   'kc' k contiguous (k stride 1): 4x4 blocks are loaded and transposed with shuffles.
 * They handle full panels and (for 'kc') k in steps of 4; `pack.ts` finishes edges in
 * TypeScript. Signature: (src, rs, ks, panels, k, kp, dst), addresses in bytes, strides in
 * elements; `k` is the number of k values to pack (a multiple of 4 for 'kc').
 */
import { type FunctionBuilder, type ModuleBuilder, OP, SIMD } from '../../wasm/assembler';

export type PackLayout = 'rc' | 'kc';

export function packFunctionName(layout: PackLayout, R: number, bf16: boolean, flush: boolean): string {
  return `pack_${layout}_${R}_${bf16 ? 'bf16' : 'f32'}${flush ? '_flush' : ''}`;
}

const splat = (x: number): [number, number, number, number] => [x, x, x, x];

/**
 * Converts the v128 on the stack (f32 bits or widened bf16 bits), left on the stack; uses v128
 * local `t` and, rounding f32 bits, local `nan` (a new local of `f` when not given). With
 * `finite` the NaN handling is left out (5 operations a vector instead of 9): the caller makes
 * sure no NaN is among the values, or converts them again without it (the packing kernels'
 * two passes, see `addPackFunctions`); every other value rounds the same.
 */
export function convert(f: FunctionBuilder, t: number, bf16: boolean, flush: boolean, nan?: number, finite = false): void {
  f.set(t);
  if (flush) {
    // t = exponent==0 ? (t & sign) : t
    f.get(t).v128Const(splat(0x80000000)).simd(SIMD.v128_and);
    f.get(t);
    f.get(t).v128Const(splat(0x7f800000)).simd(SIMD.v128_and).v128Const(splat(0)).simd(SIMD.i32x4_eq);
    f.simd(SIMD.v128_bitselect).set(t);
  }
  if (bf16) {
    f.get(t);
    return;
  }
  if (finite) {
    // t + 0x7fff + ((t >>> 16) & 1), upper 16 bits
    f.get(t).get(t).i32Const(16).simd(SIMD.i32x4_shr_u).v128Const(splat(1)).simd(SIMD.v128_and).v128Const(splat(0x7fff)).simd(SIMD.i32x4_add);
    f.simd(SIMD.i32x4_add);
    f.v128Const(splat(0xffff0000)).simd(SIMD.v128_and);
    return;
  }
  // NaN: t quieted (t | 0x400000); else rounded to nearest even: t + 0x7fff + ((t >>> 16) & 1).
  // Both as one sum, (t | (nan & 0x400000)) + (bias & ~nan), then one mask of the upper 16 bits
  // (9 operations a vector, none of them a bitselect, which is three instructions on x64).
  nan ??= f.local('v128');
  f.get(t).get(t).simd(SIMD.f32x4_ne).set(nan);
  f.get(t).get(nan).v128Const(splat(0x00400000)).simd(SIMD.v128_and).simd(SIMD.v128_or);
  f.get(t).i32Const(16).simd(SIMD.i32x4_shr_u).v128Const(splat(1)).simd(SIMD.v128_and).v128Const(splat(0x7fff)).simd(SIMD.i32x4_add);
  f.get(nan).simd(SIMD.v128_andnot);
  f.simd(SIMD.i32x4_add);
  f.v128Const(splat(0xffff0000)).simd(SIMD.v128_and);
}

/** Pushes 4 elements starting at byte address local `addr` + `offset` as f32 bits (bf16 widened). */
function load4(f: FunctionBuilder, addr: number, bf16: boolean, offset = 0): void {
  if (bf16) f.get(addr).simdMem(SIMD.v128_load16x4_u, offset, 8).i32Const(16).simd(SIMD.i32x4_shl);
  else f.get(addr).simdMem(SIMD.v128_load, offset, 16);
}

/** 32-bit lane shuffle of the two v128 on the stack: lanes 0-3 from the first, 4-7 from the second (also attentionModule.ts's). */
export function shuffle32(f: FunctionBuilder, lanes: readonly [number, number, number, number]): void {
  f.simd(SIMD.i8x16_shuffle);
  for (const l of lanes) for (let b = 0; b < 4; b++) f.op(l * 4 + b);
}

/**
 * `out_bf16[_flush](src, ldc, rows, cols8, dst)`: rounds the f32 accumulator (row stride `ldc`
 * elements) to bf16 storage, 8 columns at a time (`cols8` a multiple of 8), writing a dense
 * [rows, cols] u16 matrix at `dst` whose row stride is `cols` = the caller's N (passed as ldd).
 */
export function addOutputFunctions(m: ModuleBuilder): void {
  for (const flush of [false, true]) {
    m.addFunction(`out_bf16${flush ? '_flush' : ''}`, ['i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
      const [src, ldc, rows, cols8, dst, ldd] = [0, 1, 2, 3, 4, 5];
      const r = f.local('i32');
      const j = f.local('i32');
      const s = f.local('i32');
      const d = f.local('i32');
      const t = f.local('v128');
      const lo = f.local('v128');
      f.get(rows).op(OP.i32_eqz).if().op(OP.return).end();
      f.get(cols8).op(OP.i32_eqz).if().op(OP.return).end();
      f.i32Const(0).set(r);
      f.loop();
      f.get(src).get(r).get(ldc).op(OP.i32_mul).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(s);
      f.get(dst).get(r).get(ldd).op(OP.i32_mul).i32Const(2).op(OP.i32_mul).op(OP.i32_add).set(d);
      f.i32Const(0).set(j);
      f.loop();
      f.get(s).simdMem(SIMD.v128_load, 0, 16);
      convert(f, t, false, flush);
      f.i32Const(16).simd(SIMD.i32x4_shr_u).set(lo);
      f.get(d);
      f.get(lo);
      f.get(s).simdMem(SIMD.v128_load, 16, 16);
      convert(f, t, false, flush);
      f.i32Const(16).simd(SIMD.i32x4_shr_u);
      f.simd(SIMD.i16x8_narrow_i32x4_u);
      f.simdMem(SIMD.v128_store, 0, 16);
      f.get(s).i32Const(32).op(OP.i32_add).set(s);
      f.get(d).i32Const(16).op(OP.i32_add).set(d);
      f.get(j).i32Const(8).op(OP.i32_add).tee(j).get(cols8).op(OP.i32_lt_u).brIf(0);
      f.end();
      f.get(r).i32Const(1).op(OP.i32_add).tee(r).get(rows).op(OP.i32_lt_u).brIf(0);
      f.end();
    });
  }
}

/**
 * The panel heights the packing kernels exist for: 4 and 8 (B panels of NR = 8 columns, A panels
 * of a 4-row micro-kernel) and 5 (A panels of the 5 x 8 micro-kernel, see gemmModule.ts).
 */
export const PACK_ROWS: readonly number[] = [4, 5, 8];

/** Stores lane `lane` of the v128 on the stack at byte address `d + offset` (the address pushed first). */
function storeLane(f: FunctionBuilder, offset: number, lane: number): void {
  f.simdMem(SIMD.v128_store32_lane, offset, 4);
  f.op(lane);
}

/** Locals of a packing kernel (see `addPackFunctions`). */
interface PackLocals {
  src: number;
  rsB: number;
  ksB: number;
  panels: number;
  K: number;
  kp: number;
  dst: number;
  p: number;
  k: number;
  s: number;
  d: number;
  t: number;
  /** Four v128 temporaries. */
  v: number[];
  /** 'kc': a pointer per row of the panel. */
  rp: number[];
  /** The fast pass's NaN check: the sum of every source vector (f32), NaN if one of them holds a NaN. */
  acc: number;
}

/**
 * Adds the v128 locals `raw` (source vectors, f32) into a fast pass's NaN check, the f32 sum in
 * v128 local `acc`: acc + (((raw0 + raw1) + raw2) + ...), a chain over `raw` and then one add
 * into acc, so the sum's own dependency chain grows by one add per call (also the fused
 * attention's staging, attentionModule.ts).
 */
export function sumForNaN(f: FunctionBuilder, acc: number, raw: readonly number[]): void {
  f.get(acc);
  let n = 0;
  for (const x of raw) {
    f.get(x);
    if (++n > 1) f.simd(SIMD.f32x4_add);
  }
  f.simd(SIMD.f32x4_add).set(acc);
}

/**
 * A kernel's conversion of f32 sources to bf16 in two passes (the packing kernels' and the fused
 * attention's staging): `pass(true)` converts without NaN handling (`convert`'s `finite`) and
 * adds every source vector into the f32 sum in v128 local `acc` (`sumForNaN`; 0 on entry, as a
 * fresh local is); only when a lane of the sum is NaN does `pass(false)` convert everything
 * again with it, over the same bytes, so the result is always the exact conversion's. A NaN among
 * the sources makes the sum NaN; so do infinities of opposite signs meeting in one lane, source
 * values or partial sums that overflowed: then the second pass costs time only.
 */
export function twoPassConvert(f: FunctionBuilder, acc: number, pass: (fast: boolean) => void): void {
  pass(true);
  f.get(acc).get(acc).simd(SIMD.f32x4_ne).simd(SIMD.v128_any_true).if();
  pass(false);
  f.end();
}

/**
 * A step's source vectors are loaded first (`loadRaw`, into locals), added into the NaN check
 * in the fast pass, then converted (`convertRaw`, without NaN handling in the fast pass).
 */
function loadRaw(f: FunctionBuilder, addr: number, bf16: boolean, offset: number, into: number): void {
  load4(f, addr, bf16, offset);
  f.set(into);
}

function convertRaw(f: FunctionBuilder, l: PackLocals, x: number, bf16: boolean, flush: boolean, fast: boolean): void {
  f.get(x);
  convert(f, l.t, bf16, flush, undefined, fast);
}

/**
 * The 'rc' layout's main loop: P panels at a time (P * R rows = 16, a 64-byte line of f32, or 20
 * for R = 5), so each k reads its source rows once, whole vectors, one conversion per 4 elements,
 * and hands each panel its rows (shuffled across vectors where a panel starts mid-vector; a row
 * past a group of 4 stored from its lane). Advances `p` past the panels it packed.
 */
function emitRcBlocks(f: FunctionBuilder, R: number, bf16: boolean, flush: boolean, fast: boolean, l: PackLocals): void {
  const P = R === 8 ? 2 : 4;
  const V = (P * R) / 4;
  const esz = bf16 ? 2 : 4;
  const w: number[] = [];
  for (let i = 0; i < V; i++) w.push(f.local('v128'));
  // One destination pointer per panel, each advanced by a k row (R floats) per k: the stores
  // take constant offsets from them, the loads constant offsets from the source pointer.
  const dp: number[] = [];
  for (let j = 0; j < P; j++) dp.push(j === 0 ? l.d : f.local('i32'));
  const pst = f.local('i32');
  f.get(l.kp).i32Const(R * 4).op(OP.i32_mul).set(pst);
  f.block().loop();
  f.get(l.panels).get(l.p).op(OP.i32_sub).i32Const(P).op(OP.i32_lt_u).brIf(1);
  f.get(l.src).get(l.p).i32Const(R).op(OP.i32_mul).get(l.rsB).op(OP.i32_mul).op(OP.i32_add).set(l.s);
  f.get(l.dst).get(l.p).get(pst).op(OP.i32_mul).op(OP.i32_add).set(l.d);
  for (let j = 1; j < P; j++) f.get(dp[j - 1]).get(pst).op(OP.i32_add).set(dp[j]);
  f.i32Const(0).set(l.k);
  f.loop(); // k
  for (let i = 0; i < V; i++) loadRaw(f, l.s, bf16, 4 * i * esz, w[i]);
  if (fast) sumForNaN(f, l.acc, w);
  for (let i = 0; i < V; i++) {
    convertRaw(f, l, w[i], bf16, flush, fast);
    f.set(w[i]);
  }
  for (let j = 0; j < P; j++) {
    for (let q = 0; q < Math.floor(R / 4); q++) {
      const g = j * R + 4 * q;
      f.get(dp[j]);
      f.get(w[g >> 2]);
      if (g % 4 !== 0) {
        const o = g % 4;
        f.get(w[(g >> 2) + 1]);
        shuffle32(f, [o, o + 1, o + 2, o + 3]);
      }
      f.simdMem(SIMD.v128_store, q * 16, 4);
    }
    for (let r = Math.floor(R / 4) * 4; r < R; r++) {
      const g = j * R + r;
      f.get(dp[j]);
      f.get(w[g >> 2]);
      storeLane(f, r * 4, g % 4);
    }
  }
  f.get(l.s).get(l.ksB).op(OP.i32_add).set(l.s);
  for (let j = 0; j < P; j++) f.get(dp[j]).i32Const(R * 4).op(OP.i32_add).set(dp[j]);
  f.get(l.k).i32Const(1).op(OP.i32_add).tee(l.k).get(l.K).op(OP.i32_lt_u).brIf(0);
  f.end();
  f.get(l.p).i32Const(P).op(OP.i32_add).set(l.p);
  f.br(0);
  f.end().end();
}

/**
 * One pass over the kernel's whole work: 'rc' P panels at a time (`emitRcBlocks`), then the
 * panels left one at a time (both layouts). `fast`: the NaN-free pass (see `addPackFunctions`).
 */
function emitPackPass(f: FunctionBuilder, layout: PackLayout, R: number, bf16: boolean, flush: boolean, fast: boolean, l: PackLocals): void {
  const { src, rsB, ksB, panels, K, kp, dst, p, k, s, d, t, v, rp } = l;
  const esz = bf16 ? 2 : 4;
  f.i32Const(0).set(p);
  if (layout === 'rc') emitRcBlocks(f, R, bf16, flush, fast, l);
  f.get(p).get(panels).op(OP.i32_lt_u).if(); // panels left (one at a time)
  f.loop(); // panels
  // s = src + p*R*rsB (first row of the panel, k = 0); d = dst + p*kp*R*4
  f.get(src).get(p).i32Const(R).op(OP.i32_mul).get(rsB).op(OP.i32_mul).op(OP.i32_add).set(s);
  f.get(dst).get(p).get(kp).op(OP.i32_mul).i32Const(R * 4).op(OP.i32_mul).op(OP.i32_add).set(d);
  // 'kc': a pointer per row of the panel (rows rsB bytes apart), advanced along k.
  if (layout === 'kc') rp.forEach((x, i) => (i === 0 ? f.get(s) : f.get(rp[i - 1]).get(rsB).op(OP.i32_add)).set(x));
  f.i32Const(0).set(k);
  f.loop(); // k
  const groups = Math.floor(R / 4);
  if (layout === 'rc') {
    // R/4 contiguous vectors at s + q*4*esz; store at d + 16q. Rows past the last group
    // of 4 (R = 5) come with one more vector of the panel's last 4 rows, stored over
    // the same places (the rows in both get the same bits twice).
    const starts: number[] = [];
    for (let q = 0; q < groups; q++) starts.push(4 * q);
    if (R % 4 !== 0) starts.push(R - 4);
    starts.forEach((r0, j) => loadRaw(f, s, bf16, r0 * esz, v[j]));
    if (fast) sumForNaN(f, l.acc, v.slice(0, starts.length));
    starts.forEach((r0, j) => {
      f.get(d);
      convertRaw(f, l, v[j], bf16, flush, fast);
      f.simdMem(SIMD.v128_store, r0 * 4, 4);
    });
    f.get(s).get(ksB).op(OP.i32_add).set(s);
    f.get(d).i32Const(R * 4).op(OP.i32_add).set(d);
    f.get(k).i32Const(1).op(OP.i32_add).tee(k).get(K).op(OP.i32_lt_u).brIf(0);
  } else {
    // For each group of 4 rows: load rows x (k..k+3), transpose, store 4 k-vectors.
    for (let q = 0; q < groups; q++) {
      for (let i = 0; i < 4; i++) loadRaw(f, rp[q * 4 + i], bf16, 0, v[i]);
      if (fast) sumForNaN(f, l.acc, v);
      for (let i = 0; i < 4; i++) {
        convertRaw(f, l, v[i], bf16, flush, fast);
        f.set(v[i]);
      }
      // 4x4 transpose: rows r0..r3 of lanes k0..k3 -> vectors per k of lanes r0..r3.
      const [x0, x1, x2, x3] = v;
      const y0 = t;
      // dst = the 32-bit lanes `lanes` of (a, b)
      const pick = (a: number, b: number, lanes: [number, number, number, number], dst: number): void => {
        f.get(a).get(b);
        shuffle32(f, lanes);
        f.set(dst);
      };
      pick(x0, x1, [0, 4, 1, 5], y0); // r0k0 r1k0 r0k1 r1k1
      pick(x0, x1, [2, 6, 3, 7], x1); // r0k2 r1k2 r0k3 r1k3
      pick(x2, x3, [0, 4, 1, 5], x0); // r2k0 r3k0 r2k1 r3k1
      pick(x2, x3, [2, 6, 3, 7], x3); // r2k2 r3k2 r2k3 r3k3
      // k0: y0[0,1] x0[0,1]; k1: y0[2,3] x0[2,3]; k2: x1[0,1] x3[0,1]; k3: x1[2,3] x3[2,3]
      const out: Array<[number, number, [number, number, number, number]]> = [
        [y0, x0, [0, 1, 4, 5]],
        [y0, x0, [2, 3, 6, 7]],
        [x1, x3, [0, 1, 4, 5]],
        [x1, x3, [2, 3, 6, 7]],
      ];
      out.forEach(([lo, hi, lanes], j) => {
        f.get(d);
        f.get(lo).get(hi);
        shuffle32(f, lanes);
        f.simdMem(SIMD.v128_store, j * R * 4 + q * 16, 16);
      });
    }
    // A row past the last group of 4 (R = 5): its 4 k values go to lane r of 4 k-vectors.
    for (let r = groups * 4; r < R; r++) {
      loadRaw(f, rp[r], bf16, 0, v[0]);
      if (fast) sumForNaN(f, l.acc, [v[0]]);
      convertRaw(f, l, v[0], bf16, flush, fast);
      f.set(v[0]);
      for (let j = 0; j < 4; j++) {
        f.get(d).get(v[0]);
        storeLane(f, j * R * 4 + r * 4, j);
      }
    }
    for (const x of rp) f.get(x).i32Const(4 * esz).op(OP.i32_add).set(x);
    f.get(d).i32Const(4 * R * 4).op(OP.i32_add).set(d);
    f.get(k).i32Const(4).op(OP.i32_add).tee(k).get(K).op(OP.i32_lt_u).brIf(0);
  }
  f.end();
  f.get(p).i32Const(1).op(OP.i32_add).tee(p).get(panels).op(OP.i32_lt_u).brIf(0);
  f.end();
  f.end();
}

/**
 * `touch_rows(src, rowBytes, stride, rows) -> i32`: reads one 32-bit word (the first) of every
 * 64-byte line that rows [src + r * stride, + rowBytes), r < rows, overlap, and returns their
 * xor (so the loads are kept). A packing chunk whose source lies in memory written long before
 * (an arena's operand: out of the caches by the time its dot runs) is swept this way first: the
 * lines then arrive as one sequential stream that the hardware prefetcher follows, where the
 * packing kernel's own reads ('rc': one 64-byte piece of every k row, 2 KiB or more apart) each
 * wait for memory in turn (BENCHMARKS.md, gemmstep).
 */
export function addTouchFunction(m: ModuleBuilder): void {
  m.addFunction('touch_rows', ['i32', 'i32', 'i32', 'i32'], ['i32'], (f) => {
    const [src, rowBytes, stride, rows] = [0, 1, 2, 3];
    const acc = f.local('i32');
    const a = f.local('i32');
    const end = f.local('i32');
    f.get(rows).op(OP.i32_eqz).if().i32Const(0).op(OP.return).end();
    f.get(rowBytes).op(OP.i32_eqz).if().i32Const(0).op(OP.return).end();
    f.loop(); // rows
    f.get(src).i32Const(-64).op(OP.i32_and).set(a);
    // end: past the line of the row's last byte
    f.get(src).get(rowBytes).op(OP.i32_add).i32Const(63).op(OP.i32_add).i32Const(-64).op(OP.i32_and).set(end);
    f.loop(); // the row's lines
    f.get(acc).get(a).mem(OP.i32_load, 0, 4).op(OP.i32_xor).set(acc);
    f.get(a).i32Const(64).op(OP.i32_add).tee(a).get(end).op(OP.i32_lt_u).brIf(0);
    f.end();
    f.get(src).get(stride).op(OP.i32_add).set(src);
    f.get(rows).i32Const(1).op(OP.i32_sub).tee(rows).brIf(0);
    f.end();
    f.get(acc);
  });
}

/**
 * The `touch_rows` arguments that cover the source of packing call `call` (src, rs, ks, panels,
 * k, kp, dst; `R` rows per panel, `esz` bytes per element), written into `out` [src, rowBytes,
 * stride, rows]: the k rows of an 'rc' operand (rs 1), the R x panels rows of a 'kc' one.
 */
export function touchArgs(call: readonly number[], R: number, esz: number, out: number[]): number[] {
  const [src, rs, ks, panels, k] = call;
  out[0] = src;
  if (rs === 1) {
    out[1] = panels * R * esz;
    out[2] = ks * esz;
    out[3] = k;
  } else {
    out[1] = k * esz;
    out[2] = rs * esz;
    out[3] = panels * R;
  }
  return out;
}

/**
 * Adds every packing kernel (`packFunctionName`) to `m`. With `nanPass` (the default), a float32
 * kernel packs in two passes: the first rounds without NaN handling (`convert`'s `finite`: 5
 * operations a vector, not 9) and adds every source vector into one f32 sum (lanes apart); only
 * when that sum is NaN does the second pass pack it all again with the NaN handling, over the
 * same bytes. The sum is NaN when the source holds a NaN, and also when infinities of opposite
 * signs meet in one lane, source values or partial sums that overflowed: then the second pass
 * costs time only. So does a source that is not the operand's: `GemmEngine.simdPanels` lets a
 * kernel pack a partial last panel whole, reading rows past the operand (zeroed afterwards), and
 * bytes there that read as NaN send the call through the second pass too. Either way the packed
 * bytes are the exact conversion's, and a call's source is read once when its sum is not NaN
 * (BENCHMARKS.md, pack16: 8-33% less time per call with the source in cache, min of 40 calls).
 */
export function addPackFunctions(m: ModuleBuilder, nanPass = true): void {
  for (const layout of ['rc', 'kc'] as const) {
    for (const R of PACK_ROWS) {
      for (const bf16 of [false, true]) {
        for (const flush of [false, true]) {
          m.addFunction(packFunctionName(layout, R, bf16, flush), ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
            const [src, rs, ks, panels, K, kp, dst] = [0, 1, 2, 3, 4, 5, 6];
            const esz = bf16 ? 2 : 4;
            const p = f.local('i32');
            const k = f.local('i32');
            const s = f.local('i32');
            const d = f.local('i32');
            const t = f.local('v128');
            const rsB = f.local('i32');
            const ksB = f.local('i32');
            const v = [f.local('v128'), f.local('v128'), f.local('v128'), f.local('v128')];
            const rp: number[] = layout === 'kc' ? Array.from({ length: R }, () => f.local('i32')) : [];
            const acc = f.local('v128');
            f.get(rs).i32Const(esz).op(OP.i32_mul).set(rsB);
            f.get(ks).i32Const(esz).op(OP.i32_mul).set(ksB);
            f.get(panels).op(OP.i32_eqz).if().op(OP.return).end();
            f.get(K).op(OP.i32_eqz).if().op(OP.return).end();
            const l: PackLocals = { src, rsB, ksB, panels, K, kp, dst, p, k, s, d, t, v, rp, acc };
            if (bf16 || !nanPass) {
              emitPackPass(f, layout, R, bf16, flush, false, l);
              return;
            }
            // f32: a first pass rounds without NaN handling and sums every source vector; a NaN
            // among them makes the sum NaN (so do opposite infinities meeting in one lane,
            // overflowed partial sums included: only time lost), and a second pass then packs
            // everything again with it (same addresses: the result is the exact pass's).
            twoPassConvert(f, acc, (fast) => emitPackPass(f, layout, R, bf16, flush, fast, l));
          });
        }
      }
    }
  }
}
