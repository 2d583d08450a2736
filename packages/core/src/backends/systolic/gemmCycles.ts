/**
 * Analytic cycle counts for one GEMM C[M,N] = A[M,K] B[K,N] on a rows x cols systolic array.
 *
 * Every dataflow maps the GEMM to (Sr, Sc, T): the stationary operand is cut into Sr x Sc and
 * tiled onto the array in row folds ceil(Sr/rows) and column folds ceil(Sc/cols); T values
 * stream through per fold. As in SCALE-Sim v2 (scalesim/compute/systolic_compute_{ws,os,is}.py):
 *   ws (weight stationary): Sr = K, Sc = N, T = M
 *   os (output stationary): Sr = M, Sc = N, T = K
 *   is (input stationary):  Sr = K, Sc = M, T = N
 *
 * model 'scalesim' reproduces SCALE-Sim v2's compute model: folds run one after the other, each
 * taking as many cycles as its demand-matrix rows: ws/is 2*rows + cols + T - 2 (load the
 * stationary tile, stream T, drain with skew), os rows + cols + T - 2. Its compute utilization
 * is the mean over folds of rowsUsed*colsUsed*T / (rows*cols*foldSpan), with foldSpan the
 * filter (ws) / input (is) / output (os) demand rows plus cols - 1 (2*rows + 2*cols + T - 3 for
 * ws/is, rows + cols + T - 2 for os). These are the formulas the demand-matrix construction in
 * those files yields; `scalesimFold` in the tests rebuilds the matrices to check them, and
 * hand-simulated layers pin the numbers.
 *
 * `report` gives the row SCALE-Sim writes to COMPUTE_REPORT.csv for the layer when no stall
 * occurs (scalesim/single_layer_sim.py, calc_report_data): its "Total Cycles" is the cycle stamp
 * of the last OFMAP demand row (double_buffered_scratchpad_mem.py, service_memory_requests: row i
 * is issued at cycle i plus the stalls so far, and total_cycles = the last row's stamp), so it is
 * our `cycles` - 1; "Overall Util %" = 100 * M*N*K / (Total Cycles * rows * cols); "Mapping
 * Efficiency %" and "Compute Util %" are the per-fold means above, times 100. Stall cycles come
 * from SCALE-Sim's SRAM/DRAM model (they are 0 when the operands fit in the SRAMs and nothing
 * misses); SCALE-Sim adds them to Total Cycles, we do not model them.
 *
 * model 'overlapped' (default) is a real MXU: the next stationary tile is loaded while the
 * current one streams (double-buffered weights), so after the first fold each fold starts
 * max(T, rows) cycles after the previous one; folds are spread over all `units` arrays (MXUs of
 * a chip) and fill/drain is paid once. With f = ceil(folds/units):
 * cycles = rows (first load) + (f - 1) * max(T, rows) + T + rows + cols - 2.
 * For one fold this equals SCALE-Sim's fold (2*rows + cols + T - 2); it is never more.
 */
import { showValue } from '../../describe';

export type Dataflow = 'ws' | 'os' | 'is';
export type CycleModel = 'scalesim' | 'overlapped';

export interface GemmDims {
  m: number;
  k: number;
  n: number;
}

export interface ArrayConfig {
  rows: number;
  cols: number;
  dataflow?: Dataflow;
  model?: CycleModel;
  /** Arrays working in parallel ('overlapped' only); default 1. */
  units?: number;
}

export interface GemmCycles {
  cycles: number;
  /** Fraction of MAC-cycles doing useful work (SCALE-Sim's compute utilization for 'scalesim'). */
  utilization: number;
  /** Number of stationary tiles: rowFolds * colFolds. */
  folds: number;
  rowFolds: number;
  colFolds: number;
  /** Mean fraction of the array a fold maps (SCALE-Sim's mapping efficiency). */
  mappingEfficiency: number;
  /** Useful multiply-accumulates: m * k * n. */
  macs: number;
  /** model 'scalesim' only: SCALE-Sim v2's COMPUTE_REPORT.csv row for this layer, without stalls. */
  report?: ScalesimReport;
}

/** The columns of SCALE-Sim v2's COMPUTE_REPORT.csv, for a run without memory stalls. */
export interface ScalesimReport {
  /** "Total Cycles": the cycle stamp of the last demand row, `cycles - 1`. */
  totalCycles: number;
  /** "Stall Cycles": 0 (memory stalls are not modelled). */
  stallCycles: 0;
  /** "Overall Util %": 100 * m*k*n / (totalCycles * rows * cols). */
  overallUtilPct: number;
  /** "Mapping Efficiency %": 100 * mappingEfficiency. */
  mappingEfficiencyPct: number;
  /** "Compute Util %": 100 * utilization (mean over folds). */
  computeUtilPct: number;
}

function checkPositiveInt(op: string, name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new RangeError(`${op}: ${name} must be a positive integer; got ${String(v)}`);
  return v;
}

/** (Sr, Sc, T) of a GEMM under a dataflow, as SCALE-Sim maps it. */
export function operandMapping({ m, k, n }: GemmDims, dataflow: Dataflow): { sr: number; sc: number; t: number } {
  switch (dataflow) {
    case 'ws': return { sr: k, sc: n, t: m };
    case 'os': return { sr: m, sc: n, t: k };
    case 'is': return { sr: k, sc: m, t: n };
    default: {
      const never: never = dataflow;
      throw new Error(`gemmCycles: dataflow must be 'ws', 'os' or 'is'; got ${showValue(never)}`);
    }
  }
}

export function gemmCycles(dims: GemmDims, cfg: ArrayConfig): GemmCycles {
  const op = 'gemmCycles';
  const m = checkPositiveInt(op, 'm', dims.m);
  const k = checkPositiveInt(op, 'k', dims.k);
  const n = checkPositiveInt(op, 'n', dims.n);
  const R = checkPositiveInt(op, 'rows', cfg.rows);
  const C = checkPositiveInt(op, 'cols', cfg.cols);
  const dataflow = cfg.dataflow ?? 'ws';
  const model = cfg.model ?? 'overlapped';
  const units = checkPositiveInt(op, 'units', cfg.units ?? 1);
  if (model !== 'scalesim' && model !== 'overlapped') throw new Error(`${op}: model must be 'scalesim' or 'overlapped'; got ${showValue(model)}`);
  const { sr, sc, t } = operandMapping({ m, k, n }, dataflow);
  const rowFolds = Math.ceil(sr / R);
  const colFolds = Math.ceil(sc / C);
  const folds = rowFolds * colFolds;
  const macs = m * k * n;
  // Mapping efficiency: mean over folds of used cells / all cells (same for both models).
  let mapped = 0;
  for (let fr = 0; fr < rowFolds; fr++) {
    const ru = Math.min(R, sr - fr * R);
    for (let fc = 0; fc < colFolds; fc++) mapped += ru * Math.min(C, sc - fc * C);
  }
  const mappingEfficiency = mapped / (folds * R * C);
  if (model === 'scalesim') {
    if (units !== 1) throw new Error(`${op}: model 'scalesim' simulates one array; got units ${units}`);
    const perFold = dataflow === 'os' ? R + C + t - 2 : 2 * R + C + t - 2;
    const span = dataflow === 'os' ? R + C + t - 2 : 2 * R + 2 * C + t - 3;
    // Every fold has the same span, so the mean utilization is mapped MACs over span cycles.
    const utilization = (mapped * t) / (folds * R * C * span);
    const cycles = folds * perFold;
    // SCALE-Sim divides by its Total Cycles, which is 0 only for m = k = n = 1 under os on a 1x1
    // array (it raises ZeroDivisionError there); we report 100% for that one MAC.
    const totalCycles = cycles - 1;
    const report: ScalesimReport = {
      totalCycles,
      stallCycles: 0,
      overallUtilPct: totalCycles > 0 ? (100 * macs) / (totalCycles * R * C) : 100,
      mappingEfficiencyPct: 100 * mappingEfficiency,
      computeUtilPct: 100 * utilization,
    };
    return { cycles, utilization, folds, rowFolds, colFolds, mappingEfficiency, macs, report };
  }
  const f = Math.ceil(folds / units);
  const cycles = R + (f - 1) * Math.max(t, R) + t + R + C - 2;
  return { cycles, utilization: macs / (cycles * units * R * C), folds, rowFolds, colFolds, mappingEfficiency, macs };
}
