/**
 * Opcodes the fused-kernel generator needs beyond the ones core's assembler names (`OP`, `SIMD`
 * in `@tpukit/core`'s `wasm` namespace): SIMD float compares, lane stores, conversions, f64x2
 * arithmetic for float64 accumulation, and a few scalar ops. Values are the WebAssembly 2.0 /
 * SIMD128 binary encodings (SIMD ones are sub-opcodes after the 0xfd prefix). Kept here rather
 * than in core's tables so the GEMM backend's assembler surface is unchanged.
 */

/** SIMD sub-opcodes (after 0xfd). */
export const V = {
  load: 0x00,
  load8_splat: 0x07,
  load32_splat: 0x09,
  store: 0x0b,
  shuffle: 0x0d,
  i32x4_splat: 0x11,
  f32x4_splat: 0x13,
  f32x4_extract_lane: 0x1f,
  f32x4_replace_lane: 0x20,
  f64x2_extract_lane: 0x21,
  i32x4_eq: 0x37,
  i32x4_ne: 0x38,
  i32x4_lt_s: 0x39,
  f32x4_eq: 0x41,
  f32x4_ne: 0x42,
  f32x4_lt: 0x43,
  f32x4_gt: 0x44,
  f32x4_le: 0x45,
  f32x4_ge: 0x46,
  not: 0x4d,
  and: 0x4e,
  andnot: 0x4f,
  or: 0x50,
  xor: 0x51,
  bitselect: 0x52,
  any_true: 0x53,
  store8_lane: 0x58,
  store32_lane: 0x5a,
  load32_zero: 0x5c,
  f32x4_demote_f64x2_zero: 0x5e,
  f64x2_promote_low_f32x4: 0x5f,
  f32x4_ceil: 0x67,
  f32x4_floor: 0x68,
  f32x4_nearest: 0x6a,
  i16x8_extend_low_i8x16_u: 0x89,
  i32x4_extend_low_i16x8_u: 0xa9,
  i32x4_shl: 0xab,
  i32x4_shr_s: 0xac,
  i32x4_add: 0xae,
  i32x4_sub: 0xb1,
  f32x4_abs: 0xe0,
  f32x4_neg: 0xe1,
  f32x4_sqrt: 0xe3,
  f32x4_add: 0xe4,
  f32x4_sub: 0xe5,
  f32x4_mul: 0xe6,
  f32x4_div: 0xe7,
  f32x4_min: 0xe8,
  f32x4_max: 0xe9,
  f64x2_add: 0xf0,
  f64x2_sub: 0xf1,
  f64x2_mul: 0xf2,
  f64x2_max: 0xf5,
  i32x4_trunc_sat_f32x4_s: 0xf8,
  f32x4_convert_i32x4_s: 0xfa,
  f32x4_relaxed_madd: 0x105,
} as const;

/** Scalar opcodes not in core's `OP` table. */
export const S = {
  f64_load: 0x2b,
  f64_store: 0x39,
  i32_rem_u: 0x70,
  f32_max: 0x97,
  f64_add: 0xa0,
  f64_max: 0xa5,
  f32_demote_f64: 0xb6,
  f64_promote_f32: 0xbb,
} as const;
