/**
 * The worker pool that runs xla-lite's WebAssembly kernels on several threads: a pool (job kind
 * 'kernels', a control block and job protocol of its own) over core's worker crew
 * (`wasm.WorkerPool`, `core/src/wasm/workerPool.ts`): one worker set per realm that runs the jobs
 * of this pool, the systolic GEMM's and the fused attention's, so kernels and products never wake
 * separate workers. The GEMM pool is built around one GEMM module while xla-lite has one module
 * per compiled executable:
 *
 * - Each executable's program (compiled `WebAssembly.Module` + its shared `WebAssembly.Memory`)
 *   is posted to a worker the first time it runs a kernel there (`WorkerPool.post`); the worker,
 *   blocked in `Atomics.wait` between jobs, picks such messages up synchronously with
 *   `receiveMessageOnPort` when it next wakes. Programs that are garbage-collected on
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

const GEN = 0; // the pool's job generation: bumped to announce a job
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

/** A worker's part of a job it joined (see KERNELS_KIND): chunks of the job's items until none are left. */
const JOB_SOURCE = `
    let k = null;
    try {
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

/**
 * The kernel pool's job kind (core's worker crew): the programs the worker was sent (their
 * kernels by index; one that fails to instantiate stays absent, so a job that needs it fails
 * with ERR), and the job function.
 */
const KERNELS_KIND = wasm.workerKind('kernels', `
const programs = new Map();
function message(x) {
  if (x.drop !== undefined) {
    programs.delete(x.drop);
    return;
  }
  try {
    // Kernel k<fn> at index fn (no name built per job).
    const ex = new WebAssembly.Instance(x.module, { env: { mem: x.memory, sin: Math.sin, cos: Math.cos } }).exports;
    const ks = [];
    for (const n of Object.keys(ex)) if (/^k[0-9]+$/.test(n)) ks[Number(n.slice(1))] = ex[n];
    programs.set(x.id, ks);
  } catch (e) {
    programs.delete(x.id);
  }
}
function job(seen) {
  ${wasm.joinSource(OPEN, INSIDE, `id < c[${ACTIVE}]`, JOB_SOURCE)}
}
return { job, message };
`);

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
/** The pool over core's worker crew (the workers the systolic GEMM and the fused attention use too). */
const pool = new wasm.WorkerPool(KERNELS_KIND, control, GEN, SPIN, () => ({}), 'kernels');
let jobs = 0;

/** Kernel runs split across worker threads so far (for tests and benchmarks). */
export function poolStats(): { parallelJobs: number; workers: number } {
  return { parallelJobs: jobs, workers: pool.size };
}

const dropped = new FinalizationRegistry<number>((id) => {
  for (let w = 0; w < pool.size; w++) pool.post(w, { drop: id });
  // (woken to read the drops now: the program's module and memory go at once, not at the next job)
  wasm.readMessages();
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
  for (let w = prog.sentTo; w < threads - 1; w++) pool.post(w, { id: prog.id, module: prog.module, memory: prog.memory });
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
