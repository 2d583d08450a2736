/**
 * `npx tsx poolIdle.ts trace.json [executable calls top]`: where the pool's worker has nothing to
 * do, from a pool-job trace with its step timeline (`TPUKIT_POOL_TRACE=trace.json`, core
 * `wasm/workerPool.ts`: xla-lite's executable stamps each step's start with its label while the
 * trace is on), e.g. of `TPUKIT_POOL_TRACE=/tmp/t.json GPT_BENCH_ONLY='tpukit 2t step' npx tsx
 * gpt.bench.ts`. For the last `calls` calls (default 15) of `executable` (default `tStep`): the
 * calling thread's time per step of the executable (its instructions in order, plus the call's
 * argument handling before the first and its result handling after the last, and the gap to the
 * next call), and in each the worker's idle time (no worker inside a pool job; the worker's busy
 * time is from its entry into a job to its exit). Idle time inside a pool job's window (from the
 * announcement to the job's end) is split into the join lag (announcement to entry) and the end
 * (exit to the job's end); the rest of a step's idle time is the calling thread working alone.
 * Prints per step kind and fusion kind, then the `top` steps with the most idle time
 * (default 30). One worker assumed (2 threads).
 */
import { readFileSync } from 'node:fs';

const [file, exeArg, callsArg, topArg] = process.argv.slice(2);
if (!file) throw new Error('poolIdle: usage: npx tsx poolIdle.ts trace.json [executable calls top]');
const raw = JSON.parse(readFileSync(file, 'utf8')) as { fields: string[]; rows: number[][]; timeline?: number[][]; labels?: string[]; dropped: number };
if (!raw.timeline || !raw.labels) throw new Error(`poolIdle: ${file} has no step timeline (a trace from before the timeline was added)`);
const exe = exeArg ?? 'tStep';
const ncalls = Number(callsArg ?? 15);
const top = Number(topArg ?? 30);
const col = (n: string): number => raw.fields.indexOf(n);
const [WAKE, JOIN, LEAVE, END] = ['wake', 'workerJoin', 'workerLeave', 'end'].map(col);
const rows = raw.rows.map((r) => r.map((x) => (x === null ? Number.NaN : x)));
const labels = raw.labels;
const tl = raw.timeline;
// Calls: from '<exe> begin' to '<exe> returned'.
const calls: Array<[number, number]> = [];
for (let j = 0; j < tl.length; j++) {
  if (labels[tl[j][1]] !== `${exe} begin`) continue;
  let e = j + 1;
  while (e < tl.length && labels[tl[e][1]] !== `${exe} returned`) e++;
  if (e < tl.length) calls.push([j, e]);
}
if (calls.length < ncalls) throw new Error(`poolIdle: ${file}: ${calls.length} complete calls of ${exe}, fewer than ${ncalls}`);
const used = calls.slice(-ncalls);
// Busy (worker inside a job) and job windows, merged and sorted.
const merge = (iv: Array<[number, number]>): Array<[number, number]> => {
  iv.sort((a, b) => a[0] - b[0]);
  const out: Array<[number, number]> = [];
  for (const [a, b] of iv) {
    if (!(b > a)) continue;
    const l = out[out.length - 1];
    if (l && a <= l[1]) l[1] = Math.max(l[1], b);
    else out.push([a, b]);
  }
  return out;
};
const busy = merge(rows.filter((r) => !Number.isNaN(r[JOIN]) && !Number.isNaN(r[LEAVE])).map((r) => [r[JOIN], r[LEAVE]]));
const lagIv = merge(rows.filter((r) => !Number.isNaN(r[JOIN])).map((r) => [r[WAKE], r[JOIN]]));
const unjoinedIv = merge(rows.filter((r) => Number.isNaN(r[JOIN])).map((r) => [r[WAKE], r[END]]));
const tailIv = merge(rows.filter((r) => !Number.isNaN(r[LEAVE])).map((r) => [r[LEAVE], r[END]]));
/** Length of [a, b) covered by the merged intervals `iv`. */
const overlap = (iv: Array<[number, number]>, a: number, b: number): number => {
  let lo = 0;
  let hi = iv.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (iv[m][1] <= a) lo = m + 1;
    else hi = m;
  }
  let s = 0;
  for (let k = lo; k < iv.length && iv[k][0] < b; k++) s += Math.max(0, Math.min(b, iv[k][1]) - Math.max(a, iv[k][0]));
  return s;
};
type Acc = { n: number; wall: number; idle: number; lag: number; tail: number; unjoined: number; idles: number[] };
const acc = (): Acc => ({ n: 0, wall: 0, idle: 0, lag: 0, tail: 0, unjoined: 0, idles: [] });
const bySlot = new Map<string, Acc>();
const byKind = new Map<string, Acc>();
const total = acc();
const add = (a: Acc, wall: number, idle: number, lag: number, tail: number, un: number): void => {
  a.n++;
  a.wall += wall;
  a.idle += idle;
  a.lag += lag;
  a.tail += tail;
  a.unjoined += un;
  a.idles.push(idle);
};
const median = (v: number[]): number => [...v].sort((x, y) => x - y)[v.length >> 1];
const kindOf = (label: string): string => {
  const p = label.split(' ');
  if (p.length <= 2) return p[1] ?? label; // begin / end / returned / gap
  return `${p[2]} ${p[3]}`;
};
used.forEach(([j0, j1], c) => {
  const next = c + 1 < used.length ? tl[used[c + 1][0]][0] : Number.NaN;
  for (let j = j0; j <= j1; j++) {
    const a = tl[j][0];
    const b = j < j1 ? tl[j + 1][0] : next;
    if (Number.isNaN(b)) continue;
    const label = j < j1 ? labels[tl[j][1]] : `${exe} gap-to-next-call`;
    const slotName = label.split(' ').slice(1).join(' ').slice(0, 110);
    const wall = b - a;
    const idle = wall - overlap(busy, a, b);
    const lag = overlap(lagIv, a, b);
    const tail = overlap(tailIv, a, b);
    const un = overlap(unjoinedIv, a, b);
    for (const m of [bySlot.get(slotName) ?? (bySlot.set(slotName, acc()), bySlot.get(slotName)!), byKind.get(kindOf(label)) ?? (byKind.set(kindOf(label), acc()), byKind.get(kindOf(label))!), total]) add(m, wall, idle, lag, tail, un);
  }
});
const per = (x: number): string => (x / ncalls).toFixed(2).padStart(7);
console.log(`${file}: ${exe}, last ${ncalls} calls; ms per call: wall, worker idle, of which join lag (announcement to the worker's entry), job end (worker out, calling thread still in the job), unjoined jobs`);
console.log(`  all        wall ${per(total.wall)} idle ${per(total.idle)} lag ${per(total.lag)} end ${per(total.tail)} unjoined ${per(total.unjoined)}; worker busy ${per(total.wall - total.idle)}`);
console.log('  by step kind (count per call):');
for (const [k, a] of [...byKind].sort((x, y) => y[1].idle - x[1].idle)) console.log(`    ${k.padEnd(28)} ${(a.n / ncalls).toFixed(0).padStart(4)}  wall ${per(a.wall)} idle ${per(a.idle)} lag ${per(a.lag)} end ${per(a.tail)} unjoined ${per(a.unjoined)}`);
console.log(`  top ${top} steps by idle:`);
for (const [k, a] of [...bySlot].sort((x, y) => y[1].idle - x[1].idle).slice(0, top)) console.log(`    ${k.padEnd(110)} wall ${per(a.wall)} idle ${per(a.idle)} (median ${median(a.idles).toFixed(2)}) lag ${per(a.lag)} end ${per(a.tail)}`);
// Robust to a call's outliers (a preempted worker): per step of the executable, the median over calls of its idle time, summed by kind.
const medByKind = new Map<string, number>();
for (const [k, a] of bySlot) {
  const kind = k === 'gap-to-next-call' ? 'gap-to-next-call' : kindOf(`x ${k}`);
  medByKind.set(kind, (medByKind.get(kind) ?? 0) + median(a.idles) * (a.idles.length / ncalls));
}
const medAll = [...medByKind.values()].reduce((x, y) => x + y, 0);
console.log(`  per step the median over calls of its idle, summed (ms per call): ${medAll.toFixed(2)}; by kind: ${[...medByKind].sort((x, y) => y[1] - x[1]).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`);
