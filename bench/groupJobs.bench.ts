/**
 * `pnpm bench:groups` (`tsx groupJobs.bench.ts`): the GPT step's dot groups as the GEMM pool runs
 * them (core's `GemmEngine.beginGroup`, threads.ts `runGroup`), operands and destinations in the
 * GEMM memory, cold (48 MiB of other memory read before each call), 1 thread against 2 threads
 * with the group job's threads claiming whole products largest first ('2t claim', the default)
 * and walking them in order ('2t walk', `groupJobSettings.claim` false, main before wg13), in
 * interleaved rounds (the two 2t variants alternate their order per round: the first 2t call after
 * the 1t call finds the worker asleep longer). Per variant: wall ms (median, min), CPU ms of all
 * threads (getrusage) and of the workers (/proc schedstat), and from the GEMM phase timer
 * (`gemmPhases.pool`): ms until the calling thread found no unit left, how often a thread waited
 * for another's units and slept doing so, the first worker's wake-up (core's `poolJobTimes`), and
 * the units the calling thread computed. Results are checked bit-identical across variants.
 *
 * Env: RUNS (rounds, default 15), ONLY (a substring of the group labels), QUIET (e.g. 0.85: each
 * round starts once the machine was that idle over 0.15 s, waiting at most 3 s; the idle
 * fractions seen are printed), ALL=1 (each 2t round's wall and caller-done ms), HELD=1 (adds
 * '2t held': the worker held, the calling thread computes every unit: the path's own cost).
 * Pin the micro-kernel (`TPUKIT_GEMM_KERNEL=5x8`) when comparing runs.
 */
import { readFileSync } from 'node:fs';
import { systolic } from '@tpukit/core';
import { aval, type GemmEngine, groupJobSettings, mxuDotGeneral, wasm } from '@tpukit/core/internal';
import { threadSnapshot } from './threadTimes';
import { loadAndTime, median } from './timing';

const RUNS = Number(process.env.RUNS ?? 15);
const QUIET = Number(process.env.QUIET ?? 0);

type DotCase = [number[], number[], [[number[], number[]], [number[], number[]]]];
/** The GPT's (bench:gpt) grouped dots: lhs shape, rhs shape, dimension numbers. */
const D: Record<string, DotCase> = {
  dX: [[16, 128, 128], [128, 128], [[[2], [0]], [[], []]]], // a q/k/v projection's dX [2048,128]x[128,128]
  dW: [[16, 128, 128], [16, 128, 128], [[[0, 1], [0, 1]], [[], []]]], // its dW [2048,128]^T x [2048,128]
  dWup: [[16, 128, 128], [16, 128, 512], [[[0, 1], [0, 1]], [[], []]]],
  dWdown: [[16, 128, 512], [16, 128, 128], [[[0, 1], [0, 1]], [[], []]]],
  dWemb: [[16, 128, 256], [16, 128, 128], [[[0, 1], [0, 1]], [[], []]]], // the one-hot embedding's dW
  dXdown: [[16, 128, 128], [512, 128], [[[2], [1]], [[], []]]],
};
/** Groups of the GPT step (xla-lite passes/dotGroups.ts at MAX_DOT_GROUP 6), and the four-dot group of the limit before. */
const GROUPS: Array<[string, string[]]> = [
  ['weight gradients: dW dW dWup dWdown (the groups of 4 before)', ['dW', 'dW', 'dWup', 'dWdown']],
  ['weight gradients: dW dW dWup dWdown dW dW (a group of 6)', ['dW', 'dW', 'dWup', 'dWdown', 'dW', 'dW']],
  ['weight gradients: dWup dWdown dW dW dWemb (the last group)', ['dWup', 'dWdown', 'dW', 'dW', 'dWemb']],
  ['attention backward: dX dW dX dW dX', ['dX', 'dW', 'dX', 'dW', 'dX']],
  ['pair dXdown dWdown', ['dXdown', 'dWdown']],
];

function rand(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    a[i] = s / 2 ** 32 - 0.5;
  }
  return a;
}

/** Dot `c` with operands and destination in engine `e`'s memory: a run and its destination. */
function dotIn(e: GemmEngine, c: DotCase, seed: number): { run: () => void; into: Float32Array; flops: number } {
  const [ls, rs, dn] = c;
  const size = (s: number[]): number => s.reduce((x, y) => x * y, 1);
  const k = dn[0][0].reduce((x, d) => x * ls[d], 1);
  const outLen = (size(ls) / k) * (size(rs) / k);
  const params = { dimensionNumbers: dn, precision: null, preferredElementType: null };
  const out = aval([outLen], 'float32');
  const view = (x: Float32Array): Float32Array => {
    const addr = e.reserve(x.byteLength); // (grows the memory: take the buffer after)
    const v = new Float32Array(e.buffer(), addr, x.length);
    v.set(x);
    return v;
  };
  const lhs = { data: view(rand(size(ls), seed)), shape: ls, dtype: 'float32' as const };
  const rhs = { data: view(rand(size(rs), seed + 1)), shape: rs, dtype: 'float32' as const };
  const into = view(new Float32Array(outLen));
  return { run: () => void mxuDotGeneral(e, lhs, rhs, params, out, { flushSubnormals: false }, into), into, flops: 2 * outLen * k };
}

/** [CPU ms of the process, of the threads other than the calling one]. */
function threadCpu(): [number, number] {
  const u = process.cpuUsage();
  let rest = 0;
  for (const [tid, [run]] of threadSnapshot()) if (tid !== process.pid) rest += run;
  return [(u.user + u.system) / 1000, rest];
}

function jiffies(): [number, number] {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return [f[3] + f[4], f.reduce((a, b) => a + b, 0)];
}
const sleeper = new Int32Array(new SharedArrayBuffer(4));
/** With QUIET set: waits until the machine was QUIET idle over 0.15 s (at most 3 s); returns the idle fraction seen. */
function waitQuiet(): number {
  if (!(QUIET > 0)) return NaN;
  const t0 = Date.now();
  for (;;) {
    const a = jiffies();
    Atomics.wait(sleeper, 0, 0, 150);
    const b = jiffies();
    const idle = (b[0] - a[0]) / Math.max(1, b[1] - a[1]);
    if (idle >= QUIET || Date.now() - t0 > 3000) return idle;
  }
}

systolic.setNumThreads(1);
const e = systolic.backend.engine;
const junk = new Float32Array(12 << 20);
let evicted = 0;
const evict = (): void => {
  for (let i = 0; i < junk.length; i += 16) evicted += junk[i];
};
const ph = systolic.gemmPhases;
ph.enabled = true;
wasm.poolJobTimes.enabled = true;
console.log(`bench:groups, GPT dot groups in the GEMM memory, cold; ${loadAndTime()}; kernel ${process.env.TPUKIT_GEMM_KERNEL ?? '(measured)'}; ${RUNS} rounds`);
const idles: number[] = [];
// [label, threads, worker held, claim]
const variants: Array<[string, number, boolean, boolean]> = [['1t', 1, false, true], ['2t claim', 2, false, true], ['2t walk', 2, false, false]];
if (process.env.HELD === '1') variants.push(['2t held', 2, true, true]);
for (const [label, names] of GROUPS) {
  if (process.env.ONLY && !label.includes(process.env.ONLY)) continue;
  const ds = names.map((n, i) => dotIn(e, D[n], 17 * i + 1));
  const rec = variants.map(() => ({ wall: [] as number[], cpu: [] as number[], wk: [] as number[], done: [] as number[], waited: [] as number[], slept: [] as number[], wake: [] as number[], mine: [] as number[], units: 0 }));
  let want: Uint32Array[] | null = null;
  for (let r = 0; r < RUNS + 2; r++) {
    const idle = waitQuiet();
    if (r >= 2 && QUIET > 0) idles.push(idle);
    for (let kk = 0; kk < variants.length; kk++) {
      // (1t first; the 2t variants in turn first after it)
      const k = kk === 0 || r % 2 === 0 ? kk : variants.length - kk;
      const [, threads, held, claim] = variants[k];
      systolic.setNumThreads(threads);
      const eng = systolic.backend.engine; // (installs the thread setting)
      groupJobSettings.claim = claim;
      evict();
      systolic.resetGemmPhases();
      const jobs0 = { ...wasm.poolJobTimes };
      if (held) wasm.holdWorkers(true);
      const [a0, w0] = threadCpu();
      const t0 = performance.now();
      const open = eng.beginGroup();
      for (const d of ds) d.run();
      if (open) eng.endGroup(true);
      const t1 = performance.now();
      const [a1, w1] = threadCpu();
      if (held) wasm.holdWorkers(false);
      const got = ds.map((d) => new Uint32Array(d.into.slice().buffer));
      if (want === null) want = got;
      else if (!got.every((g, i) => g.every((x, j) => x === want![i][j]))) throw new Error(`bench:groups: ${label}: ${variants[k][0]} gives different results`);
      if (r < 2) continue; // (warm-up rounds)
      const q = rec[k];
      const p = ph.pool;
      const jt = wasm.poolJobTimes;
      q.wall.push(t1 - t0);
      q.cpu.push(a1 - a0);
      q.wk.push(w1 - w0);
      q.done.push(p.callerUnitsDone);
      q.waited.push(p.waited);
      q.slept.push(p.slept);
      q.wake.push(jt.wakes > jobs0.wakes ? (jt.wakeMs - jobs0.wakeMs) / (jt.wakes - jobs0.wakes) : Number.NaN);
      q.mine.push(p.callerTiles);
      q.units = p.tiles;
    }
  }
  const flops = ds.reduce((s, d) => s + d.flops, 0);
  console.log(`\n${label}: ${(flops / 1e6).toFixed(0)} MFLOP`);
  const f = (v: number[]): string => median(v).toFixed(2);
  for (let k = 0; k < variants.length; k++) {
    const q = rec[k];
    const pool = k === 0 ? '' : ` | caller done ${f(q.done)} waited ${f(q.waited)} slept ${f(q.slept)} wake ${median(q.wake).toFixed(3)} caller units ${f(q.mine)}/${q.units}`;
    const x = k === 0 ? '' : ` | 1t/this per round ${median(rec[0].wall.map((w, i) => w / q.wall[i])).toFixed(3)}x`;
    console.log(`  ${variants[k][0].padEnd(9)} wall ${f(q.wall)} (min ${Math.min(...q.wall).toFixed(2)}) CPU ${f(q.cpu)} (workers ${f(q.wk)})${x}${pool}`);
  }
  if (process.env.ALL === '1') for (let k = 1; k < 3; k++) console.log(`  ${variants[k][0]} walls ${rec[k].wall.map((x) => x.toFixed(1)).join(' ')}\n  ${variants[k][0]} caller done ${rec[k].done.map((x) => x.toFixed(1)).join(' ')}`);
}
if (idles.length > 0) console.log(`\nidle fractions at the rounds' start: median ${median(idles).toFixed(2)}, min ${Math.min(...idles).toFixed(2)}`);
systolic.setNumThreads(1);
if (evicted === 42) console.log('');
process.exit(0);
