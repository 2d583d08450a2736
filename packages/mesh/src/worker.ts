/**
 * A device's worker-thread entry (built to dist/worker.js and dist/worker.cjs). It answers run
 * requests in order: import the program's module (once), call its export on the unpacked
 * arguments, await the result, and send it back (every Array copied into a transferred buffer,
 * since an Array's storage may live in backend memory such as a WebAssembly heap).
 */
import { type Array, type ClosedJaxpr, fromStorage, setNumThreads, type StorageArray, toStorage, withBackend } from '@tpukit/core';
import { evalJaxpr } from '@tpukit/core/internal';
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { BoardCollectives, buildDeviceProgram, CollectiveBoard, withSpmdDevice } from '@tpukit/xla-lite/internal';
import type { RunReply, RunRequest, SpmdCallReply, SpmdCallRequest, SpmdRequest } from './deviceRuntime';
import { decodeClosed } from './jaxprWire';
// Registers the collectives (and pvary, the vma probe) in this thread's @tpukit/core, and
// xla-lite's compiler behind its jit, so jitted parts of a shardMap body run compiled here.
import '@tpukit/xla-lite';
import './collectives';
import { shardMap } from './shardMap';
import { installDeviceCollectives, withBoard } from './spmd';
import { pack, transferList, unpack, wireCopy, wireShared } from './transfer';

// Built through the Function constructor so the CJS build keeps a real `import()` (bundlers turn
// a literal dynamic import into `require`, which cannot load ES modules or file URLs).
const importModule = new Function('specifier', 'return import(specifier)') as (s: string) => Promise<Record<string, unknown>>;
const modules = new Map<string, Promise<Record<string, unknown>>>();

async function handle(req: RunRequest): Promise<RunReply> {
  try {
    let mod = modules.get(req.module);
    if (!mod) modules.set(req.module, (mod = importModule(req.module)));
    const m = await mod;
    // A CommonJS module's exports may only be visible as `default`.
    const fn = m[req.exportName] ?? (m.default as Record<string, unknown> | undefined)?.[req.exportName];
    if (typeof fn !== 'function') throw new TypeError(`${req.module} has no function export "${req.exportName}"`);
    const args = unpack(req.args) as unknown[];
    const result = await (fn as (...a: unknown[]) => unknown)(...args);
    return { id: req.id, result: pack(result, wireCopy, `result of ${req.module}#${req.exportName}`) };
  } catch (e) {
    return { id: req.id, error: e instanceof Error ? (e.stack ?? e.message) : String(e) };
  }
}

const programs = new Map<number, ClosedJaxpr>();

/** Runs a shardMap body traced to a jaxpr on this device's blocks; collectives meet the other devices on the board. */
function handleSpmd(req: SpmdRequest): RunReply {
  try {
    const { program, args } = unpack(req.program) as { program: unknown; args: Array[] };
    // Decoded once per program, so that its jitted parts hit xla-lite's compile cache.
    let closed = programs.get(req.programId);
    if (!closed) {
      if (program === null) throw new Error(`shardMap program ${req.programId} was not sent to this worker`);
      closed = decodeClosed(program);
      programs.set(req.programId, closed);
    }
    const outs = withBoard(req.ctx, () => withBackend(req.backend, () => evalJaxpr(closed.jaxpr, closed.consts, args)));
    // The outputs in shared memory this device owns (the host reads them in place).
    return { id: req.id, result: pack(outs, wireShared, 'shardMap program result') };
  } catch (e) {
    return { id: req.id, error: e instanceof Error ? (e.stack ?? e.message) : String(e) };
  }
}

const { status, kernelThreads } = workerData as { status: Int32Array; kernelThreads: number };
// This device's share of the machine's cores (see DeviceWorker).
setNumThreads(kernelThreads);
/** The partitioned programs compiled in this thread, by program id. */
const compiled = new Map<number, (args: Array[]) => Array[]>();
/** The board of the partitioned call in progress (aborted if this thread exits meanwhile). */
let inCall: { board: CollectiveBoard; position: number } | null = null;

/** `s` in a SharedArrayBuffer (as is when it already is one: an input passed through). */
function shared(s: StorageArray): StorageArray {
  if (s.buffer instanceof SharedArrayBuffer) return s;
  const out = new (s.constructor as new (b: ArrayBufferLike) => StorageArray)(new SharedArrayBuffer(s.byteLength));
  (out as Uint8Array).set(s as Uint8Array);
  return out;
}

function compile(req: SpmdCallRequest): (args: Array[]) => Array[] {
  if (req.image === null) throw new Error(`partitioned program ${req.programId} (${req.name}) was not sent to this worker`);
  const run = buildDeviceProgram(req.image);
  compiled.set(req.programId, run);
  return run;
}

/** Runs this device's compiled program of a partitioned call; collectives meet the other devices' threads on the board. */
function handleSpmdCall(req: SpmdCallRequest): { outs: StorageArray[] } | { error: string } {
  const board = new CollectiveBoard(req.board, req.devices, req.slotBytes);
  inCall = { board, position: req.position };
  try {
    return withBackend(req.backend, () => {
      const run = compiled.get(req.programId) ?? compile(req);
      const args = req.args.map((a) => fromStorage(a.data, a.shape, a.dtype));
      const outs = withSpmdDevice({ position: req.position, collectives: new BoardCollectives(board, req.position) }, () => run(args));
      return { outs: outs.map((o) => shared(toStorage(o))) };
    });
  } catch (e) {
    board.abort(req.position);
    return { error: e instanceof Error ? (e.stack ?? e.message) : String(e) };
  } finally {
    inCall = null;
  }
}

process.on('exit', () => {
  inCall?.board.abort(inCall.position);
  Atomics.store(status, 1, 1);
  Atomics.notify(status, 0);
});

installDeviceCollectives(shardMap);
let chain: Promise<void> = Promise.resolve();
parentPort!.on('message', (req: RunRequest | SpmdRequest | SpmdCallRequest) => {
  if ('kind' in req && req.kind === 'spmdCall') {
    chain = chain.then(() => {
      const start = performance.timeOrigin + performance.now();
      const r = handleSpmdCall(req);
      req.replies.postMessage({ ...r, start, end: performance.timeOrigin + performance.now() });
      req.replies.close();
      Atomics.store(status, 0, 1);
      Atomics.notify(status, 0);
    });
    return;
  }
  chain = chain.then(async () => {
    const reply = 'kind' in req ? handleSpmd(req) : await handle(req);
    parentPort!.postMessage(reply, 'result' in reply ? transferList(reply.result) : []);
  });
});
