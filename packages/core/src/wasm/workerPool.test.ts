/** The shared worker machinery: workers that poll for the next job before sleeping still see every job once. */
import { afterAll, describe, expect, it } from 'vitest';
import { getWorkerIdleSpinMicros, holdWorkers, idleWaitSource, joinSource, poolJobTimes, setWorkerIdleSpinMicros, WorkerPool } from './workerPool';

const GEN = 0;
const DONE = 1;
const SUM = 2;

/** A test worker's program: the pool's job loop around `job` (JavaScript run once per generation seen). */
const workerLoop = (job: string): string => `
const { workerData } = require('node:worker_threads');
const c = new Int32Array(workerData.control);
let seen = workerData.start;
for (;;) {
  ${idleWaitSource(GEN)}
  seen = Atomics.load(c, ${GEN});
  if (seen < 0) break;
  ${job}
}`;

// A worker that adds its job's generation to SUM once per job, then reports the job done.
const SOURCE = workerLoop(`Atomics.add(c, ${SUM}, seen);
  Atomics.store(c, ${DONE}, seen);
  Atomics.notify(c, ${DONE});`);

const OPEN = 3;
const INSIDE = 4;
const NAP = 5; // milliseconds a joined worker sleeps before leaving
const LOOKED = 6; // the last generation the worker looked at (joined or left alone)
const SLOTS = 8;

// A worker under the join protocol: inside a job it joined, it adds the job's generation to SUM, then naps NAP ms.
const JOINING = workerLoop(`${joinSource(OPEN, INSIDE, 'true', `Atomics.add(c, ${SUM}, seen); Atomics.notify(c, ${SUM}); if (c[${NAP}] > 0) Atomics.wait(c, ${SLOTS - 1}, 0, c[${NAP}]);`)}
  Atomics.store(c, ${LOOKED}, seen);
  Atomics.notify(c, ${LOOKED});`);

describe('WorkerPool', () => {
  const before = getWorkerIdleSpinMicros();
  afterAll(() => setWorkerIdleSpinMicros(before));

  /** A pool of one worker started with an idle poll of `us` (the setting is read when a pool starts its workers; later tests get the default again). */
  const startPool = (us: number): { c: Int32Array; pool: WorkerPool } => {
    setWorkerIdleSpinMicros(us);
    const c = new Int32Array(new SharedArrayBuffer(16));
    const pool = new WorkerPool(SOURCE, c, GEN, 100);
    const started = pool.ensure(1);
    setWorkerIdleSpinMicros(before);
    expect(started).toBe(true);
    return { c, pool };
  };

  it('rejects a bad idle poll setting, naming the value', () => {
    expect(() => setWorkerIdleSpinMicros(-1)).toThrow(/setWorkerIdleSpinMicros: us must be a number in 0\.\.1e6; got -1/);
    expect(() => setWorkerIdleSpinMicros(Number.NaN)).toThrow(/got NaN/);
    expect(() => setWorkerIdleSpinMicros('5' as unknown as number)).toThrow(/got 5/);
    expect(getWorkerIdleSpinMicros()).toBe(before);
  });

  it.runIf(WorkerPool.available())('runs every job exactly once whether the worker sleeps at once or polls first', () => {
    for (const us of [0, 2000]) {
      const { c, pool } = startPool(us);
      let want = 0;
      // Back to back (caught by the poll when it is on) and after pauses longer than the poll.
      for (let j = 1; j <= 40; j++) {
        if (j % 10 === 0) {
          const t = performance.now();
          while (performance.now() - t < 4);
        }
        pool.wake();
        want += j;
        pool.waitFor(DONE, j);
      }
      expect(Atomics.load(c, SUM), `idle poll ${us} us`).toBe(want);
      Atomics.store(c, GEN, -1);
      Atomics.notify(c, GEN);
    }
  });

  it.runIf(WorkerPool.available())('a polling worker sees a job announced without a wake-up; a sleeping one does not', () => {
    // A job announced by bumping the generation WITHOUT Atomics.notify reaches a worker only
    // through its idle poll: with the poll on (a long one) the worker runs it; with it off the
    // worker sleeps through it until notified. (No timing decides this: a worker asleep in
    // Atomics.wait cannot see an un-notified change, however long it is given.)
    for (const us of [500_000, 0]) {
      const { c, pool } = startPool(us);
      try {
        // Job 1 with a wake-up: the worker is running, then goes to poll (or sleep) right after.
        pool.wake();
        pool.waitFor(DONE, 1);
        // Give the worker time to reach its idle wait (a bump before that would be seen by its
        // check of the generation, poll or not): 50 ms, well inside the 500 ms poll.
        Atomics.wait(c, SUM + 1, 0, 50);
        Atomics.add(c, GEN, 1); // job 2, no notify
        const seen = Atomics.wait(c, DONE, 1, us > 0 ? 5_000 : 200);
        if (us > 0) expect(seen === 'ok' || Atomics.load(c, DONE) === 2, 'the polling worker ran the un-notified job').toBe(true);
        else {
          expect(seen, 'the sleeping worker did not run the un-notified job').toBe('timed-out');
          expect(Atomics.load(c, DONE)).toBe(1);
          Atomics.notify(c, GEN);
          pool.waitFor(DONE, 2);
        }
        expect(Atomics.load(c, SUM)).toBe(3);
      } finally {
        Atomics.store(c, GEN, -1);
        Atomics.notify(c, GEN);
      }
    }
  });

  it.runIf(WorkerPool.available())('poolJobTimes counts jobs per pool, switches between pools and the workers\' wake-ups', () => {
    const make = (name: string): { c: Int32Array; pool: WorkerPool } => {
      const c = new Int32Array(new SharedArrayBuffer(16));
      const pool = new WorkerPool(SOURCE, c, GEN, 100, () => ({}), name);
      expect(pool.ensure(1)).toBe(true);
      return { c, pool };
    };
    const a = make('test-a');
    const b = make('test-b');
    const enabled = poolJobTimes.enabled;
    const before = { ...poolJobTimes };
    try {
      poolJobTimes.enabled = true;
      // A, A, B, A: three switches (the first job follows some other pool's, or none).
      for (const [{ c, pool }, j] of [[a, 1], [a, 2], [b, 1], [a, 3]] as const) {
        pool.wake();
        pool.waitFor(DONE, j);
        pool.finished();
        expect(Atomics.load(c, DONE)).toBe(j);
      }
      expect(poolJobTimes.switches - before.switches).toBe(3);
      expect(poolJobTimes.jobs - before.jobs).toBe(4);
      const pa = poolJobTimes.byPool['test-a'];
      const pb = poolJobTimes.byPool['test-b'];
      expect([pa.jobs, pb.jobs]).toEqual([3, 1]);
      // Each job waited for its worker, which stamped its wake-up first: every job has one.
      expect([pa.wakes, pa.unwoken, pb.wakes, pb.unwoken]).toEqual([3, 0, 1, 0]);
      expect(pa.wakeMs).toBeGreaterThan(0);
      expect(pa.wakeMs).toBeLessThanOrEqual(pa.ms);
      expect(pa.waitMs).toBeGreaterThan(0);
      expect(poolJobTimes.wakes - before.wakes).toBe(4);
    } finally {
      poolJobTimes.enabled = enabled;
      for (const { c } of [a, b]) {
        Atomics.store(c, GEN, -1);
        Atomics.notify(c, GEN);
      }
    }
  });

  it.runIf(WorkerPool.available())('join protocol: a worker that wakes after the job closed leaves it alone; closing waits for the workers inside', () => {
    const c = new Int32Array(new SharedArrayBuffer(4 * SLOTS));
    const pool = new WorkerPool(JOINING, c, GEN, 100, () => ({}), 'test-join');
    expect(pool.ensure(1)).toBe(true);
    // (with `joined`, the calling thread waits until the worker is inside before closing)
    const job = (nap: number, joined?: number): void => {
      c[NAP] = nap;
      pool.openJob(OPEN);
      pool.wake();
      if (joined !== undefined) pool.waitFor(SUM, joined);
      pool.closeJob(OPEN, INSIDE);
      pool.finished();
    };
    const enabled = poolJobTimes.enabled;
    try {
      // Job 1 with the worker held before it joins: closing it does not wait for the worker, and
      // the released worker finds it closed and leaves it (SUM never gets generation 1).
      holdWorkers(true);
      job(0);
      expect(Atomics.load(c, LOOKED), 'the job closed while its worker was still held').toBe(0);
      holdWorkers(false);
      pool.waitFor(LOOKED, 1);
      expect(Atomics.load(c, SUM), 'the late worker left the closed job alone').toBe(0);
      // Job 2, joined (generation 2 when the worker sees it; job 1's late wake-up may already
      // read it): closing waits for the worker inside, which naps 20 ms, so the calling thread
      // sleeps and counts that, and its wake-up after the worker left.
      poolJobTimes.enabled = true;
      const before = { ...(poolJobTimes.byPool['test-join'] ?? { sleeps: 0, lateCloses: 0, lateMs: 0 }) };
      job(20, 2);
      expect(Atomics.load(c, INSIDE)).toBe(0);
      expect(Atomics.load(c, SUM), 'only the open job was run').toBe(2);
      const after = poolJobTimes.byPool['test-join'];
      expect(after.sleeps - before.sleeps).toBeGreaterThanOrEqual(1);
      expect(after.lateCloses - before.lateCloses).toBe(1);
      expect(after.lateMs - before.lateMs, 'the wake-up after the last worker left takes some time').toBeGreaterThan(0);
    } finally {
      holdWorkers(false);
      poolJobTimes.enabled = enabled;
      Atomics.store(c, GEN, -1);
      Atomics.notify(c, GEN);
    }
  });

  it.runIf(WorkerPool.available())('join protocol: a job body that throws still counts its worker out, and the dead worker neither crashes the process nor holds up later jobs', async () => {
    const THROWING = JOINING.replace(`Atomics.notify(c, ${SUM});`, `Atomics.notify(c, ${SUM}); throw new Error('job body failed');`);
    expect(THROWING).not.toBe(JOINING);
    const c = new Int32Array(new SharedArrayBuffer(4 * SLOTS));
    const pool = new WorkerPool(THROWING, c, GEN, 100, () => ({}), 'test-throw');
    expect(pool.ensure(1)).toBe(true);
    try {
      c[NAP] = 0;
      pool.openJob(OPEN);
      pool.wake();
      pool.waitFor(SUM, 1); // the worker is inside the job (it added before throwing)
      // Without the count-out on throw INSIDE would stay 1 and closeJob would wait forever: poll
      // with a deadline instead, so that a regression fails rather than hangs.
      const deadline = Date.now() + 5000;
      while (Atomics.load(c, INSIDE) !== 0 && Date.now() < deadline) Atomics.wait(c, INSIDE, 1, 10);
      expect(Atomics.load(c, INSIDE)).toBe(0);
      pool.closeJob(OPEN, INSIDE);
      pool.finished();
      // Let the worker's 'error' event arrive (an unhandled one would end the test run), then a
      // second job: its worker is dead, so the job closes at once, unjoined.
      await new Promise((r) => setTimeout(r, 200));
      expect(pool.ensure(2), 'no more workers start after one died').toBe(false);
      pool.openJob(OPEN);
      pool.wake();
      pool.closeJob(OPEN, INSIDE);
      pool.finished();
      expect(Atomics.load(c, SUM)).toBe(1);
    } finally {
      Atomics.store(c, GEN, -1);
      Atomics.notify(c, GEN);
    }
  });

  it.runIf(WorkerPool.available())('poolJobTimes counts finished jobs and the time waited for workers only while enabled', () => {
    const c = new Int32Array(new SharedArrayBuffer(16));
    const pool = new WorkerPool(SOURCE, c, GEN, 100);
    expect(pool.ensure(1)).toBe(true);
    const job = (j: number): void => {
      pool.wake();
      pool.waitFor(DONE, j);
      pool.finished();
    };
    const before = { ...poolJobTimes };
    try {
      poolJobTimes.enabled = false;
      job(1);
      expect(poolJobTimes).toEqual({ ...before, enabled: false });
      poolJobTimes.enabled = true;
      for (let j = 2; j <= 6; j++) job(j);
      expect(poolJobTimes.jobs - before.jobs).toBe(5);
      const ms = poolJobTimes.ms - before.ms;
      const waited = poolJobTimes.waitMs - before.waitMs;
      expect(waited).toBeGreaterThan(0);
      expect(ms).toBeGreaterThanOrEqual(waited);
      // A job announced while timing was off and finished after it was switched on is not
      // counted (its start is unknown), rather than counted from time zero.
      const mid = { ...poolJobTimes };
      poolJobTimes.enabled = false;
      pool.wake();
      pool.waitFor(DONE, 7);
      poolJobTimes.enabled = true;
      pool.finished();
      expect(poolJobTimes.jobs).toBe(mid.jobs);
      expect(poolJobTimes.ms).toBe(mid.ms);
    } finally {
      poolJobTimes.enabled = before.enabled;
      Atomics.store(c, GEN, -1);
      Atomics.notify(c, GEN);
    }
  });
});
