/**
 * The background writer: one worker thread that commits WriteJobs one after another, so that
 * `save` in async mode returns as soon as the state is copied and training continues while the
 * bytes go to disk. Job buffers are transferred or shared with the worker, never copied. The worker keeps the
 * process alive only while a job is in flight.
 *
 * Node 20 cannot run a .ts worker, so the worker is the built `dist/writerWorker.(c)js`; when
 * this module runs from source (tests), it looks for the built file in `../dist`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { WriteJob, WriteResult } from './writer';

function workerFile(): string {
  const here = fileURLToPath(import.meta.url);
  const dir = path.dirname(here);
  const ext = here.endsWith('.cjs') ? '.cjs' : '.js';
  const candidates = [path.join(dir, `writerWorker${ext}`), path.join(dir, '..', 'dist', 'writerWorker.js')];
  const found = candidates.find((c) => fs.existsSync(c));
  if (!found) throw new Error(`orbax-ts: background writer not found (looked for ${candidates.join(', ')}); run \`pnpm --filter @tpukit/orbax-ts build\``);
  return found;
}

export class BackgroundWriter {
  #worker: Worker | null = null;
  #pending = new Map<number, { resolve: (r: WriteResult) => void; reject: (e: Error) => void }>();
  #nextId = 0;
  #dead: Error | null = null;

  #start(): Worker {
    if (this.#worker) return this.#worker;
    // execArgv: [] keeps vitest's / tsx's loader flags out of the worker (see TOOLCHAIN.md).
    const w = new Worker(workerFile(), { execArgv: [] });
    w.on('message', (m: { id: number; ok: boolean; result?: WriteResult; message?: string; stack?: string }) => {
      const p = this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id);
      if (this.#pending.size === 0) w.unref();
      if (m.ok) p.resolve(m.result!);
      else {
        const e = new Error(m.message);
        if (m.stack) e.stack = m.stack;
        p.reject(e);
      }
    });
    const die = (e: Error) => {
      this.#dead = e;
      this.#worker = null;
      for (const p of this.#pending.values()) p.reject(e);
      this.#pending.clear();
    };
    w.on('error', (e) => die(new Error(`orbax-ts background writer crashed: ${e.message}`)));
    w.on('exit', (code) => {
      if (this.#pending.size > 0) die(new Error(`orbax-ts background writer exited with code ${code} during a save`));
      this.#worker = null;
    });
    w.unref();
    this.#worker = w;
    return w;
  }

  /**
   * Starts the worker thread now, so that the first `save` does not pay for it on the caller's
   * thread. Idle, the worker does not keep the process alive.
   */
  warmUp(): void {
    this.#start();
  }

  /**
   * Commits `job` in the worker. Buffers in ArrayBuffers are transferred (unusable here
   * afterwards); buffers in SharedArrayBuffers (the snapshot pool's) are shared, and the caller
   * must not write them until the returned promise settles.
   */
  submit(job: WriteJob): Promise<WriteResult> {
    const w = this.#start();
    this.#dead = null;
    const id = this.#nextId++;
    const transfer = [...new Set(job.files.map((f) => f.data.buffer).filter((b): b is ArrayBuffer => b instanceof ArrayBuffer))];
    return new Promise<WriteResult>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      w.ref();
      w.postMessage({ id, job }, transfer);
    });
  }

  /**
   * Has the writer thread touch every page of `buffers` (fresh snapshot buffers the caller is
   * about to copy into), back to front, so that their page faults are shared between the two
   * threads (see prefault.ts). Fire and forget: a job submitted afterwards runs after it.
   */
  prefault(buffers: readonly SharedArrayBuffer[]): void {
    if (buffers.length > 0) this.#start().postMessage({ prefault: buffers });
  }

  async close(): Promise<void> {
    const w = this.#worker;
    this.#worker = null;
    if (w) await w.terminate();
  }
}
