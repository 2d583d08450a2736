/**
 * A device's worker-thread entry (built to dist/worker.js and dist/worker.cjs). It answers run
 * requests in order: import the program's module (once), call its export on the unpacked
 * arguments, await the result, and send it back (every Array copied into a transferred buffer,
 * since an Array's storage may live in backend memory such as a WebAssembly heap).
 */
import { parentPort } from 'node:worker_threads';
import { type Array, type ClosedJaxpr, withBackend } from '@tpukit/core';
import { evalJaxpr } from '@tpukit/core/internal';
import type { RunReply, RunRequest, SpmdRequest } from './deviceRuntime';
import { decodeClosed } from './jaxprWire';
// Registers the collectives (and pvary, the vma probe) in this thread's @tpukit/core, and
// xla-lite's compiler behind its jit, so jitted parts of a shardMap body run compiled here.
import '@tpukit/xla-lite';
import './collectives';
import { installDeviceCollectives, withRelay } from './spmd';
import { pack, transferList, unpack, wireCopy } from './transfer';

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

/** Runs a shardMap body traced to a jaxpr on this device's blocks; collectives go through the host. */
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
    const outs = withRelay(req.port, req.signal, req.slot, () => withBackend(req.backend, () => evalJaxpr(closed.jaxpr, closed.consts, args)));
    return { id: req.id, result: pack(outs, wireCopy, 'shardMap program result') };
  } catch (e) {
    return { id: req.id, error: e instanceof Error ? (e.stack ?? e.message) : String(e) };
  } finally {
    req.port.close();
  }
}

installDeviceCollectives();
let chain: Promise<void> = Promise.resolve();
parentPort!.on('message', (req: RunRequest | SpmdRequest) => {
  chain = chain.then(async () => {
    const reply = 'kind' in req ? handleSpmd(req) : await handle(req);
    parentPort!.postMessage(reply, 'result' in reply ? transferList(reply.result) : []);
  });
});
