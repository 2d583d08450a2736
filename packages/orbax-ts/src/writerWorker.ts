/**
 * Entry point of the background writer thread (built as its own tsup entry, see
 * backgroundWriter.ts). It receives one WriteJob at a time, whose buffers were transferred or shared
 * (not copied) from the main thread, commits it with `writeCheckpoint`, and answers with
 * `{ ok: true, result }` (the old steps deleted, and warnings for those that could not be) or the
 * error's message and stack. It also pre-faults fresh snapshot buffers
 * while the caller copies into them (prefault.ts).
 */
import { parentPort } from 'node:worker_threads';
import { prefault } from './prefault';
import { type WriteJob, writeCheckpoint } from './writer';

if (!parentPort) throw new Error('orbax-ts writerWorker: must run as a worker thread');
const port = parentPort;
// Jobs run one at a time, in order: the manager never submits a second before the first ends.
port.on('message', async (msg: { id: number; job: WriteJob } | { prefault: SharedArrayBuffer[] }) => {
  if ('prefault' in msg) {
    prefault(msg.prefault); // synchronous: the job posted after it starts only when it is done
    return;
  }
  try {
    const result = await writeCheckpoint(msg.job);
    port.postMessage({ id: msg.id, ok: true, result });
  } catch (e) {
    const err = e as Error;
    port.postMessage({ id: msg.id, ok: false, message: err?.message ?? String(e), stack: err?.stack });
  }
});
