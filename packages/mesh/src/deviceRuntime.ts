/**
 * The device runtime: every CPU device owns one worker thread, and a device runs a *program*
 * there on arguments that live in that thread. A program is a serialisable description of a
 * function (a module and an export name; functions themselves cannot cross threads): the
 * worker imports the module once, then calls the export on each request with the shard
 * arguments (pytrees of Arrays) and sends the result back. `runOnDevices` starts one request
 * per device and waits for all, so the devices compute in parallel, one core each.
 */
import { type MessagePort, Worker } from 'node:worker_threads';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type Array, getBackend } from '@tpukit/core';
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

/** A traced program (jaxprWire) for one device, with its channel to the host for collectives. */
export interface SpmdRequest {
  readonly id: number;
  readonly kind: 'spmd';
  /** Identifies the program: a worker decodes (and compiles) each program once. */
  readonly programId: number;
  readonly program: Packed;
  /** The caller's backend, which the device computes on. */
  readonly backend: string;
  readonly port: MessagePort;
  readonly signal: Int32Array;
  readonly slot: number;
}

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

  constructor(readonly deviceId: number) {}

  #start(execArgv: readonly string[], cjs: boolean): Worker {
    const key = [cjs ? 'cjs' : 'esm', ...execArgv].join(' ');
    if (this.#worker && key !== this.#execArgv) {
      throw new Error(`device ${this.deviceId}: its worker was started for [${this.#execArgv}] programs; this one needs [${key}] (close the device first)`);
    }
    if (this.#worker) return this.#worker;
    this.#programs.clear();
    const w = new Worker(workerFile(cjs), { execArgv: [...execArgv], workerData: { deviceId: this.deviceId } });
    w.unref();
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
      this.#worker = null;
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`exited with code ${code}`)));
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

  /** Runs an encoded closed jaxpr (jaxprWire) on `args`, collectives relayed on `port` (spmd.ts). */
  runJaxpr(programId: number, program: unknown, args: readonly Array[], port: MessagePort, signal: Int32Array, slot: number, wire: (a: Array) => WireArray = wireCopy): Promise<unknown> {
    // Either build of the worker runs traced programs: keep whichever is running.
    const w = this.#worker ?? this.#start([], false);
    const first = !this.#programs.has(programId);
    this.#programs.add(programId);
    const packed = pack({ program: first ? program : null, args: [...args] }, wire, `device ${this.deviceId}: shardMap program`);
    const id = this.#next++;
    const req: SpmdRequest = { id, kind: 'spmd', programId, program: packed, backend: getBackend().name, port, signal, slot };
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      w.ref();
      w.postMessage(req, [...transferList(packed), port]);
    });
  }

  async close(): Promise<void> {
    const w = this.#worker;
    this.#worker = null;
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
