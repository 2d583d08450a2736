/**
 * dot_general with TPU MXU numerics, on the WebAssembly GEMM engine. Any dimension numbers are
 * reduced to a batch of [M,K] x [K,N] products over strided views (transposes are read in place;
 * only a free or contracting group whose dims cannot be merged into one stride is copied first).
 *
 * Numerics (as the MXU): operands rounded to bf16 (RNE), exact products, float32 accumulation.
 * float32 inputs follow `precision` (lax.Precision; null = the process default): 'default' = 1 bf16 pass, 'high' = 3 passes (bf16_3x:
 * hi*mid + mid*hi + hi*hi), 'highest' = 6 passes (bf16_6x, float32-equivalent). bf16 inputs make
 * one pass whatever the precision. float16 inputs are widened to float32 first (the MXU has no
 * f16 path). The f32 accumulator is rounded once to the output dtype.
 */
import * as bf16 from '../../bf16';
import * as f16 from '../../f16';
import type { StorageArray } from '../../dtype';
import { freeDims, type DotGeneralParams } from '../../lax/dot';
import { type CanonicalPrecision, effectivePrecision, higherPrecision } from '../../lax/precision';
import { stridedCopy } from '../../lax/strided';
import type { HostArray, ShapedArray } from '../../primitive';
import { sizeOf, stridesOf } from '../../shape';
import type { GemmEngine } from './gemmEngine';
import { HI, LO, MID, type OperandView } from './pack';
import { gemmPhases, shapePhases } from './phases';

/** Term pairs per pass, smallest first (so the large terms are added last). */
export const PASSES: Record<'default' | 'high' | 'highest', { a: number[]; b: number[] }> = {
  default: { a: [HI], b: [HI] },
  high: { a: [HI, MID, HI], b: [MID, HI, HI] },
  highest: { a: [LO, HI, MID, MID, HI, HI], b: [HI, LO, MID, HI, MID, HI] },
};

/**
 * The pass scheme of a dot: bf16 inputs make one pass; float32 inputs follow the dot's precision
 * (null: the process default, `lax.setDefaultMatmulPrecision`), the higher one of a pair.
 */
export function passesFor(dtype: string, precision: CanonicalPrecision): { a: number[]; b: number[] } {
  return dtype === 'bfloat16' ? PASSES.default : PASSES[higherPrecision(effectivePrecision(precision))];
}

/** Number of bf16 MXU passes a dot of this dtype and precision makes. */
export function passCount(dtype: string, precision: CanonicalPrecision): number {
  return passesFor(dtype, precision).a.length;
}

interface Side {
  view: OperandView;
  batchOffsets: number[];
}

/**
 * What `side` works out from an operand's shape and dimension numbers alone (no data): whether
 * its free or contracting group needs a copy first (`perm`, the order of that copy, and the
 * source strides it reads), and the view's rows, k, strides and per-batch offsets. Kept per
 * call site (see `plans`).
 */
interface SideGeom {
  perm: number[] | null;
  permStrides: number[];
  pshape: number[];
  rows: number;
  k: number;
  rs: number;
  ks: number;
  batchOffsets: number[];
}

/** Strides of a group of dims if they merge into one (row-major, size-1 dims ignored), else null. */
function groupStride(shape: readonly number[], strides: readonly number[], dims: readonly number[]): number | null {
  const ds = dims.filter((d) => shape[d] !== 1);
  if (ds.length === 0) return 0;
  for (let i = 0; i < ds.length - 1; i++) if (strides[ds[i]] !== strides[ds[i + 1]] * shape[ds[i + 1]]) return null;
  return strides[ds[ds.length - 1]];
}

function sideGeom(shape0: readonly number[], batch: readonly number[], free: readonly number[], contract: readonly number[]): SideGeom {
  let shape = shape0;
  let strides = stridesOf(shape);
  let b = batch;
  let fr = free;
  let ct = contract;
  let rs = groupStride(shape, strides, fr);
  let ks = groupStride(shape, strides, ct);
  let perm: number[] | null = null;
  let permStrides: number[] = [];
  if (rs === null || ks === null) {
    // Materialise [batch..., free..., contract...] so each group is contiguous.
    perm = [...batch, ...free, ...contract];
    const pshape = perm.map((p) => shape[p]);
    permStrides = perm.map((p) => strides[p]);
    shape = pshape;
    strides = stridesOf(shape);
    b = batch.map((_, i) => i);
    fr = free.map((_, i) => batch.length + i);
    ct = contract.map((_, i) => batch.length + free.length + i);
    rs = groupStride(shape, strides, fr)!;
    ks = groupStride(shape, strides, ct)!;
  }
  const bshape = b.map((d) => shape[d]);
  const nb = sizeOf(bshape);
  const batchOffsets = new Array<number>(nb);
  const idx = new Array<number>(b.length).fill(0);
  for (let i = 0; i < nb; i++) {
    let off = 0;
    for (let d = 0; d < b.length; d++) off += idx[d] * strides[b[d]];
    batchOffsets[i] = off;
    for (let d = b.length - 1; d >= 0; d--) {
      if (++idx[d] < bshape[d]) break;
      idx[d] = 0;
    }
  }
  return { perm, permStrides, pshape: perm === null ? [] : [...shape], rows: sizeOf(fr.map((d) => shape[d])), k: sizeOf(ct.map((d) => shape[d])), rs, ks, batchOffsets };
}

/** An operand's view for the engine: its data (copied first where `g` says so) under the geometry `g`. */
function side(x: HostArray, g: SideGeom): Side {
  let data: StorageArray = x.data;
  if (g.perm !== null) {
    const out = new (data.constructor as new (n: number) => StorageArray)(data.length);
    stridedCopy(data, out, g.pshape, g.permStrides);
    data = out;
  }
  const isBf16 = x.dtype === 'bfloat16';
  let bits: Uint32Array | Uint16Array;
  if (isBf16) bits = data as Uint16Array;
  else if (x.dtype === 'float16') {
    const f = f16.decode(data as Uint16Array);
    bits = new Uint32Array(f.buffer, f.byteOffset, f.length);
  } else bits = new Uint32Array((data as Float32Array).buffer, (data as Float32Array).byteOffset, data.length);
  // (the batch offsets are shared with the plan: the engine only reads them)
  return { view: { bits, bf16: isBf16, rows: g.rows, k: g.k, rs: g.rs, ks: g.ks }, batchOffsets: g.batchOffsets };
}

/**
 * A dot's operand geometry for both sides, for the operand shapes it was made for. One per
 * `DotGeneralParams` object (a compiled program's dot step passes the same one at every call),
 * replaced when the shapes change: a call then plans nothing but the operands' data views.
 */
interface DotPlan {
  /** The dimension numbers it was made from (a params object given new ones is planned again). */
  dn: DotGeneralParams['dimensionNumbers'];
  lshape: readonly number[];
  rshape: readonly number[];
  L: SideGeom;
  R: SideGeom;
}

const plans = new WeakMap<DotGeneralParams, DotPlan>();

const sameShape = (a: readonly number[], b: readonly number[]): boolean => {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

/** The plan of `params` for these operand shapes (made, or remade, when they differ from the cached one). */
function dotPlan(lhs: HostArray, rhs: HostArray, params: DotGeneralParams): DotPlan {
  const p = plans.get(params);
  if (p !== undefined && p.dn === params.dimensionNumbers && sameShape(p.lshape, lhs.shape) && sameShape(p.rshape, rhs.shape)) return p;
  const [[lc, rc], [lb, rb]] = params.dimensionNumbers;
  const plan: DotPlan = {
    dn: params.dimensionNumbers,
    lshape: [...lhs.shape],
    rshape: [...rhs.shape],
    L: sideGeom(lhs.shape, lb, freeDims(lhs.shape.length, lc, lb), lc),
    R: sideGeom(rhs.shape, rb, freeDims(rhs.shape.length, rc, rb), rc),
  };
  plans.set(params, plan);
  return plan;
}

export interface MxuOptions {
  flushSubnormals: boolean;
}

/**
 * Runs dot_general for floating operands on the engine; returns the output storage: `into` when
 * given (a float32 result's caller-owned destination, with exactly the result's element count),
 * else a new array. `bands` (with `into`): receives elements [e0, e1) of `into` as soon as they
 * are final, in order from 0 (see `Backend.executeInto`): on the thread pool a single product
 * hands over its finished rows between the calling thread's tiles and while it waits for the
 * workers (rows copied out of the accumulator after their copy); the rest (all of it on one
 * thread) is left to the caller.
 */
export function mxuDotGeneral(engine: GemmEngine, lhs: HostArray, rhs: HostArray, params: DotGeneralParams, out: ShapedArray, opts: MxuOptions, into: Float32Array | null = null, bands?: (e0: number, e1: number) => void): StorageArray {
  if (!gemmPhases.enabled) return dotGeneral(engine, lhs, rhs, params, out, opts, into, bands);
  // The phase timer: the whole call, by the shape key of its products.
  const t0 = performance.now();
  const r = dotGeneral(engine, lhs, rhs, params, out, opts, into, bands);
  const t = performance.now() - t0;
  const plan = dotPlan(lhs, rhs, params);
  const L = side(lhs, plan.L);
  const R = side(rhs, plan.R);
  const direct = engine.resultTarget(into, L.batchOffsets.length, L.view.rows, R.view.rows, L.view.bits, R.view.bits) >= 0;
  const sp = shapePhases(engine.shapeKey(L.view, R.view, true, true, direct));
  sp.calls++;
  sp.call += t;
  return r;
}

function dotGeneral(engine: GemmEngine, lhs: HostArray, rhs: HostArray, params: DotGeneralParams, out: ShapedArray, opts: MxuOptions, into: Float32Array | null, bands: ((e0: number, e1: number) => void) | undefined): StorageArray {
  const plan = dotPlan(lhs, rhs, params);
  const L = side(lhs, plan.L);
  const R = side(rhs, plan.R);
  const M = L.view.rows;
  const N = R.view.rows;
  const K = L.view.k;
  const B = L.batchOffsets.length;
  const passes = passesFor(lhs.dtype, params.precision);
  if (into !== null && (out.dtype !== 'float32' || into.length !== B * M * N)) throw new RangeError(`dot_general: the destination holds ${into.length} elements; the ${out.dtype} result has ${B * M * N}`);
  // A single f32 product: result rows may be copied as soon as they are final (see rowsReady).
  const single = out.dtype === 'float32' && B === 1 && K > 0;
  // Without a destination, a single f32 result is sliced straight out of wasm memory (no zero-filled allocation).
  const sliceOut = single && into === null;
  let acc = into ?? (out.dtype === 'float32' ? new Float32Array(sliceOut ? 0 : B * M * N) : new Float32Array(out.dtype === 'float16' || K === 0 ? M * N : 0));
  const sliceBf16 = out.dtype === 'bfloat16' && B === 1 && K > 0;
  let result: StorageArray = out.dtype === 'float32' ? acc : new Uint16Array(sliceBf16 ? 0 : B * M * N);
  if (M * N === 0) return result;
  const finish = (bi: number): void => {
    if (out.dtype === 'float32') return;
    const o = (result as Uint16Array).subarray(bi * M * N, (bi + 1) * M * N);
    if (out.dtype === 'bfloat16') bf16.encode(acc, { flushSubnormals: opts.flushSubnormals }, o);
    else o.set(f16.encode(acc));
  };
  if (K === 0) {
    acc.fill(0);
    for (let bi = 0; bi < B; bi++) finish(bi);
    return result;
  }
  // With a thread pool, the output of a single product is allocated and its pages touched by
  // this thread while the workers multiply: a fresh multi-megabyte buffer costs a page fault
  // per 4 KiB on first write, serial work otherwise done after the product.
  let pre: Float32Array | Uint16Array | null = single ? into : null;
  const prepare = sliceOut || sliceBf16 ? (): void => {
    const p = sliceOut ? new Float32Array(M * N) : new Uint16Array(M * N);
    for (let i = 0; i < p.length; i += 1024) p[i] = 0;
    pre = p;
  } : undefined;
  // The GEMM may write straight into the destination (the engine decides, see `resultTarget`):
  // the sink then finds the result in place.
  const cAddr = engine.resultTarget(into, B, M, N, L.view.bits, R.view.bits);
  // With a thread pool, rows of a single f32 result are copied into the pre-allocated output as
  // soon as they are final, while other threads still multiply; the sink copies the rest. Rows
  // written in place or copied so are handed to `bands`.
  let early = 0;
  const rowsReady = single && (cAddr < 0 || bands !== undefined) ? (c: number, ldc: number, r0: number, r1: number): void => {
    if (r0 !== early) return;
    if (cAddr < 0) {
      const p = pre as Float32Array | null;
      if (!p) return;
      const f32 = engine.f32;
      if (ldc === N) p.set(f32.subarray(c + r0 * N, c + r1 * N), r0 * N);
      else for (let i = r0; i < r1; i++) p.set(f32.subarray(c + i * ldc, c + i * ldc + N), i * N);
    }
    early = r1;
    if (bands !== undefined && into !== null) bands(r0 * N, r1 * N);
  } : undefined;
  engine.batchedProduct(L.view, L.batchOffsets, R.view, R.batchOffsets, passes.a, passes.b, opts.flushSubnormals, 'dot_general', (bi, c, ldc) => {
    if (out.dtype === 'bfloat16') {
      const into = sliceBf16 ? (pre as Uint16Array | null) : (result as Uint16Array);
      const r = engine.narrowToBf16(c, ldc, M, N, opts.flushSubnormals, into, bi * M * N);
      if (sliceBf16) result = into ?? r;
      return;
    }
    if (cAddr >= 0 && c * 4 === cAddr + bi * M * N * 4) return; // the accumulator is the destination
    const dst = out.dtype === 'float32' ? bi * M * N : 0;
    const f32 = engine.f32;
    if (sliceOut && ldc === N && !pre) {
      acc = f32.slice(c, c + M * N);
      result = acc;
      return;
    }
    let from = 0;
    if (single) {
      const p = pre as Float32Array | null;
      acc = p ?? new Float32Array(M * N);
      result = acc;
      if (p) from = early;
    }
    if (ldc === N) acc.set(f32.subarray(c + from * N, c + M * N), dst + from * N);
    else for (let i = from; i < M; i++) acc.set(f32.subarray(c + i * ldc, c + i * ldc + N), dst + i * N);
    finish(bi);
  }, prepare, rowsReady, cAddr);
  return result;
}
