/**
 * The cost model: gemmCycles against SCALE-Sim v2's demand-matrix construction and against the
 * cycle-level PE-grid simulator, the overlapped MXU model, presets, roofline and the ledger.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bf16, np, systolic, withBackend } from '../../index';

const { gemmCycles, simulatePeGrid, presets, withLedger, mfu } = systolic;

/**
 * SCALE-Sim v2's demand matrices for one fold, rebuilt step by step from
 * scalesim/compute/systolic_compute_{ws,os,is}.py (prefix / operand / suffix row blocks, then
 * the skew that adds `columns - 1` rows). Returns each matrix's row count and the fold span used
 * by its utilization (rows + cols - 1 of the matrix it is computed on).
 */
function scalesimFold(dataflow: 'ws' | 'os' | 'is', R: number, C: number, T: number): { ifmap: number; filter: number; ofmap: number; span: number } {
  const skew = (rows: number, cols: number): number => rows + cols - 1;
  if (dataflow === 'ws') {
    const ifmap = skew(R + T + (C - 1), R); // prefix arr_row, T, suffix arr_col-1; skew over R columns
    const filter = R + (R + C + T - 2); // R weight rows, suffix; no skew
    const ofmap = skew(2 * R - 1 + T, C); // prefix 2R-1, T; skew over C columns
    return { ifmap, filter, ofmap, span: filter + C - 1 };
  }
  if (dataflow === 'is') {
    const ifmap = R + (R + C + T - 2); // R stationary rows, suffix; no skew
    const filter = skew(R + T + (C - 1), R);
    const ofmap = skew(2 * R - 1 + T, C);
    return { ifmap, filter, ofmap, span: ifmap + C - 1 };
  }
  const ifmap = skew(T + (C - 1), R); // T, suffix arr_col-1; skew over R
  const filter = skew(T + (R - 1), C);
  const ofmapBeforeSkew = T - 1 + R; // prefix T-1, R output rows
  const ofmap = skew(ofmapBeforeSkew, C);
  return { ifmap, filter, ofmap, span: ofmapBeforeSkew + C - 1 };
}

describe('gemmCycles', () => {
  it("'scalesim' equals SCALE-Sim's serialised folds and mean per-fold compute utilization", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 32 }),
        fc.integer({ min: 1, max: 32 }),
        fc.constantFrom('ws' as const, 'os' as const, 'is' as const),
        (m, k, n, R, C, dataflow) => {
          const g = gemmCycles({ m, k, n }, { rows: R, cols: C, dataflow, model: 'scalesim' });
          const { sr, sc, t } = systolic.operandMapping({ m, k, n }, dataflow);
          let cycles = 0;
          let utilSum = 0;
          let folds = 0;
          for (let fcol = 0; fcol < Math.ceil(sc / C); fcol++) {
            for (let frow = 0; frow < Math.ceil(sr / R); frow++) {
              const f = scalesimFold(dataflow, R, C, t);
              expect(f.ifmap).toBe(f.filter); // SCALE-Sim asserts the three demand matrices stay in sync
              expect(f.ofmap).toBe(f.filter);
              cycles += f.filter;
              const used = Math.min(R, sr - frow * R) * Math.min(C, sc - fcol * C);
              utilSum += (used * t) / (R * C * f.span);
              folds++;
            }
          }
          expect(g.cycles).toBe(cycles);
          expect(g.folds).toBe(folds);
          expect(g.utilization).toBeCloseTo(utilSum / folds, 12);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('matches a hand-computed weight-stationary case', () => {
    // 4x4 array, M=5 K=6 N=7: 2x2 folds of 2*4+4+5-2 = 15 cycles; used cells 16,12,8,6; span 18.
    const g = gemmCycles({ m: 5, k: 6, n: 7 }, { rows: 4, cols: 4, dataflow: 'ws', model: 'scalesim' });
    expect(g).toMatchObject({ cycles: 60, folds: 4, rowFolds: 2, colFolds: 2 });
    expect(g.utilization).toBeCloseTo((42 * 5) / (4 * 16 * 18), 12);
    expect(g.mappingEfficiency).toBeCloseTo(42 / 64, 12);
  });

  // Layers hand-simulated through SCALE-Sim v2's code (scalesim-project/scale-sim-v2:
  // systolic_compute_ws.py at 11a8413, _os.py at 0b80b27, _is.py at 1f53104; the report from
  // single_layer_sim.py calc_report_data and double_buffered_scratchpad_mem.py
  // service_memory_requests). A GEMM layer "M, N, K" becomes the conv [ifmap M x K, filter 1 x K,
  // 1 channel, N filters] (topology_utils.py load_arrays_gemm), so the operand matrices are
  // ifmap [M, K], filter [K, N], ofmap [M, N]. Folds are visited col fold outer, row fold inner.
  // skew_matrix(rows x cols) appends cols - 1 rows. With no stalls, demand row i is serviced at
  // cycle i, so the report's Total Cycles is the last row's index: demand rows - 1.
  it('reproduces hand-simulated SCALE-Sim layers, report columns included', () => {
    const layer = (dataflow: 'ws' | 'os' | 'is', rows: number, cols: number, m: number, n: number, k: number) =>
      gemmCycles({ m, k, n }, { rows, cols, dataflow, model: 'scalesim' });

    // ws, 2x2 array, M=3 N=2 K=2: Sr = ifmap cols = K = 2, Sc = filter cols = N = 2, T = ifmap
    // rows = M = 3; one fold. ifmap demand: prefix arr_row (2) + T (3) + suffix arr_col-1 (1) = 6
    // rows, skewed over 2 columns -> 7. filter: 2 weight rows + suffix arr_row+arr_col+T-2 (5) = 7,
    // no skew. ofmap: prefix 2*arr_row-1 (3) + T (3) = 6, skewed over 2 columns -> 7. 7 demand
    // rows: Total Cycles 6. compute_util_this_fold: cycles_this_fold = filter rows 7 + arr_col 2 - 1
    // = 8, mac_used = 2*2, so 4*3 / (4*8) = 0.375. Overall util = 3*2*2 / (6*4) = 50%.
    let g = layer('ws', 2, 2, 3, 2, 2);
    expect(g).toMatchObject({ cycles: 7, folds: 1, report: { totalCycles: 6, stallCycles: 0, mappingEfficiencyPct: 100 } });
    expect(g.report!.computeUtilPct).toBeCloseTo(37.5, 12);
    expect(g.report!.overallUtilPct).toBeCloseTo(50, 12);

    // ws, 4x4 array, M=5 N=7 K=6: Sr=6 (2 row folds: 4, 2 rows used), Sc=7 (2 col folds: 4, 3),
    // T=5. Per fold: ifmap 4+5+3 = 12 -> skew over 4 -> 15; filter 4 + (4+4+5-2) = 15; ofmap
    // 7+5 = 12 -> skew over 4 -> 15. 4 folds x 15 = 60 rows: Total Cycles 59. Used cells in visit
    // order (fc, fr): 16, 8, 12, 6 = 42 of 64; cycles_this_fold = 15 + 4 - 1 = 18, so compute
    // util = mean(used*5/(16*18)) = 42*5/(4*16*18); overall = 5*7*6/(59*16).
    g = layer('ws', 4, 4, 5, 7, 6);
    expect(g).toMatchObject({ cycles: 60, folds: 4, report: { totalCycles: 59 } });
    expect(g.report!.computeUtilPct).toBeCloseTo((100 * 42 * 5) / (4 * 16 * 18), 12);
    expect(g.report!.mappingEfficiencyPct).toBeCloseTo((100 * 42) / 64, 12);
    expect(g.report!.overallUtilPct).toBeCloseTo((100 * 210) / (59 * 16), 12);

    // os, 2 rows x 3 cols, M=3 N=4 K=5: Sr = ifmap rows = M = 3 (folds of 2, 1 rows), Sc = N = 4
    // (folds of 3, 1 cols), T = K = 5. Per fold: ifmap T (5) + suffix arr_col-1 (2) = 7 -> skew
    // over arr_row 2 -> 8; filter T (5) + suffix arr_row-1 (1) = 6 -> skew over 3 -> 8; ofmap
    // prefix T-1 (4) + arr_row (2) = 6 -> skew over 3 -> 8. 4 folds x 8 = 32: Total Cycles 31.
    // cycles_this_fold = ofmap rows before the skew (6) + 3 - 1 = 8; used 6, 3, 2, 1 = 12 of 24:
    // compute util 12*5/(4*6*8) = 31.25%, mapping 50%, overall 3*4*5/(31*6).
    g = layer('os', 2, 3, 3, 4, 5);
    expect(g).toMatchObject({ cycles: 32, folds: 4, rowFolds: 2, colFolds: 2, report: { totalCycles: 31 } });
    expect(g.report!.computeUtilPct).toBeCloseTo(31.25, 12);
    expect(g.report!.mappingEfficiencyPct).toBeCloseTo(50, 12);
    expect(g.report!.overallUtilPct).toBeCloseTo((100 * 60) / (31 * 6), 12);

    // is, 3 rows x 2 cols, M=3 N=2 K=4: Sr = ifmap cols = K = 4 (folds of 3, 1), Sc = ifmap rows
    // = M = 3 (folds of 2, 1), T = filter cols = N = 2. Per fold: ifmap arr_row (3, flipped and
    // padded) + suffix arr_row+arr_col+T-2 (5) = 8, no skew; filter prefix arr_row (3) + T (2) +
    // suffix arr_col-1 (1) = 6 -> skew over arr_row 3 -> 8; ofmap prefix 2*arr_row-1 (5) + T (2) =
    // 7 -> skew over 2 -> 8. 4 folds x 8 = 32: Total Cycles 31. cycles_this_fold = ifmap rows 8
    // + arr_col 2 - 1 = 9; used (fc, fr) 6, 2, 3, 1 = 12 of 24: compute util 12*2/(4*6*9) = 1/9,
    // overall 3*2*4/(31*6).
    g = layer('is', 3, 2, 3, 2, 4);
    expect(g).toMatchObject({ cycles: 32, folds: 4, report: { totalCycles: 31 } });
    expect(g.report!.computeUtilPct).toBeCloseTo(100 / 9, 12);
    expect(g.report!.mappingEfficiencyPct).toBeCloseTo(50, 12);
    expect(g.report!.overallUtilPct).toBeCloseTo((100 * 24) / (31 * 6), 12);

    // The one layer whose Total Cycles is 0 (SCALE-Sim divides by zero there).
    expect(layer('os', 1, 1, 1, 1, 1).report).toMatchObject({ totalCycles: 0, overallUtilPct: 100 });
    // The overlapped model has no SCALE-Sim report.
    expect(gemmCycles({ m: 3, k: 2, n: 2 }, { rows: 2, cols: 2 }).report).toBeUndefined();
  });

  it("the PE-grid simulator takes exactly the 'scalesim' weight-stationary cycles and computes MXU arithmetic", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 1000 }),
        (m, k, n, rows, cols, seed) => {
          const a = Float32Array.from({ length: m * k }, (_, i) => Math.sin(i * 1.7 + seed));
          const b = Float32Array.from({ length: k * n }, (_, i) => Math.cos(i * 0.9 + seed));
          const sim = simulatePeGrid(a, b, { m, k, n }, { rows, cols });
          const g = gemmCycles({ m, k, n }, { rows, cols, dataflow: 'ws', model: 'scalesim' });
          expect(sim.cycles).toBe(g.cycles);
          expect(sim.folds).toBe(g.folds);
          expect(sim.macs).toBe(m * k * n);
          const mxu = withBackend('systolic', () => np.matmul(np.array(a, 'float32').reshape([m, k]), np.array(b, 'float32').reshape([k, n]))).dataSync();
          if (k <= rows) {
            // One K fold: the grid adds k in order in f32, exactly as the GEMM kernel does.
            expect(Array.from(sim.out)).toEqual(Array.from(mxu));
          } else {
            for (let i = 0; i < m * n; i++) expect(Math.abs(sim.out[i] - mxu[i])).toBeLessThanOrEqual(k * 2 ** -22 * 4);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('the PE grid multiplies bf16-rounded operands (not the raw f32 values)', () => {
    const sim = simulatePeGrid(Float32Array.of(1 + 2 ** -10), Float32Array.of(1), { m: 1, k: 1, n: 1 }, { rows: 2, cols: 2 });
    expect(sim.out[0]).toBe(bf16.toFloat32(bf16.fromFloat32(1 + 2 ** -10)));
    expect(sim.out[0]).toBe(1);
  });

  it("'overlapped' hides weight loads, spreads folds over MXUs and never beats the peak", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 1, max: 5000 }), (m, k, n) => {
        const one = gemmCycles({ m, k, n }, { rows: 128, cols: 128 });
        const ser = gemmCycles({ m, k, n }, { rows: 128, cols: 128, model: 'scalesim' });
        const four = gemmCycles({ m, k, n }, { rows: 128, cols: 128, units: 4 });
        expect(one.cycles).toBeLessThanOrEqual(ser.cycles);
        expect(four.cycles).toBeLessThanOrEqual(one.cycles);
        expect(four.utilization).toBeLessThanOrEqual(1);
        expect(one.utilization).toBeGreaterThan(0);
      }),
      { numRuns: 200 },
    );
    const big = gemmCycles({ m: 4096, k: 4096, n: 4096 }, { rows: 128, cols: 128, units: 8 });
    expect(big.folds).toBe(1024);
    expect(big.cycles).toBe(128 + 127 * 4096 + 4096 + 128 + 128 - 2);
    const single = gemmCycles({ m: 7, k: 100, n: 90 }, { rows: 128, cols: 128 });
    expect(single.cycles).toBe(gemmCycles({ m: 7, k: 100, n: 90 }, { rows: 128, cols: 128, model: 'scalesim' }).cycles);
    expect(big.utilization).toBeGreaterThan(0.99);
  });

  it('names the argument on bad input', () => {
    expect(() => gemmCycles({ m: 0, k: 1, n: 1 }, { rows: 8, cols: 8 })).toThrow(/gemmCycles: m must be a positive integer; got 0/);
    expect(() => gemmCycles({ m: 1, k: 1, n: 1 }, { rows: 8, cols: 8, dataflow: 'xs' as 'ws' })).toThrow(/dataflow must be 'ws', 'os' or 'is'/);
    expect(() => gemmCycles({ m: 1, k: 1, n: 1 }, { rows: 8, cols: 8, model: 'scalesim', units: 2 })).toThrow(/one array/);
  });
});

describe('presets, ledger and roofline', () => {
  it('every preset reproduces its published peak from the MXU geometry and clock', () => {
    for (const p of Object.values(presets)) {
      const peak = 2 * p.mxuRows * p.mxuCols * p.mxusPerCore * p.coresPerChip * p.clockHz;
      expect(peak / p.peakBf16Flops).toBeCloseTo(1, 9);
      expect(p.source).toMatch(/^https:\/\/cloud\.google\.com\/tpu\/docs\//);
    }
    expect(presets.v4.clockHz / 1e6).toBeCloseTo(1049, 0);
    expect(presets.v5e.mxusPerCore).toBe(4);
  });

  it('withLedger records FLOPs, bytes, modelled cycles and seconds of every op; MFU follows', () => {
    const a = np.ones([1024, 1024], 'bfloat16');
    const b = np.ones([1024, 1024], 'bfloat16');
    const { result, ledger } = withLedger(() => np.matmul(a, b).add(1));
    expect(result.dataSync()[0]).toBe(1024); // 1024 + 1 rounds back to 1024 in bf16
    expect(ledger.ops).toBeGreaterThanOrEqual(2);
    const dot = ledger.entries.find((e) => e.op === 'dot_general')!;
    expect(dot.flops).toBe(2 * 1024 ** 3);
    expect(dot.bytes).toBe(3 * 1024 * 1024 * 2);
    expect(dot.unit).toBe('mxu');
    const p = presets.v5e;
    const g = gemmCycles({ m: 1024, k: 1024, n: 1024 }, { rows: 128, cols: 128, units: 4 });
    expect(dot.cycles).toBeCloseTo(Math.max(g.cycles, (dot.bytes / p.hbmBandwidth) * p.clockHz), 6);
    expect(dot.seconds).toBeCloseTo(dot.cycles / p.clockHz, 15);
    const add = ledger.entries.find((e) => e.op === 'add')!;
    expect(add.bound).toBe('memory');
    expect(add.bytes).toBe(3 * 1024 * 1024 * 2);
    expect(ledger.flops).toBe(ledger.entries.reduce((s, e) => s + e.flops, 0));
    expect(ledger.byOp.dot_general).toMatchObject({ count: 1, flops: 2 * 1024 ** 3 });
    const totalsOnly = withLedger(() => np.matmul(a, b).add(1), { keepEntries: false }).ledger;
    expect(totalsOnly.entries).toEqual([]);
    expect(totalsOnly.flops).toBe(ledger.flops);
    expect(totalsOnly.seconds).toBeCloseTo(ledger.seconds, 15);
    expect(ledger.seconds).toBeCloseTo(ledger.entries.reduce((s, e) => s + e.seconds, 0), 15);
    const u = mfu(ledger);
    expect(u).toBeGreaterThan(0.3);
    expect(u).toBeLessThanOrEqual(1);
    // The same program modelled on v6e takes fewer seconds.
    const v6 = withLedger(() => np.matmul(a, b).add(1), { preset: presets.v6e }).ledger;
    expect(v6.seconds).toBeLessThan(ledger.seconds);
  });

  it('precision multiplies the modelled MXU cycles by the number of bf16 passes', () => {
    const a = np.ones([512, 512], 'float32');
    const c1 = withLedger(() => np.matmul(a, a)).ledger.entries[0].computeCycles;
    const c6 = withLedger(() => np.matmul(a, a, { precision: 'highest' })).ledger.entries[0].computeCycles;
    expect(c6 / c1).toBeCloseTo(6, 6);
  });

  it('roofline: a matmul sits right of the ridge, an add far left', () => {
    const a = np.ones([1024, 1024], 'bfloat16');
    const { ledger } = withLedger(() => np.matmul(a, a).add(a));
    const [dot, add] = ledger.entries;
    const rd = systolic.roofline(dot, ledger.preset);
    const ra = systolic.roofline(add, ledger.preset);
    expect(rd.intensity).toBeGreaterThan(rd.ridge);
    expect(ra.intensity).toBeLessThan(ra.ridge);
    expect(ra.attainableFlops).toBeCloseTo(ra.intensity * ledger.preset.hbmBandwidth, 0);
  });
});
