/**
 * The process-wide thread count (`setNumThreads` / `getNumThreads`): how many threads, the
 * calling one included, parallel kernels may use. One knob for everything that runs on worker
 * threads: the systolic backend's GEMM pool and the kernels @tpukit/xla-lite generates. The
 * default is the machine's available parallelism (1 outside Node).
 */

type ProcessLike = { getBuiltinModule?: (id: string) => unknown; versions?: { node?: string } };

/** A Node built-in module (`node:os`, `node:worker_threads`), or null outside Node. */
export function nodeModule<T>(id: string): T | null {
  const proc = (globalThis as { process?: ProcessLike }).process;
  if (!proc?.versions?.node || typeof proc.getBuiltinModule !== 'function') return null;
  return (proc.getBuiltinModule(id) as T) ?? null;
}

let hardware = 0;

/**
 * The machine's available parallelism (at least 1; 1 outside Node), read once per process: every
 * kernel launch asks (through `getNumThreads`), and `os.availableParallelism()` costs a system
 * call each time (~10% of a small eager grad step when it was not cached).
 */
export function hardwareThreads(): number {
  if (hardware === 0) {
    const os = nodeModule<{ availableParallelism?: () => number; cpus(): unknown[] }>('node:os');
    hardware = os ? Math.max(1, os.availableParallelism ? os.availableParallelism() : os.cpus().length) : 1;
  }
  return hardware;
}

/** The most threads `setNumThreads` accepts. */
export const MAX_THREADS = 256;

let requested: number | null = null;

/** Threads parallel kernels use (the calling thread included): `setNumThreads`, else the machine's parallelism. */
export function getNumThreads(): number {
  return requested ?? hardwareThreads();
}

/**
 * Sets the threads parallel kernels use, for the whole process (1 = no workers; `null` = the
 * machine's parallelism again). Takes effect on the next kernel that runs.
 */
export function setNumThreads(n: number | null): void {
  if (n !== null && (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_THREADS)) {
    const shown = typeof n === 'number' ? String(n) : `${JSON.stringify(n) ?? String(n)} (${typeof n})`;
    throw new RangeError(`setNumThreads: n must be an integer in 1..${MAX_THREADS}; got ${shown} (null restores the default, this machine's ${hardwareThreads()})`);
  }
  requested = n;
}
