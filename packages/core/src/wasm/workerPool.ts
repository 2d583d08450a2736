/**
 * The worker-thread machinery both parallel kernel runners share: the systolic GEMM pool
 * (`backends/systolic/threads.ts`) and @tpukit/xla-lite's generated-kernel pool. Workers are
 * plain JavaScript started from a source string (`eval: true`, `execArgv: []`, unref'ed so
 * they never keep the process alive); each gets the shared control block, its id and the job
 * generation it starts at in `workerData` (plus what the runner adds). A job is announced by
 * bumping the generation slot and notifying it; the calling thread waits on control slots by
 * polling a while, then sleeping with `Atomics.wait`. The runners keep their own protocols
 * (slot layout, worker loop); this class owns starting the workers, waking them and waiting.
 * Node only: elsewhere, or when workers cannot start, `ensure` answers false from then on and
 * the runner computes on the calling thread.
 */
import { envNumber, envSwitch } from '../env';
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

/**
 * The microseconds a worker keeps polling for the next job after finishing one before it sleeps in
 * `Atomics.wait` (env `TPUKIT_WORKER_SPIN_US` overrides; read when a worker starts). 0: sleep at once.
 */
let idleSpin = envNumber('TPUKIT_WORKER_SPIN_US', 0, 1e6, false) ?? 0;

export function getWorkerIdleSpinMicros(): number {
  return idleSpin;
}

/** Sets the idle poll of workers started from now on (benchmarks comparing settings). */
export function setWorkerIdleSpinMicros(us: number): void {
  if (typeof us !== 'number' || !Number.isFinite(us) || us < 0 || us > 1e6) throw new RangeError(`setWorkerIdleSpinMicros: us must be a number in 0..1e6; got ${String(us)}`);
  idleSpin = us;
}

/**
 * The statement a worker program runs between jobs (JavaScript source): polls control slot
 * `gen` of the Int32Array `c` while it still equals the local `seen`, for
 * `workerData.idleSpin` microseconds, then sleeps on it. A job announced during the poll
 * starts without a futex wake-up (tens of microseconds, up to hundreds when the core has gone
 * idle in a virtual machine).
 */
export function idleWaitSource(gen: number): string {
  return `if (workerData.idleSpin > 0) { const until = performance.now() + workerData.idleSpin / 1000; while (Atomics.load(c, ${gen}) === seen && performance.now() < until) for (let s = 0; s < 64 && Atomics.load(c, ${gen}) === seen; s++); }
  Atomics.wait(c, ${gen}, seen);
  ${WAKE_STAMP}
  ${HOLD}`;
}

/** Slot 0: 1 while `holdWorkers(true)` holds woken workers back (tests); shared by every pool's workers. */
const held = typeof SharedArrayBuffer === 'undefined' ? null : new Int32Array(new SharedArrayBuffer(4));

/** A woken worker waits here while `holdWorkers` is on, before it looks at the job (a view made once per worker). */
const HOLD = `if (workerData.hold) { const h = (globalThis.__tpukitHold ??= new Int32Array(workerData.hold)); while (Atomics.load(h, 0) === 1) Atomics.wait(h, 0, 1); }`;

/**
 * Tests only: with `on`, every pool's workers that wake from now on wait before looking at the job
 * (as a worker without a core would), until `holdWorkers(false)`. Returns the shared slot (1 while
 * held), so that a test can release it from another thread.
 */
export function holdWorkers(on: boolean): Int32Array | null {
  if (held === null) return null;
  Atomics.store(held, 0, on ? 1 : 0);
  if (!on) Atomics.notify(held, 0);
  return held;
}

/**
 * A worker's record of when it woke (or its poll saw a job): epoch milliseconds into its slot of
 * the pool's `wakeStamps` (a view made once per worker), for `poolJobTimes`' wake-up latency.
 */
const WAKE_STAMP = stampSource('workerData.id');

/** A worker's epoch-ms stamp into slot `slot` (JavaScript expression) of its pool's `wakeStamps`. */
function stampSource(slot: string): string {
  return `if (workerData.wakeStamps) (globalThis.__tpukitWakeStamps ??= new Float64Array(workerData.wakeStamps))[${slot}] = performance.timeOrigin + performance.now();`;
}

/** When a worker leaves a job it joined (slot MAX_THREADS + id of the same stamps), for `poolJobTimes.byPool[name].lateMs`. */
const LEAVE_STAMP = stampSource(`${MAX_THREADS} + workerData.id`);

/**
 * A worker's part of one job under the join protocol every pool uses (JavaScript source, inside
 * the worker's loop right after it read the generation into `seen`): it counts itself into
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
      ${body}
      ${LEAVE_STAMP}
    }
  } finally {
    Atomics.sub(c, ${inside}, 1); // (also when the body throws: the calling thread must never wait for a worker that left)
    Atomics.notify(c, ${inside});
  }`;
}

/** Ends a pool's workers: generation -1 in its control block (the workers' loop exits on it), then a wake-up. Needs no reference to the pool, so a FinalizationRegistry can call it. */
export function endWorkers(control: Int32Array, gen: number): void {
  Atomics.store(control, gen, -1);
  Atomics.notify(control, gen);
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

const counts = (): PoolJobCounts => ({ jobs: 0, ms: 0, waitMs: 0, wakes: 0, wakeMs: 0, unwoken: 0, sleeps: 0, sleptMs: 0, lateMs: 0, lateCloses: 0 });

/**
 * Where the calling thread's time goes around pool jobs (see `PoolJobCounts`), summed over every
 * pool that reports (the GEMM pool, xla-lite's kernel pool, the fused attention's pool) and per
 * pool name in `byPool` (`WorkerPool`'s `name`), plus `switches`: jobs that went to a different
 * pool than the job before (each such job wakes another set of workers). Off unless `enabled`
 * (env `TPUKIT_POOL_TIMES=1`): one boolean test per job when off.
 */
export const poolJobTimes: PoolJobCounts & { enabled: boolean; switches: number; byPool: Record<string, PoolJobCounts> } = {
  enabled: envSwitch('TPUKIT_POOL_TIMES', false),
  ...counts(),
  switches: 0,
  byPool: {},
};

/** Pools made (their ids), and the id of the pool of the last job announced while timing was on (for `poolJobTimes.switches`; an id, so no pool is kept alive). */
let pools = 0;
let lastPool = 0;

export class WorkerPool {
  readonly workers: PoolWorker[] = [];
  /** Set when workers cannot start or one died: no more are started. An object of its own, so that a worker's error listener can set it without holding the pool (a running worker is a GC root; through the listener it would keep the pool and its runner's engine alive, and the FinalizationRegistry that ends the workers of a dropped engine would never run). */
  readonly #state = { broken: false };
  #t0 = 0;
  /** The job's `wake` in epoch ms (comparable with the workers' wake stamps), and the stamps (one slot per worker). */
  #wakeAt = 0;
  #stamps: Float64Array | null = null;
  readonly #id = ++pools;
  /** Polls of a control slot the calling thread spends before sleeping on it. */
  readonly spin: number;

  /**
   * @param source the workers' program (CommonJS, run with `eval: true`)
   * @param control the shared control block
   * @param gen the control slot holding the job generation
   * @param spin polls of a slot before sleeping on it (env `TPUKIT_POOL_SPIN` overrides)
   * @param data extra `workerData` for worker `id`
   * @param name the pool's key in `poolJobTimes.byPool`
   */
  constructor(
    private readonly source: string,
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

  /** Starts workers until there are `n`; false (now and from then on) when they cannot start. */
  ensure(n: number): boolean {
    const state = this.#state;
    if (state.broken) return false;
    const wt = nodeModule<{ Worker: WorkerCtor }>('node:worker_threads');
    if (!wt) return false;
    try {
      while (this.workers.length < n) {
        const id = this.workers.length;
        this.#stamps ??= new Float64Array(new SharedArrayBuffer(16 * MAX_THREADS));
        const w = new wt.Worker(this.source, { eval: true, execArgv: [], workerData: { control: this.control.buffer, id, start: Atomics.load(this.control, this.gen), idleSpin, wakeStamps: this.#stamps.buffer, hold: held?.buffer, ...this.data(id) } });
        w.unref();
        // A worker that dies (its program throws outside a job) must not take the process with it:
        // the pool starts no more workers, and the jobs it announces are computed by the calling
        // thread and the workers left (a dead worker never joins a job, so nobody waits for it).
        w.on?.('error', () => {
          state.broken = true;
        });
        this.workers.push(w);
      }
    } catch {
      // Workers cannot start here (sandbox, resource limits): the runner computes alone from now on.
      state.broken = true;
      return false;
    }
    return true;
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
    Atomics.store(this.control, open, 0);
    const slept = this.waitForZero(inside);
    if (slept && this.#t0 !== 0 && this.#stamps !== null) {
      // (the last worker to leave this job woke the calling thread: how long that took)
      let last = 0;
      for (let i = 0; i < this.workers.length; i++) last = Math.max(last, this.#stamps[MAX_THREADS + i]);
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

  /** Announces a job: bumps the generation and wakes every worker. */
  wake(): void {
    if (poolJobTimes.enabled) {
      this.#t0 = performance.now();
      this.#wakeAt = performance.timeOrigin + this.#t0;
      if (lastPool !== this.#id) poolJobTimes.switches++;
      lastPool = this.#id;
    }
    Atomics.add(this.control, this.gen, 1);
    Atomics.notify(this.control, this.gen);
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
    const st = this.#stamps;
    if (st !== null) for (let i = 0; i < this.workers.length; i++) if (st[i] >= this.#wakeAt && st[i] < first) first = st[i];
    const mine = (poolJobTimes.byPool[this.name] ??= counts());
    for (const t of [poolJobTimes, mine]) {
      t.jobs++;
      t.ms += ms;
      if (first < Infinity) {
        t.wakes++;
        t.wakeMs += first - this.#wakeAt;
      } else t.unwoken++;
    }
    this.#t0 = 0;
  }
}
