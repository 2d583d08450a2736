/**
 * Worker threads that compute dataset elements ahead of the consumer. Functions cannot be sent
 * to a thread, so a worker rebuilds the dataset from a module (`WorkerSpec`: the module's export
 * is called with `args` and returns the dataset), the way Grain pickles a pipeline into its
 * worker processes. The consumer stays synchronous: results travel on a MessagePort and are
 * read with `receiveMessageOnPort`, and the consumer sleeps on `Atomics.wait` over a shared
 * counter each worker bumps after posting, so `next()` blocks only when the prefetch buffer is
 * empty. A chunk of Int32Array elements (token sequences) travels as one flat array plus
 * offsets, copied once in the worker and transferred; other results are structured-cloned (a
 * worker's dataset may hand out the same typed array again, so its own arrays are never
 * transferred).
 */
import { availableParallelism } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { MessageChannel, type MessagePort, Worker, receiveMessageOnPort } from 'node:worker_threads';
import type { JsonValue } from './iterator';

/** How a worker thread rebuilds the dataset: `(await import(module))[exportName](args)`. */
export interface WorkerSpec {
  /** A file URL or absolute path of an ES module (or CommonJS file) that Node can load. */
  module: string;
  /** The export to call (default `'default'`). */
  exportName?: string;
  /** JSON passed to the export. */
  args?: JsonValue;
  /** Node flags for the worker (default none; e.g. `['--import', 'tsx']` to load a .ts module). */
  execArgv?: string[];
}

let warnedOversubscribed = false;

/**
 * Warns once per process when `workerCount` is more than twice the cores Node may use: threads
 * beyond the cores add memory and messaging, not speed (the output is the same either way).
 */
export function warnIfOversubscribed(op: string, workerCount: number, cores = availableParallelism()): void {
  if (warnedOversubscribed || workerCount <= 2 * cores) return;
  warnedOversubscribed = true;
  process.emitWarning(
    `${op}: workerCount ${workerCount} is more than twice the ${cores} cores this process can use (os.availableParallelism()); the extra threads cost memory and messaging without speeding anything up. Use about ${cores} (this warning is shown once per process).`,
    { code: 'TPUKIT_GRAIN_WORKERS' },
  );
}

/** What a worker is asked to build. */
export interface WorkerJob {
  kind: 'dataset' | 'loader';
  spec: WorkerSpec;
  /** For 'loader': the sampler options and operation count the main thread uses. */
  loader?: JsonValue;
}

export interface Reply {
  gen: number;
  start: number;
  values?: unknown[];
  /** A chunk of Int32Arrays sent flat: element k is `flat[offsets[k], next offset)`, or undefined where `offsets[k] < 0`. */
  flat?: Int32Array;
  offsets?: Float64Array;
  count?: number;
  error?: string;
  length?: number;
  describe?: string;
}

function workerFile(): URL {
  const here = import.meta.url;
  if (/\.[cm]?ts$/.test(here)) return new URL('../dist/worker.js', here);
  return new URL(here.endsWith('.cjs') ? './worker.cjs' : './worker.js', here);
}

export function moduleUrl(module: string): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(module) && !/^[a-z]:[\\/]/i.test(module)) return module;
  return pathToFileURL(module).href;
}

interface Slot {
  worker: Worker;
  port: MessagePort;
}

/** A fixed set of workers, each answering range requests `[start, start+count)` in order. */
export class WorkerPool {
  readonly #slots: Slot[] = [];
  readonly #signal: Int32Array;
  readonly timeoutMs: number;
  #closed = false;

  constructor(readonly job: WorkerJob, readonly workerCount: number, options: { timeoutMs?: number } = {}) {
    if (!job.spec || typeof job.spec.module !== 'string') {
      throw new TypeError('workers: workerCount > 0 needs a `worker: { module, exportName?, args? }` spec: worker threads rebuild the dataset by calling that module export (functions cannot be sent to a thread)');
    }
    this.timeoutMs = options.timeoutMs ?? 300_000;
    // [0, W): per-worker reply counters; [W, 2W): set when a worker thread has exited.
    this.#signal = new Int32Array(new SharedArrayBuffer(8 * workerCount));
    const spec = { ...job.spec, module: moduleUrl(job.spec.module) };
    for (let i = 0; i < workerCount; i++) {
      const { port1, port2 } = new MessageChannel();
      const worker = new Worker(fileURLToPath(workerFile()), {
        execArgv: job.spec.execArgv ?? [],
        workerData: { job: { ...job, spec }, port: port2, signal: this.#signal, slot: i },
        transferList: [port2],
      });
      worker.unref();
      this.#slots.push({ worker, port: port1 });
    }
  }

  /** Asks worker `w` for elements `[start, start+count)`, tagged with generation `gen`. */
  request(w: number, gen: number, start: number, count: number): void {
    this.#slots[w].port.postMessage({ gen, start, count });
  }

  /** Asks worker `w` to report the dataset's length and description (checked against the main thread's). */
  probe(w: number, gen: number): void {
    this.#slots[w].port.postMessage({ gen, start: -1, count: 0 });
  }

  /** The elements of a reply (unpacking a flat Int32Array chunk into views). */
  static values(r: Reply): unknown[] {
    if (r.values) return r.values;
    const { flat, offsets, count } = r as Required<Reply>;
    const out = new Array<unknown>(count);
    for (let k = 0; k < count; k++) {
      if (offsets[k] < 0) continue;
      let end = offsets[count];
      for (let j = k + 1; j <= count; j++) {
        if (offsets[j] >= 0) {
          end = offsets[j];
          break;
        }
      }
      out[k] = flat.subarray(offsets[k], end);
    }
    return out;
  }

  /** The next reply from worker `w`, blocking until it arrives. */
  receive(w: number): Reply {
    const port = this.#slots[w].port;
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      const seen = Atomics.load(this.#signal, w);
      const m = receiveMessageOnPort(port);
      if (m) return m.message as Reply;
      if (this.#closed) throw new Error('workers: the pool was closed');
      if (Atomics.load(this.#signal, this.workerCount + w) === 1) {
        const late = receiveMessageOnPort(port);
        if (late) return late.message as Reply;
        throw new Error(`workers: worker ${w} exited without answering (an uncaught error in the worker module? it could not be loaded?)`);
      }
      if (Date.now() > deadline) throw new Error(`workers: no reply from worker ${w} within ${this.timeoutMs} ms (did it crash? check the worker module)`);
      Atomics.wait(this.#signal, w, seen, 200);
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#slots) {
      s.port.close();
      void s.worker.terminate();
    }
  }
}
