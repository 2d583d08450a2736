/**
 * The device runtime: every CPU device owns one worker thread, and a device runs a *program*
 * there on arguments that live in that thread. A program is a serialisable description of a
 * function (a module and an export name; functions themselves cannot cross threads): the
 * worker imports the module once, then calls the export on each request with the shard
 * arguments (pytrees of Arrays) and sends the result back. `runOnDevices` starts one request
 * per device and waits for all, so the devices compute in parallel, one core each.
 */
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from 'node:worker_threads';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type Array, type DType, getBackend, type StorageArray } from '@tpukit/core';
import type { ModuleImage } from '@tpukit/xla-lite/internal';
import { type Packed, type WireArray, arraysIn, pack, transferList, unpack, wireCopy, wireShared } from './transfer';

/** A function a device can run: `module`'s export `exportName` (default 'default'). */
export interface DeviceProgram {
  /** A file path, file: URL or package specifier of an ES module, or of a `.cjs` CommonJS module (run by the worker's CommonJS build). */
  readonly module: string;
  readonly exportName?: string;
  /** Node flags for the worker, e.g. `['--import', 'tsx']` to load a TypeScript module. */
  readonly execArgv?: readonly string[];
}

export interface RunRequest {
  readonly id: number;
  readonly module: string;
  readonly exportName: string;
  readonly args: Packed;
}

/** What a worker knows of a shardMap run: the collective board, its position, the mesh's shape. */
export interface BoardContext {
  readonly board: SharedArrayBuffer;
  readonly devices: number;
  readonly slotBytes: number;
  readonly position: number;
  readonly axisNames: readonly string[];
  readonly axisSizes: readonly number[];
}

/** A traced program (jaxprWire) for one device, with the board its collectives meet the other devices on. */
export interface SpmdRequest {
  readonly id: number;
  readonly kind: 'spmd';
  /** Identifies the program: a worker decodes (and compiles) each program once. */
  readonly programId: number;
  readonly program: Packed;
  /** The caller's backend, which the device computes on. */
  readonly backend: string;
  readonly ctx: BoardContext;
}

/** One device's share of a partitioned call: the program (sent once per worker), its position, the collective board and its argument buffers. */
export interface SpmdCallRequest {
  readonly id: number;
  readonly kind: 'spmdCall';
  readonly programId: number;
  readonly image: ModuleImage | null;
  readonly name: string;
  readonly position: number;
  readonly board: SharedArrayBuffer;
  readonly devices: number;
  readonly slotBytes: number;
  /** Device-owned buffers (SharedArrayBuffer views): shared with the worker, never copied. */
  readonly args: { readonly data: StorageArray; readonly shape: readonly number[]; readonly dtype: DType }[];
  readonly backend: string;
  /** Where the worker answers (read synchronously by the host). */
  readonly replies: MessagePort;
}

/** A device's outputs (SharedArrayBuffer views it allocated), or its error; when it ran (ms since the epoch). */
export type SpmdCallReply = ({ readonly outs: StorageArray[] } | { readonly error: string }) & { readonly start: number; readonly end: number };

/** Words of a worker's status block: [REPLY] 1 when a partitioned call's reply was posted, [EXITED] 1 once the thread is exiting. */
const REPLY = 0;
const EXITED = 1;

export type RunReply = { readonly id: number; readonly result: Packed } | { readonly id: number; readonly error: string };

/**
 * The worker entry: the ES module build, or the CommonJS build for a `.cjs` program, so that the
 * program and the worker share one copy of @tpukit/core (its Arrays are that copy's class).
 */
function workerFile(cjs: boolean): string {
  const here = import.meta.url;
  const name = cjs ? 'worker.cjs' : 'worker.js';
  return fileURLToPath(new URL(/\.[cm]?ts$/.test(here) ? `../dist/${name}` : `./${name}`, here));
}

function moduleUrl(module: string): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(module) && !/^[a-z]:[\\/]/i.test(module)) return module;
  if (module.startsWith('.') || module.startsWith('/')) return pathToFileURL(module).href;
  return module;
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: Error): void;
}

/** One device's worker thread; requests are answered in order. */
export class DeviceWorker {
  #worker: Worker | null = null;
  #execArgv = '';
  /** The traced programs this worker thread holds (spmd.ts sends each one once). */
  readonly #programs = new Set<number>();
  #next = 0;
  readonly #pending = new Map<number, Pending>();
  /** The partitioned programs this worker thread has compiled. */
  readonly #compiled = new Set<number>();
  /** Where partitioned calls are answered (read synchronously with receiveMessageOnPort). */
  #replies: MessagePort | null = null;
  #status: Int32Array | null = null;
  /** Why the worker thread died, when it did without being closed. */
  #died: string | null = null;
  /** Partitioned calls this device ran, and (when `recordTimeline`) when each ran on its thread, in ms since the epoch. */
  readonly spmd = { calls: 0, recordTimeline: false, timeline: [] as { program: string; start: number; end: number }[] };

  /**
   * @param kernelThreads threads this device's kernels use on its worker (the calling thread
   *   included), read when the worker starts: devices share the machine's cores, so N devices on
   *   C cores get max(1, floor(C / N)) each rather than C each (which oversubscribes the cores).
   */
  constructor(
    readonly deviceId: number,
    readonly kernelThreads: () => number,
  ) {}

  #start(execArgv: readonly string[], cjs: boolean): Worker {
    const key = [cjs ? 'cjs' : 'esm', ...execArgv].join(' ');
    if (this.#worker && key !== this.#execArgv) {
      throw new Error(`device ${this.deviceId}: its worker was started for [${this.#execArgv}] programs; this one needs [${key}] (close the device first)`);
    }
    if (this.#worker) return this.#worker;
    if (this.#died !== null) throw new Error(`device ${this.deviceId}: its worker thread died (${this.#died}); await device.close() to start a fresh one`);
    this.#programs.clear();
    this.#compiled.clear();
    const status = new Int32Array(new SharedArrayBuffer(8));
    const w = new Worker(workerFile(cjs), { execArgv: [...execArgv], workerData: { deviceId: this.deviceId, status, kernelThreads: this.kernelThreads() } });
    w.unref();
    this.#status = status;
    w.on('message', (m: RunReply) => {
      const p = this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id);
      if (this.#pending.size === 0) w.unref();
      if ('error' in m) p.reject(new Error(`device ${this.deviceId}: ${m.error}`));
      else p.resolve(unpack(m.result));
    });
    const fail = (e: Error) => {
      for (const p of this.#pending.values()) p.reject(new Error(`device ${this.deviceId}: worker thread failed: ${e.message}`));
      this.#pending.clear();
      // Not closed by us (close() lets go of the worker first): the device is dead until closed.
      if (this.#worker === w) {
        this.#worker = null;
        this.#died ??= e.message;
      }
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`exited with code ${code}`)));
    // Adding the listeners refs the worker again: unref it after them (run() refs it while a request is pending).
    w.unref();
    this.#worker = w;
    this.#execArgv = key;
    return w;
  }

  /** Runs `program` on `args` (an argument list: a pytree of Arrays and plain values) in this worker. */
  run(program: DeviceProgram, args: readonly unknown[], wire: (a: Array) => WireArray = wireCopy): Promise<unknown> {
    if (!program || typeof program.module !== 'string') throw new TypeError(`device ${this.deviceId}: a program is { module, exportName?, execArgv? }; got ${JSON.stringify(program)}`);
    const w = this.#start(program.execArgv ?? [], program.module.endsWith('.cjs'));
    const packed = pack(globalThis.Array.from(args), wire, `device ${this.deviceId} program ${program.module}#${program.exportName ?? 'default'}`);
    const id = this.#next++;
    const req: RunRequest = { id, module: moduleUrl(program.module), exportName: program.exportName ?? 'default', args: packed };
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      w.ref();
      w.postMessage(req, transferList(packed));
    });
  }

  /** Runs an encoded closed jaxpr (jaxprWire) on `args`, collectives on the board of `ctx` (spmd.ts). */
  runJaxpr(programId: number, program: unknown, args: readonly Array[], ctx: BoardContext, wire: (a: Array) => WireArray = wireCopy): Promise<unknown> {
    // Either build of the worker runs traced programs: keep whichever is running.
    const w = this.#worker ?? this.#start([], false);
    const first = !this.#programs.has(programId);
    this.#programs.add(programId);
    const packed = pack({ program: first ? program : null, args: [...args] }, wire, `device ${this.deviceId}: shardMap program`);
    const id = this.#next++;
    const req: SpmdRequest = { id, kind: 'spmd', programId, program: packed, backend: getBackend().name, ctx };
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      w.ref();
      w.postMessage(req, transferList(packed));
    });
  }

  /**
   * Sends this device's share of a partitioned call (the program itself only the first time);
   * `collectSpmd` then waits for the reply. Throws if the worker thread died.
   */
  postSpmdCall(req: Omit<SpmdCallRequest, 'id' | 'kind' | 'image' | 'backend' | 'replies'>, image: ModuleImage, what: string): void {
    if (this.#died !== null) throw new Error(`${what}: device ${this.deviceId}'s worker thread died (${this.#died}); await device.close() to start a fresh one`);
    const w = this.#worker ?? this.#start([], false);
    const first = !this.#compiled.has(req.programId);
    this.#compiled.add(req.programId);
    Atomics.store(this.#status!, REPLY, 0);
    // A channel per call, closed once answered (an open port would keep the process alive).
    const { port1, port2 } = new MessageChannel();
    this.#replies = port1;
    const msg: SpmdCallRequest = { ...req, id: this.#next++, kind: 'spmdCall', image: first ? image : null, backend: getBackend().name, replies: port2 };
    w.postMessage(msg, [port2]);
  }

  /** Blocks this thread until the worker answers the call posted last (the devices compute meanwhile). */
  collectSpmd(what: string): SpmdCallReply {
    const port = this.#replies!;
    const status = this.#status!;
    for (;;) {
      const got = receiveMessageOnPort(port);
      if (got) {
        port.close();
        this.#replies = null;
        const r = got.message as SpmdCallReply;
        this.spmd.calls++;
        if (this.spmd.recordTimeline) this.spmd.timeline.push({ program: what, start: r.start, end: r.end });
        return r;
      }
      if (Atomics.load(status, EXITED) === 1) {
        this.#died ??= 'the thread exited during a call';
        throw new Error(`${what}: device ${this.deviceId}'s worker thread died while running the program`);
      }
      Atomics.wait(status, REPLY, 0, 250);
    }
  }

  async close(): Promise<void> {
    const w = this.#worker;
    this.#worker = null;
    this.#died = null;
    this.#replies?.close();
    this.#replies = null;
    if (w) await w.terminate();
  }
}

/**
 * How Arrays of several devices' arguments travel: one that several devices receive goes once,
 * through a SharedArrayBuffer; the others are copied into transferred buffers.
 */
export function sharingWire(argsPerDevice: readonly unknown[]): (a: Array) => WireArray {
  const uses = new Map<Array, number>();
  for (const args of argsPerDevice) for (const a of new Set(arraysIn(args))) uses.set(a, (uses.get(a) ?? 0) + 1);
  const shared = new Map<Array, WireArray>();
  return (a: Array): WireArray => {
    if ((uses.get(a) ?? 0) < 2) return wireCopy(a);
    let w = shared.get(a);
    if (!w) shared.set(a, (w = wireShared(a)));
    return w;
  };
}

/** Anything with a worker: the devices of `devices()`. */
export interface RunnableDevice {
  readonly id: number;
  readonly worker: DeviceWorker;
}

/**
 * Runs `program` on every device at once, device k on `argsPerDevice[k]`; resolves to the
 * results in device order. Arrays that are the same object on several devices are sent once
 * through a SharedArrayBuffer; the others are copied into (transferred) buffers.
 */
export async function runOnDevices(program: DeviceProgram, devs: readonly RunnableDevice[], argsPerDevice: readonly (readonly unknown[])[]): Promise<unknown[]> {
  if (argsPerDevice.length !== devs.length) {
    throw new Error(`runOnDevices: ${devs.length} devices but ${argsPerDevice.length} argument lists`);
  }
  const wire = sharingWire(argsPerDevice);
  return Promise.all(devs.map((d, k) => d.worker.run(program, argsPerDevice[k], wire)));
}
