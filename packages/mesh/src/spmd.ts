/**
 * SPMD execution on the device workers: every device runs the same traced program (a shardMap
 * body as a jaxpr, see jaxprWire.ts) on its own blocks, on its own thread, in parallel. A
 * collective is a rendezvous: each worker posts its operand to the host on a per-run channel and
 * blocks (Atomics.wait); when every device's operand has arrived, the host computes all devices'
 * results at once with the vectorised collective (the same batching rules shardMap uses on one
 * thread) and wakes each worker with its result. pvary and the vma probe are identities on a
 * device. Collectives therefore cost a round trip through the host; the compute between them
 * runs in parallel.
 */
import { type MessagePort, MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { type Array, type ClosedJaxpr, lax, np } from '@tpukit/core';
import { bind, getPrimitive } from '@tpukit/core/internal';
import { boundAxis } from './axisContext';
import { type RunnableDevice, sharingWire } from './deviceRuntime';
import { encodeClosed } from './jaxprWire';
import type { Mesh } from './mesh';
import { P } from './partitionSpec';
import { type WireArray, pack, unpack, wireCopy } from './transfer';

/** The collectives a device must meet the others for (pvary and the probe run locally). */
export const RENDEZVOUS = ['psum', 'pmax', 'pmin', 'all_gather', 'psum_scatter', 'ppermute', 'all_to_all'];

interface CollectiveMsg {
  readonly prim: string;
  readonly params: unknown;
  readonly x: WireArray;
}

/** Worker side: the channel to the host for the run in progress. */
let relay: { port: MessagePort; signal: Int32Array; slot: number } | null = null;

/** Worker side: makes collectives (evaluated outside any trace) meet the other devices through the host. */
export function installDeviceCollectives(): void {
  for (const name of RENDEZVOUS) {
    getPrimitive(name).rules.eval = ([x]: Array[], params: Record<string, unknown>) => {
      if (relay === null) throw new Error(`${name}: collectives run inside shardMap`);
      const { port, signal, slot } = relay;
      const w = wireCopy(x);
      const { report: _r, ...plain } = params;
      port.postMessage({ prim: name, params: plain, x: w } satisfies CollectiveMsg, [w.data.buffer as ArrayBuffer]);
      for (;;) {
        Atomics.wait(signal, slot, 0);
        const got = receiveMessageOnPort(port);
        if (got) {
          Atomics.store(signal, slot, 0);
          return [unpack(got.message as never) as Array];
        }
      }
    };
  }
  for (const name of ['pvary', 'vma_probe']) getPrimitive(name).rules.eval = ([x]: Array[]) => [x];
}

/** Worker side: runs `body` with collectives relayed on `port`. */
export function withRelay<T>(port: MessagePort, signal: Int32Array, slot: number, body: () => T): T {
  relay = { port, signal, slot };
  try {
    return body();
  } finally {
    relay = null;
  }
}

const REDUCERS: Record<string, (x: Array, axes: number[]) => Array> = { psum: lax.reduceSum, pmax: lax.reduceMax, pmin: lax.reduceMin };

/**
 * Host side: every device's result of one collective, from every device's operand: the operands
 * are stacked over the mesh axes and the collective runs vectorised (a shardMap with one entry
 * per device along every axis).
 */
function collectiveOnHost(mesh: Mesh, msg: CollectiveMsg, operands: Array[], shardMapFn: typeof import('./shardMap').shardMap): Array[] {
  const prim = getPrimitive(msg.prim);
  const params = msg.params as { axis: string };
  const shape = operands[0].shape;
  const ones = mesh.axisSizes.map(() => 1);
  const stacked = np.stack(operands).reshape([...mesh.axisSizes, ...shape]);
  /** The m rows of `x` after its `lead` leading (mesh) dims are flattened into one. */
  const rows = (x: Array, lead: number, m: number): Array[] => {
    const per = x.shape.slice(lead);
    const flat = lax.reshape(x, [m, ...per]);
    return globalThis.Array.from({ length: m }, (_, k) => lax.reshape(lax.slice(flat, [k, ...per.map(() => 0)], [k + 1, ...per]), per));
  };
  const reduce = REDUCERS[msg.prim];
  if (reduce) {
    // A reduction: one reduce over the axis, then each device takes its group's row.
    const a = mesh.axisNames.indexOf(params.axis);
    const groups = rows(reduce(stacked, [a]), mesh.axisSizes.length - 1, mesh.size / mesh.axisSizes[a]);
    return operands.map((_, k) => {
      const c = mesh.coords(k);
      let g = 0;
      mesh.axisSizes.forEach((n, i) => {
        if (i !== a) g = g * n + c[i];
      });
      return groups[g];
    });
  }
  const spec = P(...mesh.axisNames);
  const out = shardMapFn((b: Array) => {
    const y = bind(prim, [lax.reshape(b, shape), boundAxis(params.axis, msg.prim).index], params)[0];
    return lax.reshape(y, [...ones, ...y.shape]);
  }, { mesh, inSpecs: spec, outSpecs: spec, checkVma: false })(stacked) as Array;
  return rows(out, mesh.axisSizes.length, mesh.size);
}

const encoded = new WeakMap<ClosedJaxpr, { id: number; wire: unknown }>();
let nextProgramId = 0;

/**
 * Runs `closed` on every device of `mesh` (device k on `argsPerDevice[k]`), in parallel on their
 * workers, with collectives through the host; resolves to every device's outputs.
 */
export async function runSpmd(mesh: Mesh, closed: ClosedJaxpr, argsPerDevice: Array[][], shardMapFn: typeof import('./shardMap').shardMap): Promise<Array[][]> {
  const devs = mesh.devices as unknown as RunnableDevice[];
  for (const d of devs) {
    if (!(d as { worker?: unknown }).worker) throw new Error(`shardMap on devices: device ${d.id} has no worker thread (use the devices of devices())`);
  }
  const n = devs.length;
  const signal = new Int32Array(new SharedArrayBuffer(4 * n));
  const channels = devs.map(() => new MessageChannel());
  const inbox: { msg: CollectiveMsg; x: Array }[][] = devs.map(() => []);
  let failed: Error | null = null;
  const stopAll = () => Promise.all(devs.map((d) => (d as unknown as { close(): Promise<void> }).close()));
  const tryCollective = () => {
    while (inbox.every((q) => q.length > 0)) {
      const round = inbox.map((q) => q.shift()!);
      const names = new Set(round.map((r) => `${r.msg.prim} ${JSON.stringify(r.msg.params)}`));
      if (names.size !== 1) throw new Error(`shardMap on devices: the devices reached different collectives (${[...names].join(' | ')})`);
      const results = collectiveOnHost(mesh, round[0].msg, round.map((r) => r.x), shardMapFn);
      results.forEach((r, k) => {
        const p = pack(r, wireCopy, 'collective');
        channels[k].port1.postMessage(p, [p.arrays[0].data.buffer as ArrayBuffer]);
        Atomics.store(signal, k, 1);
        Atomics.notify(signal, k);
      });
    }
  };
  channels.forEach((c, k) => {
    c.port1.on('message', (msg: CollectiveMsg) => {
      try {
        inbox[k].push({ msg, x: unpack({ tree: { $array: 0 }, arrays: [msg.x] }) as Array });
        tryCollective();
      } catch (e) {
        failed = e instanceof Error ? e : new Error(String(e));
        void stopAll();
      }
    });
  });
  let prog = encoded.get(closed);
  if (!prog) encoded.set(closed, (prog = { id: nextProgramId++, wire: encodeClosed(closed) }));
  const { id, wire } = prog;
  const argWire = sharingWire(argsPerDevice);
  // A device that fails (or a collective that cannot be computed) would leave the others blocked
  // at their next rendezvous: then every worker of the run is stopped (and restarts on next use).
  try {
    const outs = await Promise.all(
      devs.map((d, k) =>
        d.worker.runJaxpr(id, wire, argsPerDevice[k], channels[k].port2, signal, k, argWire).catch(async (e: Error) => {
          failed ??= e;
          await stopAll();
          throw failed;
        }),
      ),
    );
    if (failed) throw failed;
    return outs as Array[][];
  } finally {
    for (const c of channels) c.port1.close();
  }
}
