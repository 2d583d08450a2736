/**
 * `npx tsx poolTrace.ts trace.json [jobsPerStep steps]`: summarises a pool-job trace written with
 * `TPUKIT_POOL_TRACE=trace.json` (core `wasm/workerPool.ts`, `poolJobTrace`), e.g. of
 * `TPUKIT_POOL_TRACE=/tmp/t.json GPT_BENCH_ONLY='tpukit 2t step' npx tsx gpt.bench.ts`. Per pool,
 * per step (the last `steps` x `jobsPerStep` jobs: the timed steps; defaults: 84 jobs per step,
 * what bench:gpt's 2t step ran at main 316932d (93 before the async groups), and 15 steps; check both against your run):
 * the jobs' wall ms, the calling thread's time alone from the announcement to the first worker's
 * entry into the job ("join lag": median and mean per job, summed per step), the calling thread waiting for the worker at the end, the
 * worker out of work before the calling thread, and the join lag by the gap since the previous
 * pool job ended (jobs that follow another closely find their worker just gone to sleep).
 * Refuses a trace that dropped jobs (it was full: its last rows are not the timed steps).
 */
import { readFileSync } from 'node:fs';

const [file, perArg, stepsArg] = process.argv.slice(2);
if (!file) throw new Error('poolTrace: usage: npx tsx poolTrace.ts trace.json [jobsPerStep steps]');
let parsed: unknown;
try {
  parsed = JSON.parse(readFileSync(file, 'utf8'));
} catch (e) {
  throw new Error(`poolTrace: ${file}: cannot read it as JSON (${e instanceof Error ? e.message : String(e)})`);
}
const bad = (why: string): Error => new Error(`poolTrace: ${file}: ${why}`);
if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw bad('not a JSON object');
const raw = parsed as Record<string, unknown>;
if (!Array.isArray(raw.fields) || !raw.fields.every((f) => typeof f === 'string')) throw bad('key "fields" must be an array of strings');
if (!Array.isArray(raw.rows)) throw bad('key "rows" must be an array');
if (typeof raw.names !== 'object' || raw.names === null || Array.isArray(raw.names) || !Object.values(raw.names).every((n) => typeof n === 'string')) throw bad('key "names" must be an object of pool id -> name strings');
const fields = raw.fields as string[];
raw.rows.forEach((r: unknown, k) => {
  if (!Array.isArray(r) || r.length !== fields.length || !r.every((x) => x === null || typeof x === 'number')) throw bad(`row ${k} must be an array of ${fields.length} numbers or nulls (one per field); got ${JSON.stringify(r)}`);
});
const dropped = raw.dropped ?? 0;
if (typeof dropped !== 'number' || !Number.isInteger(dropped) || dropped < 0) throw bad(`key "dropped" must be a non-negative integer; got ${JSON.stringify(raw.dropped)}`);
if (dropped > 0) throw bad(`the trace was full and dropped the last ${dropped} jobs: its last rows are not the timed steps (trace fewer steps)`);
const trace = { fields, names: raw.names as Record<string, string>, rows: raw.rows as Array<Array<number | null>> };
const per = Number(perArg ?? 84);
const steps = Number(stepsArg ?? 15);
if (!(Number.isInteger(per) && per > 0 && Number.isInteger(steps) && steps > 0)) throw new Error(`poolTrace: jobsPerStep and steps must be positive integers; got ${perArg} ${stepsArg}`);
if (trace.rows.length < per * steps) throw bad(`has ${trace.rows.length} jobs, fewer than ${steps} steps x ${per} jobs = ${per * steps}`);
const col = (name: string): number => {
  const i = trace.fields.indexOf(name);
  if (i < 0) throw new Error(`poolTrace: ${file} has no field ${name} (fields: ${trace.fields.join(', ')})`);
  return i;
};
const [P, WAKE, JOIN, DONE, LEAVE, END] = ['pool', 'wake', 'workerJoin', 'callerDone', 'workerLeave', 'end'].map(col);
const rows = trace.rows.slice(-per * steps).map((r) => r.map((x) => (x === null ? Number.NaN : x)));
const median = (v: number[]): number => (v.length === 0 ? Number.NaN : [...v].sort((a, b) => a - b)[v.length >> 1]);
const gaps: Array<[number, number]> = [[0, 0.02], [0.02, 0.1], [0.1, 0.3], [0.3, 1], [1, 3], [3, Infinity]];
const pools = new Map<string, { jobs: number; wall: number; lags: number[]; tail: number; early: number; unjoined: number; byGap: number[][] }>();
rows.forEach((r, k) => {
  const name = trace.names[String(r[P])] ?? String(r[P]);
  let s = pools.get(name);
  if (!s) pools.set(name, (s = { jobs: 0, wall: 0, lags: [], tail: 0, early: 0, unjoined: 0, byGap: gaps.map(() => []) }));
  s.jobs++;
  s.wall += r[END] - r[WAKE];
  if (Number.isNaN(r[JOIN])) {
    s.unjoined++;
    return;
  }
  const lag = r[JOIN] - r[WAKE];
  s.lags.push(lag);
  if (!Number.isNaN(r[DONE])) {
    s.tail += Math.max(0, r[END] - r[DONE]);
    s.early += Math.max(0, r[DONE] - r[LEAVE]);
  }
  if (k > 0) {
    const gap = r[WAKE] - rows[k - 1][END];
    const g = gaps.findIndex(([lo, hi]) => gap >= lo && gap < hi);
    if (g >= 0) s.byGap[g].push(lag);
  }
});
const us = (ms: number): string => `${Math.round(ms * 1000)} us`;
// With the 'stepStart' field (traces since the early-wake work): per job, the calling thread's
// set-up in its step before the announcement (from the step's start, or from the previous job's
// end when that job ran in the same step), and how much of the join lag a wake-up at the step's
// start (min(lag, set-up)) or at the previous job's end (min(lag, gap)) could have hidden.
const STEP = trace.fields.indexOf('stepStart');
if (STEP >= 0) {
  const setups: number[] = [];
  const firsts: number[] = [];
  let hideStep = 0;
  let hideGap = 0;
  let n = 0;
  rows.forEach((r, k) => {
    if (k === 0 || Number.isNaN(r[STEP])) return;
    const prevEnd = rows[k - 1][END];
    const first = r[STEP] > prevEnd;
    const setup = r[WAKE] - Math.max(r[STEP], prevEnd);
    setups.push(setup);
    if (first) firsts.push(setup);
    n++;
    if (Number.isNaN(r[JOIN])) return;
    const lag = r[JOIN] - r[WAKE];
    hideStep += Math.min(lag, first ? setup : 0);
    hideGap += Math.min(lag, r[WAKE] - prevEnd);
  });
  const sum = (v: number[]): number => v.reduce((a, b) => a + b, 0);
  const q = (v: number[], f: number): number => (v.length === 0 ? Number.NaN : [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.floor(v.length * f))]);
  console.log(`  set-up before the announcement (${(n / steps).toFixed(1)} jobs per step): ${(sum(setups) / steps).toFixed(2)} ms per step; the ${(firsts.length / steps).toFixed(1)} jobs first in their step: per job p10 / median / p90 ${us(q(firsts, 0.1))} / ${us(q(firsts, 0.5))} / ${us(q(firsts, 0.9))}`);
  console.log(`  join lag a wake-up could hide: at the job's step start ${(hideStep / steps).toFixed(2)} ms per step; at the previous job's end ${(hideGap / steps).toFixed(2)}`);
  const hist = [0, 0.02, 0.05, 0.1, 0.2, 0.5, Infinity];
  console.log(`    first-in-step set-ups: ${hist.slice(1).map((hi, i) => `${hist[i] * 1000}-${hi * 1000} us: ${(firsts.filter((x) => x >= hist[i] && x < hi).length / steps).toFixed(1)}`).join('; ')}`);
}
console.log(`${file}: last ${rows.length} jobs (${steps} steps of ${per}); ms per step unless stated`);
for (const [name, s] of pools) {
  const lagSum = s.lags.reduce((a, b) => a + b, 0);
  console.log(`  ${name}: ${(s.jobs / steps).toFixed(1)} jobs, wall ${(s.wall / steps).toFixed(2)}; join lag ${(lagSum / steps).toFixed(2)} (per job median ${us(median(s.lags))}, mean ${us(lagSum / Math.max(1, s.lags.length))}); caller waiting at the end ${(s.tail / steps).toFixed(2)}; worker out first ${(s.early / steps).toFixed(2)}; unjoined ${(s.unjoined / steps).toFixed(1)}`);
  const parts = gaps.map(([lo, hi], g) => (s.byGap[g].length === 0 ? '' : `${lo}-${hi} ms: ${(s.byGap[g].length / steps).toFixed(1)} jobs, lag median ${us(median(s.byGap[g]))}`)).filter((x) => x !== '');
  console.log(`    by gap since the previous job's end: ${parts.join('; ')}`);
}
