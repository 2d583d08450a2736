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

function post(reply: Reply, transfer: ArrayBuffer[] = []): void {
  port.postMessage(reply, transfer);
  Atomics.add(signal, slot, 1);
  Atomics.notify(signal, slot);
}

// Built through the Function constructor so the CJS build keeps a real `import()` (bundlers turn
// a literal dynamic import into `require`, which cannot load ES modules or file URLs).
const importModule = new Function('specifier', 'return import(specifier)') as (s: string) => Promise<Record<string, unknown>>;

async function build(): Promise<Built> {
  const mod = await importModule(job.spec.module);
  const name = job.spec.exportName ?? 'default';
  const fn = (mod[name] ?? (name === 'default' ? mod : undefined)) as ((a: unknown) => unknown) | undefined;
  if (typeof fn !== 'function') throw new TypeError(`worker: ${job.spec.module} has no function export "${name}"`);
  const made = (await fn(job.spec.args)) as Built | null;
  if (job.kind === 'loader') return buildLoaderDataset(made, job.loader);
  if (!made || typeof made.get !== 'function' || typeof made.length !== 'number') {
    throw new TypeError(`worker: ${job.spec.module} export "${name}" must return a MapDataset (or { length, get(i) }); got ${typeof made}`);
  }
  return made as Built;
}

// If this thread ends (a crash, an exit in user code), mark it dead and wake the consumer.
process.on('exit', () => {
  Atomics.store(signal, signal.length / 2 + slot, 1);
  Atomics.add(signal, slot, 1);
  Atomics.notify(signal, slot);
});

const ready = build();
ready.catch(() => {}); // reported to the consumer on its first request
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
  // Token pipelines yield Int32Arrays: send a chunk of them as one flat array plus offsets,
  // transferred (it is freshly allocated here), instead of cloning many small arrays.
  let total = 0;
  let ragged = true;
  for (const v of values) {
    if (v instanceof Int32Array) total += v.length;
    else if (v !== undefined) {
      ragged = false;
      break;
    }
  }
  if (ragged && values.length > 1) {
    const flat = new Int32Array(total);
    const offsets = new Float64Array(values.length + 1).fill(-1);
    let at = 0;
    values.forEach((v, k) => {
      if (v === undefined) return;
      offsets[k] = at;
      flat.set(v as Int32Array, at);
      at += (v as Int32Array).length;
    });
    offsets[values.length] = at;
    post({ gen: msg.gen, start: msg.start, flat, offsets, count: values.length }, [flat.buffer, offsets.buffer]);
    return;
  }
  post({ gen: msg.gen, start: msg.start, values });
});
