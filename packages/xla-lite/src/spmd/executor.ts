/**
 * Runs a partitioned module on N devices: every device executes the same program on its own
 * shards, one device after another per instruction (in this thread), and the collectives
 * exchange the devices' buffers through a `CollectiveRuntime`. Non-collective instructions run
 * as their core primitive on the current backend, as the single-device executable's primitive
 * steps do; `dynamic-slice` takes each device's planned offsets. while / scan / cond run their
 * partitioned bodies (the loop predicate and branch index are replicated scalars: device 0's
 * value decides for all).
 */
import { type Array, np } from '@tpukit/core';
import { evalPrimitive, getPrimitive, type ShapedArray } from '@tpukit/core/internal';
import type { HloComputation, HloInstruction, HloModule } from '../hlo';
import type { CollectiveRuntime, ReduceOp } from './collectives';
import { concat, sliceBox } from './collectives';

type Step = { out: number; ins: number[]; inst: HloInstruction; params: Record<string, unknown> };

type Runner = (args: readonly (readonly Array[])[], rt: CollectiveRuntime) => Array[][];
const COLL = new Set(['all-reduce', 'all-gather', 'reduce-scatter', 'all-to-all', 'collective-permute']);

/** Builds the run function of a partitioned module for `n` devices: per parameter and device in, per output and device out. */
export function buildSpmdExecutable(mod: HloModule, n: number, name: string): Runner {
  return buildRunner(mod.entry, n, name);
}

const prim = (p: string) => getPrimitive(p);
const reshape = (x: Array, newSizes: readonly number[]): Array => evalPrimitive(prim('reshape'), [x], { newSizes })[0];

/** Control-flow values of one device. */
export const ONE_DEVICE: ControlValues<Array> = {
  scalar: (x) => Number((x.dataSync() as ArrayLike<number>)[0]),
  row: (x, t) => reshape(sliceBox(x, x.shape.map((m, j): [number, number] => (j === 0 ? [t, t + 1] : [0, m]))), x.shape.slice(1)),
  stack: (rows) => concat(rows.map((r) => reshape(r, [1, ...r.shape])), 0),
  zeros: (s) => np.zeros(s.shape, s.dtype),
};

/** Control-flow values of the in-thread executor: one Array per device (device 0's scalar decides for all). */
const perDevice = (n: number): ControlValues<Array[]> => ({
  scalar: (x) => ONE_DEVICE.scalar(x[0]),
  row: (x, t) => x.map((xd) => ONE_DEVICE.row(xd, t)),
  stack: (rows) => rows[0].map((_, d) => ONE_DEVICE.stack(rows.map((r) => r[d]))),
  zeros: (s) => globalThis.Array.from({ length: n }, () => ONE_DEVICE.zeros(s)),
});

function buildRunner(c: HloComputation, n: number, name: string): Runner {
  const slot = new Map<HloInstruction, number>();
  c.instructions.forEach((i, k) => slot.set(i, k));
  const subs = new Map<HloInstruction, Runner[]>();
  const steps: Step[] = c.instructions.map((inst, out) => {
    const { sharding: _s, spmd, ...params } = inst.params as Record<string, unknown>;
    if (spmd) subs.set(inst, inst.called.map((sc) => buildRunner(sc, n, name)));
    if (inst.opcode !== 'parameter' && inst.opcode !== 'constant' && inst.opcode !== 'get-tuple-element' && inst.opcode !== 'dynamic-slice' && !inst.prim && !COLL.has(inst.opcode)) {
      throw new Error(`xla-lite spmd ${name}: instruction ${inst.opcode} has no executable form`);
    }
    return { out, ins: inst.operands.map((o) => slot.get(o)!), inst, params };
  });
  const outSlots = c.outputs.map((o) => slot.get(o)!);
  return (args, rt) => {
    if (args.length !== c.params.length) throw new TypeError(`xla-lite spmd ${name}: expected ${c.params.length} arguments, got ${args.length}`);
    const vals: (Array | Array[])[][] = new globalThis.Array(steps.length);
    const arr = (k: number): Array[] => vals[k] as Array[];
    const per = (f: (d: number) => Array | Array[]): (Array | Array[])[] => globalThis.Array.from({ length: n }, (_, d) => f(d));
    /** Per-device tuples from per-output lists. */
    const tupled = (outs: Array[][]): Array[][] => per((d) => outs.map((o) => o[d])) as Array[][];
    for (const s of steps) {
      const i = s.inst;
      const p = s.params as Record<string, any>;
      const sub = subs.get(i);
      if (sub) {
        const ins = s.ins.map((k) => arr(k));
        const outs = runControlFlow<Array[]>(i.prim!.name, p, sub.map((b) => (a: Array[][]) => b(a, rt)), ins, i.shapes, perDevice(n));
        vals[s.out] = i.isTuple ? tupled(outs) : outs[0];
        continue;
      }
      switch (i.opcode) {
        case 'parameter':
          vals[s.out] = [...args[i.paramIndex]];
          break;
        case 'constant':
          vals[s.out] = per(() => i.literal!);
          break;
        case 'get-tuple-element':
          vals[s.out] = per((d) => (vals[s.ins[0]][d] as Array[])[p.index]);
          break;
        case 'dynamic-slice':
          vals[s.out] = per((d) => sliceBox(arr(s.ins[0])[d], (p.offsets[d] as number[]).map((o, j) => [o, o + p.sizes[j]] as const)));
          break;
        case 'all-reduce':
          vals[s.out] = rt.allReduce(arr(s.ins[0]), p.replicaGroups, p.toApply as ReduceOp);
          break;
        case 'all-gather':
          vals[s.out] = rt.allGather(arr(s.ins[0]), p.replicaGroups, p.dimensions[0]);
          break;
        case 'reduce-scatter':
          vals[s.out] = rt.reduceScatter(arr(s.ins[0]), p.replicaGroups, p.dimensions[0], p.toApply as ReduceOp);
          break;
        case 'all-to-all':
          vals[s.out] = rt.allToAll(arr(s.ins[0]), p.replicaGroups, p.splitDimension, p.concatDimension);
          break;
        case 'collective-permute':
          vals[s.out] = rt.collectivePermute(arr(s.ins[0]), p.sourceTargetPairs);
          break;
        default:
          vals[s.out] = per((d) => {
            const outs = evalPrimitive(i.prim!, s.ins.map((k) => vals[k][d] as Array), s.params);
            return i.isTuple ? outs : outs[0];
          });
      }
    }
    return outSlots.map((k) => arr(k));
  };
}

/** How control flow reads, slices and stacks its values (one device's Arrays, or every device's). */
export interface ControlValues<V> {
  /** A replicated scalar's value (a loop predicate, a branch index). */
  scalar(v: V): number;
  /** Row `t` of the leading axis. */
  row(v: V, t: number): V;
  /** Rows stacked on a new leading axis. */
  stack(rows: V[]): V;
  zeros(s: ShapedArray): V;
}

/** while / scan / cond over partitioned bodies, one value per operand and result. */
export function runControlFlow<V>(name: string, p: Record<string, any>, bodies: readonly ((args: V[]) => V[])[], ins: V[], shapes: readonly ShapedArray[], ops: ControlValues<V>): V[] {
  if (name === 'while') {
    const condConsts = ins.slice(0, p.condNconsts);
    const bodyConsts = ins.slice(p.condNconsts, p.condNconsts + p.bodyNconsts);
    let carry = ins.slice(p.condNconsts + p.bodyNconsts);
    while (ops.scalar(bodies[0]([...condConsts, ...carry])[0])) carry = bodies[1]([...bodyConsts, ...carry]);
    return carry;
  }
  if (name === 'cond') {
    const k = Math.min(Math.max(Math.trunc(ops.scalar(ins[0])), 0), bodies.length - 1);
    return bodies[k](ins.slice(1));
  }
  if (name !== 'scan') throw new Error(`xla-lite spmd: control flow ${name} has no partitioned execution`);
  // scan: (consts, carry, xs) -> (carry, ys), one iteration per leading index of xs.
  const nc = p.numConsts + p.numCarry;
  const consts = ins.slice(0, p.numConsts);
  let carry = ins.slice(p.numConsts, nc);
  const xs = ins.slice(nc);
  const ys: V[][] = [];
  for (let it = 0; it < p.length; it++) {
    const t = p.reverse ? p.length - 1 - it : it;
    const outs = bodies[0]([...consts, ...carry, ...xs.map((x) => ops.row(x, t))]);
    carry = outs.slice(0, p.numCarry);
    ys[t] = outs.slice(p.numCarry);
  }
  const stacked = shapes.slice(p.numCarry).map((s, k) => (p.length === 0 ? ops.zeros(s) : ops.stack(ys.map((y) => y[k]))));
  return [...carry, ...stacked];
}
