/**
 * Hand-written minimal WebAssembly loops for `kernels.bench.ts`: the math of the GPT's GELU
 * forward kernel (and a two-multiply loop moving the same bytes), each a plain row loop with
 * its constants in locals set before the loop and no index arithmetic beyond one offset per
 * vector, over the same [rows, 512] + [512] layout. What the generated kernel could cost.
 */
import { wasm } from '@tpukit/core/internal';

const { OP, SIMD } = wasm;
type F = wasm.FunctionBuilder;

const bits = (c: number): number => new Uint32Array(new Float32Array([c]).buffer)[0];

/** Byte addresses: h, b, out0, out1 (16-byte aligned, 64 KiB apart from the end of the previous). */
export interface MinimalLayout {
  h: number;
  b: number;
  out0: number;
  out1: number;
}

/** A module with `gelu(rows)` and `twoMuls(rows)` over rows of 512 columns in `memory` at `at`. */
export function minimalLoops(memory: wasm.WasmMemory, pages: number, at: MinimalLayout): { gelu: (rows: number) => void; twoMuls: (rows: number) => void } {
  const m = new wasm.ModuleBuilder();
  m.importMemory('env', 'memory', { initial: pages, maximum: pages, shared: true });
  const body = (f: F, consts: number[], step: (a: number, k: (c: number) => number) => [() => void, () => void]): void => {
    const r = f.local('i32');
    const j = f.local('i32');
    const row = f.local('i32');
    const a = f.local('v128');
    const local = new Map<number, number>();
    for (const c of consts) {
      const l = f.local('v128');
      const v = bits(c);
      f.v128Const([v, v, v, v]).set(l);
      local.set(c, l);
    }
    const k = (c: number): number => local.get(c)!;
    f.i32Const(0).set(r);
    f.block().loop();
    f.get(r).get(0).op(OP.i32_ge_u).brIf(1);
    f.get(r).i32Const(2048).op(OP.i32_mul).set(row);
    f.i32Const(0).set(j);
    f.block().loop();
    f.get(j).i32Const(2048).op(OP.i32_ge_u).brIf(1);
    f.get(row).get(j).op(OP.i32_add).simdMem(SIMD.v128_load, at.h);
    f.get(j).simdMem(SIMD.v128_load, at.b);
    f.simd(SIMD.f32x4_add).set(a);
    const [o0, o1] = step(a, k);
    f.get(row).get(j).op(OP.i32_add);
    o0();
    f.simdMem(SIMD.v128_store, at.out0);
    f.get(row).get(j).op(OP.i32_add);
    o1();
    f.simdMem(SIMD.v128_store, at.out1);
    f.get(j).i32Const(16).op(OP.i32_add).set(j).br(0);
    f.end().end();
    f.get(r).i32Const(1).op(OP.i32_add).set(r).br(0);
    f.end().end();
  };
  m.addFunction('twoMuls', ['i32'], [], (f) =>
    body(f, [0.5, 3], (a, k) => [() => void f.get(a).get(k(0.5)).simd(SIMD.f32x4_mul), () => void f.get(a).get(k(3)).simd(SIMD.f32x4_mul)]),
  );
  // tanh's small-|x| odd polynomial (the lanes the bench's data reach), then gelu = a/2 (1 + t).
  const P = [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1];
  m.addFunction('gelu', ['i32'], [], (f) => {
    const x = f.local('v128');
    const z = f.local('v128');
    const t = f.local('v128');
    body(f, [0.044715, 0.7978845608, 0.5, 1, ...P], (a, k) => {
      // x = (a + a^3 * 0.044715) * c
      f.get(a).get(a).simd(SIMD.f32x4_mul).get(a).simd(SIMD.f32x4_mul).get(k(0.044715)).simd(SIMD.f32x4_mul).get(a).simd(SIMD.f32x4_add);
      f.get(k(0.7978845608)).simd(SIMD.f32x4_mul).set(x);
      f.get(x).get(x).simd(SIMD.f32x4_mul).set(z);
      f.get(k(P[0]));
      for (let i = 1; i < P.length; i++) f.get(z).simd(SIMD.f32x4_mul).get(k(P[i])).simd(SIMD.f32x4_add);
      f.get(z).simd(SIMD.f32x4_mul).get(x).simd(SIMD.f32x4_mul).get(x).simd(SIMD.f32x4_add).set(t);
      return [() => void f.get(a).get(k(0.5)).simd(SIMD.f32x4_mul).get(t).get(k(1)).simd(SIMD.f32x4_add).simd(SIMD.f32x4_mul), () => void f.get(t)];
    });
  });
  const inst = new wasm.WA.Instance(new wasm.WA.Module(m.toBytes()), { env: { memory } });
  return inst.exports as unknown as { gelu: (rows: number) => void; twoMuls: (rows: number) => void };
}
