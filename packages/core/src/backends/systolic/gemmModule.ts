/**
 * The GEMM kernel of the systolic backend, generated as WebAssembly with the run-time assembler.
 * It multiplies packed operands (see `pack.ts`): A in row panels of MR rows, B in column panels
 * of NR columns, both already rounded to bf16 (so every product is exact in f32) and K padded to
 * a multiple of the unroll factor. C is a padded f32 tile grid with row stride `np`.
 *
 * Structure (GotoBLAS): loops over column blocks (NC), K blocks (KC, fits the B micro-panel in
 * L1), row blocks (MC, the A block in L2), then a register-blocked MR x NR micro-kernel whose
 * accumulators live in v128 locals for the whole K block. With relaxed SIMD the inner update is
 * `f32x4.relaxed_madd`; since bf16 x bf16 products are exact in f32, the fused and the separate
 * multiply-add round identically (see the README for the one exception: products that underflow
 * the f32 normal range). The micro-kernel walks all the row panels of an A block for one column
 * panel per call.
 *
 * Why 4 x 8 (MR = 4, two v128 per row): V8's TurboFan places every load of a K iteration (the B
 * vectors and the A splats) before its multiply-adds, so loads and accumulators must fit the 15
 * allocatable xmm registers together: 4 splats + 2 B + 8 accumulators = 14. Larger blockings
 * spill accumulators to the stack inside the K loop and run at a third to a half of the speed
 * (measured 2026-11-26 on Zen 4, Node 20: 8x4, 12x4, 4x12, 8x8, 3x12, 2x16 and a K unroll of 2
 * all slower, also with stores forcing the order); KC 256-2048 and MC 64-256 are within 2%.
 *
 * `gemm(ap, bp, cp, mp, np, kp, i0, i1, j0, j1)` computes rows [i0, i1) (multiples of MR) and
 * columns [j0, j1) (multiples of NR) of C, so threads can split the work by row or column panels
 * without sharing an output element; each element sees the same K order either way.
 */
import { ModuleBuilder, OP, SIMD } from '../../wasm/assembler';
import { addOutputFunctions, addPackFunctions } from './packKernels';

export interface GemmShape {
  /** Rows per micro-tile. */
  readonly mr: number;
  /** v128 vectors per micro-tile row (NR = 4 * nv columns). */
  readonly nv: number;
  /** K-loop unroll factor; packed K is padded to a multiple of it. */
  readonly unroll: number;
  readonly kc: number;
  readonly mc: number;
  readonly nc: number;
}

export const DEFAULT_GEMM_SHAPE: GemmShape = { mr: 4, nv: 2, unroll: 1, kc: 512, mc: 128, nc: 4096 };

/** The module's GEMM export (see above); its packing and output functions are looked up by name. */
export interface GemmExports {
  gemm(ap: number, bp: number, cp: number, mp: number, np: number, kp: number, i0: number, i1: number, j0: number, j1: number): void;
}

export interface GemmModuleOptions {
  shape: GemmShape;
  relaxed: boolean;
  shared: boolean;
  /** Maximum memory in 64 KiB pages (needed for shared memory). */
  maxPages: number;
}

export function buildGemmModule({ shape, relaxed, shared, maxPages }: GemmModuleOptions): Uint8Array {
  const { mr, nv, unroll: U, kc: KC, mc: MC, nc: NC } = shape;
  const NR = nv * 4;
  if (MC % mr !== 0) throw new Error(`buildGemmModule: mc ${MC} must be a multiple of mr ${mr}`);
  if (NC % NR !== 0) throw new Error(`buildGemmModule: nc ${NC} must be a multiple of NR ${NR}`);
  if (KC % U !== 0) throw new Error(`buildGemmModule: kc ${KC} must be a multiple of the unroll ${U}`);
  const m = new ModuleBuilder();
  m.importMemory('env', 'mem', { initial: 1, maximum: maxPages, shared });

  // micro(a, b, c, kc, ldcBytes, accumulate, panels, aStride): `panels` micro-tiles down one
  // column panel (A row panels `aStride` bytes apart, C tiles MR rows apart) in one call, so the
  // call and the caller's register saves around it are paid once per column panel and K block,
  // not once per micro-tile (a tenth of the time of a K = 32 product).
  const micro = m.addFunction('micro', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [a, b, c, kc, ldc, accum, panels, aStride] = [0, 1, 2, 3, 4, 5, 6, 7];
    const acc: number[] = [];
    for (let i = 0; i < mr * nv; i++) acc.push(f.local('v128'));
    const bv: number[] = [];
    for (let j = 0; j < nv; j++) bv.push(f.local('v128'));
    const av = f.local('v128');
    const cr = f.local('i32');
    const ak = f.local('i32');
    const bk = f.local('i32');
    const k = f.local('i32');
    f.loop(); // row panels
    // Load or zero the accumulators.
    f.get(accum).if();
    f.get(c).set(cr);
    for (let r = 0; r < mr; r++) {
      for (let j = 0; j < nv; j++) f.get(cr).simdMem(SIMD.v128_load, 16 * j).set(acc[r * nv + j]);
      if (r < mr - 1) f.get(cr).get(ldc).op(OP.i32_add).set(cr);
    }
    f.else();
    for (const x of acc) f.v128Const([0, 0, 0, 0]).set(x);
    f.end();
    // The K loop.
    f.get(a).set(ak);
    f.get(b).set(bk);
    f.get(kc).set(k);
    f.loop();
    for (let u = 0; u < U; u++) {
      for (let j = 0; j < nv; j++) f.get(bk).simdMem(SIMD.v128_load, (u * nv + j) * 16).set(bv[j]);
      for (let r = 0; r < mr; r++) {
        f.get(ak).simdMem(SIMD.v128_load32_splat, (u * mr + r) * 4, 4).set(av);
        for (let j = 0; j < nv; j++) {
          const x = acc[r * nv + j];
          if (relaxed) f.get(av).get(bv[j]).get(x).simd(SIMD.f32x4_relaxed_madd).set(x);
          else f.get(x).get(av).get(bv[j]).simd(SIMD.f32x4_mul).simd(SIMD.f32x4_add).set(x);
        }
      }
    }
    f.get(ak).i32Const(U * mr * 4).op(OP.i32_add).set(ak);
    f.get(bk).i32Const(U * nv * 16).op(OP.i32_add).set(bk);
    f.get(k).i32Const(U).op(OP.i32_sub).tee(k).brIf(0);
    f.end();
    // Store.
    f.get(c).set(cr);
    for (let r = 0; r < mr; r++) {
      for (let j = 0; j < nv; j++) f.get(cr).get(acc[r * nv + j]).simdMem(SIMD.v128_store, 16 * j);
      f.get(cr).get(ldc).op(OP.i32_add).set(cr);
    }
    // Next row panel: C continues where the stores ended (MR rows down).
    f.get(cr).set(c);
    f.get(a).get(aStride).op(OP.i32_add).set(a);
    f.get(panels).i32Const(1).op(OP.i32_sub).tee(panels).brIf(0);
    f.end();
  });

  // gemm(ap, bp, cp, mp, np, kp, i0, i1, j0, j1)
  m.addFunction('gemm', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [ap, bp, cp, mp0, np, kp, i0, i1, j0, j1] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    void mp0; // the padded height; rows are bounded by i1
    const mp = i1;
    const jc = f.local('i32');
    const pc = f.local('i32');
    const ic = f.local('i32');
    const jr = f.local('i32');
    const kc = f.local('i32');
    const jEnd = f.local('i32');
    const iEnd = f.local('i32');
    const bptr = f.local('i32');
    const ldc = f.local('i32');
    const min = (x: number, cap: number): void => {
      // push min(x, cap) where x is a local and cap a constant
      f.get(x).i32Const(cap).get(x).i32Const(cap).op(OP.i32_lt_s).op(OP.select);
    };
    f.get(i0).get(i1).op(OP.i32_ge_s).if().op(OP.return).end();
    f.get(np).i32Const(4).op(OP.i32_mul).set(ldc);
    f.get(j0).set(jc);
    f.block().loop(); // jc loop
    f.get(jc).get(j1).op(OP.i32_ge_s).brIf(1);
    // jEnd = jc + min(NC, j1 - jc)
    const rem = f.local('i32');
    f.get(j1).get(jc).op(OP.i32_sub).set(rem);
    f.get(jc);
    min(rem, NC);
    f.op(OP.i32_add).set(jEnd);
    f.i32Const(0).set(pc);
    f.loop(); // pc loop
    f.get(kp).get(pc).op(OP.i32_sub).set(rem);
    min(rem, KC);
    f.set(kc);
    f.get(i0).set(ic);
    f.loop(); // ic loop
    f.get(mp).get(ic).op(OP.i32_sub).set(rem);
    f.get(ic);
    min(rem, MC);
    f.op(OP.i32_add).set(iEnd);
    f.get(jc).set(jr);
    f.loop(); // jr loop
    // bptr = bp + (jr * kp + pc * NR) * 4
    f.get(bp).get(jr).get(kp).op(OP.i32_mul).get(pc).i32Const(NR).op(OP.i32_mul).op(OP.i32_add).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(bptr);
    // micro(ap + (ic*kp + pc*MR)*4, bptr, cp + (ic*np + jr)*4, kc, ldc, pc, (iEnd - ic)/MR, kp*MR*4):
    // the row panels ic..iEnd of column panel jr.
    f.get(ap).get(ic).get(kp).op(OP.i32_mul).get(pc).i32Const(mr).op(OP.i32_mul).op(OP.i32_add).i32Const(4).op(OP.i32_mul).op(OP.i32_add);
    f.get(bptr);
    f.get(cp).get(ic).get(np).op(OP.i32_mul).get(jr).op(OP.i32_add).i32Const(4).op(OP.i32_mul).op(OP.i32_add);
    f.get(kc).get(ldc).get(pc);
    f.get(iEnd).get(ic).op(OP.i32_sub).i32Const(mr).op(OP.i32_div_u);
    f.get(kp).i32Const(mr * 4).op(OP.i32_mul);
    f.call(micro);
    f.get(jr).i32Const(NR).op(OP.i32_add).tee(jr).get(jEnd).op(OP.i32_lt_s).brIf(0);
    f.end();
    f.get(iEnd).tee(ic).get(mp).op(OP.i32_lt_s).brIf(0);
    f.end();
    f.get(pc).i32Const(KC).op(OP.i32_add).tee(pc).get(kp).op(OP.i32_lt_s).brIf(0);
    f.end();
    f.get(jEnd).set(jc);
    f.br(0);
    f.end().end();
  });
  addPackFunctions(m);
  addOutputFunctions(m);
  return m.toBytes();
}
