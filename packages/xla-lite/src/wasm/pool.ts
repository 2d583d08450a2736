/**
 * The worker pool that runs xla-lite's WebAssembly kernels on several threads. It is core's
 * `wasm.WorkerPool` (the one implementation the systolic GEMM pool,
 * `core/src/backends/systolic/threads.ts`, uses too: starting the workers, waking them, waiting
 * on control slots) with a job protocol of its own, because the GEMM pool is built around one
 * GEMM module while xla-lite has one module per compiled executable:
 *
 * - Workers are plain JavaScript started from a string (`eval: true`, no imports, no worker
 *   file), so the same code runs from the TypeScript sources under vitest and from `dist/`.
 * - Each executable's program (compiled `WebAssembly.Module` + its shared `WebAssembly.Memory`)
 *   is posted to a worker the first time it runs a kernel there; the worker, blocked in
 *   `Atomics.wait` between jobs, picks such messages up synchronously with
 *   `receiveMessageOnPort` when the next job starts. Programs that are garbage-collected on
 *   the calling side are dropped by the workers (FinalizationRegistry).
 * - One job = one kernel over work items [0, items): a single wake-up, then every thread (the
 *   calling one included) takes chunks of items from a shared atomic counter until none are
 *   left. The calling thread waits until every item is computed, then closes the job: a
 *   worker that wakes only after that (its core busy with other work) leaves without being
 *   waited for; only workers already inside the job are waited for, so the control block can
 *   be reused. Kernels get the thread's index as a third argument (0 = the calling thread,
 *   worker w is w+1): row kernels use it to pick their scratch rows (`emitKernel.ts`). Which
 *   thread computes an item never changes what it computes (see
 *   `emitKernel.ts`), so results do not depend on the thread count.
 *
 * Threads: core's process-wide `setNumThreads(n)` / `getNumThreads()` (the core count unless
 * set), the same knob the systolic GEMM uses; `setKernelThreads(n)` overrides it for generated
 * kernels only (benchmarks comparing thread counts). Node only: elsewhere (or when workers cannot start) kernels run on the
 * calling thread.
 */
import { getNumThreads } from '@tpukit/core';
import { wasm } from '@tpukit/core/internal';

const GEN = 0; // job generation: bumped to wake the workers
const DONE_ITEMS = 1; // items computed in the current job
const ERR = 2;
const NEXT = 3; // next item to take
const PID = 4;
const FN = 5;
const ITEMS = 6;
const CHUNK = 7;
const ACTIVE = 8; // workers [0, ACTIVE) take part
const OPEN = 9; // the generation of the job workers may still join (0 once closed)
const INSIDE = 10; // workers between joining a job and leaving it
const SLOTS = 16;
/** Polls of a control slot before sleeping on it. */
const SPIN = 4000;

/** Between jobs: poll the generation a while, then sleep (core's `wasm.idleWaitSource`). */
const IDLE_WAIT = wasm.idleWaitSource(GEN);

/** A worker's part of a job it joined (see WORKER_SOURCE): chunks of the job's items until none are left. */
const JOB_SOURCE = `
    let k = null;
    try {
      drain();
      k = programs.get(c[${PID}])[c[${FN}]];
    } catch (e) {
      Atomics.store(c, ${ERR}, 1);
    }
    if (k) {
      const items = c[${ITEMS}], ch = c[${CHUNK}];
      for (let i = Atomics.add(c, ${NEXT}, ch); i < items; i = Atomics.add(c, ${NEXT}, ch)) {
        const e = Math.min(items, i + ch);
        try {
          k(i, e, id + 1);
        } catch (err) {
          Atomics.store(c, ${ERR}, 1);
        }
        Atomics.add(c, ${DONE_ITEMS}, e - i);
        Atomics.notify(c, ${DONE_ITEMS});
      }
    }
`;

const WORKER_SOURCE = `
const { parentPort, workerData, receiveMessageOnPort } = require('node:worker_threads');
const c = new Int32Array(workerData.control);
const id = workerData.id;
const programs = new Map();
function drain() {
  for (let m = receiveMessageOnPort(parentPort); m; m = receiveMessageOnPort(parentPort)) {
    const x = m.message;
    if (x.drop !== undefined) programs.delete(x.drop);
    else {
      // Kernel k<fn> at index fn (no name built per job).
      const ex = new WebAssembly.Instance(x.module, { env: { mem: x.memory, sin: Math.sin, cos: Math.cos } }).exports;
      const ks = [];
      for (const n of Object.keys(ex)) if (/^k[0-9]+$/.test(n)) ks[Number(n.slice(1))] = ex[n];
      programs.set(x.id, ks);
    }
  }
}
let seen = workerData.start;
for (;;) {
  ${IDLE_WAIT}
  seen = Atomics.load(c, ${GEN});
  if (seen < 0) break;
  ${wasm.joinSource(OPEN, INSIDE, `id < c[${ACTIVE}]`, JOB_SOURCE)}
}
`;

/** What the pool needs of a program: an id, the compiled module and its shared memory. */
export interface PoolProgram {
  readonly id: number;
  readonly module: wasm.WasmModule;
  readonly memory: wasm.WasmMemory;
  /** Workers [0, sentTo) have this program. */
  sentTo: number;
}

let requested: number | null = null;

/** Threads the generated kernels use (the calling thread included): `setKernelThreads`, else core's `getNumThreads()`. */
export function getKernelThreads(): number {
  return requested ?? getNumThreads();
}

/** Overrides the threads of generated kernels only (1 = no workers); `null` follows core's `setNumThreads` again. */
export function setKernelThreads(n: number | null): void {
  if (n !== null && (!Number.isInteger(n) || n < 1 || n > 256)) throw new RangeError(`setKernelThreads: n must be an integer in 1..256 or null; got ${n}`);
  requested = n;
}

/** Whether kernels can run on worker threads here (Node worker_threads and shared memory). */
export function kernelThreadsAvailable(): boolean {
  return wasm.WorkerPool.available() && wasm.wasmFeatures().threads;
}

const control = new Int32Array(new SharedArrayBuffer(4 * SLOTS));
/** The workers (core's shared worker-thread machinery, as the systolic GEMM uses). */
const pool = new wasm.WorkerPool(WORKER_SOURCE, control, GEN, SPIN, () => ({}), 'kernels');
const workers = pool.workers;
let jobs = 0;

/** Kernel runs split across worker threads so far (for tests and benchmarks). */
export function poolStats(): { parallelJobs: number; workers: number } {
  return { parallelJobs: jobs, workers: workers.length };
}

const dropped = new FinalizationRegistry<number>((id) => {
  for (const w of workers) w.postMessage({ drop: id });
});

/** Registers a program's owner so the workers drop the program once the owner is collected. */
export function trackProgram(owner: object, id: number): void {
  dropped.register(owner, id);
}

/**
 * Runs kernel `k` (export `k<fn>` of `prog`, already instantiated on this thread) over items
 * [0, items) on `threads` threads, `chunk` items at a time. Returns false (having done nothing)
 * when workers are unavailable, so the caller runs the kernel itself.
 */
export function runParallel(prog: PoolProgram, fn: number, k: (lo: number, hi: number, thread: number) => void, items: number, chunk: number, threads: number, name: string): boolean {
  if (!pool.ensure(threads - 1)) return false;
  for (let w = prog.sentTo; w < threads - 1; w++) workers[w].postMessage({ id: prog.id, module: prog.module, memory: prog.memory });
  prog.sentTo = Math.max(prog.sentTo, threads - 1);
  const c = control;
  c[PID] = prog.id;
  c[FN] = fn;
  c[ITEMS] = items;
  c[CHUNK] = chunk;
  c[ACTIVE] = threads - 1;
  Atomics.store(c, NEXT, 0);
  Atomics.store(c, DONE_ITEMS, 0);
  Atomics.store(c, ERR, 0);
  pool.openJob(OPEN);
  pool.wake();
  jobs++;
  let failed: unknown = null;
  for (let i = Atomics.add(c, NEXT, chunk); i < items; i = Atomics.add(c, NEXT, chunk)) {
    const e = Math.min(items, i + chunk);
    try {
      k(i, e, 0);
    } catch (err) {
      failed ??= err;
    }
    Atomics.add(c, DONE_ITEMS, e - i);
  }
  // Every item is taken; wait for those still being computed, then close the job so that a
  // worker waking only now (its core busy elsewhere) leaves at once instead of being waited
  // for, and wait for the workers inside to leave before the control block is reused.
  pool.waitFor(DONE_ITEMS, items);
  pool.closeJob(OPEN, INSIDE);
  pool.finished();
  if (failed) throw failed;
  if (Atomics.load(c, ERR) !== 0) throw new Error(`xla-lite ${name}: a kernel worker thread failed (setKernelThreads(1) runs kernels on the calling thread only)`);
  return true;
}
