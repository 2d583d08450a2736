/**
 * The worker-thread entry (built to dist/worker.js and dist/worker.cjs). It rebuilds the
 * dataset from the `WorkerSpec` module, then answers range requests from the main thread with
 * the computed elements, bumping the shared counter so a blocked consumer wakes up.
 */
import { type MessagePort, workerData } from 'node:worker_threads';
import { buildLoaderDataset } from './loaderDataset';
import type { Reply, WorkerJob } from './workerPool';

interface Built {
  length: number;
  get(i: number): unknown;
  describe?: () => string;
}

const { job, port, signal, slot } = workerData as { job: WorkerJob; port: MessagePort; signal: Int32Array; slot: number };

function post(reply: Reply): void {
  port.postMessage(reply);
  Atomics.add(signal, slot, 1);
  Atomics.notify(signal, slot);
}

async function build(): Promise<Built> {
  const mod = await import(job.spec.module);
  const name = job.spec.exportName ?? 'default';
  const fn = mod[name] ?? (name === 'default' ? mod : undefined);
  if (typeof fn !== 'function') throw new TypeError(`worker: ${job.spec.module} has no function export "${name}"`);
  const made = await fn(job.spec.args);
  if (job.kind === 'loader') return buildLoaderDataset(made, job.loader);
  if (!made || typeof made.get !== 'function' || typeof made.length !== 'number') {
    throw new TypeError(`worker: ${job.spec.module} export "${name}" must return a MapDataset (or { length, get(i) }); got ${typeof made}`);
  }
  return made as Built;
}

const ready = build();
port.on('message', async (msg: { gen: number; start: number; count: number }) => {
  let ds: Built;
  try {
    ds = await ready;
  } catch (e) {
    post({ gen: msg.gen, start: msg.start, error: `worker ${slot} could not build the dataset: ${(e as Error)?.stack ?? e}` });
    return;
  }
  if (msg.start < 0) {
    post({ gen: msg.gen, start: msg.start, length: ds.length, describe: typeof ds.describe === 'function' ? ds.describe() : '' });
    return;
  }
  const values: unknown[] = new Array(msg.count);
  try {
    for (let k = 0; k < msg.count; k++) values[k] = ds.get(msg.start + k);
  } catch (e) {
    post({ gen: msg.gen, start: msg.start, error: `worker ${slot} failed computing elements ${msg.start}..${msg.start + msg.count - 1}: ${(e as Error)?.stack ?? e}` });
    return;
  }
  post({ gen: msg.gen, start: msg.start, values });
});
