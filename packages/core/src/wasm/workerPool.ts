/**
 * The worker-thread machinery every parallel kernel runner shares: the systolic GEMM pool
 * (`backends/systolic/threads.ts`), the fused attention's pool (`backends/systolic/attention.ts`)
 * and @tpukit/xla-lite's generated-kernel pool. ONE worker set per JavaScript realm (the crew):
 * one worker per spare thread runs the jobs of every pool, so that on two cores one worker, not
 * one per pool, competes for the spare core, and a worker that just finished a job of one pool can
 * find the next job of any pool during its idle poll instead of sleeping through it.
 *
 * - The crew: workers started on first use and grown on demand to the largest count any pool asks
 *   for (`WorkerPool.ensure`), never ended (unref'ed: they never keep the process alive). Plain
 *   JavaScript started from a source string (`eval: true`, `execArgv: []`), so the same code runs
 *   from the TypeScript sources and from `dist/`. Its control block holds the crew's generation
 *   (bumped to announce a job of any pool), the announced job's pool id and the idle poll.
 * - Job kinds (`workerKind(name, source)`): a runner's worker-side program, the body of a function
 *   of `(c, id, data, require)` (its pool's control block, the worker's id, the pool's data) that
 *   sets up and returns the job function (called with the pool's job generation as `seen`), or
 *   `{ job, message }` where `message(m)` receives what the runner posts (`WorkerPool.post`).
 *   Compiled once per worker (posted with the first pool of the kind the worker gets).
 * - Pools (`new WorkerPool(kind, control, gen, ...)`): one per runner instance (an engine's GEMM
 *   pool, an attention arena's, xla-lite's kernel pool), each with its own control block and job
 *   protocol (slot layout, the join protocol's OPEN/INSIDE slots, counters): a view of the crew
 *   with the API each pool had when it owned its workers (ensure / openJob / wake / closeJob /
 *   waitFor / finished). Its data (the GEMM module and memory, attention's memory) goes to each
 *   worker by message, picked up with `receiveMessageOnPort` when the worker next wakes; `end()`
 *   (a FinalizationRegistry of a dropped engine or arena calls `endPool(id)`) makes the workers
 *   drop the pool and its data (they are woken to do it at once).
 * - A job: the pool bumps its own generation, stores its id as the crew's job and bumps and
 *   notifies the crew's generation. A woken worker (or one whose idle poll saw the bump) drains
 *   its messages, reads the job's pool and, if it holds that pool and has not yet looked at that
 *   pool's generation, runs the kind's job function, which joins the job only while it is still
 *   open (`joinSource`). A worker that read a later job's pool runs that one instead; the one it
 *   missed was closed without it (the calling thread never waits for a worker that did not join).
 *
 * The calling thread waits on control slots by polling a while, then sleeping with `Atomics.wait`.
 * A worker that dies (an error outside a job's own error handling) stops the crew from growing:
 * every pool's `ensure` answers false from then on and the runners compute on the calling thread.
 * Node only: elsewhere `ensure` answers false. Each realm (mesh's device threads) has its own crew.
 */
import { envNumber, envSwitch, envVar } from '../env';
import { MAX_THREADS, nodeModule } from '../threads';

/** What the pool needs of a Node worker. */
export interface PoolWorker {
  unref(): void;
  postMessage(msg: unknown): void;
  on?(event: 'error', listener: (err: unknown) => void): unknown;
}

type WorkerCtor = new (src: string, opts: object) => PoolWorker;

/** Env `TPUKIT_POOL_SPIN`: polls the calling thread spends on a control slot before it sleeps (overrides each pool's own; benchmarks comparing settings). */
const envPolls = envNumber('TPUKIT_POOL_SPIN', 0, 1e9);

// The crew's control block (Int32 slots).
const CGEN = 0; // the crew's generation: bumped to announce a job of any pool
const CPOOL = 1; // the announced job's pool id (0: none, the workers only read their messages)
const CSPIN = 2; // the idle poll in microseconds (read by each worker before each idle wait)
const CFAILED = 3; // pool setups that threw in a worker (the pool is left out there; `crewStats`)
const CHELD = 4; // per worker from here: the pools it holds (for tests of dropped pools)
const CSLOTS = CHELD + MAX_THREADS;

const crewControl = typeof SharedArrayBuffer === 'undefined' ? null : new Int32Array(new SharedArrayBuffer(4 * CSLOTS));

/**
 * The microseconds a worker keeps polling for the next job after finishing one before it sleeps in
 * `Atomics.wait` (env `TPUKIT_WORKER_SPIN_US` overrides). 0: sleep at once. Read by the workers
 * before every idle wait, so a change applies to running workers.
 */
let idleSpin = Math.round(envNumber('TPUKIT_WORKER_SPIN_US', 0, 1e6, false) ?? 0);
if (crewControl !== null) Atomics.store(crewControl, CSPIN, idleSpin);

export function getWorkerIdleSpinMicros(): number {
  return idleSpin;
}

/** Sets the workers' idle poll (benchmarks comparing settings); applies from their next idle wait. */
export function setWorkerIdleSpinMicros(us: number): void {
  if (typeof us !== 'number' || !Number.isFinite(us) || us < 0 || us > 1e6) throw new RangeError(`setWorkerIdleSpinMicros: us must be a number in 0..1e6; got ${String(us)}`);
  idleSpin = Math.round(us);
  if (crewControl !== null) Atomics.store(crewControl, CSPIN, idleSpin);
}

/**
 * Slot 0: 1 while `holdWorkers(true)` holds woken workers back; slot 1: 1 while `holdAfterRead(true)`
 * holds them after their first read of messages, slot 2: 1 while one is held there; slot 3: 1 while
 * `holdBetweenStamps(true)` holds them between their idle-start and wake-up stamps, slot 4: 1 while
 * one is held there (tests).
 */
const held = typeof SharedArrayBuffer === 'undefined' ? null : new Int32Array(new SharedArrayBuffer(20));

/**
 * Tests only: with `on`, a woken worker stops right after it read the announced pool's id and its
 * messages, before it looks at that pool's job (as a worker preempted there would), setting slot 2
 * of the returned slots to 1 while it waits, until `holdAfterRead(false)`.
 */
export function holdAfterRead(on: boolean): Int32Array | null {
  if (held === null) return null;
  Atomics.store(held, 1, on ? 1 : 0);
  if (!on) Atomics.notify(held, 1);
  return held;
}

/**
 * Tests only: with `on`, a woken worker stops after it stored the start of the idle wait it woke
 * from and before it stores its wake-up stamp, setting slot 4 of the returned slots to 1 while it
 * waits, until `holdBetweenStamps(false)` (the trace must never pair a new wake-up with the idle
 * start of an earlier wait).
 */
export function holdBetweenStamps(on: boolean): Int32Array | null {
  if (held === null) return null;
  Atomics.store(held, 3, on ? 1 : 0);
  if (!on) Atomics.notify(held, 3);
  return held;
}

/**
 * Tests only: with `on`, the workers that wake from now on wait before looking at the job (as a
 * worker without a core would), until `holdWorkers(false)`. Returns the shared slot (1 while
 * held), so that a test can release it from another thread.
 */
export function holdWorkers(on: boolean): Int32Array | null {
  if (held === null) return null;
  Atomics.store(held, 0, on ? 1 : 0);
  if (!on) Atomics.notify(held, 0);
  return held;
}

/**
 * The workers' wake-up and leave stamps (epoch ms; slot id: when worker id woke or its poll saw a
 * job, slot MAX_THREADS + id: when it last left a job it joined), for `poolJobTimes`. One set for
 * the crew: a realm's calling thread runs one pool job at a time.
 */
const stamps = typeof SharedArrayBuffer === 'undefined' ? null : new Float64Array(new SharedArrayBuffer(32 * MAX_THREADS));
/**
 * Stamp slots past the wake and leave stamps: when worker id entered a job's body (JOINED + id) and
 * when the idle wait it last woke from began (IDLE + id, stored right BEFORE the wake-up stamp, so
 * that a wake-up stamp that is new for a job never goes with the previous wait's idle start).
 */
const JOINED = 2 * MAX_THREADS;
const IDLE = 3 * MAX_THREADS;

/** The worker's stamp into slot `slot` (a JavaScript expression) of the crew's stamps (a global of the worker, see CREW_SOURCE). */
const stampSource = (slot: string): string => `__tpukitStamps[${slot}] = performance.timeOrigin + performance.now();`;

/**
 * The crew's worker program. Between jobs: polls the crew's generation for the idle poll's
 * microseconds, then sleeps on it; woken, it records the wake-up, waits while `holdWorkers`
 * holds it, reads its messages (kinds to compile, pools to set up or drop, messages to pools) and
 * runs the announced pool's job function once per generation of that pool.
 */
const CREW_SOURCE = `
const { parentPort, workerData, receiveMessageOnPort } = require('node:worker_threads');
const cc = new Int32Array(workerData.control);
const id = workerData.id;
globalThis.__tpukitStamps = new Float64Array(workerData.stamps);
globalThis.__tpukitId = id;
const hold = workerData.hold ? new Int32Array(workerData.hold) : null;
const kinds = new Map();
const pools = new Map();
// (tests: stops here while hold slot 'on' is 1, with slot 'at' 1 meanwhile)
function pause(on, at) {
  if (hold === null || Atomics.load(hold, on) !== 1) return;
  Atomics.store(hold, at, 1);
  Atomics.notify(hold, at);
  while (Atomics.load(hold, on) === 1) Atomics.wait(hold, on, 1);
  Atomics.store(hold, at, 0);
}
function drain() {
  for (let m = receiveMessageOnPort(parentPort); m; m = receiveMessageOnPort(parentPort)) {
    const x = m.message;
    if (x.source !== undefined) {
      try {
        kinds.set(x.kind, new Function('c', 'id', 'data', 'require', x.source));
      } catch {
        // (a kind that does not compile: its pools are never set up here, their jobs run without this worker)
      }
    } else if (x.drop) {
      pools.delete(x.pool);
      Atomics.store(cc, ${CHELD} + id, pools.size);
    }
    else if (x.control !== undefined) {
      // A pool whose setup throws (its kind missing, a module that does not instantiate) is left
      // out in this worker: its jobs run on the calling thread and the other workers, and the
      // worker lives on for every other pool.
      try {
        const c = new Int32Array(x.control);
        const made = kinds.get(x.kind)(c, id, x.data, require);
        pools.set(x.pool, { c, gen: x.gen, last: x.start, job: typeof made === 'function' ? made : made.job, message: typeof made === 'function' ? null : made.message });
        Atomics.store(cc, ${CHELD} + id, pools.size);
      } catch {
        Atomics.add(cc, ${CFAILED}, 1);
      }
    } else pools.get(x.pool)?.message?.(x.message);
  }
}
let seen = workerData.start;
for (;;) {
  const idleAt = performance.now();
  const us = Atomics.load(cc, ${CSPIN});
  if (us > 0) { const until = idleAt + us / 1000; while (Atomics.load(cc, ${CGEN}) === seen && performance.now() < until) for (let s = 0; s < 64 && Atomics.load(cc, ${CGEN}) === seen; s++); }
  Atomics.wait(cc, ${CGEN}, seen);
  // (the idle start first: see IDLE)
  __tpukitStamps[${IDLE} + id] = performance.timeOrigin + idleAt;
  pause(3, 4);
  ${stampSource('id')}
  if (hold !== null) while (Atomics.load(hold, 0) === 1) Atomics.wait(hold, 0, 1);
  seen = Atomics.load(cc, ${CGEN});
  // (the pool id first: a pool's setup is posted before its id is announced, so the drain after
  // reading the id sees the setup)
  const pid = Atomics.load(cc, ${CPOOL});
  drain();
  pause(1, 2);
  const p = pools.get(pid);
  if (p === undefined) continue;
  const g = Atomics.load(p.c, p.gen);
  if (g === p.last) continue;
  // The runner posts what job g needs (a program) before it bumps g: messages that arrived since
  // the drain above (this worker may have read its messages before that post, waking for
  // something else) are read now, before the job.
  drain();
  p.last = g;
  p.job(g);
}
`;

/** A job kind: a runner's worker-side program (see the file's header), compiled once per worker. */
export interface WorkerKind {
  readonly id: number;
  readonly name: string;
  readonly source: string;
}

let kinds = 0;

/**
 * Registers a job kind: `source` is the body of a function of `(c, id, data, require)` run once per
 * pool of the kind in each worker, returning the job function `(seen) => void` or `{ job, message }`.
 */
export function workerKind(name: string, source: string): WorkerKind {
  return { id: ++kinds, name, source };
}

/** The crew: its workers, the kinds each has compiled, and whether it may grow. */
const crew = {
  workers: [] as PoolWorker[],
  /** Kind id -> workers [0, n) that have its source. */
  kindsSent: new Map<number, number>(),
  broken: false,
};

/** Starts crew workers until there are `n`; false (now and from then on) when they cannot start or one died. */
function grow(n: number): boolean {
  if (crew.broken || crewControl === null) return false;
  if (crew.workers.length >= n) return true;
  const wt = nodeModule<{ Worker: WorkerCtor }>('node:worker_threads');
  if (!wt) return false;
  try {
    while (crew.workers.length < n) {
      const id = crew.workers.length;
      const w = new wt.Worker(CREW_SOURCE, { eval: true, execArgv: [], workerData: { control: crewControl.buffer, id, start: Atomics.load(crewControl, CGEN), stamps: stamps!.buffer, hold: held?.buffer } });
      w.unref();
      // A worker that dies (its program throws outside a job's own error handling) must not take
      // the process with it: no more workers start, and the jobs pools announce are computed by
      // the calling thread and the workers left (a dead worker never joins a job).
      w.on?.('error', () => {
        crew.broken = true;
      });
      crew.workers.push(w);
    }
  } catch {
    // Workers cannot start here (sandbox, resource limits): the runners compute alone from now on.
    crew.broken = true;
    return false;
  }
  return true;
}

/** Announces pool `pool`'s job (0: none, the workers only read their messages) to the crew. */
function announce(pool: number, notify: boolean): void {
  const cc = crewControl!;
  Atomics.store(cc, CPOOL, pool);
  Atomics.add(cc, CGEN, 1);
  if (notify) Atomics.notify(cc, CGEN);
}

/**
 * Makes the workers drop pool `id` (its job function and data: an engine's module and memory), at
 * once: they are woken to read the message. Needs no reference to the pool, so a
 * FinalizationRegistry can call it.
 */
export function endPool(id: number): void {
  if (crew.workers.length === 0) return;
  for (const w of crew.workers) w.postMessage({ pool: id, drop: true });
  readMessages();
}

/**
 * Wakes the crew's workers to read their messages now (a runner's drop of data it no longer
 * needs, e.g. xla-lite's program of a collected executable) instead of at the next job. Call
 * between jobs (a FinalizationRegistry callback is).
 */
export function readMessages(): void {
  if (crew.workers.length > 0) announce(0, true);
}

/** The crew's workers and the pools they hold, summed over the workers (tests: a dropped pool leaves the workers). */
export function crewStats(): { workers: number; poolsHeld: number; setupsFailed: number } {
  let poolsHeld = 0;
  if (crewControl !== null) for (let i = 0; i < crew.workers.length; i++) poolsHeld += Atomics.load(crewControl, CHELD + i);
  return { workers: crew.workers.length, poolsHeld, setupsFailed: crewControl === null ? 0 : Atomics.load(crewControl, CFAILED) };
}

/**
 * A worker's part of one job under the join protocol every pool uses (JavaScript source, inside a
 * kind's job function, with the pool's job generation in `seen`): it counts itself into
 * control slot `inside`, runs `body` only when the job it woke for is still open (slot `open`
 * holds its generation, see `WorkerPool.openJob`) and `condition` holds, then counts itself out.
 * A worker that wakes after the calling thread closed the job (`closeJob`: every piece of work
 * taken, the caller computing what no worker took) leaves it alone, so the caller never waits for
 * a worker that had no core when the job started, only for those inside it.
 */
export function joinSource(open: number, inside: number, condition: string, body: string): string {
  return `Atomics.add(c, ${inside}, 1);
  try {
    if (Atomics.load(c, ${open}) === seen && (${condition})) {
      ${stampSource(`${JOINED} + __tpukitId`)}
      ${body}
      ${stampSource(`${MAX_THREADS} + __tpukitId`)}
    }
  } finally {
    Atomics.sub(c, ${inside}, 1); // (also when the body throws: the calling thread must never wait for a worker that left)
    Atomics.notify(c, ${inside});
  }`;
}

/** One pool's (or all pools') job counters in `poolJobTimes`. */
export interface PoolJobCounts {
  /** Jobs finished (`wake` to `finished`). */
  jobs: number;
  /** Calling-thread wall ms from `wake` to `finished`. */
  ms: number;
  /** Of that, wall ms in `waitFor` / `waitForZero` (polling or asleep, waiting for workers). */
  waitMs: number;
  /** Jobs in which a worker woke before `finished`, and the ms from `wake` to the first such wake-up, summed. */
  wakes: number;
  wakeMs: number;
  /** Jobs finished before any worker woke for them (the calling thread did all the work). */
  unwoken: number;
  /** Jobs a worker joined (ran its part of, `joinSource`): the others the calling thread computed alone. */
  joined: number;
  /** Times the calling thread went to sleep (`Atomics.wait`) in `waitFor` / `waitForZero`, its polls spent, and wall ms asleep. */
  sleeps: number;
  sleptMs: number;
  /**
   * Closing a job (`closeJob`) after sleeping: wall ms from the last worker leaving the job to the
   * calling thread running again (its wake-up latency), summed, and how many such closes.
   */
  lateMs: number;
  lateCloses: number;
}

const counts = (): PoolJobCounts => ({ jobs: 0, ms: 0, waitMs: 0, wakes: 0, wakeMs: 0, unwoken: 0, joined: 0, sleeps: 0, sleptMs: 0, lateMs: 0, lateCloses: 0 });

/**
 * Where the calling thread's time goes around pool jobs (see `PoolJobCounts`), summed over every
 * pool that reports (the GEMM pool, xla-lite's kernel pool, the fused attention's pool) and per
 * pool name in `byPool` (`WorkerPool`'s `name`), plus `switches`: jobs that went to a different
 * pool than the job before (the same crew's workers run it, but their job code and data change). Off unless `enabled`
 * (env `TPUKIT_POOL_TIMES=1`): one boolean test per job when off.
 */
export const poolJobTimes: PoolJobCounts & { enabled: boolean; switches: number; byPool: Record<string, PoolJobCounts> } = {
  enabled: envSwitch('TPUKIT_POOL_TIMES', false),
  ...counts(),
  switches: 0,
  byPool: {},
};

/** Fields of one job's record in `poolJobTrace.records` (epoch ms, NaN where no worker did it). */
export const TRACE_FIELDS = ['pool', 'wake', 'workerWake', 'workerJoin', 'callerDone', 'workerLeave', 'end', 'workerIdleSince', 'stepStart'] as const;

/**
 * A per-job trace of the pool jobs (env `TPUKIT_POOL_TRACE=file`, with `poolJobTimes` on): per job
 * finished, the `TRACE_FIELDS` (the pool's id; the announcement; the first worker's wake-up and
 * entry into the job's body; the calling thread closing the job, i.e. out of work; the last
 * worker leaving; the job's end; when the first worker to enter the job had begun the idle wait it
 * woke from, NaN when none entered; when the calling thread last began a step of an executable
 * (`traceStepStart`) before the announcement, NaN when none did), in `records` (capacity `max` jobs; the jobs past it are
 * counted in `dropped`, not recorded), written to the file as JSON (`fields`, `names`: pool id ->
 * name, `rows`, `dropped`) at the process's exit (`startPoolJobTrace`). Diagnostics for
 * benchmarks. Off, a job costs the calling thread one boolean test; the workers stamp whether it
 * is on or off: per idle wait one clock read and store (its start; with the idle poll on they read
 * the clock there anyway) and per job joined one clock read and store (the entry).
 */
export const poolJobTrace: { file: string | undefined; records: Float64Array | null; count: number; max: number; dropped: number; names: Map<number, string>; steps: Float64Array | null; stepCount: number; labels: string[] } = {
  file: undefined,
  records: null,
  count: 0,
  max: 1 << 16,
  dropped: 0,
  names: new Map(),
  steps: null,
  stepCount: 0,
  labels: [],
};

/** Step stamps the trace's timeline keeps (the last ones: a ring), see `traceStepStart`. */
const TIMELINE_STEPS = 1 << 18;

interface TraceFs {
  writeFileSync(f: string, d: string): void;
  renameSync(a: string, b: string): void;
  rmSync(f: string, o: { force: boolean }): void;
}

let traceExitHook = false;

/**
 * Starts the trace into `file` (what env `TPUKIT_POOL_TRACE` does at load): checks at once that
 * `<file>.tmp` can be written (so a bad path fails here, not at exit), turns `poolJobTimes` on and
 * makes the process write the trace at exit (`writePoolJobTrace`). Throws
 * `poolJobTrace: TPUKIT_POOL_TRACE=<file>: <reason>` where it cannot.
 */
export function startPoolJobTrace(file: string): void {
  const fail = (why: string): Error => new Error(`poolJobTrace: TPUKIT_POOL_TRACE=${file}: ${why}`);
  if (typeof file !== 'string' || file === '') throw fail('the file must be a non-empty path');
  const fs = nodeModule<TraceFs>('node:fs');
  const proc = (globalThis as { process?: { on(ev: string, f: () => void): void } }).process;
  if (fs === null || proc === undefined) throw fail('node:fs is not available here (the trace is written by Node only)');
  try {
    fs.writeFileSync(`${file}.tmp`, '');
    fs.rmSync(`${file}.tmp`, { force: true });
  } catch (e) {
    throw fail(`cannot write ${file}.tmp (${e instanceof Error ? e.message : String(e)})`);
  }
  const t = poolJobTrace;
  t.file = file;
  t.records ??= new Float64Array(t.max * TRACE_FIELDS.length);
  t.steps ??= new Float64Array(2 * TIMELINE_STEPS);
  t.count = 0;
  t.stepCount = 0;
  t.dropped = 0;
  poolJobTimes.enabled = true;
  if (!traceExitHook) {
    traceExitHook = true;
    proc.on('exit', () => {
      if (poolJobTrace.file !== undefined && poolJobTrace.records !== null) writePoolJobTrace();
    });
  }
}

/**
 * Writes the trace to its file now (at exit, see `startPoolJobTrace`): to `<file>.tmp`, then
 * renamed over the file, so that a failed write leaves no half file. Throws
 * `poolJobTrace: TPUKIT_POOL_TRACE=<file>: <reason>` where it cannot.
 */
export function writePoolJobTrace(): void {
  const t = poolJobTrace;
  const file = t.file;
  if (file === undefined || t.records === null) throw new Error('writePoolJobTrace: no trace started (startPoolJobTrace or env TPUKIT_POOL_TRACE)');
  const fs = nodeModule<TraceFs>('node:fs');
  if (fs === null) throw new Error(`poolJobTrace: TPUKIT_POOL_TRACE=${file}: node:fs is not available here`);
  const n = TRACE_FIELDS.length;
  const rows: number[][] = [];
  for (let j = 0; j < t.count; j++) rows.push(Array.from(t.records.subarray(j * n, (j + 1) * n)));
  // The step timeline, oldest first: [epoch ms, label id] per step start (the ring's last TIMELINE_STEPS).
  const timeline: number[][] = [];
  if (t.steps !== null) for (let j = Math.max(0, t.stepCount - TIMELINE_STEPS); j < t.stepCount; j++) timeline.push([t.steps[2 * (j % TIMELINE_STEPS)], t.steps[2 * (j % TIMELINE_STEPS) + 1]]);
  try {
    fs.writeFileSync(`${file}.tmp`, JSON.stringify({ fields: TRACE_FIELDS, names: Object.fromEntries(t.names), rows, dropped: t.dropped, timeline, labels: t.labels }));
    fs.renameSync(`${file}.tmp`, file);
  } catch (e) {
    fs.rmSync(`${file}.tmp`, { force: true });
    throw new Error(`poolJobTrace: TPUKIT_POOL_TRACE=${file}: cannot write the trace (${e instanceof Error ? e.message : String(e)})`);
  }
}

/** `poolJobTrace` only: when the calling thread last began a step of an executable (`traceStepStart`), epoch ms. */
let stepAt = Number.NaN;

/**
 * `poolJobTrace` only: marks the start of a step (one instruction of xla-lite's executable), so that
 * each job's record says how long the calling thread worked in that step before announcing the
 * job (its set-up: planning, views, staging). With a `label` (from `traceStepLabel`) the stamp
 * also goes into the trace's step timeline (`timeline` in the file: which step the calling thread
 * ran when, for the worker's idle time by step, `bench/poolTrace.ts`). Call only while
 * `poolJobTrace.records` is set.
 */
export function traceStepStart(label = -1): void {
  stepAt = performance.timeOrigin + performance.now();
  const t = poolJobTrace;
  if (label < 0 || t.steps === null) return;
  const o = 2 * (t.stepCount++ % TIMELINE_STEPS);
  t.steps[o] = stepAt;
  t.steps[o + 1] = label;
}

/** `poolJobTrace` only: the id of a step label for `traceStepStart` (e.g. 'tStep 12 fusion.7602 kRow'). */
export function traceStepLabel(label: string): number {
  poolJobTrace.labels.push(label);
  return poolJobTrace.labels.length - 1;
}

{
  const file = envVar('TPUKIT_POOL_TRACE');
  if (file) startPoolJobTrace(file);
}

/** Pools made (their ids), and the id of the pool of the last job announced while timing was on (for `poolJobTimes.switches`; an id, so no pool is kept alive). */
let pools = 0;
let lastPool = 0;

/**
 * One runner's pool: its control block and job protocol over the realm's crew (see the file's
 * header). `ensure(n)` grows the crew to `n` workers and sets the pool up in each; `wake`
 * announces a job; `openJob` / `closeJob` / `waitFor` are the calling thread's side of the join
 * protocol; `end` makes the workers drop the pool.
 */
export class WorkerPool {
  /** The pool's id in the crew (its jobs are announced with it). */
  readonly id = ++pools;
  /** Workers [0, sentTo) have this pool set up. */
  #sentTo = 0;
  #ended = false;
  #t0 = 0;
  /** The job's `wake` in epoch ms (comparable with the workers' wake stamps). */
  #wakeAt = 0;
  /** The step start (`traceStepStart`) current at `wake`, epoch ms (`poolJobTrace` only). */
  #stepAt = Number.NaN;
  /** `closeJob`'s start in epoch ms (`poolJobTrace` only). */
  #closeAt = 0;
  /** Whether `poolJobTrace.names` has this pool. */
  #named = false;
  /** Polls of a control slot the calling thread spends before sleeping on it. */
  readonly spin: number;

  /**
   * @param kind the workers' job code (`workerKind`)
   * @param control the pool's shared control block
   * @param gen the control slot holding the pool's job generation
   * @param spin polls of a slot before sleeping on it (env `TPUKIT_POOL_SPIN` overrides)
   * @param data the pool's data for worker `id` (its kind's function gets it as `data`; sent once per worker)
   * @param name the pool's key in `poolJobTimes.byPool`
   */
  constructor(
    private readonly kind: WorkerKind,
    readonly control: Int32Array,
    private readonly gen: number,
    spin: number,
    private readonly data: (id: number) => object = () => ({}),
    readonly name = 'unnamed',
  ) {
    this.spin = envPolls ?? spin;
  }

  /** Whether worker threads can run here (Node's worker_threads and a shared memory). */
  static available(): boolean {
    return typeof SharedArrayBuffer !== 'undefined' && nodeModule('node:worker_threads') !== null;
  }

  /** Workers that have this pool (the first `size` of the crew's). */
  get size(): number {
    return this.#sentTo;
  }

  /** Grows the crew to `n` workers and sets this pool up in each; false (now and from then on) when workers cannot start or one died. */
  ensure(n: number): boolean {
    if (this.#ended || !grow(n)) return false;
    if (this.#sentTo >= n) return true;
    // The kind's source first, to the workers that lack it; then this pool's setup.
    const k = crew.kindsSent.get(this.kind.id) ?? 0;
    for (let v = k; v < n; v++) crew.workers[v].postMessage({ kind: this.kind.id, source: this.kind.source });
    if (k < n) crew.kindsSent.set(this.kind.id, n);
    for (let w = this.#sentTo; w < n; w++) crew.workers[w].postMessage({ pool: this.id, kind: this.kind.id, control: this.control.buffer, gen: this.gen, start: Atomics.load(this.control, this.gen), data: this.data(w) });
    this.#sentTo = n;
    return true;
  }

  /** Posts `message` to this pool's function `message` in worker `w` (read when the worker next wakes). */
  post(w: number, message: unknown): void {
    crew.workers[w].postMessage({ pool: this.id, message });
  }

  /** Makes the workers drop this pool (see `endPool`); it starts no workers afterwards. */
  end(): void {
    this.#ended = true;
    endPool(this.id);
  }

  /**
   * Opens the next job for workers to join (see `joinSource`): slot `open` gets the generation
   * the next `wake` announces. Call before `wake`.
   */
  openJob(open: number): void {
    Atomics.store(this.control, open, Atomics.load(this.control, this.gen) + 1);
  }

  /**
   * Closes the job: a worker that has not joined it yet leaves it alone when it wakes; then waits
   * until the workers inside (slot `inside`) have left. Call once no work is left to take.
   */
  closeJob(open: number, inside: number): void {
    if (poolJobTrace.records !== null) this.#closeAt = performance.timeOrigin + performance.now();
    Atomics.store(this.control, open, 0);
    const slept = this.waitForZero(inside);
    if (slept && this.#t0 !== 0 && stamps !== null) {
      // (the last worker to leave this job woke the calling thread: how long that took)
      let last = 0;
      for (let i = 0; i < this.#sentTo; i++) last = Math.max(last, stamps[MAX_THREADS + i]);
      if (last >= this.#wakeAt) {
        const late = performance.timeOrigin + performance.now() - last;
        const mine = (poolJobTimes.byPool[this.name] ??= counts());
        for (const t of [poolJobTimes, mine]) {
          t.lateMs += late;
          t.lateCloses++;
        }
      }
    }
  }

  /** Announces a job: bumps the pool's generation and the crew's, and wakes the workers (`notify` false: tests of the idle poll). */
  wake(notify = true): void {
    if (poolJobTimes.enabled) {
      this.#t0 = performance.now();
      this.#wakeAt = performance.timeOrigin + this.#t0;
      if (lastPool !== this.id) poolJobTimes.switches++;
      this.#closeAt = NaN; // (a job that is not closed, `closeJob`, has no close in the trace)
      this.#stepAt = stepAt;
      lastPool = this.id;
    }
    Atomics.add(this.control, this.gen, 1);
    announce(this.id, notify);
  }

  /** Polls slot `i` until it reaches `target` (or the spin budget passes); returns its last value. */
  poll(i: number, target: number): number {
    const c = this.control;
    let v = Atomics.load(c, i);
    for (let s = 0; s < this.spin && v < target; s++) v = Atomics.load(c, i);
    return v;
  }

  /** Waits until slot `i` reaches `target`: polling first, then sleeping on it. */
  waitFor(i: number, target: number): void {
    const t0 = poolJobTimes.enabled ? performance.now() : 0;
    let sleeps = 0;
    let slept = 0;
    for (;;) {
      const v = this.poll(i, target);
      if (v >= target) break;
      const t = t0 !== 0 ? performance.now() : 0;
      Atomics.wait(this.control, i, v);
      sleeps++;
      if (t0 !== 0) slept += performance.now() - t;
    }
    if (t0 !== 0) this.#waited(performance.now() - t0, sleeps, slept);
  }

  /** Waits until slot `i` is zero or less (a count of workers inside a job). Returns whether it slept. */
  waitForZero(i: number): boolean {
    const c = this.control;
    const t0 = poolJobTimes.enabled ? performance.now() : 0;
    let sleeps = 0;
    let slept = 0;
    for (;;) {
      let v = Atomics.load(c, i);
      for (let s = 0; s < this.spin && v > 0; s++) v = Atomics.load(c, i);
      if (v <= 0) break;
      const t = t0 !== 0 ? performance.now() : 0;
      Atomics.wait(c, i, v);
      sleeps++;
      if (t0 !== 0) slept += performance.now() - t;
    }
    if (t0 !== 0) this.#waited(performance.now() - t0, sleeps, slept);
    return sleeps > 0;
  }

  #waited(ms: number, sleeps: number, slept: number): void {
    const mine = (poolJobTimes.byPool[this.name] ??= counts());
    for (const t of [poolJobTimes, mine]) {
      t.waitMs += ms;
      t.sleeps += sleeps;
      t.sleptMs += slept;
    }
  }

  /** Ends the job `wake` announced, for `poolJobTimes`. */
  finished(): void {
    // (Skipped when timing was switched on after this job's `wake`: its start is unknown.)
    if (!poolJobTimes.enabled || this.#t0 === 0) return;
    const ms = performance.now() - this.#t0;
    // The first worker to wake after this job's wake-up (stamps of earlier wake-ups are older).
    let first = Infinity;
    const st = stamps;
    // (and whether a worker left this job after joining it: its leave stamp is newer than the wake)
    let joined = 0;
    if (st !== null)
      for (let i = 0; i < this.#sentTo; i++) {
        if (st[i] >= this.#wakeAt && st[i] < first) first = st[i];
        if (st[MAX_THREADS + i] >= this.#wakeAt) joined = 1;
      }
    const mine = (poolJobTimes.byPool[this.name] ??= counts());
    for (const t of [poolJobTimes, mine]) {
      t.jobs++;
      t.joined += joined;
      t.ms += ms;
      if (first < Infinity) {
        t.wakes++;
        t.wakeMs += first - this.#wakeAt;
      } else t.unwoken++;
    }
    const tr = poolJobTrace;
    if (tr.records !== null && st !== null) {
      if (tr.count >= tr.max) {
        tr.dropped++;
        this.#t0 = 0;
        return;
      }
      let join = Infinity;
      let leave = -Infinity;
      let idle = Number.NaN;
      for (let i = 0; i < this.#sentTo; i++) {
        const j = st[JOINED + i];
        if (j >= this.#wakeAt && j < join) {
          join = j;
          // The idle start of the first worker to enter: a worker that entered stored its wake-up
          // and idle-start stamps before its entry, and the join protocol's Atomics (the calling
          // thread saw it leave in closeJob) publish them here, so the pair is that wake-up's.
          // (A worker that woke but did not enter may be storing them right now: left out.)
          const w = st[i];
          const s0 = st[IDLE + i];
          idle = w >= this.#wakeAt && s0 <= this.#wakeAt && s0 <= w ? s0 : Number.NaN;
        }
        if (st[MAX_THREADS + i] >= this.#wakeAt) leave = Math.max(leave, st[MAX_THREADS + i]);
      }
      if (!this.#named) {
        tr.names.set(this.id, this.name);
        this.#named = true;
      }
      const r = tr.records;
      const o = tr.count++ * TRACE_FIELDS.length;
      r[o] = this.id;
      r[o + 1] = this.#wakeAt;
      r[o + 2] = first < Infinity ? first : NaN;
      r[o + 3] = join < Infinity ? join : NaN;
      r[o + 4] = this.#closeAt;
      r[o + 5] = leave > -Infinity ? leave : NaN;
      r[o + 6] = performance.timeOrigin + performance.now();
      r[o + 7] = idle;
      r[o + 8] = this.#stepAt;
    }
    this.#t0 = 0;
  }
}
