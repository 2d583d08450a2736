/**
 * The cost model: gemmCycles against SCALE-Sim v2's demand-matrix construction and against the
 * cycle-level PE-grid simulator, the overlapped MXU model, presets, roofline and the ledger.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bf16, np, systolic, withBackend } from '../index';

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
