/**
 * The index walk gather and scatter share: for every index vector (the batch dims of `indices`),
 * compute the operand start of one window (clamped so the window fits, or flagged out of
 * bounds), then visit every element of that window with its operand offset and the matching
 * offset in the other array (gather's output, scatter's updates). Offsets are carried
 * incrementally, so the inner loop does no index arithmetic beyond adds.
 */
import type { Shape } from '../shape';
import { sizeOf, stridesOf } from '../shape';
import type { StorageArray } from '../dtype';

export interface WindowWalk {
  operandShape: Shape;
  /** Index data, `[...batchShape, K]` row-major. */
  indices: StorageArray;
  batchShape: Shape;
  /** Operand dim each of the K index components sets (start_index_map / scatter_dims_to_operand_dims). */
  startDims: readonly number[];
  /** Window extent along every operand dim (1 for collapsed / inserted / batching dims). */
  windowExtent: readonly number[];
  /** Operand dims the window walks, in order, and their sizes. */
  winDims: readonly number[];
  winSizes: readonly number[];
  operandBatchingDims: readonly number[];
  indicesBatchingDims: readonly number[];
  /** Strides in the other array for each batch dim and each window dim. */
  otherBatchStrides: readonly number[];
  otherWindowStrides: readonly number[];
  /** Clamp starts so the window fits; otherwise a start outside [0, dim - extent] marks the window out of bounds. */
  clamp: boolean;
  /** Visit out-of-bounds windows (with `oob` true) instead of skipping them. */
  visitOutOfBounds: boolean;
}

export function walkWindows(w: WindowWalk, visit: (opOff: number, otherOff: number, oob: boolean) => void): void {
  const r = w.operandShape.length;
  const nb = w.batchShape.length;
  const nw = w.winDims.length;
  const K = w.startDims.length;
  const xst = stridesOf(w.operandShape);
  const nBatch = sizeOf(w.batchShape);
  const nWin = sizeOf(w.winSizes);
  if (nWin === 0) return;
  const winStride = w.winDims.map((d) => xst[d]);
  const G = new Int32Array(nb);
  const W = new Int32Array(nw);
  const start = new Float64Array(r);
  for (let b = 0; b < nBatch; b++) {
    start.fill(0);
    let oob = false;
    for (let k = 0; k < K; k++) {
      const d = w.startDims[k];
      const hi = w.operandShape[d] - w.windowExtent[d];
      let s = Number(w.indices[b * K + k]);
      if (w.clamp) s = s < 0 ? 0 : s > hi ? hi : s;
      else if (s < 0 || s > hi) oob = true;
      start[d] = s;
    }
    for (let i = 0; i < w.operandBatchingDims.length; i++) start[w.operandBatchingDims[i]] = G[w.indicesBatchingDims[i]];
    if (!oob || w.visitOutOfBounds) {
      let otherOff = 0;
      for (let j = 0; j < nb; j++) otherOff += G[j] * w.otherBatchStrides[j];
      let opOff = 0;
      for (let d = 0; d < r; d++) opOff += start[d] * xst[d];
      W.fill(0);
      for (let e = 0; e < nWin; e++) {
        visit(opOff, otherOff, oob);
        for (let j = nw - 1; j >= 0; j--) {
          W[j]++;
          opOff += winStride[j];
          otherOff += w.otherWindowStrides[j];
          if (W[j] < w.winSizes[j]) break;
          opOff -= winStride[j] * w.winSizes[j];
          otherOff -= w.otherWindowStrides[j] * w.winSizes[j];
          W[j] = 0;
        }
      }
    }
    for (let j = nb - 1; j >= 0; j--) {
      if (++G[j] < w.batchShape[j]) break;
      G[j] = 0;
    }
  }
}
