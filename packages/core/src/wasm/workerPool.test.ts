/** The shared worker machinery: one crew of workers runs the jobs of every pool, each pool's once, whether a worker sleeps between jobs or polls. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_THREADS } from '../threads';
import { crewStats, getWorkerIdleSpinMicros, holdAfterRead, holdBetweenStamps, holdWorkers, joinSource, poolJobTimes, poolJobTrace, setWorkerIdleSpinMicros, startPoolJobTrace, TRACE_FIELDS, traceStepLabel, traceStepStart, workerKind, WorkerPool, writePoolJobTrace } from './workerPool';

const GEN = 0;
const DONE = 1;
const SUM = 2;

// A kind whose worker adds its pool's job generation to SUM once per job, then reports the job done.
const SUMMING = workerKind('test-sum', `return function job(seen) {
  Atomics.add(c, ${SUM}, seen);
  Atomics.store(c, ${DONE}, seen);
  Atomics.notify(c, ${DONE});
};`);

const OPEN = 3;
const INSIDE = 4;
const NAP = 5; // milliseconds a joined worker sleeps before leaving
const LOOKED = 6; // the last generation the worker looked at (joined or left alone)
const SLOTS = 8;

/** A job function under the join protocol: inside a job it joined, it adds the job's generation times `times` to SUM, then naps NAP ms. */
const joiningSource = (times: number, extra = ''): string => `return function job(seen) {
  ${joinSource(OPEN, INSIDE, 'true', `Atomics.add(c, ${SUM}, ${times} * seen); Atomics.notify(c, ${SUM}); ${extra} if (c[${NAP}] > 0) Atomics.wait(c, ${SLOTS - 1}, 0, c[${NAP}]);`)}
  Atomics.store(c, ${LOOKED}, seen);
  Atomics.notify(c, ${LOOKED});
};`;
const JOINING = workerKind('test-join', joiningSource(1));
/** Another kind under the join protocol (adds ten times the generation). */
const JOINING_TEN = workerKind('test-join-ten', joiningSource(10));

/** A job under the join protocol whose joined worker naps `nap` ms; with `joined`, the calling thread waits until SUM reaches it (the worker is inside) before closing. */
function joinJob({ c, pool }: { c: Int32Array; pool: WorkerPool }, nap: number, joined?: number): void {
  c[NAP] = nap;
  pool.openJob(OPEN);
  pool.wake();
  if (joined !== undefined) pool.waitFor(SUM, joined);
  pool.closeJob(OPEN, INSIDE);
  pool.finished();
}

describe('WorkerPool', () => {
  const before = getWorkerIdleSpinMicros();
  afterAll(() => setWorkerIdleSpinMicros(before));

  /** A pool of kind `kind` with one worker (the crew's first; its control block `slots` long). */
  const makePool = (kind = SUMMING, name = 'unnamed', slots = SLOTS): { c: Int32Array; pool: WorkerPool } => {
    const c = new Int32Array(new SharedArrayBuffer(4 * slots));
    const pool = new WorkerPool(kind, c, GEN, 100, () => ({}), name);
    expect(pool.ensure(1)).toBe(true);
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
      const { c, pool } = makePool();
      setWorkerIdleSpinMicros(us);
      try {
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
      } finally {
        setWorkerIdleSpinMicros(before);
        pool.end();
      }
    }
  });

  it.runIf(WorkerPool.available())('a polling worker sees a job announced without a wake-up; a sleeping one does not', () => {
    // A job announced WITHOUT Atomics.notify reaches a worker only through its idle poll: with the
    // poll on (a long one) the worker runs it; with it off the worker sleeps through it until
    // notified. (No timing decides this: a worker asleep in Atomics.wait cannot see an un-notified
    // change, however long it is given.)
    for (const us of [500_000, 0]) {
      const { c, pool } = makePool();
      setWorkerIdleSpinMicros(us);
      try {
        // Job 1 with a wake-up: the worker is running, then goes to poll (or sleep) right after.
        pool.wake();
        pool.waitFor(DONE, 1);
        // Give the worker time to reach its idle wait (a bump before that would be seen by its
        // check of the generation, poll or not): 50 ms, well inside the 500 ms poll.
        Atomics.wait(c, SLOTS - 1, 0, 50);
        pool.wake(false); // job 2, no notify
        const seen = Atomics.wait(c, DONE, 1, us > 0 ? 5_000 : 200);
        if (us > 0) {
          expect(seen === 'ok' || Atomics.load(c, DONE) === 2, 'the polling worker ran the un-notified job').toBe(true);
          expect(Atomics.load(c, SUM)).toBe(3);
        } else {
          expect(seen, 'the sleeping worker did not run the un-notified job').toBe('timed-out');
          expect(Atomics.load(c, DONE)).toBe(1);
          // Job 3 with a wake-up: the worker runs it (job 2's generation it never saw is skipped).
          pool.wake();
          pool.waitFor(DONE, 3);
          expect(Atomics.load(c, SUM)).toBe(4);
        }
      } finally {
        setWorkerIdleSpinMicros(before);
        pool.end();
      }
    }
  });

  /**
   * Turns the job trace on into a fresh record buffer of `rows` jobs; `restore` puts back the
   * timing switch, the records and the count as they were (and the dropped count to 0).
   */
  const traceInto = (rows: number): { rec: Float64Array; restore: () => void } => {
    const t = poolJobTrace;
    const saved = { enabled: poolJobTimes.enabled, records: t.records, count: t.count };
    poolJobTimes.enabled = true;
    const rec = new Float64Array(rows * TRACE_FIELDS.length);
    t.records = rec;
    t.count = 0;
    return {
      rec,
      restore: () => {
        poolJobTimes.enabled = saved.enabled;
        t.records = saved.records;
        t.count = saved.count;
        t.dropped = 0;
      },
    };
  };

  it.runIf(WorkerPool.available())('poolJobTrace records each job\'s announcement, the worker\'s wake-up, entry and exit, the close and the end, in order', () => {
    const p = makePool(JOINING, 'test-trace');
    const t = poolJobTrace;
    let trace: ReturnType<typeof traceInto> | null = null;
    try {
      // A first job, then a pause: the worker is idle when the traced job is announced (not still
      // looping after the wake-up another test's pool.end() gave it).
      joinJob(p, 0, Atomics.load(p.c, SUM) + Atomics.load(p.c, GEN) + 1);
      Atomics.wait(p.c, SLOTS - 1, 0, 20);
      trace = traceInto(4);
      const { rec } = trace;
      // Joined: the calling thread waits until the worker is inside (SUM), which naps 5 ms.
      traceStepStart(); // (the step the job's set-up began in)
      const step = performance.timeOrigin + performance.now();
      const g = Atomics.load(p.c, GEN) + 1;
      const sum = Atomics.load(p.c, SUM) + g;
      p.c[NAP] = 5;
      p.pool.openJob(OPEN);
      p.pool.wake();
      traceStepStart(); // (a later step, begun while the job runs: not the job's)
      p.pool.waitFor(SUM, sum);
      p.pool.closeJob(OPEN, INSIDE);
      p.pool.finished();
      expect(t.count).toBe(1);
      const r = Object.fromEntries(TRACE_FIELDS.map((f, i) => [f, rec[i]]));
      expect(r.pool).toBe(p.pool.id);
      expect(t.names.get(p.pool.id)).toBe('test-trace');
      expect(r.workerWake).toBeGreaterThanOrEqual(r.wake);
      expect(r.workerJoin).toBeGreaterThanOrEqual(r.workerWake);
      expect(r.callerDone).toBeGreaterThanOrEqual(r.workerJoin);
      expect(r.workerLeave).toBeGreaterThanOrEqual(r.workerJoin);
      expect(r.end).toBeGreaterThanOrEqual(r.workerLeave);
      expect(r.workerIdleSince).toBeLessThanOrEqual(r.wake);
      // (the step start current at the announcement, not the later one current at the record)
      expect(r.stepStart, 'stepStart').toBeLessThanOrEqual(step);
      expect(r.stepStart).toBeGreaterThan(0);
      // Held until the job closed: unjoined, its worker fields are NaN; the close is recorded.
      holdWorkers(true);
      joinJob(p, 0);
      holdWorkers(false);
      expect(t.count).toBe(2);
      const o = TRACE_FIELDS.length;
      expect([rec[o + 3], rec[o + 5], rec[o + 7]].every(Number.isNaN), 'no entry, no exit, no idle start').toBe(true);
      expect(rec[o + 4], 'callerDone').toBeGreaterThanOrEqual(rec[o + 1]);
      expect(rec[o + 6], 'end').toBeGreaterThanOrEqual(rec[o + 4]);
      p.pool.waitFor(LOOKED, Atomics.load(p.c, GEN));
      // A full trace records no more jobs and counts them.
      const max = t.max;
      t.max = 2;
      try {
        joinJob(p, 0, Atomics.load(p.c, SUM) + Atomics.load(p.c, GEN) + 1);
        joinJob(p, 0, Atomics.load(p.c, SUM) + Atomics.load(p.c, GEN) + 1);
      } finally {
        t.max = max;
      }
      expect([t.count, t.dropped]).toEqual([2, 2]);
    } finally {
      holdWorkers(false);
      trace?.restore();
      p.pool.end();
    }
  });

  it.runIf(WorkerPool.available())('poolJobTrace: a worker between its idle-start and wake-up stamps is not yet woken for the job (the idle start is stored first)', () => {
    const p = makePool(JOINING, 'test-trace-order');
    const t = poolJobTrace;
    let trace: ReturnType<typeof traceInto> | null = null;
    const h = holdBetweenStamps(false)!;
    try {
      // A first job, then a pause: the worker is idle when the traced job is announced.
      joinJob(p, 0, Atomics.load(p.c, SUM) + Atomics.load(p.c, GEN) + 1);
      Atomics.wait(p.c, SLOTS - 1, 0, 20);
      trace = traceInto(2);
      const { rec } = trace;
      // The worker held after its idle-start stamp, before its wake-up stamp, until the job closed.
      holdBetweenStamps(true);
      p.c[NAP] = 0;
      p.pool.openJob(OPEN);
      p.pool.wake();
      const deadline = Date.now() + 5_000;
      while (Atomics.load(h, 4) !== 1 && Date.now() < deadline) Atomics.wait(h, 4, 0, 10);
      expect(Atomics.load(h, 4), 'the worker stopped between its stamps').toBe(1);
      p.pool.closeJob(OPEN, INSIDE);
      p.pool.finished();
      // Its idle start is new, its wake-up stamp still the last wait's: no wake-up for this job.
      expect(t.count).toBe(1);
      expect([rec[2], rec[3], rec[7]].every(Number.isNaN), 'no wake-up, entry or idle start').toBe(true);
      holdBetweenStamps(false);
      p.pool.waitFor(LOOKED, Atomics.load(p.c, GEN));
      // Joined after a pause: the idle start (the wait after the held job) is before the job.
      Atomics.wait(p.c, SLOTS - 1, 0, 20);
      joinJob(p, 0, Atomics.load(p.c, SUM) + Atomics.load(p.c, GEN) + 1);
      const o = TRACE_FIELDS.length;
      expect(t.count).toBe(2);
      expect(rec[o + 7]).toBeLessThanOrEqual(rec[o + 1]);
      expect(rec[o + 7]).toBeGreaterThan(rec[6]);
    } finally {
      holdBetweenStamps(false);
      trace?.restore();
      p.pool.end();
    }
  });

  it.runIf(WorkerPool.available())('poolJobTrace with two workers: the first entry and the last exit, of different workers', () => {
    // Worker 0 enters and leaves first; worker 1 enters after worker 0 entered and leaves after
    // worker 0 left (each waits for the other's stamp to be in the past on its own clock). Each
    // copies its entry and exit stamps to `times`.
    const IN0 = 5;
    const OUT0 = 6;
    const COPIED = 7; // worker 1 copied its stamps (after it left the job)
    const TWO = workerKind('test-trace-two', `const times = new Float64Array(data.times);
      const st = globalThis.__tpukitStamps;
      const now = () => performance.timeOrigin + performance.now();
      const after = (slot, flag, seen) => { while (Atomics.load(c, flag) !== seen) Atomics.wait(c, flag, Atomics.load(c, flag), 10); while (now() <= st[slot] + 0.01); return true; };
      return function job(seen) {
        ${joinSource(OPEN, INSIDE, `id === 0 || after(${2 * MAX_THREADS}, ${IN0}, seen)`, `times[2 * id] = st[${2 * MAX_THREADS} + id]; Atomics.add(c, ${SUM}, 1); Atomics.notify(c, ${SUM}); if (id === 0) { Atomics.store(c, ${IN0}, seen); Atomics.notify(c, ${IN0}); } else after(${MAX_THREADS}, ${OUT0}, seen);`)}
        times[2 * id + 1] = st[${MAX_THREADS} + id];
        const flag = id === 0 ? ${OUT0} : ${COPIED};
        Atomics.store(c, flag, seen);
        Atomics.notify(c, flag);
      };`);
    const times = new Float64Array(new SharedArrayBuffer(32));
    const c = new Int32Array(new SharedArrayBuffer(4 * SLOTS));
    const pool = new WorkerPool(TWO, c, GEN, 100, () => ({ times: times.buffer }), 'test-trace-two');
    if (!pool.ensure(2)) return; // (workers cannot start here)
    const t = poolJobTrace;
    const { rec, restore } = traceInto(1);
    try {
      pool.openJob(OPEN);
      pool.wake();
      pool.waitFor(SUM, 2);
      pool.closeJob(OPEN, INSIDE);
      pool.finished();
      pool.waitFor(COPIED, Atomics.load(c, GEN));
      expect(t.count).toBe(1);
      const [join0, leave0, join1, leave1] = times;
      expect(join0).toBeLessThan(join1);
      expect(leave0).toBeLessThan(leave1);
      expect(rec[3], 'the first entry').toBe(join0);
      expect(rec[5], 'the last exit').toBe(leave1);
    } finally {
      restore();
      pool.end();
    }
  });

  it('startPoolJobTrace rejects a path it cannot write at once, naming it; the trace is written through a .tmp file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tpukit-trace-'));
    const t = poolJobTrace;
    const saved = { file: t.file, records: t.records, count: t.count, dropped: t.dropped, enabled: poolJobTimes.enabled, steps: t.steps, stepCount: t.stepCount, labels: t.labels.length };
    try {
      const bad = join(dir, 'missing', 'trace.json');
      expect(() => startPoolJobTrace(bad)).toThrow(`poolJobTrace: TPUKIT_POOL_TRACE=${bad}: cannot write ${bad}.tmp (ENOENT`);
      expect(t.file).toBe(saved.file);
      expect(() => startPoolJobTrace('')).toThrow(/poolJobTrace: TPUKIT_POOL_TRACE=: the file must be a non-empty path/);
      const good = join(dir, 'trace.json');
      startPoolJobTrace(good);
      expect([t.file, poolJobTimes.enabled, existsSync(`${good}.tmp`)]).toEqual([good, true, false]);
      t.records![0] = 1;
      t.count = 1;
      t.dropped = 3;
      // The step timeline: labelled stamps in order (an unlabelled one only sets the job's step start).
      const a = traceStepLabel('exe 0 wasm kLoop');
      const b = traceStepLabel('exe end');
      const t0 = performance.timeOrigin + performance.now();
      traceStepStart(a);
      traceStepStart();
      traceStepStart(b);
      writePoolJobTrace();
      const out = JSON.parse(readFileSync(good, 'utf8')) as { fields: string[]; rows: unknown[][]; dropped: number; timeline: number[][]; labels: string[] };
      expect(out.fields).toEqual([...TRACE_FIELDS]);
      expect([out.rows.length, out.rows[0][0], out.dropped]).toEqual([1, 1, 3]);
      expect(out.timeline.map(([, l]) => out.labels[l])).toEqual(['exe 0 wasm kLoop', 'exe end']);
      expect(out.timeline[0][0]).toBeGreaterThanOrEqual(t0);
      expect(out.timeline[1][0]).toBeGreaterThanOrEqual(out.timeline[0][0]);
      expect(existsSync(`${good}.tmp`)).toBe(false);
      // A directory gone by the time of the write: a clear error and no file, half or whole.
      const gone = join(dir, 'gone');
      t.file = join(gone, 'trace.json');
      expect(() => writePoolJobTrace()).toThrow(`poolJobTrace: TPUKIT_POOL_TRACE=${t.file}: cannot write the trace (ENOENT`);
      expect(existsSync(gone)).toBe(false);
    } finally {
      t.file = saved.file;
      t.records = saved.records;
      t.count = saved.count;
      t.dropped = saved.dropped;
      t.steps = saved.steps;
      t.stepCount = saved.stepCount;
      t.labels.length = saved.labels;
      poolJobTimes.enabled = saved.enabled;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.runIf(WorkerPool.available())('poolJobTimes counts jobs per pool, switches between pools and the workers\' wake-ups', () => {
    const a = makePool(SUMMING, 'test-a');
    const b = makePool(SUMMING, 'test-b');
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
      a.pool.end();
      b.pool.end();
    }
  });

  it.runIf(WorkerPool.available())('join protocol: a worker that wakes after the job closed leaves it alone; closing waits for the workers inside', () => {
    const p = makePool(JOINING, 'test-join');
    const { c, pool } = p;
    const job = (nap: number, joined?: number): void => joinJob(p, nap, joined);
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
      // Job 2, joined: closing waits for the worker inside, which naps 20 ms, so the calling
      // thread sleeps and counts that, and its wake-up after the worker left.
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
      pool.end();
    }
  });

  it.runIf(WorkerPool.available())('one worker runs jobs of two kinds back to back; a late worker leaves a closed job of another kind alone', () => {
    const a = makePool(JOINING, 'test-kind-a');
    const b = makePool(JOINING_TEN, 'test-kind-b');
    const job = (p: { c: Int32Array; pool: WorkerPool }, joined?: number): void => joinJob(p, 0, joined);
    try {
      // Interleaved and joined (the worker is waited for inside each): a b b a b.
      job(a, 1);
      job(b, 10);
      job(b, 10 + 20);
      job(a, 1 + 2);
      job(b, 30 + 30);
      expect([Atomics.load(a.c, SUM), Atomics.load(b.c, SUM)]).toEqual([3, 60]);
      // The worker held while a job of A and then a job of B are announced and closed: released,
      // it reads the crew's latest job (B's, closed) and leaves it; A's it never looks at.
      holdWorkers(true);
      job(a);
      job(b);
      holdWorkers(false);
      b.pool.waitFor(LOOKED, 4);
      expect([Atomics.load(a.c, SUM), Atomics.load(b.c, SUM)], 'neither closed job was joined').toEqual([3, 60]);
      expect(Atomics.load(a.c, LOOKED), 'A\'s job was missed, not joined').toBe(2);
      expect([Atomics.load(a.c, INSIDE), Atomics.load(b.c, INSIDE)]).toEqual([0, 0]);
      // Both pools still run their next jobs.
      job(a, 3 + 4);
      job(b, 60 + 50);
      expect([Atomics.load(a.c, SUM), Atomics.load(b.c, SUM)]).toEqual([7, 110]);
    } finally {
      holdWorkers(false);
      a.pool.end();
      b.pool.end();
    }
  });

  it.runIf(WorkerPool.available())('an ended pool leaves the workers (its data with it) while the crew lives on, and starts no more workers', () => {
    const { pool } = makePool(SUMMING, 'test-end');
    const other = makePool(SUMMING, 'test-end-other');
    pool.wake();
    pool.waitFor(DONE, 1);
    const held = crewStats().poolsHeld;
    pool.end();
    // The workers are woken to read the drop at once: wait (with a deadline) until they did.
    const deadline = Date.now() + 5000;
    while (crewStats().poolsHeld !== held - 1 && Date.now() < deadline) Atomics.wait(other.c, SLOTS - 1, 0, 5);
    expect(crewStats().poolsHeld, 'the worker dropped the ended pool').toBe(held - 1);
    expect(pool.ensure(1)).toBe(false);
    other.pool.wake();
    other.pool.waitFor(DONE, 1);
    expect(Atomics.load(other.c, SUM)).toBe(1);
    other.pool.end();
  });

  it.runIf(WorkerPool.available())('poolJobTimes counts finished jobs and the time waited for workers only while enabled', () => {
    const { pool } = makePool();
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
      pool.end();
    }
  });

  // Last: the worker it kills is the crew's (this file's realm starts no more workers after it).
  it.runIf(WorkerPool.available())('a message posted to a pool after its worker read its messages, then its job announced, reaches the worker before the job (xla-lite posts a program a job needs that way)', () => {
    // The job records the last message's value; the worker is held after reading its messages for
    // an earlier job of the same pool while the message is posted and the next job announced.
    const RECEIVED = 2;
    const MESSAGED = workerKind('test-message', `let last = 0;
      return { message(m) { last = m; }, job(seen) { Atomics.store(c, ${RECEIVED}, last); Atomics.store(c, ${DONE}, seen); Atomics.notify(c, ${DONE}); } };`);
    const { c, pool } = makePool(MESSAGED, 'test-message');
    pool.post(0, 7);
    pool.wake();
    pool.waitFor(DONE, Atomics.load(c, GEN));
    expect(c[RECEIVED]).toBe(7);
    const h = holdAfterRead(true)!;
    try {
      pool.wake(); // the worker wakes, reads its messages (none new), and stops
      const deadline = Date.now() + 5_000;
      while (Atomics.load(h, 2) !== 1 && Date.now() < deadline) Atomics.wait(h, 2, 0, 10);
      expect(Atomics.load(h, 2)).toBe(1);
      pool.post(0, 8);
      pool.wake();
    } finally {
      holdAfterRead(false);
    }
    pool.waitFor(DONE, Atomics.load(c, GEN));
    expect(c[RECEIVED]).toBe(8);
    pool.end();
  });

  it.runIf(WorkerPool.available())('a pool whose setup throws in a worker is left out there: its jobs run without that worker, and the worker runs every other pool\'s jobs', () => {
    const BAD = workerKind('test-bad-setup', `throw new Error('setup failed');`);
    const failed = crewStats().setupsFailed;
    const bad = makePool(BAD, 'test-bad-setup');
    const good = makePool(SUMMING, 'test-good');
    bad.pool.wake(); // (the worker reads the bad setup with this wake-up)
    good.pool.wake();
    const deadline = Date.now() + 5_000;
    while (Atomics.load(good.c, DONE) !== Atomics.load(good.c, GEN) && Date.now() < deadline) Atomics.wait(good.c, DONE, Atomics.load(good.c, DONE), 10);
    expect(Atomics.load(good.c, DONE), 'the worker lives on and runs the good pool\'s job').toBe(Atomics.load(good.c, GEN));
    expect(crewStats().setupsFailed).toBe(failed + 1);
    expect(bad.pool.ensure(1), 'the crew still grows').toBe(true);
    bad.pool.end();
    good.pool.end();
  });
  it.runIf(WorkerPool.available())('join protocol: a job body that throws still counts its worker out, and the dead worker neither crashes the process nor holds up later jobs', async () => {
    const THROWING = workerKind('test-throw', joiningSource(1, `throw new Error('job body failed');`));
    const { c, pool } = makePool(THROWING, 'test-throw');
    const other = makePool(JOINING, 'test-throw-other');
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
    // job of each pool: their worker is dead, so each closes at once, unjoined.
    await new Promise((r) => setTimeout(r, 200));
    expect(pool.ensure(2), 'no more workers start after one died').toBe(false);
    expect(other.pool.ensure(2), 'for any pool').toBe(false);
    for (const { pool: p } of [{ pool }, other]) {
      p.openJob(OPEN);
      p.wake();
      p.closeJob(OPEN, INSIDE);
      p.finished();
    }
    expect([Atomics.load(c, SUM), Atomics.load(other.c, SUM)]).toEqual([1, 0]);
  });
});
