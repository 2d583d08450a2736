/**
 * Partitioned programs (jit with shardings) on the CPU devices' worker threads. Installed into
 * xla-lite when @tpukit/mesh loads: a sharded call whose devices are all CPU devices sends each
 * device its share (program id, position, the collective board and its argument buffers:
 * device-owned SharedArrayBuffers, never the bytes; the program image only on a device's first
 * call), then blocks until every device answers. Each worker runs its compiled program and the
 * collectives meet worker to worker on the board (shared memory + Atomics); the host takes no
 * part until the results, which come back as device-owned buffers the result Arrays wrap.
 */
import type { Array, Device } from '@tpukit/core';
import { CollectiveBoard, setSpmdDeviceRunner, type SpmdDeviceRunner, type SpmdProgram } from '@tpukit/xla-lite/internal';
import { checkNotHeld, deviceArray, deviceStorage } from './deviceBuffers';
import type { DeviceWorker, SpmdCallReply } from './deviceRuntime';

/** A CPU device of `devices()` (duck-typed: devices.ts installs this runner). */
type WorkerDevice = Device & { readonly worker: DeviceWorker };
const hasWorker = (d: Device): d is WorkerDevice => typeof (d as Partial<WorkerDevice>).worker?.postSpmdCall === 'function';

/** One collective board per program and device set (calls are synchronous, so one call uses it at a time). */
const boards = new WeakMap<SpmdProgram, CollectiveBoard>();

function boardFor(program: SpmdProgram, n: number): CollectiveBoard {
  let b = boards.get(program);
  if (!b || b.devices !== n) boards.set(program, (b = CollectiveBoard.create(n, Math.max(program.maxCollectiveBytes, 8))));
  return b;
}

/** Runs `program` on the CPU devices' threads (see the file comment); null for other devices. */
export const cpuDeviceRunner: SpmdDeviceRunner = {
  run(program: SpmdProgram, devices: readonly Device[], args: readonly (readonly Array[])[], own: readonly (readonly boolean[])[], what: string): Array[][] | null {
    if (!devices.every(hasWorker)) return null;
    const devs = devices as readonly WorkerDevice[];
    for (const j of program.donated) for (const a of args.map((l) => l[j])) checkNotHeld(a, `${what}: donated input ${j}`);
    const buffers = devs.map((d, k) => args[k].map((a, j) => ({ data: deviceStorage(a, d.id, own[k][j], `${what} input ${j}`), shape: a.shape, dtype: a.dtype })));
    const board = boardFor(program, devs.length);
    board.reset();
    const posted: WorkerDevice[] = [];
    try {
      devs.forEach((d, k) => {
        d.worker.postSpmdCall({ programId: program.id, name: program.name, position: k, board: board.buffer, devices: devs.length, slotBytes: board.slotBytes, args: buffers[k] }, program.image, what);
        posted.push(d);
      });
    } catch (e) {
      // The devices already started would wait for the missing one at their first collective.
      board.abort(posted.length);
      for (const d of posted) collect(d, what);
      throw e;
    }
    const replies = devs.map((d, k) => {
      const r = collect(d, what);
      if ('error' in r) board.abort(k);
      return r;
    });
    // The first device that failed on its own (the others report being abandoned).
    const failed = replies.flatMap((r, k) => ('error' in r ? [{ error: r.error, k }] : []));
    if (failed.length) {
      const first = failed.find((f) => !/abandoned because device position/.test(f.error)) ?? failed[0];
      throw new Error(`${what} failed on device ${devs[first.k].id}: ${first.error}`);
    }
    return replies.map((r, k) => (r as { outs: ArrayLike<number>[] }).outs.map((data, j) => deviceArray(data as never, program.outShapes[j].shape, program.outShapes[j].dtype, devs[k].id)));
  },
};

function collect(d: WorkerDevice, what: string): SpmdCallReply {
  try {
    return d.worker.collectSpmd(what);
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e), start: 0, end: 0 };
  }
}

let installed = false;

/** Makes partitioned programs over CPU devices run on their threads (devices() calls it). */
export function installCpuDeviceRunner(): void {
  if (installed) return;
  installed = true;
  setSpmdDeviceRunner(cpuDeviceRunner);
}
