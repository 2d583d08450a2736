/**
 * A cycle-level simulator of a small weight-stationary systolic array: a rows x cols grid of
 * processing elements (PEs), each holding one weight, a horizontal activation register and a
 * vertical partial-sum register. Values really move one cell per cycle. It exists to check the
 * analytic cycle counts (`gemmCycles`, SCALE-Sim model) and the MXU arithmetic (bf16 operands,
 * exact products, f32 partial sums) against something that does the work step by step.
 *
 * One fold: weights enter at the top edge and shift down one row per cycle (rows cycles, the
 * last row's weight enters first). Then activation A[m, k] enters row k at the left edge at
 * stream cycle m + k (the skew), moves right one column per cycle, and PE(k, n) adds
 * A[m,k] * W[k,n] to the partial sum arriving from above; sums leave the bottom edge. The last
 * output leaves after T + rows + cols - 2 stream cycles, so a fold takes 2*rows + cols + T - 2.
 * Folds run one after another; partial outputs of successive K folds are summed in f32.
 */
import * as bf16 from '../../bf16';

export interface PeGridResult {
  /** C[M,N] row-major (f32). */
  out: Float32Array;
  cycles: number;
  folds: number;
  /** Multiply-accumulates performed by PEs holding a real (non-padding) weight and activation. */
  macs: number;
}

/**
 * Simulates C = A B on a rows x cols weight-stationary grid. `a` is [m,k], `b` is [k,n], both
 * row-major float32; operands are rounded to bf16 on entry, as the MXU does.
 */
export function simulatePeGrid(a: Float32Array, b: Float32Array, dims: { m: number; k: number; n: number }, grid: { rows: number; cols: number }): PeGridResult {
  const { m: M, k: K, n: N } = dims;
  const { rows: R, cols: C } = grid;
  if (a.length !== M * K || b.length !== K * N) {
    throw new Error(`simulatePeGrid: operand sizes ${a.length} and ${b.length} do not match m=${M}, k=${K}, n=${N}`);
  }
  const ar = bf16.roundInPlace(Float32Array.from(a));
  const br = bf16.roundInPlace(Float32Array.from(b));
  const out = new Float32Array(M * N);
  const weight = new Float32Array(R * C);
  const wValid = new Uint8Array(R * C);
  const act = new Float32Array(R * C);
  const actValid = new Uint8Array(R * C);
  const actRow = new Int32Array(R * C); // which m the activation belongs to
  const psum = new Float32Array(R * C);
  const nextAct = new Float32Array(R * C);
  const nextActValid = new Uint8Array(R * C);
  const nextActRow = new Int32Array(R * C);
  const nextPsum = new Float32Array(R * C);
  let cycles = 0;
  let macs = 0;
  const rowFolds = Math.ceil(K / R);
  const colFolds = Math.ceil(N / C);
  for (let fc = 0; fc < colFolds; fc++) {
    for (let fr = 0; fr < rowFolds; fr++) {
      const k0 = fr * R;
      const n0 = fc * C;
      // Weight load: shift down one row per cycle; the weight for row r enters at cycle R-1-r.
      weight.fill(0);
      wValid.fill(0);
      for (let t = 0; t < R; t++) {
        for (let r = R - 1; r > 0; r--) {
          for (let c = 0; c < C; c++) {
            weight[r * C + c] = weight[(r - 1) * C + c];
            wValid[r * C + c] = wValid[(r - 1) * C + c];
          }
        }
        const srcRow = R - 1 - t; // the row whose weight enters now
        for (let c = 0; c < C; c++) {
          const k = k0 + srcRow;
          const n = n0 + c;
          const ok = k < K && n < N;
          weight[c] = ok ? br[k * N + n] : 0;
          wValid[c] = ok ? 1 : 0;
        }
        cycles++;
      }
      // Streaming: T = M activations per row, skewed by row index.
      act.fill(0);
      actValid.fill(0);
      psum.fill(0);
      const streamCycles = M + R + C - 2;
      for (let t = 0; t < streamCycles; t++) {
        for (let r = 0; r < R; r++) {
          for (let c = 0; c < C; c++) {
            const i = r * C + c;
            // Activation arriving from the left (or the edge input).
            let av = 0;
            let valid = 0;
            let mrow = -1;
            if (c === 0) {
              const mm = t - r;
              const k = k0 + r;
              if (mm >= 0 && mm < M && k < K) {
                av = ar[mm * K + k];
                valid = 1;
                mrow = mm;
              }
            } else {
              av = act[i - 1];
              valid = actValid[i - 1];
              mrow = actRow[i - 1];
            }
            // Partial sum arriving from above (0 at the top edge).
            const pin = r === 0 ? 0 : psum[i - C];
            let p = pin;
            if (valid && wValid[i]) {
              p = Math.fround(pin + av * weight[i]); // bf16 x bf16 is exact in f32
              macs++;
            }
            nextAct[i] = av;
            nextActValid[i] = valid;
            nextActRow[i] = mrow;
            nextPsum[i] = p;
          }
        }
        act.set(nextAct);
        actValid.set(nextActValid);
        actRow.set(nextActRow);
        psum.set(nextPsum);
        // Outputs leaving the bottom edge this cycle: column c carries row m = t - (R-1) - c.
        for (let c = 0; c < C; c++) {
          const mm = t - (R - 1) - c;
          const n = n0 + c;
          if (mm >= 0 && mm < M && n < N) {
            const o = mm * N + n;
            out[o] = fr === 0 ? psum[(R - 1) * C + c] : Math.fround(out[o] + psum[(R - 1) * C + c]);
          }
        }
        cycles++;
      }
    }
  }
  return { out, cycles, folds: rowFolds * colFolds, macs };
}
