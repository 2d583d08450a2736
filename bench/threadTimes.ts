/**
 * CPU time of this process's threads by group (Linux only: `/proc/self/task/<tid>/schedstat`,
 * nanoseconds on the CPU and waiting for one): the main thread, the threads that existed when
 * this module was loaded (V8's platform workers, which run concurrent garbage collection and
 * compilation, and libuv's), and the threads started later (the worker pools: the GEMM pool,
 * xla-lite's kernel pool, the attention pool). On two cores a two-thread step whose threads
 * are busy for about twice its wall time has no idle core left; the groups say who used it.
 *
 * The groups are by start time, not by name (Node 20 names every thread "node"): a libuv pool
 * thread started lazily after this module loaded (first async fs, dns, crypto or zlib call)
 * counts as a worker, and a thread that ends within a round takes its time with it. bench:gpt
 * makes no such calls while it times, and its pools live for the whole run.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface ThreadGroupTimes {
  /** Milliseconds on a CPU. */
  run: { main: number; background: number; workers: number };
  /** Milliseconds runnable but waiting for a CPU. */
  wait: { main: number; background: number; workers: number };
}

function read(): Map<number, [number, number]> {
  const m = new Map<number, [number, number]>();
  let tasks: string[];
  try {
    tasks = readdirSync('/proc/self/task');
  } catch {
    return m;
  }
  for (const t of tasks) {
    try {
      const [run, wait] = readFileSync(`/proc/self/task/${t}/schedstat`, 'utf8').trim().split(' ').map(Number);
      m.set(Number(t), [run / 1e6, wait / 1e6]);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return m;
}

const startup = new Set(read().keys());

/** Whether per-thread times can be read here. */
export const threadTimesAvailable = startup.size > 0;

/** A snapshot of every thread's times; `since(snapshot)` gives the groups' times after it. */
export function threadSnapshot(): Map<number, [number, number]> {
  return read();
}

/** Per group, the CPU and wait milliseconds the threads used since `before`. */
export function threadTimesSince(before: Map<number, [number, number]>): ThreadGroupTimes {
  const r: ThreadGroupTimes = { run: { main: 0, background: 0, workers: 0 }, wait: { main: 0, background: 0, workers: 0 } };
  const pid = process.pid;
  for (const [t, [run, wait]] of read()) {
    const [run0, wait0] = before.get(t) ?? [0, 0];
    const g = t === pid ? 'main' : startup.has(t) ? 'background' : 'workers';
    r.run[g] += run - run0;
    r.wait[g] += wait - wait0;
  }
  return r;
}
