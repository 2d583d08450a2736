/**
 * The scatter family: `scatter` (replace), `scatter-add`, `scatter-mul`, `scatter-min` and
 * `scatter-max`, with JAX's ScatterDimensionNumbers (update_window_dims, inserted_window_dims,
 * scatter_dims_to_operand_dims, operand_batching_dims, scatter_indices_batching_dims); the index
 * vector is the last dimension of `indices`. The combiner is the primitive itself (JAX carries
 * an update jaxpr instead), so every param stays plain data.
 *
 * Modes: 'clip' clamps each start index so the update window fits; 'fill' (JAX's FILL_OR_DROP,
 * the default) and 'promise_in_bounds' drop any update window that does not fit, which is what
 * XLA does natively. Updates are applied in row-major order of the update scatter dims, so with
 * repeated indices `scatter` keeps the last one (XLA leaves the order unspecified).
 * Combining kernels work in the operand's own storage for float32 and integers (float32 rounds
 * after every update, as XLA does; integers wrap); bfloat16/float16 combine in float64 and round
 * once at the end (XLA rounds after each update).
 */
import { numbersToStorage, storageToNumbers } from '../array';
import { type DType, is16BitFloat, isInteger } from '../dtype';
import type { HostArray, PrimitiveDef, ShapedArray } from '../primitive';
import { fmt, stridesOf } from '../shape';
import { walkWindows } from './windowWalk';
import { type GatherScatterMode, checkBatching, checkDimList, checkIndices, checkMode } from './gather';

export interface ScatterDimensionNumbers {
  readonly updateWindowDims: readonly number[];
  readonly insertedWindowDims: readonly number[];
  readonly scatterDimsToOperandDims: readonly number[];
  readonly operandBatchingDims: readonly number[];
  readonly scatterIndicesBatchingDims: readonly number[];
}

export interface ScatterParams {
  dimensionNumbers: ScatterDimensionNumbers;
  mode: GatherScatterMode;
  indicesAreSorted: boolean;
  uniqueIndices: boolean;
}

function scatterShapeCheck(op: string, operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, p: ScatterParams): void {
  const dn = p.dimensionNumbers;
  const r = operand.shape.length;
  checkMode(op, p.mode);
  if (updates.dtype !== operand.dtype) throw new TypeError(`${op}: updates dtype ${updates.dtype} must equal operand dtype ${operand.dtype}`);
  checkIndices(op, indices, dn.scatterDimsToOperandDims.length, `scatter_dims_to_operand_dims ${fmt(dn.scatterDimsToOperandDims)}`);
  checkDimList(op, 'scatter_dims_to_operand_dims', dn.scatterDimsToOperandDims, r, `operand ${fmt(operand.shape)}`, false);
  checkDimList(op, 'inserted_window_dims', dn.insertedWindowDims, r, `operand ${fmt(operand.shape)}`, true);
  checkDimList(op, 'operand_batching_dims', dn.operandBatchingDims, r, `operand ${fmt(operand.shape)}`, true);
  checkBatching(op, operand, indices, dn.operandBatchingDims, dn.scatterIndicesBatchingDims, 'scatter_indices_batching_dims');
  checkDimList(op, 'update_window_dims', dn.updateWindowDims, updates.shape.length, `updates ${fmt(updates.shape)}`, true);
  for (const d of dn.insertedWindowDims) {
    if (dn.operandBatchingDims.includes(d)) throw new Error(`${op}: dimension ${d} is both in inserted_window_dims and operand_batching_dims`);
  }
  const windowOperandDims = operand.shape.map((_, d) => d).filter((d) => !dn.insertedWindowDims.includes(d) && !dn.operandBatchingDims.includes(d));
  if (windowOperandDims.length !== dn.updateWindowDims.length) {
    throw new Error(
      `${op}: update_window_dims ${fmt(dn.updateWindowDims)} must have ${windowOperandDims.length} entries (operand rank ${r} minus inserted_window_dims and operand_batching_dims)`,
    );
  }
  const batchShape = indices.shape.slice(0, -1);
  const expectRank = batchShape.length + dn.updateWindowDims.length;
  if (updates.shape.length !== expectRank) {
    throw new Error(`${op}: updates ${fmt(updates.shape)} must have rank ${expectRank} (indices batch dims ${fmt(batchShape)} plus ${dn.updateWindowDims.length} window dims)`);
  }
  let b = 0;
  let w = 0;
  for (let i = 0; i < updates.shape.length; i++) {
    if (dn.updateWindowDims.includes(i)) {
      const od = windowOperandDims[w++];
      if (updates.shape[i] > operand.shape[od]) {
        throw new Error(`${op}: update window dimension ${i} (size ${updates.shape[i]}) is larger than operand dimension ${od} (size ${operand.shape[od]})`);
      }
    } else if (updates.shape[i] !== batchShape[b++]) {
      throw new Error(`${op}: updates ${fmt(updates.shape)} scatter dimension ${i} must match indices batch shape ${fmt(batchShape)}`);
    }
  }
}

type Combine = (a: number, b: number, dtype: DType) => number;

/** Walks every in-bounds (operand offset, update offset) pair in application order. */
function forEachUpdate(x: HostArray, idx: HostArray, upd: HostArray, p: ScatterParams, visit: (opOff: number, updOff: number) => void): void {
  const dn = p.dimensionNumbers;
  if (upd.data.length === 0) return;
  const winDims = x.shape.map((_, d) => d).filter((d) => !dn.insertedWindowDims.includes(d) && !dn.operandBatchingDims.includes(d));
  const winSizes = dn.updateWindowDims.map((d) => upd.shape[d]);
  const extent = x.shape.map(() => 1);
  winDims.forEach((d, j) => (extent[d] = winSizes[j]));
  const ust = stridesOf(upd.shape);
  walkWindows(
    {
      operandShape: x.shape,
      indices: idx.data,
      batchShape: idx.shape.slice(0, -1),
      startDims: dn.scatterDimsToOperandDims,
      windowExtent: extent,
      winDims,
      winSizes,
      operandBatchingDims: dn.operandBatchingDims,
      indicesBatchingDims: dn.scatterIndicesBatchingDims,
      otherBatchStrides: upd.shape.map((_, i) => i).filter((i) => !dn.updateWindowDims.includes(i)).map((i) => ust[i]),
      otherWindowStrides: dn.updateWindowDims.map((d) => ust[d]),
      clamp: p.mode === 'clip',
      visitOutOfBounds: false,
    },
    visit,
  );
}

/** A scatter's shape rule and reference kernel (the primitives: gatherScatter.ts). */
export function scatterDef(name: string, combine: Combine | null): Omit<PrimitiveDef<ScatterParams>, 'rules'> {
  return {
    name,
    abstractEval([operand, indices, updates], p) {
      scatterShapeCheck(name, operand, indices, updates, p);
      return [{ shape: operand.shape, dtype: operand.dtype, weakType: operand.weakType }];
    },
    impl([x, idx, upd], p) {
      if (combine === null) {
        // Replacement moves storage words: bit-exact for every dtype.
        const out = x.data.slice();
        forEachUpdate(x, idx, upd, p, (o, u) => (out[o] = upd.data[u]));
        return [out];
      }
      const dtype = x.dtype;
      if (dtype !== 'bool' && !is16BitFloat(dtype)) {
        // float32 and integers combine in place in their own storage: float32 rounds after
        // every update (as XLA does) and integer stores wrap.
        const acc = x.data.slice();
        const uv = upd.data;
        forEachUpdate(x, idx, upd, p, (o, u) => (acc[o] = combine(acc[o], uv[u], dtype)));
        return [acc];
      }
      const acc = Float64Array.from(storageToNumbers(x.data, dtype));
      const uv = storageToNumbers(upd.data, dtype);
      forEachUpdate(x, idx, upd, p, (o, u) => (acc[o] = combine(acc[o], uv[u], dtype)));
      if (dtype === 'bool') for (let i = 0; i < acc.length; i++) acc[i] = acc[i] ? 1 : 0;
      return [numbersToStorage(acc, dtype)];
    },
  };
}

/** The combiners of the scatter family (null: replace). */
export const COMBINE = {
  scatter: null,
  add: (a: number, b: number, d: DType): number => (d === 'bool' ? (a || b ? 1 : 0) : isInteger(d) ? wrap(a + b, d) : a + b),
  mul: (a: number, b: number, d: DType): number => (d === 'bool' ? (a && b ? 1 : 0) : isInteger(d) ? wrap(Math.imul(a, b), d) : a * b),
  min: (a: number, b: number): number => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.min(a, b)),
  max: (a: number, b: number): number => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.max(a, b)),
} as const;

/** Integer wrap-around to the dtype's range (so long accumulations stay exact). */
function wrap(v: number, d: DType): number {
  switch (d) {
    case 'int32': return v | 0;
    case 'uint32': return v >>> 0;
    case 'int8': return (v << 24) >> 24;
    case 'uint8': return v & 0xff;
    default: return v;
  }
}
