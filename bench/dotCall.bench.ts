/**
 * Per-call cost of a dot_general on the systolic backend outside its kernels (issue 14, out15):
 * times `evalPrimitiveInto(dot_general)` with a per-call-site memo, as a compiled program's dot
 * step calls it, for a tiny product (the kernels negligible: the time is the call's planning,
 * operand views, staging decisions and hand-over) and for the GPT's [2048,128] x [128,128], on
 * one thread. Rounds alternate the shapes; prints min / median us per call.
 *
 *   cd bench && TPUKIT_GEMM_KERNEL=5x8 npx tsx dotCall.bench.ts
 */
import { loadavg } from 'node:os';
import { np, systolic, withBackend } from '@tpukit/core';
import { dotGeneralP, evalPrimitiveInto, intoMemo } from '@tpukit/core/internal';
import { median } from './timing';

systolic.setNumThreads(1);
const ROUNDS = Number(process.env.DOT_CALL_ROUNDS ?? 15);
const shapes: Array<[string, number, number, number, number]> = [
  ['tiny [5,8]x[8,8]', 5, 8, 8, 20000],
  ['[16,8]x[8,16]', 16, 8, 16, 20000],
  ['gpt [2048,128]x[128,128]', 2048, 128, 128, 100],
];
const params = { dimensionNumbers: [[[1], [0]], [[], []]] as [[number[], number[]], [number[], number[]]], precision: null, preferredElementType: null };
withBackend('systolic', () => {
  const cases = shapes.map(([name, m, k, n, calls]) => {
    const a = np.array(Float32Array.from({ length: m * k }, (_, i) => ((i * 7) % 13) / 13 - 0.5)).reshape([m, k]);
    const b = np.array(Float32Array.from({ length: k * n }, (_, i) => ((i * 5) % 11) / 11 - 0.5)).reshape([k, n]);
    return { name, a, b, out: new Float32Array(m * n) as Float32Array<ArrayBufferLike>, memo: intoMemo(), calls, us: [] as number[] };
  });
  // The GPT's shape again with its result in the engine's memory (a compiled program's arena: written in place, no copy).
  const engine = systolic.backend.engine;
  const g = cases[cases.length - 1];
  const at = engine.reserve(g.out.byteLength);
  cases.push({ ...g, name: 'gpt, result in place', out: new Float32Array(engine.memory.buffer, at, g.out.length), memo: intoMemo(), us: [] });
  const args: unknown[] = [null, null];
  for (let r = 0; r < ROUNDS + 2; r++) {
    for (const c of cases) {
      const t0 = performance.now();
      for (let i = 0; i < c.calls; i++) {
        args[0] = c.a;
        args[1] = c.b;
        if (evalPrimitiveInto(dotGeneralP, args as never, params, c.out, c.memo) === null) throw new Error('dotCall: the backend declined the dot');
      }
      if (r >= 2) c.us.push((1000 * (performance.now() - t0)) / c.calls);
    }
  }
  console.log(`dotCall: 1 thread, load ${loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  for (const c of cases) console.log(`  ${c.name.padEnd(28)} min ${Math.min(...c.us).toFixed(2)} us  median ${median(c.us).toFixed(2)} us per call`);
  // The phase timer's per-shape split of the in-place case: the call less its timed parts.
  const ph = systolic.gemmPhases;
  ph.enabled = true;
  const c = cases[Number(process.env.DOT_CALL_PHASES_CASE ?? cases.length - 1)];
  for (let r = 0; r < 3; r++) {
    systolic.resetGemmPhases();
    for (let i = 0; i < c.calls; i++) {
      args[0] = c.a;
      args[1] = c.b;
      evalPrimitiveInto(dotGeneralP, args as never, params, c.out, c.memo);
    }
    for (const [k, v] of ph.byShape) {
      const parts = v.packA + v.packB + v.edges + v.gemm + v.sink;
      console.log(`  phases ${k}: per call us: call ${((1000 * v.call) / v.calls).toFixed(1)} packA ${((1000 * v.packA) / v.calls).toFixed(1)} packB ${((1000 * v.packB) / v.calls).toFixed(1)} edges ${((1000 * v.edges) / v.calls).toFixed(1)} gemm ${((1000 * v.gemm) / v.calls).toFixed(1)} sink ${((1000 * v.sink) / v.calls).toFixed(1)} rest ${((1000 * (v.call - parts)) / v.calls).toFixed(1)}`);
    }
  }
  ph.enabled = false;
});
