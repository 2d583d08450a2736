/**
 * `npx tsx poolTrace.ts trace.json [jobsPerStep steps]`: summarises a pool-job trace written with
 * `TPUKIT_POOL_TRACE=trace.json` (core `wasm/workerPool.ts`, `poolJobTrace`), e.g. of
 * `TPUKIT_POOL_TRACE=/tmp/t.json GPT_BENCH_ONLY='tpukit 2t step' npx tsx gpt.bench.ts`. Per pool,
 * per step (the last `steps` x `jobsPerStep` jobs: the timed steps; default 15 x the jobs of the
 * last step-sized window, 93 for bench:gpt's 2t step): the jobs' wall ms, the calling thread's
 * time alone from the announcement to the first worker's entry into the job ("join lag": median
 * and mean per job, summed per step), the calling thread waiting for the worker at the end, the
 * worker out of work before the calling thread, and the join lag by the gap since the previous
 * pool job ended (jobs that follow another closely find their worker just gone to sleep).
 */
import { readFileSync } from 'node:fs';

const [file, perArg, stepsArg] = process.argv.slice(2);
if (!file) throw new Error('poolTrace: usage: npx tsx poolTrace.ts trace.json [jobsPerStep steps]');
const trace = JSON.parse(readFileSync(file, 'utf8')) as { fields: string[]; names: Record<string, string>; rows: Array<Array<number | null>> };
const per = Number(perArg ?? 93);
const steps = Number(stepsArg ?? 15);
if (!(per > 0 && steps > 0)) throw new Error(`poolTrace: jobsPerStep and steps must be positive; got ${perArg} ${stepsArg}`);
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
console.log(`${file}: last ${rows.length} jobs (${steps} steps of ${per}); ms per step unless stated`);
for (const [name, s] of pools) {
  const lagSum = s.lags.reduce((a, b) => a + b, 0);
  console.log(`  ${name}: ${(s.jobs / steps).toFixed(1)} jobs, wall ${(s.wall / steps).toFixed(2)}; join lag ${(lagSum / steps).toFixed(2)} (per job median ${us(median(s.lags))}, mean ${us(lagSum / Math.max(1, s.lags.length))}); caller waiting at the end ${(s.tail / steps).toFixed(2)}; worker out first ${(s.early / steps).toFixed(2)}; unjoined ${(s.unjoined / steps).toFixed(1)}`);
  const parts = gaps.map(([lo, hi], g) => (s.byGap[g].length === 0 ? '' : `${lo}-${hi} ms: ${(s.byGap[g].length / steps).toFixed(1)} jobs, lag median ${us(median(s.byGap[g]))}`)).filter((x) => x !== '');
  console.log(`    by gap since the previous job's end: ${parts.join('; ')}`);
}
