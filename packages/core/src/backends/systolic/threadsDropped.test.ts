// A dropped GEMM engine's worker threads end once the engine is garbage-collected (its pool is
// keyed by the engine in a WeakMap; a FinalizationRegistry tells the workers to stop).
import { describe, expect, it } from 'vitest';
import { canCountThreads, runDroppedEnginesScript } from '../../../test/droppedEngines';

const SCRIPT = `
const { GemmEngine } = await import(dir + '/gemmEngine.ts');
const { mxuDotGeneral } = await import(dir + '/mxuDot.ts');
const { applyThreads } = await import(dir + '/threads.ts');
const { setNumThreads } = await import(dir + '/../../threads.ts');
const { aval } = await import(dir + '/../../aval.ts');
setNumThreads(2);
const n = 512;
const lhs = { data: Float32Array.from({ length: n * n }, (_, i) => Math.sin(i)), shape: [n, n], dtype: 'float32' };
const rhs = { data: Float32Array.from({ length: n * n }, (_, i) => Math.cos(i)), shape: [n, n], dtype: 'float32' };
const params = { dimensionNumbers: [[[1], [0]], [[], []]], precision: 'default', preferredElementType: null };
const t0 = threads();
let used = 0;
let engines = []; // kept until the threads are counted, then dropped
// (In a function: a suspended top-level frame would keep its last engine in a register.)
const makeAndRun = () => {
  const engine = new GemmEngine({ relaxed: false });
  engines.push(engine);
  applyThreads(engine);
  if (engine.parallel !== null) used++;
  mxuDotGeneral(engine, lhs, rhs, params, aval([n, n], 'float32'), { flushSubnormals: false });
};
for (let i = 0; i < 4; i++) makeAndRun();
await sleep(200);
const t1 = threads();
engines = null;
console.log(JSON.stringify({ used, started: t1 - t0, ended: await endedSince(t1, 4) }));
`;

describe('systolic threads of dropped engines', () => {
  it.runIf(canCountThreads)('end once the engine is collected (in a child process with --expose-gc)', () => {
    const { used, started, ended } = runDroppedEnginesScript<{ used: number; started: number; ended: number }>(SCRIPT);
    expect(used, 'each engine ran its product on the pool').toBe(4);
    // (Thread counts include V8's own helper threads, which come and go: bounds, not equalities.)
    expect(started, 'a worker per engine').toBeGreaterThanOrEqual(4);
    expect(ended, 'threads ended after the engines were collected').toBeGreaterThanOrEqual(4);
  });
});
