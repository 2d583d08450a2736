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

/** Converts the v128 on the stack (f32 bits or widened bf16 bits) in place via local `t`. */
export function convert(f: FunctionBuilder, t: number, bf16: boolean, flush: boolean): void {
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
  // NaN: t quieted (t | 0x400000); else rounded to nearest even: t + 0x7fff + ((t >>> 16) & 1).
  // One mask of the upper 16 bits after the select serves both (8 operations a vector).
  f.get(t).v128Const(splat(0x00400000)).simd(SIMD.v128_or);
  f.get(t).v128Const(splat(0x7fff)).simd(SIMD.i32x4_add);
  f.get(t).i32Const(16).simd(SIMD.i32x4_shr_u).v128Const(splat(1)).simd(SIMD.v128_and).simd(SIMD.i32x4_add);
  f.get(t).get(t).simd(SIMD.f32x4_ne);
  f.simd(SIMD.v128_bitselect);
  f.v128Const(splat(0xffff0000)).simd(SIMD.v128_and);
}

/** Pushes 4 elements starting at byte address in local `addr` as f32 bits (bf16 widened). */
function load4(f: FunctionBuilder, addr: number, bf16: boolean): void {
  if (bf16) f.get(addr).simdMem(SIMD.v128_load16x4_u, 0, 8).i32Const(16).simd(SIMD.i32x4_shl);
  else f.get(addr).simdMem(SIMD.v128_load, 0, 16);
}

/** 32-bit lane shuffle of two vectors: lanes 0-3 from a, 4-7 from b. */
function shuffle32(f: FunctionBuilder, lanes: [number, number, number, number]): void {
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

export function addPackFunctions(m: ModuleBuilder): void {
  for (const layout of ['rc', 'kc'] as const) {
    for (const R of [4, 8]) {
      for (const bf16 of [false, true]) {
        for (const flush of [false, true]) {
          m.addFunction(packFunctionName(layout, R, bf16, flush), ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
            const [src, rs, ks, panels, K, kp, dst] = [0, 1, 2, 3, 4, 5, 6];
            const esz = bf16 ? 2 : 4;
            const p = f.local('i32');
            const k = f.local('i32');
            const s = f.local('i32');
            const d = f.local('i32');
            const a = f.local('i32');
            const t = f.local('v128');
            const rsB = f.local('i32');
            const ksB = f.local('i32');
            const v = [f.local('v128'), f.local('v128'), f.local('v128'), f.local('v128')];
            f.get(rs).i32Const(esz).op(OP.i32_mul).set(rsB);
            f.get(ks).i32Const(esz).op(OP.i32_mul).set(ksB);
            f.get(panels).op(OP.i32_eqz).if().op(OP.return).end();
            f.get(K).op(OP.i32_eqz).if().op(OP.return).end();
            f.i32Const(0).set(p);
            f.loop(); // panels
            // s = src + p*R*rsB (first row of the panel, k = 0); d = dst + p*kp*R*4
            f.get(src).get(p).i32Const(R).op(OP.i32_mul).get(rsB).op(OP.i32_mul).op(OP.i32_add).set(s);
            f.get(dst).get(p).get(kp).op(OP.i32_mul).i32Const(R * 4).op(OP.i32_mul).op(OP.i32_add).set(d);
            f.i32Const(0).set(k);
            f.loop(); // k
            if (layout === 'rc') {
              // R/4 contiguous vectors at s + q*4*esz; store at d + 16q.
              for (let q = 0; q < R / 4; q++) {
                f.get(s).i32Const(q * 4 * esz).op(OP.i32_add).set(a);
                f.get(d);
                load4(f, a, bf16);
                convert(f, t, bf16, flush);
                f.simdMem(SIMD.v128_store, q * 16, 16);
              }
              f.get(s).get(ksB).op(OP.i32_add).set(s);
              f.get(d).i32Const(R * 4).op(OP.i32_add).set(d);
              f.get(k).i32Const(1).op(OP.i32_add).tee(k).get(K).op(OP.i32_lt_u).brIf(0);
            } else {
              // For each group of 4 rows: load rows x (k..k+3), transpose, store 4 k-vectors.
              for (let q = 0; q < R / 4; q++) {
                for (let i = 0; i < 4; i++) {
                  f.get(s).get(rsB).i32Const(q * 4 + i).op(OP.i32_mul).op(OP.i32_add).set(a);
                  load4(f, a, bf16);
                  convert(f, t, bf16, flush);
                  f.set(v[i]);
                }
                // 4x4 transpose: rows r0..r3 of lanes k0..k3 -> vectors per k of lanes r0..r3.
                const [x0, x1, x2, x3] = v;
                const y0 = t;
                f.get(x0).get(x1);
                shuffle32(f, [0, 4, 1, 5]); // r0k0 r1k0 r0k1 r1k1
                f.set(y0);
                f.get(x0).get(x1);
                shuffle32(f, [2, 6, 3, 7]); // r0k2 r1k2 r0k3 r1k3
                f.set(x1);
                f.get(x2).get(x3);
                shuffle32(f, [0, 4, 1, 5]); // r2k0 r3k0 r2k1 r3k1
                f.set(x0);
                f.get(x2).get(x3);
                shuffle32(f, [2, 6, 3, 7]); // r2k2 r3k2 r2k3 r3k3
                f.set(x3);
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
              f.get(s).i32Const(4 * esz).op(OP.i32_add).set(s);
              f.get(d).i32Const(4 * R * 4).op(OP.i32_add).set(d);
              f.get(k).i32Const(4).op(OP.i32_add).tee(k).get(K).op(OP.i32_lt_u).brIf(0);
            }
            f.end();
            f.get(p).i32Const(1).op(OP.i32_add).tee(p).get(panels).op(OP.i32_lt_u).brIf(0);
            f.end();
          });
        }
      }
    }
  }
}
