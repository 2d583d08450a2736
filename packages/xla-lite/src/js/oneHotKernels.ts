/**
 * The two primitives the one-hot pass (passes/oneHotDot.ts) rewrites one-hot dots into, and
 * their kernels. Neither is ever traced: they exist only in optimised modules, so they carry a
 * shape rule and kernels but no transformation rules.
 *
 * - `onehot_gather(table[V,N], index[M])` -> [M,N]: row `index[m]` of the table, a zero row
 *   where the index is not an integer in [0, V) (as the one-hot row is all zeros then). It
 *   replaces `dot(one_hot(index, V), table)`.
 * - `onehot_segment_sum(values[T,N], index[T])` -> [V,N]: row v sums the value rows whose index
 *   is v, in token order; rows with an index outside [0, V) add nothing. It replaces
 *   `dot(one_hot(index, V)^T, values)` (the embedding's weight gradient).
 *
 * Numerics are the replaced dot's on the current backend. On the systolic backend (the MXU):
 * the table / values are rounded as the dot's passes round them (precision 'default': one bf16
 * pass, RNE; 'high': bf16 hi + mid; 'highest': exact), resolved at run time as the dot resolves
 * its precision (the process default when the dot had none), flushing subnormals where the
 * backend does; accumulation in float32. Elsewhere (the reference backend): exact values,
 * float64 accumulation rounded once. A gathered row equals the dot's row exactly for finite
 * tables (a -0 becomes +0, as the dot's sum of +0 products does); a segment sum equals the
 * dot up to float32 summation order. Where the table holds inf or NaN the dot also adds
 * 0 * inf = NaN from the rows it does not select: the gather does not (see the README).
 *
 * `nominalFlops` (a parameter of both) is the replaced dot's FLOP count: cost analysis reports
 * it as the instruction's FLOPs so MFU figures do not change (analysis.ts).
 *
 * In the executable's arena (`setOneHotInArena`): where the result storage lies in the backend's
 * arena memory (the executable hands it a view of its arena, wasm/program.ts), the kernels run as
 * WebAssembly over that memory (wasm/oneHotKernel.ts `arenaKernels`): operands lying there (the
 * executable's views, a resident table) are read in place, the result written in place; the
 * gather's table rounded with SIMD (precision default; 'high' / 'highest' in JavaScript) and its
 * rows copied by the kernel; the segment sum by the SIMD kernel at precision default (others:
 * the JavaScript loop, over the same views). The same bits as the paths over host arrays.
 */
import { bf16, getBackend, getDefaultMatmulPrecision } from '@tpukit/core';
import { arenaHost, definePrimitive, envSwitch, type HostArray, type ShapedArray } from '@tpukit/core/internal';
import { type ArenaKernels, arenaKernels, segmentSumBf16, segmentSumKernelAvailable } from '../wasm/oneHotKernel';

let inArena = envSwitch('TPUKIT_ONEHOT_ARENA', true);

/**
 * Runs the one-hot primitives in the executable's arena (default; off when the environment
 * variable `TPUKIT_ONEHOT_ARENA` is `0`), for executables built afterwards: with zero-copy dots
 * (wasm/program.ts), a one-hot primitive reads the arena values it is given as views (the
 * segment sum's values: no copy out of the arena) and writes a float32 result that only wasm
 * kernels and other in-place readers read straight into its arena buffer (no copy in), as
 * WebAssembly kernels over that memory (see the file comment). The same bits either way.
 */
export function setOneHotInArena(on: boolean): void {
  if (typeof on !== 'boolean') throw new TypeError(`setOneHotInArena: on must be a boolean; got ${String(on)}`);
  inArena = on;
}

export function oneHotInArenaEnabled(): boolean {
  return inArena;
}

export type DotPrecision = string | readonly [string, string] | null;

export interface OneHotParams {
  /** Rows of the table (gather) or of the result (segment sum): the one-hot's class count. */
  classes: number;
  /** The replaced dot's precision (null: the process default at run time). */
  precision: DotPrecision;
  /** The result dtype (the dot's). */
  dtype: 'float32' | 'bfloat16';
  /** FLOPs of the replaced dot (2·|out|·K), what cost analysis reports. */
  nominalFlops: number;
}

const FLOAT = new Set(['float32', 'bfloat16']);
const INDEX = new Set(['float32', 'int32', 'uint32', 'int8', 'uint8']);

function check(op: string, [x, idx]: ShapedArray[], p: OneHotParams, rowsOf: 'table' | 'values'): void {
  if (!x || !idx) throw new TypeError(`${op}: takes (${rowsOf}, index); got ${x ? 1 : 0} operands`);
  if (x.shape.length !== 2 || !FLOAT.has(x.dtype)) throw new TypeError(`${op}: ${rowsOf} must be a float32 or bfloat16 matrix; got ${x.dtype}[${x.shape.join(',')}]`);
  if (idx.shape.length !== 1 || !INDEX.has(idx.dtype)) throw new TypeError(`${op}: index must be a vector of float32 or integers; got ${idx.dtype}[${idx.shape.join(',')}]`);
  if (!Number.isInteger(p.classes) || p.classes < 0) throw new RangeError(`${op}: classes must be a non-negative integer; got ${p.classes}`);
  if (!FLOAT.has(p.dtype)) throw new TypeError(`${op}: dtype must be float32 or bfloat16; got ${p.dtype}`);
}

/** How the systolic dot rounds a float32 operand: the number of bf16 terms it keeps (1, 2 or 3). */
type Terms = 1 | 2 | 3;
interface Mode {
  /** null: exact values, float64 accumulation (the reference backend's dot). */
  terms: Terms | null;
  flush: boolean;
}

const RANK: Record<string, Terms> = { default: 1, high: 2, highest: 3 };

function modeFor(dtype: string, precision: DotPrecision): Mode {
  const backend = getBackend();
  if (backend.name !== 'systolic') return { terms: null, flush: false };
  const flush = backend.hostKernels?.()?.flushSubnormals === true;
  if (dtype === 'bfloat16') return { terms: 1, flush };
  const [a, b] = typeof precision === 'string' ? [precision, precision] : (precision ?? [getDefaultMatmulPrecision() ?? 'default', getDefaultMatmulPrecision() ?? 'default']);
  return { terms: Math.max(RANK[a] ?? 1, RANK[b] ?? 1) as Terms, flush };
}

const hi = (x: number, flush: boolean): number => bf16.toFloat32(bf16.fromFloat32(x, { flushSubnormals: flush }));

/** `x` as the MXU passes see it: the sum of its first `terms` bf16 pieces (float32), or `x`'s rounding when not finite. */
function rounded(x: number, terms: Terms, flush: boolean): number {
  const h = hi(x, flush);
  if (terms === 1 || !Number.isFinite(h)) return h;
  const r1 = Math.fround(x - h);
  const m = hi(r1, flush);
  if (terms === 2) return Math.fround(m + h);
  const l = hi(Math.fround(r1 - m), flush);
  return Math.fround(Math.fround(l + m) + h);
}

/**
 * Reused scratch that grows to the largest call (the kernels run on the caller's thread, one at
 * a time): `get(n)` is a buffer of at least n elements.
 */
function grower<T extends Float32Array | Float64Array | Int32Array>(make: (n: number) => T): (n: number) => T {
  let buf = make(0);
  return (n) => {
    if (buf.length < n) buf = make(Math.max(n, buf.length * 2));
    return buf;
  };
}
/** Decoded bfloat16 operands and rounded tables. */
const f32Scratch = grower((n) => new Float32Array(n));
/** Float32 results before their bfloat16 rounding. */
const accScratch = grower((n) => new Float32Array(n));
const f64Scratch = grower((n) => new Float64Array(n));
const i32Scratch = grower((n) => new Int32Array(n));

/** A reused row of scratch, as floats and as their bits. */
interface Row {
  f: Float32Array;
  u: Uint32Array;
}
let rowBuf: Row = { f: new Float32Array(0), u: new Uint32Array(0) };
function rowScratch(n: number): Row {
  if (rowBuf.f.length < n) {
    const f = new Float32Array(n);
    rowBuf = { f, u: new Uint32Array(f.buffer) };
  }
  return rowBuf;
}

/** Elements [o, o + n) of `src` rounded as the dot's operand into `row` (`src` may be `row.f` with o = 0). */
function roundRow(src: Float32Array, o: number, n: number, row: Row, mode: Mode): void {
  const f = row.f;
  if (mode.terms === null || mode.terms === 1) {
    if (src !== f || o !== 0) for (let k = 0; k < n; k++) f[k] = src[o + k];
    if (mode.terms === null) return;
    // bf16 round to nearest even on the bits (NaN stays a quiet NaN, a subnormal flushes to a
    // signed zero where the backend flushes), as bf16.roundInPlace.
    const u = row.u;
    const flush = mode.flush;
    for (let k = 0; k < n; k++) {
      const b = u[k];
      u[k] = (b & 0x7fffffff) > 0x7f800000 ? (b | 0x00400000) & 0xffff0000 : flush && (b & 0x7f800000) === 0 ? b & 0x80000000 : ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) << 16;
    }
    return;
  }
  for (let k = 0; k < n; k++) f[k] = rounded(src[o + k], mode.terms, mode.flush);
}

/** Row v of a float32 or bfloat16 matrix with rows of n values, as the dot's operand, into `row`. */
function operandRow(x: HostArray, v: number, n: number, row: Row, mode: Mode): void {
  const a = v * n;
  if (x.dtype === 'float32') {
    roundRow(x.data as Float32Array, a, n, row, mode);
    return;
  }
  const d = x.data as Uint16Array;
  const u = row.u;
  for (let k = 0; k < n; k++) u[k] = d[a + k] << 16;
  roundRow(row.f, 0, n, row, mode);
}

/**
 * Views of rows 0..v-1 (n values each) of `t`, reused while `t` is the same array and the row
 * length repeats: the gather's rounded table always lies at the start of the f32 scratch, so
 * the views are made again only when that scratch grows or the table's shape changes.
 */
let rowsOf: Float32Array = new Float32Array(0);
let rowsN = 0;
let rowViews: Float32Array[] = [];
/** Views of `t`'s `v` rows of `n` values, cached (with `t`, `n`) for the next gathers of the same table. */
function tableRows(t: Float32Array, v: number, n: number): Float32Array[] {
  const rows = new globalThis.Array<Float32Array>(v);
  for (let r = 0; r < v; r++) rows[r] = t.subarray(r * n, (r + 1) * n);
  rowsOf = t;
  rowsN = n;
  rowViews = rows;
  return rows;
}

/** The float32 values of a float32 or bfloat16 host array. */
function valuesOf(x: HostArray): Float32Array {
  if (x.dtype === 'float32') return x.data as Float32Array;
  const n = x.data.length;
  const out = f32Scratch(n).subarray(0, n);
  bf16.decode(x.data as Uint16Array, out);
  return out;
}

/** Rounds `src` as the dot's operand into `dst` (both float32; may alias). */
function roundOperand(src: Float32Array, dst: Float32Array, mode: Mode): void {
  if (mode.terms === null) {
    if (dst !== src) dst.set(src);
    return;
  }
  if (mode.terms === 1) {
    if (dst !== src) dst.set(src);
    bf16.roundInPlace(dst, { flushSubnormals: mode.flush });
    return;
  }
  for (let i = 0; i < src.length; i++) dst[i] = rounded(src[i], mode.terms, mode.flush);
}

/** The row an index value selects, or -1 (not an integer in [0, classes)). */
const rowOf = (v: number, classes: number): number => (v >= 0 && v < classes && v === Math.floor(v) ? v : -1);

/** Writes the float32 result `acc` into `out` (float32, or bfloat16 bits rounded as the dot's result). */
function store(acc: Float32Array, out: Float32Array | Uint16Array, dtype: string, mode: Mode): void {
  if (dtype === 'float32') {
    if (out !== acc) (out as Float32Array).set(acc);
    return;
  }
  bf16.encode(acc, { flushSubnormals: mode.flush }, out as Uint16Array);
}

/** `t[i] + 0` for every element (-0 becomes +0: a one-hot row's sum starts from +0 products). */
function plusZero(t: Float32Array): void {
  for (let i = 0; i < t.length; i++) t[i] += 0;
}

/** Rows `rows[idx[m]]` (a zero row where the index selects none of the V rows) into rows m of `acc`, N values each. */
function copyRows(rows: Float32Array[], idx: ArrayLike<number>, V: number, N: number, M: number, acc: Float32Array): void {
  for (let m = 0; m < M; m++) {
    const v = rowOf(idx[m], V);
    const o = m * N;
    if (v < 0) acc.fill(0, o, o + N);
    else acc.set(rows[v], o);
  }
}

/** Row `idx[m]` of `table` rounded as the dot's operand (a zero row where the index selects none) into rows m of `acc`. */
function gatherRows(table: HostArray, idx: ArrayLike<number>, V: number, N: number, M: number, acc: Float32Array, mode: Mode): void {
  const row = rowScratch(N);
  for (let m = 0; m < M; m++) {
    const v = rowOf(idx[m], V);
    const o = m * N;
    if (v < 0) {
      acc.fill(0, o, o + N);
      continue;
    }
    operandRow(table, v, N, row, mode);
    for (let n = 0; n < N; n++) acc[o + n] = row.f[n] + 0;
  }
}

// No loop in `gatherInto` itself (they are the three functions above): a loop of V·N or M
// iterations here got the gather on-stack-replaced (OSR) in its first call, before the code after
// the loop had run once, and V8 kept entering that OSR code from the loop in later calls, each
// time deoptimising at the first access it had no type feedback for ("insufficient type feedback
// for generic named access", the row-view check below): 10 times in the 30 timed steps of the GPT
// bench's 1t and 2t trainers (BENCHMARKS.md, deopt15). Without a loop the gather is only ever
// optimised whole, from the feedback of complete calls.
function gatherInto([table, index]: HostArray[], p: OneHotParams, out: Float32Array | Uint16Array): void {
  const V = table.shape[0];
  const N = table.shape[1];
  const M = index.shape[0];
  const mode = modeFor(table.dtype, p.precision);
  if (V <= M && gatherInArena(table, index.data as ArrayLike<number>, V, N, M, out, mode)) return;
  const acc = p.dtype === 'float32' ? (out as Float32Array) : accScratch(M * N).subarray(0, M * N);
  const idx = index.data as ArrayLike<number>;
  // (Row copies by index, nothing allocated per row: block copies from row views cached per
  // table, or element loops.)
  if (V <= M) {
    // More rows gathered than the table has: the table rounded once (V·N elements), then rows copied.
    const src = valuesOf(table);
    const t = table.dtype === 'float32' ? f32Scratch(V * N).subarray(0, V * N) : src;
    roundOperand(src, t, mode);
    plusZero(t);
    // Each row a block copy from a cached view of the rounded table's row (a per-element loop
    // over M·N values was most of this kernel's time). Whether the cached views are `t`'s is
    // checked here. (The "insufficient type feedback" deopts once blamed on doing this check in a
    // helper were, as deopt15 measured them, the stale OSR code described above `gatherInto`.)
    const rows = rowsN === N && rowViews.length >= V && rowsOf.buffer === t.buffer && rowsOf.byteOffset === t.byteOffset && rowsOf.length >= V * N ? rowViews : tableRows(t, V, N);
    copyRows(rows, idx, V, N, M, acc);
  } else {
    // A large table (a real vocabulary): only the gathered rows are read and rounded (M·N elements).
    gatherRows(table, idx, V, N, M, acc, mode);
  }
  store(acc, out, p.dtype, mode);
}

function segmentSumInto([values, index]: HostArray[], p: OneHotParams, out: Float32Array | Uint16Array): void {
  const T = values.shape[0];
  const N = values.shape[1];
  const V = p.classes;
  const mode = modeFor(values.dtype, p.precision);
  const idx = index.data as ArrayLike<number>;
  if (mode.terms === 1 && segmentSumInArena(values, idx, V, N, T, out, mode)) return;
  const src = valuesOf(values);
  if (mode.terms === null) {
    // The reference dot: exact products, float64 accumulation, one rounding.
    const acc = f64Scratch(V * N).subarray(0, V * N);
    acc.fill(0);
    for (let t = 0; t < T; t++) {
      const v = rowOf(idx[t], V);
      if (v < 0) continue;
      const a = v * N;
      const b = t * N;
      for (let n = 0; n < N; n++) acc[a + n] += src[b + n];
    }
    const r = p.dtype === 'float32' ? (out as Float32Array) : accScratch(V * N).subarray(0, V * N);
    for (let i = 0; i < r.length; i++) r[i] = acc[i];
    store(r, out, p.dtype, mode);
    return;
  }
  const acc = p.dtype === 'float32' ? (out as Float32Array) : accScratch(V * N).subarray(0, V * N);
  if (mode.terms === 1 && !mode.flush && segmentSumKernelAvailable(N)) {
    // The WebAssembly SIMD kernel (same rounding, same order); it declines sizes its memory cannot hold.
    const rows = i32Scratch(T).subarray(0, T);
    for (let t = 0; t < T; t++) rows[t] = rowOf(idx[t], V);
    if (segmentSumBf16(src, rows, acc, N)) {
      store(acc, out, p.dtype, mode);
      return;
    }
  }
  acc.fill(0);
  // Float32 accumulation in token order (a Float32Array store rounds each sum); each selected
  // row is rounded as the dot's operand into a row of scratch first (rows with an index out of
  // range are never read).
  const row = rowScratch(N);
  for (let t = 0; t < T; t++) {
    const v = rowOf(idx[t], V);
    if (v < 0) continue;
    roundRow(src, t * N, N, row, mode);
    const a = v * N;
    for (let n = 0; n < N; n++) acc[a + n] += row.f[n];
  }
  store(acc, out, p.dtype, mode);
}

/** The arena kernels when `out` lies in the backend's arena memory (a view of the executable's arena) and rows are whole vectors, else null. */
function arenaOf(out: Float32Array | Uint16Array, N: number): ArenaKernels | null {
  if (!inArena || !(out instanceof Float32Array) || N % 4 !== 0 || N === 0) return null;
  const host = arenaHost();
  if (host === null || host.holds?.(out) !== true) return null;
  return arenaKernels(host);
}

const align16 = (n: number): number => Math.ceil(n / 16) * 16;

/** rows[m] (int32 at byte address `at` of the arena memory) = the row index m selects, or -1. */
function writeRows(k: ArenaKernels, at: number, idx: ArrayLike<number>, V: number, M: number): void {
  const rows = k.i32;
  const o = at >> 2;
  for (let m = 0; m < M; m++) rows[o + m] = rowOf(idx[m], V);
}

/** The byte address of `x`'s float32 values in the arena memory: where they lie when they lie there, else copied (bfloat16: decoded) to `at`. */
function operandAt(k: ArenaKernels, x: HostArray, at: number): number {
  const d = x.data;
  if (d instanceof Float32Array) {
    if (k.host.holds?.(d) === true) return d.byteOffset;
    k.f32.set(d, at >> 2);
    return at;
  }
  bf16.decode(d as Uint16Array, k.f32.subarray(at >> 2, (at >> 2) + d.length));
  return at;
}

/**
 * The gather (V <= M: the whole table rounded once) in the arena (see the file comment); false
 * when it does not apply (then the caller runs the path of host arrays). Scratch: the rows, a
 * copy of the table where it does not lie in the arena memory, the rounded table.
 */
function gatherInArena(table: HostArray, idx: ArrayLike<number>, V: number, N: number, M: number, out: Float32Array | Uint16Array, mode: Mode): boolean {
  const k = mode.terms === null ? null : arenaOf(out, N);
  if (k === null) return false;
  const rowBytes = align16(4 * M);
  const tableBytes = 4 * V * N;
  const at = k.scratch(rowBytes + 2 * tableBytes);
  if (at < 0) return false;
  writeRows(k, at, idx, V, M);
  const src = operandAt(k, table, at + rowBytes);
  const t = at + rowBytes + tableBytes;
  if (mode.terms === 1) (mode.flush ? k.run.roundFlush : k.run.round)(src, t, V * N);
  else {
    // (precision 'high' / 'highest': the JavaScript rounding of the path over host arrays)
    const tv = k.f32.subarray(t >> 2, (t >> 2) + V * N);
    roundOperand(k.f32.subarray(src >> 2, (src >> 2) + V * N), tv, mode);
    plusZero(tv);
  }
  k.run.gather(at, t, (out as Float32Array).byteOffset, M, N);
  return true;
}

/**
 * The segment sum at one bf16 pass in the arena (see the file comment); false when it does not
 * apply. Scratch: the rows, and a copy of the values where they do not lie in the arena memory.
 */
function segmentSumInArena(values: HostArray, idx: ArrayLike<number>, V: number, N: number, T: number, out: Float32Array | Uint16Array, mode: Mode): boolean {
  const k = arenaOf(out, N);
  if (k === null) return false;
  const rowBytes = align16(4 * T);
  const inPlace = values.data instanceof Float32Array && k.host.holds?.(values.data) === true;
  const at = k.scratch(rowBytes + (inPlace ? 0 : 4 * T * N));
  if (at < 0) return false;
  writeRows(k, at, idx, V, T);
  const src = operandAt(k, values, at + rowBytes);
  (mode.flush ? k.run.segsumFlush : k.run.segsum)(at, src, (out as Float32Array).byteOffset, T, N, V);
  return true;
}

const alloc = (o: ShapedArray): Float32Array | Uint16Array => (o.dtype === 'bfloat16' ? new Uint16Array(o.shape[0] * o.shape[1]) : new Float32Array(o.shape[0] * o.shape[1]));

/** `impl` (into a fresh array) and `implInto` of a kernel writing into its result storage. */
const kernels = (into: (args: HostArray[], p: OneHotParams, out: Float32Array | Uint16Array) => void) => ({
  impl(args: HostArray[], p: OneHotParams, [o]: ShapedArray[]) {
    const out = alloc(o);
    into(args, p, out);
    return [out];
  },
  implInto(args: HostArray[], p: OneHotParams, _o: ShapedArray, out: unknown) {
    into(args, p, out as Float32Array | Uint16Array);
  },
});

export const oneHotGatherP = definePrimitive<OneHotParams>({
  name: 'onehot_gather',
  abstractEval(avals, p) {
    check('onehot_gather', avals, p, 'table');
    const [table, idx] = avals;
    if (table.shape[0] !== p.classes) throw new RangeError(`onehot_gather: the table has ${table.shape[0]} rows but classes is ${p.classes}`);
    return [{ shape: [idx.shape[0], table.shape[1]], dtype: p.dtype, weakType: false }];
  },
  ...kernels(gatherInto),
});

export const oneHotSegmentSumP = definePrimitive<OneHotParams>({
  name: 'onehot_segment_sum',
  abstractEval(avals, p) {
    check('onehot_segment_sum', avals, p, 'values');
    const [values, idx] = avals;
    if (values.shape[0] !== idx.shape[0]) throw new RangeError(`onehot_segment_sum: values have ${values.shape[0]} rows but index has ${idx.shape[0]} entries`);
    return [{ shape: [p.classes, values.shape[1]], dtype: p.dtype, weakType: false }];
  },
  ...kernels(segmentSumInto),
});

/** Whether an instruction's primitive is one of these (their `nominalFlops` are the replaced dot's). */
export const isOneHotPrimitive = (name: string | undefined): boolean => name === 'onehot_gather' || name === 'onehot_segment_sum';
