/** The run-time WebAssembly assembler: LEB128 encodings, control flow, memory and SIMD ops. */
import { describe, expect, it } from 'vitest';
import { wasm } from '../internal';
import { WA } from './webassemblyTypes';

const { ModuleBuilder, OP, SIMD, sleb, uleb } = wasm;

describe('wasm assembler', () => {
  it('encodes LEB128 as the spec examples', () => {
    const u: number[] = [];
    uleb(u, 624485);
    expect(u).toEqual([0xe5, 0x8e, 0x26]);
    const s: number[] = [];
    sleb(s, -123456);
    expect(s).toEqual([0xc0, 0xbb, 0x78]);
    expect(() => uleb([], -1)).toThrow(/uleb: -1/);
  });

  it('builds a loop that sums 1..n and a SIMD dot over memory', () => {
    const m = new ModuleBuilder();
    m.importMemory('env', 'mem', { initial: 1 });
    m.addFunction('sum', ['i32'], ['i32'], (f) => {
      const acc = f.local('i32');
      f.block().loop();
      f.get(0).op(OP.i32_eqz).brIf(1);
      f.get(acc).get(0).op(OP.i32_add).set(acc);
      f.get(0).i32Const(1).op(OP.i32_sub).set(0);
      f.br(0).end().end();
      f.get(acc);
    });
    m.addFunction('dot4', ['i32', 'i32'], ['f32'], (f) => {
      const v = f.local('v128');
      f.get(0).simdMem(SIMD.v128_load).get(1).simdMem(SIMD.v128_load).simd(SIMD.f32x4_mul).set(v);
      for (let lane = 0; lane < 4; lane++) {
        f.get(v).simd(SIMD.f32x4_extract_lane).op(lane);
        if (lane > 0) f.op(OP.f32_add);
      }
    });
    const bytes = m.toBytes();
    expect(WA.validate(bytes)).toBe(true);
    const mem = new WA.Memory({ initial: 1 });
    const inst = new WA.Instance(new WA.Module(bytes), { env: { mem } });
    const ex = inst.exports as { sum(n: number): number; dot4(a: number, b: number): number };
    expect(ex.sum(100)).toBe(5050);
    new Float32Array(mem.buffer).set([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(ex.dot4(0, 16)).toBe(5 + 12 + 21 + 32);
  });

  it('detects SIMD, and rejects a shared memory without a maximum', () => {
    expect(wasm.wasmFeatures().simd).toBe(true);
    expect(() => new ModuleBuilder().importMemory('env', 'mem', { initial: 1, shared: true })).toThrow(/shared memory needs a maximum/);
  });
});
