/**
 * The GEMM kernel of the systolic backend, generated as WebAssembly with the run-time assembler.
 * It multiplies packed operands (see `pack.ts`): A in row panels of MR rows (the last one
 * zero-padded), B in column panels of NR columns, both already rounded to bf16 (so every product
 * is exact in f32) and K padded to a multiple of the unroll factor. C is an f32 matrix of the
 * product's M rows and `np` (a multiple of NR) columns: a last, partial row panel is computed
 * whole and stored row by row (`micro_edge`), so C has no padding rows.
 *
 * Structure (GotoBLAS): loops over column blocks (NC), K blocks (KC, fits the B micro-panel in
 * L1), row blocks (MC, the A block in L2), then a register-blocked MR x NR micro-kernel whose
 * accumulators live in v128 locals for the whole K block. With relaxed SIMD the inner update is
 * `f32x4.relaxed_madd`; since bf16 x bf16 products are exact in f32, the fused and the separate
 * multiply-add round identically (see the README for the one exception: products that underflow
 * the f32 normal range). The micro-kernel walks all the row panels of an A block for one column
 * panel per call.
 *
 * Register limit: V8's TurboFan unrolls the K loop into two copies and, in the first one, places
 * every load of a K step (the B vectors and the A splats) before its multiply-adds, so loads and
 * accumulators must fit the 15 allocatable xmm registers together there (the second copy
 * interleaves them). 4 x 8 (MR = 4, two v128 per row): 4 splats + 2 B + 8 accumulators = 14.
 * 5 x 8 fits only with `aLoad: 'vector'`: one v128 load of 4 A rows whose lanes are broadcast by
 * shuffles (pure operations, placed next to their FMAs) + a splat for the fifth row: 1 + 1 + 2 B
 * + 10 accumulators + 1 temporary = 15. Every other larger blocking spills accumulators inside
 * the K loop and runs at a third to four fifths of the speed (measured 2026-11-26 on Zen 4,
 * Node 20; BENCHMARKS.md, gemm and gemmk); KC 256-2048 and MC 64-256 are within 2%.
 *
 * `gemm(ap, bp, cp, mp, np, kp, i0, i1, j0, j1)` computes rows [i0, i1) (i0 a multiple of MR, i1
 * the end of C or a multiple of MR) and columns [j0, j1) (multiples of NR) of C, so threads can
 * split the work by row or column panels without sharing an output element; each element sees
 * the same K order either way.
 */
import { type FunctionBuilder, ModuleBuilder, OP, SIMD } from '../../wasm/assembler';
import { addOutputFunctions, addPackFunctions, addTouchFunction } from './packKernels';

export interface GemmShape {
  /** Rows per micro-tile. */
  readonly mr: number;
  /** v128 vectors per micro-tile row (NR = 4 * nv columns). */
  readonly nv: number;
  /**
   * How the micro-kernel broadcasts A values: 'splat', one `load32_splat` per row and k; or
   * 'vector', one v128 load per 4 rows and k, each row's lane broadcast with a shuffle (rows
   * past the last group of 4 still splat-load). See the file comment for why 5 x 8 needs it.
   */
  readonly aLoad: 'splat' | 'vector';
  /** K-loop unroll factor; packed K is padded to a multiple of it. */
  readonly unroll: number;
  readonly kc: number;
  readonly mc: number;
  readonly nc: number;
}

/** The 4 x 8 micro-kernel: 8 accumulators, A rows splat-loaded. */
export const GEMM_SHAPE_4X8: GemmShape = { mr: 4, nv: 2, aLoad: 'splat', unroll: 1, kc: 512, mc: 128, nc: 4096 };

/**
 * The 5 x 8 micro-kernel: 10 accumulators, A rows broadcast from one vector load by shuffles (the
 * one larger blocking that fits V8's registers). On Zen 4 1.5-4% faster than 4 x 8 on packed
 * operands but no faster in the GPT's step (BENCHMARKS.md, gemmk); on an Intel Xeon faster
 * alone (11-20%), ~10% less CPU per one-thread GPT step (k5, gemm11). Engines made without a shape take
 * the one this CPU runs faster (gemmTune.ts). The pool's row-block and K-blocked jobs and dot
 * groups take whole row panels only, so with 5 x 8 the GPT's dots (M = 2048, 512, 128) skip them.
 */
export const GEMM_SHAPE_5X8: GemmShape = { mr: 5, nv: 2, aLoad: 'vector', unroll: 1, kc: 512, mc: 130, nc: 4096 };

/** The module's GEMM export (see above) and its source sweep; its packing and output functions are looked up by name. */
export interface GemmExports {
  gemm(ap: number, bp: number, cp: number, mp: number, np: number, kp: number, i0: number, i1: number, j0: number, j1: number): void;
  /**
   * The micro-kernel (see `emitMicro`): `panels` MR x NR tiles down one column panel, A row
   * panels `aStride` bytes apart, C tiles MR rows (`ldc` bytes each) apart; `accumulate` 1 adds
   * to C, 0 overwrites it. For drivers that pack as they go (`GemmEngine.kBlocks`).
   */
  micro(a: number, b: number, c: number, kc: number, ldc: number, accumulate: number, panels: number, aStride: number): void;
  /** The micro-kernel on one zero-padded row panel of which only the first `rows` (< MR) rows of C are read and written. */
  micro_edge(a: number, b: number, c: number, kc: number, ldc: number, accumulate: number, rows: number): void;
  /** Sweeps rows of a packing source into the caches (see packKernels.ts `addTouchFunction`). */
  touch_rows(src: number, rowBytes: number, stride: number, rows: number): number;
}

export interface GemmModuleOptions {
  shape: GemmShape;
  relaxed: boolean;
  shared: boolean;
  /** Maximum memory in 64 KiB pages (needed for shared memory). */
  maxPages: number;
  /** Float32 packing kernels in two passes, NaN-free first (`addPackFunctions`); default true. */
  packNanPass?: boolean;
}

/**
 * Emits a micro-kernel body. Full (`edge` false), params (a, b, c, kc, ldc, accumulate, panels,
 * aStride): `panels` micro-tiles down one column panel (A row panels `aStride` bytes apart, C
 * tiles MR rows apart) in one call, so the call and the caller's register saves around it are
 * paid once per column panel and K block, not once per micro-tile (a tenth of the time of a
 * K = 32 product). Edge (`edge` true), params (a, b, c, kc, ldc, accumulate, rows): one row
 * panel of which only the first `rows` (< MR) rows of C are read and written (its A panel is
 * zero-padded to MR rows by the packing), so C needs no padding rows.
 */
function emitMicro(f: FunctionBuilder, shape: GemmShape, relaxed: boolean, edge: boolean): void {
  const { mr, nv, unroll: U, aLoad } = shape;
  const [a, b, c, kc, ldc, accum, panels, aStride] = [0, 1, 2, 3, 4, 5, 6, 7];
  const rows = panels; // (edge)
  const acc: number[] = [];
  for (let i = 0; i < mr * nv; i++) acc.push(f.local('v128'));
  const bv: number[] = [];
  for (let j = 0; j < nv; j++) bv.push(f.local('v128'));
  const av = f.local('v128');
  const groups = aLoad === 'vector' ? Math.floor(mr / 4) : 0;
  const ag: number[] = [];
  for (let g = 0; g < groups; g++) ag.push(f.local('v128'));
  const cr = f.local('i32');
  const ak = f.local('i32');
  const bk = f.local('i32');
  const k = f.local('i32');
  /** Row r of C: pushes nothing; `body` runs with C's row address in `cr`, guarded by `r < rows` at an edge. */
  const eachRow = (body: (r: number) => void): void => {
    f.get(c).set(cr);
    for (let r = 0; r < mr; r++) {
      if (edge && r > 0) f.get(rows).i32Const(r).op(OP.i32_gt_u).if();
      body(r);
      if (edge && r > 0) f.end();
      if (r < mr - 1) f.get(cr).get(ldc).op(OP.i32_add).set(cr);
    }
  };
  if (!edge) f.loop(); // row panels
  // Load or zero the accumulators.
  if (edge) for (const x of acc) f.v128Const([0, 0, 0, 0]).set(x);
  f.get(accum).if();
  eachRow((r) => {
    for (let j = 0; j < nv; j++) f.get(cr).simdMem(SIMD.v128_load, 16 * j).set(acc[r * nv + j]);
  });
  if (!edge) {
    f.else();
    for (const x of acc) f.v128Const([0, 0, 0, 0]).set(x);
  }
  f.end();
  // The K loop.
  f.get(a).set(ak);
  f.get(b).set(bk);
  f.get(kc).set(k);
  f.loop();
  for (let u = 0; u < U; u++) {
    for (let j = 0; j < nv; j++) f.get(bk).simdMem(SIMD.v128_load, (u * nv + j) * 16).set(bv[j]);
    for (let g = 0; g < groups; g++) f.get(ak).simdMem(SIMD.v128_load, (u * mr + 4 * g) * 4).set(ag[g]);
    for (let r = 0; r < mr; r++) {
      if (r < groups * 4) {
        const lane = r % 4;
        f.get(ag[Math.floor(r / 4)]).get(ag[Math.floor(r / 4)]).simd(SIMD.i8x16_shuffle);
        for (let i = 0; i < 16; i++) f.op(lane * 4 + (i % 4));
      } else f.get(ak).simdMem(SIMD.v128_load32_splat, (u * mr + r) * 4, 4);
      f.set(av);
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
  eachRow((r) => {
    for (let j = 0; j < nv; j++) f.get(cr).get(acc[r * nv + j]).simdMem(SIMD.v128_store, 16 * j);
  });
  if (edge) return;
  // Next row panel: C continues MR rows down.
  f.get(cr).get(ldc).op(OP.i32_add).set(c);
  f.get(a).get(aStride).op(OP.i32_add).set(a);
  f.get(panels).i32Const(1).op(OP.i32_sub).tee(panels).brIf(0);
  f.end();
}

export function buildGemmModule({ shape, relaxed, shared, maxPages, packNanPass = true }: GemmModuleOptions): Uint8Array {
  const { mr, nv, unroll: U, kc: KC, mc: MC, nc: NC } = shape;
  const NR = nv * 4;
  if (MC % mr !== 0) throw new Error(`buildGemmModule: mc ${MC} must be a multiple of mr ${mr}`);
  if (NC % NR !== 0) throw new Error(`buildGemmModule: nc ${NC} must be a multiple of NR ${NR}`);
  if (KC % U !== 0) throw new Error(`buildGemmModule: kc ${KC} must be a multiple of the unroll ${U}`);
  const m = new ModuleBuilder();
  m.importMemory('env', 'mem', { initial: 1, maximum: maxPages, shared });
  const micro = m.addFunction('micro', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => emitMicro(f, shape, relaxed, false));
  const microEdge = m.addFunction('micro_edge', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => emitMicro(f, shape, relaxed, true));

  // gemm(ap, bp, cp, mp, np, kp, i0, i1, j0, j1)
  m.addFunction('gemm', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], (f) => {
    const [ap, bp, cp, mp0, np, kp, i0, i1, j0, j1] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    void mp0; // the padded height; rows are bounded by i1
    const mp = i1;
    const full = f.local('i32');
    const part = f.local('i32');
    const aptr = f.local('i32');
    const cptr = f.local('i32');
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
    // full row panels of the block, and the rows of a last partial one (i1 past a multiple of MR)
    f.get(iEnd).get(ic).op(OP.i32_sub).i32Const(mr).op(OP.i32_div_u).set(full);
    f.get(iEnd).get(ic).op(OP.i32_sub).get(full).i32Const(mr).op(OP.i32_mul).op(OP.i32_sub).set(part);
    f.get(jc).set(jr);
    f.loop(); // jr loop
    // bptr = bp + (jr * kp + pc * NR) * 4
    f.get(bp).get(jr).get(kp).op(OP.i32_mul).get(pc).i32Const(NR).op(OP.i32_mul).op(OP.i32_add).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(bptr);
    // micro(ap + (ic*kp + pc*MR)*4, bptr, cp + (ic*np + jr)*4, kc, ldc, pc, full, kp*MR*4):
    // the full row panels of ic..iEnd in column panel jr; then micro_edge for the partial one.
    f.get(ap).get(ic).get(kp).op(OP.i32_mul).get(pc).i32Const(mr).op(OP.i32_mul).op(OP.i32_add).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(aptr);
    f.get(cp).get(ic).get(np).op(OP.i32_mul).get(jr).op(OP.i32_add).i32Const(4).op(OP.i32_mul).op(OP.i32_add).set(cptr);
    f.get(full).if();
    f.get(aptr).get(bptr).get(cptr).get(kc).get(ldc).get(pc).get(full);
    f.get(kp).i32Const(mr * 4).op(OP.i32_mul);
    f.call(micro);
    f.end();
    f.get(part).if();
    f.get(aptr).get(full).get(kp).op(OP.i32_mul).i32Const(mr * 4).op(OP.i32_mul).op(OP.i32_add);
    f.get(bptr);
    f.get(cptr).get(full).i32Const(mr).op(OP.i32_mul).get(ldc).op(OP.i32_mul).op(OP.i32_add);
    f.get(kc).get(ldc).get(pc).get(part);
    f.call(microEdge);
    f.end();
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
  addPackFunctions(m, packNanPass);
  addOutputFunctions(m);
  addTouchFunction(m);
  return m.toBytes();
}
