// Runs a script in a child process (node --expose-gc, TypeScript through tsx) that makes systolic
// engines, drops them and counts the worker crew's workers and the pools they hold, for the tests that a dropped engine's pool leaves the workers (its module and
// memory with it) once the engine is collected, and that engines share one worker set.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Whether this runtime shares memory with workers (the scripts count the crew's workers and pools). */
export const canRunDroppedEngines = typeof SharedArrayBuffer !== 'undefined';

/**
 * What the script body sees: `dir` (the systolic backend's source folder), `crewWorkers()` (the
 * crew's workers started so far), `sleep(ms)`, `poolsHeld()` (the pools the crew's workers hold, summed over the workers) and
 * `droppedSince(h1, n)`: collects garbage until `n` pools have left the workers since the count
 * `h1` (at most ~6 s) and returns how many did. (The crew's own count, not the process's threads:
 * V8 starts helper threads of its own at any time.)
 */
const PRELUDE = `
const dir = process.argv[1];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const { crewStats } = await import(dir + '/../../wasm/workerPool.ts');
const poolsHeld = () => crewStats().poolsHeld;
const crewWorkers = () => crewStats().workers;
const heldReach = async (n) => {
  for (let i = 0; i < 200 && poolsHeld() < n; i++) await sleep(100);
};
const droppedSince = async (h1, n) => {
  for (let i = 0; i < 60 && poolsHeld() > h1 - n; i++) { gc(); await sleep(100); }
  return h1 - poolsHeld();
};
`;

/** Runs `body` after the prelude; returns the JSON value its last printed line holds. */
export function runDroppedEnginesScript<T>(body: string): T {
  const dir = fileURLToPath(new URL('../src/backends/systolic', import.meta.url));
  const out = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', PRELUDE + body, dir], { encoding: 'utf8', timeout: 60_000 });
  return JSON.parse(out.trim().split('\n').pop()!) as T;
}
