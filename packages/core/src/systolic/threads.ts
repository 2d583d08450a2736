/**
 * The worker pool behind the systolic GEMM: `setNumThreads(n)` (default: the core count). Every
 * worker instantiates the same compiled GEMM module over the same shared WebAssembly.Memory, so
 * the operands packed by the calling thread are visible to all; a product is split into row or
 * column panel ranges (whichever has more panels), the calling thread runs one range itself,
 * and completion is signalled through Atomics on a small shared control block. Each output
 * element is computed by one thread with the same K order, so results do not depend on the
 * thread count.
 *
 * The worker is a few lines of plain JavaScript with no imports (the kernels arrive as a
 * compiled WebAssembly.Module), started from a string (`eval: true`), so the same code works
 * from the TypeScript sources under vitest and from the built package, and needs no separate
 * worker file. Node only for now: browsers would need a Blob-URL worker and a non-blocking wait.
 */
import { WA, type WasmModule } from '../wasm/webassemblyTypes';
import type { GemmArgs, GemmEngine } from './gemmEngine';
import { packFunctionName } from './packKernels';

/** Every packing kernel, in a fixed order the workers index into. */
const PACK_NAMES: string[] = [];
for (const layout of ['rc', 'kc'] as const) for (const R of [4, 8]) for (const b of [false, true]) for (const f of [false, true]) PACK_NAMES.push(packFunctionName(layout, R, b, f));

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { module, memory, control, id, start, packNames } = workerData;
const inst = new WebAssembly.Instance(module, { env: { mem: memory } });
const gemm = inst.exports.gemm;
const packs = packNames.map((n) => inst.exports[n]);
const c = new Int32Array(control);
let seen = start;
for (;;) {
  Atomics.wait(c, 0, seen);
  seen = Atomics.load(c, 0);
  if (seen < 0) break;
  const o = 8 + id * 12;
  try {
    if (c[o + 10] === 1) packs[c[o + 11]](c[o], c[o + 1], c[o + 2], c[o + 3], c[o + 4], c[o + 5], c[o + 6]);
    else if (c[o + 6] < c[o + 7] && c[o + 8] < c[o + 9]) gemm(c[o], c[o + 1], c[o + 2], c[o + 3], c[o + 4], c[o + 5], c[o + 6], c[o + 7], c[o + 8], c[o + 9]);
  } catch (e) {
    Atomics.store(c, 2, 1); // reported by the calling thread; never leave it waiting
  }
  Atomics.add(c, 1, 1);
  Atomics.notify(c, 1);
}
`;

interface NodeWorker {
  unref(): void;
  terminate(): Promise<number>;
}

type ProcessLike = { getBuiltinModule?: (id: string) => unknown; versions?: { node?: string } };

function nodeModule<T>(id: string): T | null {
  const proc = (globalThis as { process?: ProcessLike }).process;
  if (!proc?.versions?.node || typeof proc.getBuiltinModule !== 'function') return null;
  return (proc.getBuiltinModule(id) as T) ?? null;
}

function defaultThreads(): number {
  const os = nodeModule<{ availableParallelism?: () => number; cpus(): unknown[] }>('node:os');
  if (os) return Math.max(1, os.availableParallelism ? os.availableParallelism() : os.cpus().length);
  return 1;
}

let requested: number | null = null;

/** Threads the systolic GEMM uses (the calling thread included). */
export function getNumThreads(): number {
  return requested ?? defaultThreads();
}

/** Sets the number of threads for systolic matmuls (1 = no workers). Takes effect on the next product. */
export function setNumThreads(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > 256) throw new RangeError(`setNumThreads: n must be an integer in 1..256; got ${n}`);
  requested = n;
}

/** Whether worker threads can run here (Node worker_threads and a shared memory). */
export function threadsAvailable(engine: GemmEngine): boolean {
  return engine.shared && nodeModule('node:worker_threads') !== null;
}

class Pool {
  readonly workers: NodeWorker[] = [];
  readonly control = new Int32Array(new SharedArrayBuffer(4 * (8 + 12 * 256)));
  private module: WasmModule;

  constructor(private readonly engine: GemmEngine) {
    this.module = new WA.Module(engine.bytes);
  }

  resize(n: number): void {
    const wt = nodeModule<{ Worker: new (src: string, opts: object) => NodeWorker }>('node:worker_threads')!;
    while (this.workers.length < n) {
      const w = new wt.Worker(WORKER_SOURCE, {
        eval: true,
        execArgv: [],
        workerData: { module: this.module, memory: this.engine.memory, control: this.control.buffer, id: this.workers.length, start: Atomics.load(this.control, 0), packNames: PACK_NAMES },
      });
      w.unref();
      this.workers.push(w);
    }
  }

  run(args: GemmArgs, threads: number): void {
    const { mr } = this.engine.shape;
    const nr = this.engine.nr;
    const { ap, bp, cp, mp, np, kp } = args;
    const rowPanels = mp / mr;
    const colPanels = np / nr;
    const byRows = rowPanels >= colPanels;
    const panels = byRows ? rowPanels : colPanels;
    const parts = Math.min(threads, panels);
    const per = Math.ceil(panels / parts);
    const c = this.control;
    const range = (t: number): [number, number, number, number] => {
      const p0 = Math.min(panels, t * per);
      const p1 = Math.min(panels, (t + 1) * per);
      return byRows ? [p0 * mr, p1 * mr, 0, np] : [0, mp, p0 * nr, p1 * nr];
    };
    const nw = parts - 1;
    this.resize(nw);
    for (let w = 0; w < this.workers.length; w++) {
      const o = 8 + w * 12;
      const [i0, i1, j0, j1] = w < nw ? range(w + 1) : [0, 0, 0, 0];
      c[o] = ap; c[o + 1] = bp; c[o + 2] = cp; c[o + 3] = mp; c[o + 4] = np; c[o + 5] = kp;
      c[o + 6] = i0; c[o + 7] = i1; c[o + 8] = j0; c[o + 9] = j1;
      c[o + 10] = 0;
    }
    this.start();
    const [i0, i1, j0, j1] = range(0);
    this.engine.exports.gemm(ap, bp, cp, mp, np, kp, i0, i1, j0, j1);
    this.wait();
  }

  /** Runs packing kernel `fn` on worker 0 (the other workers idle); returns the wait. */
  pack(fn: string, args: readonly number[]): () => void {
    const c = this.control;
    const index = PACK_NAMES.indexOf(fn);
    if (index < 0) throw new Error(`systolic threads: unknown packing kernel ${fn}`);
    for (let w = 0; w < this.workers.length; w++) {
      const o = 8 + w * 12;
      c[o + 6] = 0; c[o + 7] = 0; c[o + 8] = 0; c[o + 9] = 0; // idle unless chosen below
      c[o + 10] = 0;
    }
    for (let i = 0; i < 7; i++) c[8 + i] = args[i];
    c[8 + 10] = 1;
    c[8 + 11] = index;
    this.start();
    return () => this.wait();
  }

  private start(): void {
    const c = this.control;
    Atomics.store(c, 1, 0);
    Atomics.store(c, 2, 0);
    Atomics.add(c, 0, 1);
    Atomics.notify(c, 0);
  }

  private wait(): void {
    const c = this.control;
    const all = this.workers.length;
    for (;;) {
      const done = Atomics.load(c, 1);
      if (done >= all) break;
      Atomics.wait(c, 1, done);
    }
    if (Atomics.load(c, 2) !== 0) throw new Error('dot_general: a systolic worker thread failed while computing its part of the product (setNumThreads(1) runs without workers)');
  }
}

const pools = new WeakMap<GemmEngine, Pool>();

/** Installs (or removes, for 1 thread) the parallel runner on an engine, per the thread setting. */
export function applyThreads(engine: GemmEngine): void {
  const n = getNumThreads();
  if (n <= 1 || !threadsAvailable(engine)) {
    engine.parallel = null;
    engine.parallelPack = null;
    return;
  }
  let pool = pools.get(engine);
  if (!pool) {
    pool = new Pool(engine);
    pools.set(engine, pool);
  }
  const p = pool;
  engine.parallel = (args) => {
    try {
      p.resize(Math.min(n, 256) - 1);
    } catch {
      // Workers cannot start here (sandbox, resource limits): run on the calling thread.
      engine.parallel = null;
      engine.exports.gemm(args.ap, args.bp, args.cp, args.mp, args.np, args.kp, 0, args.mp, 0, args.np);
      return;
    }
    p.run(args, n);
  };
  engine.parallelPack = p.workers.length > 0 ? (fn, args) => p.pack(fn, args) : null;
}
