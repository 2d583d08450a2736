/**
 * Runs a partitioned module on N devices: every device executes the same program on its own
 * shards, one device after another per instruction (in this thread), and the collectives
 * exchange the devices' buffers through a `CollectiveRuntime`. Non-collective instructions run
 * as their core primitive on the current backend, as the single-device executable's primitive
 * steps do; `dynamic-slice` takes each device's planned offsets.
 */
import { type Array, evalPrimitive } from '@tpukit/core';
import type { HloInstruction, HloModule } from '../hlo';
import type { CollectiveRuntime, ReduceOp } from './collectives';
import { sliceBox } from './collectives';

type Step = { out: number; ins: number[]; inst: HloInstruction; params: Record<string, unknown> };

/** Builds the run function of a partitioned module for `n` devices. */
export function buildSpmdExecutable(mod: HloModule, n: number, name: string): (args: readonly (readonly Array[])[], rt: CollectiveRuntime) => Array[][] {
  const c = mod.entry;
  const slot = new Map<HloInstruction, number>();
  c.instructions.forEach((i, k) => slot.set(i, k));
  const steps: Step[] = c.instructions.map((inst, out) => {
    const { sharding: _s, ...params } = inst.params as Record<string, unknown>;
    if (inst.opcode !== 'parameter' && inst.opcode !== 'constant' && inst.opcode !== 'get-tuple-element' && inst.opcode !== 'dynamic-slice' && !inst.prim && !['all-reduce', 'all-gather', 'reduce-scatter', 'all-to-all', 'collective-permute'].includes(inst.opcode)) {
      throw new Error(`xla-lite spmd ${name}: instruction ${inst.opcode} has no executable form`);
    }
    return { out, ins: inst.operands.map((o) => slot.get(o)!), inst, params };
  });
  const outSlots = c.outputs.map((o) => slot.get(o)!);
  return (args, rt) => {
    if (args.length !== c.params.length) throw new TypeError(`xla-lite spmd ${name}: expected ${c.params.length} arguments, got ${args.length}`);
    const vals: (Array | Array[])[][] = new globalThis.Array(steps.length);
    const arr = (k: number): Array[] => vals[k] as Array[];
    for (const s of steps) {
      const i = s.inst;
      const p = s.params as Record<string, any>;
      const per = (f: (d: number) => Array | Array[]): (Array | Array[])[] => globalThis.Array.from({ length: n }, (_, d) => f(d));
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
