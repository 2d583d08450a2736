// StableHLO export of the fused attention and the one-hot gathers (passes/exportExpansion.ts):
// each expands into standard ops; the expansion, run through xla-lite's own executor, equals
// the fused kernel it stands for. (No real XLA was run on the exported text.)
import { type Array, grad, nn, np, random, valueAndGrad, withBackend } from '@tpukit/core';
import { evalPrimitive, getPrimitive } from '@tpukit/core/internal';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildExecutable, expandForExport, HloComputation, HloInstruction, HloModule, jit, toStableHlo } from '../src/internal';

/** An instruction applying primitive `name` to parameters of the given arrays' shapes. */
function instruction(name: string, args: Array[], params: Record<string, unknown>): HloInstruction {
  const c = new HloComputation('probe');
  const ps = args.map((a) => c.addParameter({ shape: a.shape, dtype: a.dtype, weakType: false }));
  const prim = getPrimitive(name);
  return new HloInstruction(name, prim.abstractEval(ps.map((p) => p.shape), params), ps, params, prim);
}

/** The expansion of `name(args)` run by xla-lite's executor, and the fused kernel's result. */
function both(name: string, args: Array[], params: Record<string, unknown>): { expanded: Float32Array[]; fused: Float32Array[]; text: string } {
  const i = instruction(name, args, params);
  const comp = expandForExport(i)!;
  expect(comp).not.toBeNull();
  const mod = new HloModule('expansion', comp);
  mod.computations = [comp];
  const run = buildExecutable(mod, 'expansion').run;
  const expanded = run(args).map((a) => Float32Array.from(a.dataSync() as ArrayLike<number>));
  const fused = evalPrimitive(getPrimitive(name), args, params).map((a) => Float32Array.from(a.dataSync() as ArrayLike<number>));
  return { expanded, fused, text: comp.instructions.map((m) => m.prim?.name ?? m.opcode).join(' ') };
}

/** Debian's `mlir-opt` (package mlir-19-tools), when installed: parses MLIR's generic op form. */
const MLIR_OPT = ['/usr/lib/llvm-19/bin/mlir-opt', '/usr/bin/mlir-opt-19'].find((p) => existsSync(p));

function expectClose(got: Float32Array, want: Float32Array, atol: number, rtol: number, what: string): void {
  expect(got.length, what).toBe(want.length);
  let worst = 0;
  for (let j = 0; j < want.length; j++) worst = Math.max(worst, Math.abs(got[j] - want[j]) / (atol + rtol * Math.abs(want[j])));
  expect(worst, `${what}: worst |diff| / (atol + rtol |want|)`).toBeLessThanOrEqual(1);
}

describe('StableHLO expansions of fused kernels', () => {
  // Shapes with grouped-query heads (N = 4 query heads over K = 2 key/value heads), T != S.
  const q = random.normal(random.key(1), [2, 5, 4, 8]);
  const k = random.normal(random.key(2), [2, 7, 2, 8]);
  const v = random.normal(random.key(3), [2, 7, 2, 8]);
  const dout = random.normal(random.key(4), [2, 5, 4, 8]);
  // A padding mask [B, 1, T, S]; batch 1's query 0 sees no key at all (uniform row, lse = log S).
  const maskBits = Uint8Array.from({ length: 2 * 5 * 7 }, (_, j) => (j >= 35 && j < 42 ? 0 : (j * 5) % 7 !== 3 ? 1 : 0));
  const mask = np.array(maskBits, 'bool').reshape([2, 1, 5, 7]);
  const cases = [
    { what: 'causal', causal: true, mask: undefined },
    { what: 'mask', causal: false, mask },
    { what: 'causal + mask', causal: true, mask },
    { what: 'neither', causal: false, mask: undefined },
  ];

  // Tolerance: both sides round q, k, v (and the fused kernel P) to bf16 for the MXU, on
  // different schedules; on the reference backend both are float32/float64 exact-product paths.
  for (const backend of ['systolic', 'reference'] as const) {
    const [atol, rtol] = backend === 'systolic' ? [2e-3, 2e-3] : [2e-5, 2e-5];
    for (const c of cases) {
      it(`attention fwd and bwd (${c.what}, ${backend}): the expansion equals the fused kernel`, () => {
        withBackend(backend, () => {
          const params = { scale: 1 / Math.sqrt(8), isCausal: c.causal };
          const extra = c.mask ? [c.mask] : [];
          const fwd = both('dot_product_attention_fwd', [q, k, v, ...extra], params);
          expect(fwd.text).not.toMatch(/attention/);
          expectClose(fwd.expanded[0], fwd.fused[0], atol, rtol, 'out');
          expectClose(fwd.expanded[1], fwd.fused[1], atol, rtol, 'lse');
          const one = both('dot_product_attention', [q, k, v, ...extra], params);
          expectClose(one.expanded[0], one.fused[0], atol, rtol, 'out (no lse)');
          const lse = evalPrimitive(getPrimitive('dot_product_attention_fwd'), [q, k, v, ...extra], params)[1];
          const bwd = both('dot_product_attention_bwd', [q, k, v, lse, dout, ...extra], params);
          ['dq', 'dk', 'dv'].forEach((name, j) => expectClose(bwd.expanded[j], bwd.fused[j], atol, rtol, name));
          // with P kept: the forward's third result, and the backward reading it
          const kept = { ...params, saveProbs: true };
          const fwdP = both('dot_product_attention_fwd', [q, k, v, ...extra], kept);
          expect(fwdP.expanded.length).toBe(3);
          expectClose(fwdP.expanded[2], fwdP.fused[2], atol, rtol, 'probs');
          const probs = evalPrimitive(getPrimitive('dot_product_attention_fwd'), [q, k, v, ...extra], kept)[2];
          // (the expansion recomputes P from lse: the same text as without the kept P)
          const bwdP = both('dot_product_attention_bwd', [q, k, v, lse, dout, ...extra, probs], kept);
          const ops = (t: string): string => t.replace(/parameter /g, '');
          expect(ops(bwdP.text)).toBe(ops(bwd.text));
          ['dq', 'dk', 'dv'].forEach((name, j) => expectClose(bwdP.expanded[j], bwdP.fused[j], atol, rtol, `${name} (P kept)`));
        });
      });
    }
  }

  it('bfloat16 operands: the expansion computes in float32 and rounds the results back to bfloat16', () => {
    withBackend('systolic', () => {
      const [qb, kb, vb, db] = [q, k, v, dout].map((a) => a.astype('bfloat16'));
      const params = { scale: 0.35, isCausal: true };
      const fwd = both('dot_product_attention_fwd', [qb, kb, vb, mask], params);
      // bf16 outputs: about one bf16 ulp (2^-8 relative) apart at most.
      expectClose(fwd.expanded[0], fwd.fused[0], 1e-2, 1e-2, 'out (bf16)');
      expectClose(fwd.expanded[1], fwd.fused[1], 2e-3, 2e-3, 'lse');
      const lse = evalPrimitive(getPrimitive('dot_product_attention_fwd'), [qb, kb, vb, mask], params)[1];
      const bwd = both('dot_product_attention_bwd', [qb, kb, vb, lse, db, mask], params);
      ['dq', 'dk', 'dv'].forEach((name, j) => expectClose(bwd.expanded[j], bwd.fused[j], 2e-2, 2e-2, `${name} (bf16)`));
    });
  });

  it('a fully masked row: uniform output and lse = log S, as the fused kernel', () => {
    withBackend('reference', () => {
      const r = both('dot_product_attention_fwd', [q, k, v, mask], { scale: 0.5, isCausal: false });
      // lse of batch 1, heads 0..3, query 0: log 7.
      for (let n = 0; n < 4; n++) expect(r.expanded[1][(1 * 4 + n) * 5]).toBeCloseTo(Math.log(7), 5);
    });
  });

  it('the one-hot gather and segment sum expand back into their dots, bit for bit', () => {
    const table = np.array(Float32Array.from({ length: 24 }, (_, j) => Math.sin(j) * 3.3)).reshape([6, 4]);
    const index = np.array(Int32Array.from([0, 5, 7, -1, 2, 2]), 'int32');
    const vals = np.array(Float32Array.from({ length: 24 }, (_, j) => Math.cos(j) * 1.7)).reshape([6, 4]);
    for (const precision of [null, 'high']) {
      const p = { classes: 6, precision, dtype: 'float32', nominalFlops: 0 };
      const g = both('onehot_gather', [table, index], p);
      expect(g.text).toMatch(/iota .*eq .*dot_general/);
      expect(g.expanded[0]).toEqual(g.fused[0]);
      const s = both('onehot_segment_sum', [vals, index], p);
      expect(s.expanded[0]).toEqual(s.fused[0]);
    }
  });

  it('one-hot expansions of narrow, unsigned and float indices: an int32 iota past 127 / 255 classes, float 1.5 matches nothing', () => {
    const V = 300;
    const table = np.array(Float32Array.from({ length: V * 4 }, (_, j) => Math.sin(j) * 3.3)).reshape([V, 4]);
    const cases: [string, Array][] = [
      ['int8', np.array(Int32Array.from([-1, 127, 100, 0, -128, 5]), 'int32').astype('int8')],
      ['uint8', np.array(Int32Array.from([255, 200, 0, 128, 7, 254]), 'int32').astype('uint8')],
      ['uint32', np.array(Uint32Array.from([299, 300, 2 ** 32 - 1, 2 ** 31, 0, 150]), 'uint32')],
      ['float32', np.array(Float32Array.from([1.5, 299, -0, 300, 2, 298.5]))],
    ];
    for (const [dtype, index] of cases) {
      expect(index.dtype).toBe(dtype);
      const vals = np.array(Float32Array.from({ length: 24 }, (_, j) => Math.cos(j) * 1.7)).reshape([6, 4]);
      const p = { classes: V, precision: null, dtype: 'float32', nominalFlops: 0 };
      const g = both('onehot_gather', [table, index], p);
      expect(g.expanded[0], dtype).toEqual(g.fused[0]);
      // Rows the index selects hold the table's row (none is all zeros here but for out-of-range indices).
      expect(g.fused[0].some((v) => v !== 0), dtype).toBe(true);
      const s = both('onehot_segment_sum', [vals, index], p);
      expect(s.expanded[0], dtype).toEqual(s.fused[0]);
    }
  });

  it('a multi-output expansion is read through get-tuple-element; any other use of the whole tuple is a clear error', () => {
    const c = new HloComputation('probe');
    const [pq, pk, pv] = [q, k, v].map((a) => c.addParameter({ shape: a.shape, dtype: a.dtype, weakType: false }));
    const params = { scale: 0.5, isCausal: true };
    const prim = getPrimitive('dot_product_attention_fwd');
    const att = c.add(new HloInstruction('dot_product_attention_fwd', prim.abstractEval([pq, pk, pv].map((x) => x.shape), params), [pq, pk, pv], params, prim));
    const gte = (x: HloInstruction, index: number) => c.add(new HloInstruction('get-tuple-element', [x.shapes[index]], [x], { index }, null));
    c.outputs = [gte(att, 1), gte(att, 0)];
    const text = toStableHlo(new HloModule('m', c));
    expect(text).not.toContain('undefined');
    expect(text).toMatch(/"func\.return"\(%\d+, %\d+\)/);
    // A copy of the whole tuple (no instruction xla-lite makes): no name to print.
    const cp = c.add(new HloInstruction('copy', att.shapes, [att], {}, null));
    c.outputs = [gte(cp, 0)];
    expect(() => toStableHlo(new HloModule('m', c))).toThrow(/xla-lite export: dot_product_attention_fwd\.\d+ has no single value to use \(a multi-output instruction is read only through get-tuple-element\)/);
  });

  it('a training step with fused attention and one-hot embeddings exports without custom calls', () => {
    const V = 16;
    const w = random.normal(random.key(5), [V, 8]);
    const x = np.array(Int32Array.from({ length: 10 }, (_, j) => (j * 3) % V), 'int32').reshape([2, 5]);
    const loss = (w: Array, x: Array): Array => {
      const h = np.matmul(nn.oneHot(x, V), w).reshape([2, 5, 2, 4]);
      const a = nn.dotProductAttention(h, h, h, { isCausal: true });
      return np.sum(np.square(a));
    };
    const compiled = jit(valueAndGrad(loss)).lower(w, x).compile();
    expect(compiled.passStats.oneHot).toBe(2);
    const text = compiled.asStableHlo();
    expect(text).not.toContain('custom_call');
    expect(text).toContain('"stablehlo.dot_general"');
    // (grad alone too.)
    expect(jit(grad(loss)).lower(w, x).asStableHlo()).not.toContain('custom_call');
  });

  // Not a run on a real XLA (none here): MLIR's own parser, with the stablehlo dialect unknown
  // to it, checks the text's syntax, SSA order and types. Skipped where mlir-opt is absent.
  it.skipIf(MLIR_OPT === undefined)('the exported step parses with mlir-opt (generic form, unregistered dialect)', () => {
    const V = 16;
    const w = random.normal(random.key(5), [V, 8]);
    const x = np.array(Int32Array.from({ length: 10 }, (_, j) => (j * 3) % V), 'int32').reshape([2, 5]);
    const loss = (w: Array, x: Array): Array => np.sum(np.square(nn.dotProductAttention(np.matmul(nn.oneHot(x, V), w).reshape([2, 5, 2, 4]), np.ones([2, 5, 1, 4]), np.ones([2, 5, 1, 4]), { isCausal: true })));
    const text = jit(valueAndGrad(loss)).lower(w, x).compile().asStableHlo();
    const ok = spawnSync(MLIR_OPT!, ['--allow-unregistered-dialect', '-', '-o', '/dev/null'], { input: text, encoding: 'utf8' });
    expect(ok.stderr).toBe('');
    expect(ok.status).toBe(0);
    // The check can fail: a use before its definition is rejected.
    const bad = spawnSync(MLIR_OPT!, ['--allow-unregistered-dialect', '-', '-o', '/dev/null'], { input: text.replace('%1 = ', '%1x = '), encoding: 'utf8' });
    expect(bad.status).not.toBe(0);
  });
});
