/**
 * SPMD execution on the device workers: every device runs the same traced program (a shardMap
 * body as a jaxpr, see jaxprWire.ts) on its own blocks, on its own thread, in parallel. A
 * collective is a rendezvous worker to worker: each device writes its operand into its slot of a
 * shared-memory board (xla-lite's `CollectiveBoard`), waits at the board's barrier (Atomics),
 * and computes its own result from every device's operand with the vectorised collective (the
 * same batching rules shardMap uses on one thread); the host only starts the run and collects
 * the outputs. pvary and the vma probe are identities on a device. Arguments a device already
 * owns (placed shards) are shared with its worker, not copied, and held until the run ends.
 */
import { type Array, type ClosedJaxpr, type Device, isArray, lax, np, toStorage } from '@tpukit/core';
import { bind, getPrimitive, Jaxpr } from '@tpukit/core/internal';
import { type MessagePort, MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { BoardCollectives, bytesOf, CollectiveBoard } from '@tpukit/xla-lite/internal';
import { boundAxis } from './axisContext';
import { adopt, hold, ownerOf } from './deviceBuffers';
import { type BoardContext, type RunnableDevice, sharingWire } from './deviceRuntime';
import { encodeClosed } from './jaxprWire';
import { type Mesh, makeMesh } from './mesh';
import { P } from './partitionSpec';
import type { WireArray } from './transfer';

/** The collectives a device must meet the others for (pvary and the probe run locally). */
export const RENDEZVOUS = ['psum', 'pmax', 'pmin', 'all_gather', 'psum_scatter', 'ppermute', 'all_to_all'];

interface CollectiveMsg {
  readonly prim: string;
  readonly params: unknown;
}

/** Worker side: the run in progress. */
let relay: { coll: BoardCollectives; mesh: Mesh } | null = null;

/** Worker side: makes collectives (evaluated outside any trace) meet the other devices' threads on the board. */
/**
 * What the device collectives need of `shardMap` (the worker passes shardMap.ts's in, so this
 * module, which shardMap.ts imports, does not import it back).
 */
export type ShardMapFn = (f: (b: Array) => Array, opts: { mesh: Mesh; inSpecs: ReturnType<typeof P>; outSpecs: ReturnType<typeof P>; checkVma: boolean }) => (x: Array) => unknown;

export function installDeviceCollectives(shardMapFn: ShardMapFn): void {
  for (const name of RENDEZVOUS) {
    getPrimitive(name).rules.eval = ([x]: Array[], params: Record<string, unknown>) => {
      if (relay === null) throw new Error(`${name}: collectives run inside shardMap`);
      const { coll, mesh } = relay;
      const { report: _r, ...plain } = params;
      const msg: CollectiveMsg = { prim: name, params: plain };
      return [coll.exchange(x, `${name} ${JSON.stringify(plain)} on device position ${coll.position}`, (values) => collectiveOnMesh(mesh, msg, values, shardMapFn)[coll.position])];
    };
  }
  for (const name of ['pvary', 'vma_probe']) getPrimitive(name).rules.eval = ([x]: Array[]) => [x];
}

/** Worker side: runs `body` with collectives on the board of `ctx`. */
export function withBoard<T>(ctx: BoardContext, body: () => T): T {
  // The mesh's shape over stand-in devices: collectives only need its axes.
  const stand = globalThis.Array.from({ length: ctx.devices }, (_, id): Device => ({ id, platform: 'cpu', deviceKind: 'cpu', processIndex: 0 }));
  relay = { coll: new BoardCollectives(new CollectiveBoard(ctx.board, ctx.devices, ctx.slotBytes), ctx.position), mesh: makeMesh(ctx.axisSizes, ctx.axisNames, { devices: stand }) };
  try {
    return body();
  } catch (e) {
    relay.coll.board.abort(ctx.position);
    throw e;
  } finally {
    relay = null;
  }
}

const REDUCERS: Record<string, (x: Array, axes: number[]) => Array> = { psum: lax.reduceSum, pmax: lax.reduceMax, pmin: lax.reduceMin };

/**
 * Every device's result of one collective, from every device's operand: the operands are
 * stacked over the mesh axes and the collective runs vectorised (a shardMap with one entry per
 * device along every axis).
 */
function collectiveOnMesh(mesh: Mesh, msg: CollectiveMsg, operands: Array[], shardMapFn: ShardMapFn): Array[] {
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

const encoded = new WeakMap<ClosedJaxpr, { id: number; wire: unknown; maxBytes: number }>();
let nextProgramId = 0;

/** The largest operand of a collective in `j` or any program nested in its parameters (bytes). */
function maxCollectiveBytes(j: Jaxpr): number {
  let m = 0;
  const visit = (v: unknown): void => {
    if (v instanceof Jaxpr) m = Math.max(m, maxCollectiveBytes(v));
    else if (v !== null && typeof v === 'object' && 'jaxpr' in v && (v as { jaxpr: unknown }).jaxpr instanceof Jaxpr) visit((v as { jaxpr: Jaxpr }).jaxpr);
    else if (globalThis.Array.isArray(v)) v.forEach(visit);
    else if (v !== null && typeof v === 'object' && !isArray(v) && Object.getPrototypeOf(v) === Object.prototype) Object.values(v).forEach(visit);
  };
  for (const e of j.eqns) {
    if (RENDEZVOUS.includes(e.prim.name)) m = Math.max(m, bytesOf(e.inputs[0].aval));
    Object.values(e.params ?? {}).forEach(visit);
  }
  return m;
}

/**
 * Runs `closed` on every device of `mesh` (device k on `argsPerDevice[k]`), in parallel on their
 * workers, collectives worker to worker on a shared board; resolves to every device's outputs
 * (in buffers those devices own).
 */
export async function runSpmd(mesh: Mesh, closed: ClosedJaxpr, argsPerDevice: Array[][]): Promise<Array[][]> {
  const devs = mesh.devices as unknown as RunnableDevice[];
  for (const d of devs) {
    if (!(d as { worker?: unknown }).worker) throw new Error(`shardMap on devices: device ${d.id} has no worker thread (use the devices of devices())`);
  }
  let prog = encoded.get(closed);
  if (!prog) encoded.set(closed, (prog = { id: nextProgramId++, wire: encodeClosed(closed), maxBytes: maxCollectiveBytes(closed.jaxpr) }));
  const { id, wire, maxBytes } = prog;
  const board = CollectiveBoard.create(devs.length, Math.max(maxBytes, 8));
  const argWire = sharingWire(argsPerDevice);
  // A device's own buffers go as they are (shared, not copied), held until the run ends.
  const own = argsPerDevice.map((args, k) => args.filter((a) => ownerOf(a) === devs[k].id));
  const release = hold(own.flat());
  const stopAll = () => Promise.all(devs.map((d) => (d as unknown as { close(): Promise<void> }).close()));
  // A device that fails aborts the board, so the others stop at their next rendezvous (and report
  // being abandoned); a worker thread that dies cannot, so then every worker of the run is
  // stopped (they restart on next use).
  try {
    const settled = await Promise.allSettled(
      devs.map((d, k) => {
        const ctx: BoardContext = { board: board.buffer, devices: devs.length, slotBytes: board.slotBytes, position: k, axisNames: mesh.axisNames, axisSizes: mesh.axisSizes };
        const wireFor = (a: Array): WireArray => (own[k].includes(a) ? { data: toStorage(a), shape: a.shape.slice(), dtype: a.dtype } : argWire(a));
        return d.worker.runJaxpr(id, wire, argsPerDevice[k], ctx, wireFor).catch((e: Error) => {
          board.abort(k);
          throw e;
        });
      }),
    );
    const errors = settled.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
    if (errors.length) {
      if (errors.some((e) => /worker thread failed/.test(e.message))) await stopAll();
      throw errors.find((e) => !/abandoned because device position/.test(e.message)) ?? errors[0];
    }
    const outs = settled.map((r) => (r as PromiseFulfilledResult<unknown>).value as Array[]);
    outs.forEach((o, k) => o.forEach((a) => adopt(a, devs[k].id)));
    return outs;
  } finally {
    release();
  }
}
