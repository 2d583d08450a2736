// A dropped GEMM engine's pool leaves the worker crew once the engine is garbage-collected (its
// pool is keyed by the engine in a WeakMap; a FinalizationRegistry tells the workers to drop the
// pool's instance of the engine's module and its memory), and engines share the crew's workers.
import { describe, expect, it } from 'vitest';
import { canRunDroppedEngines, runDroppedEnginesScript } from '../../../test/droppedEngines';

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
const t0 = crewWorkers();
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
await heldReach(4);
const t1 = crewWorkers();
const h1 = poolsHeld();
engines = null;
console.log(JSON.stringify({ used, started: t1 - t0, held: h1, dropped: await droppedSince(h1, 4) }));
`;

describe('systolic threads of dropped engines', () => {
  it.runIf(canRunDroppedEngines)('share one worker, and leave it once the engine is collected (in a child process with --expose-gc)', () => {
    const { used, started, held, dropped } = runDroppedEnginesScript<{ used: number; started: number; held: number; dropped: number }>(SCRIPT);
    expect(used, 'each engine ran its product on the pool').toBe(4);
    expect(held, 'the worker holds each engine\'s pool').toBe(4);
    expect(started, 'one worker for the four engines (a pool of its own each would start four)').toBe(1);
    expect(dropped, 'the pools left the worker after the engines were collected').toBe(4);
  });
});
