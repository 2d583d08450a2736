/**
 * Runs an optimised module. The entry computation is turned into a flat plan once: each step
 * reads operand slots and writes its result slot. Parameters come from the call's arguments,
 * constants are their literals, a `fusion` runs its generated single-pass kernel over the
 * operands' storage (see `kernel.ts`), `get-tuple-element` picks an output, and every other
 * instruction (dots, reductions, data movement, control flow with its sub-jaxprs) runs as its
 * core primitive on the current backend, so results agree with eager execution; control-flow
 * bodies are routed through the compiler too (see `subprograms.ts`). Operand lists
 * are preallocated per step; the only allocations per call are the result buffers themselves.
 * Donation (see `donation.ts`) hooks in at two points: a fusion planned to land in a donated
 * argument writes into that argument's storage instead of allocating, and at the end the other
 * paired outputs are moved into their donated storage.
 */
import { type Array, evalPrimitive, fromStorage, lax, toStorage } from '@tpukit/core';
import type { HloInstruction, HloModule } from './hlo';
import { numel } from './hlo';
import { type DonationPlan, DonationRuntime } from './donation';
import { compileKernel, type FusedKernel } from './kernel';
import { compileSubprograms } from './subprograms';

type Step =
  | { kind: 'param'; out: number; index: number }
  | { kind: 'const'; out: number; value: Array }
  | { kind: 'gte'; out: number; src: number; index: number }
  | { kind: 'fusion'; out: number; ins: number[]; kernel: FusedKernel; inst: HloInstruction; buf: ArrayLike<number>[] }
  | { kind: 'prim'; out: number; ins: number[]; inst: HloInstruction; buf: Array[]; params: unknown };

export interface ExecutableStats {
  /** Generated kernels executed per call (fusions, including single-op ones). */
  fusedKernels: number;
  /** Of those, kernels that fuse two or more ops. */
  multiOpFusions: number;
  /** Ops executed inside generated kernels. */
  fusedOps: number;
  /** Instructions run as core primitives per call. */
  primitiveOps: number;
}

export function buildExecutable(mod: HloModule, name: string, donation: DonationPlan | null = null): { run: (args: Array[]) => Array[]; stats: ExecutableStats; donor: DonationRuntime | null } {
  const donor = donation && new DonationRuntime(donation, name);
  const donating = donor !== null && donor.active;
  const c = mod.entry;
  const slot = new Map<HloInstruction, number>();
  c.instructions.forEach((i, k) => slot.set(i, k));
  const steps: Step[] = c.instructions.map((i, k): Step => {
    const ins = i.operands.map((o) => slot.get(o)!);
    switch (i.opcode) {
      case 'parameter':
        return { kind: 'param', out: k, index: i.paramIndex };
      case 'constant':
        return { kind: 'const', out: k, value: i.literal! };
      case 'get-tuple-element':
        return { kind: 'gte', out: k, src: ins[0], index: (i.params as { index: number }).index };
      case 'fusion':
        return { kind: 'fusion', out: k, ins, kernel: compileKernel(i.called[0]), inst: i, buf: new globalThis.Array(ins.length) };
      default:
        if (!i.prim) throw new Error(`xla-lite ${name}: instruction ${i.opcode} has no executable form`);
        return { kind: 'prim', out: k, ins, inst: i, buf: new globalThis.Array(ins.length), params: compileSubprograms(i.prim.name, i.params, name) };
    }
  });
  const outSlots = c.outputs.map((o) => slot.get(o)!);
  const nargs = c.params.length;
  const vals: (Array | Array[] | null)[] = new globalThis.Array(steps.length).fill(null);
  const run = (args: Array[]): Array[] => {
    if (args.length !== nargs) throw new TypeError(`xla-lite ${name}: expected ${nargs} arguments, got ${args.length}`);
    for (const s of steps) {
      switch (s.kind) {
        case 'param':
          vals[s.out] = args[s.index];
          break;
        case 'const':
          vals[s.out] = s.value;
          break;
        case 'gte':
          vals[s.out] = (vals[s.src] as Array[])[s.index];
          break;
        case 'fusion': {
          const sh = s.inst.shape;
          const n = numel(sh);
          const out = (donating ? donor.target(s.out, args) : null) ?? (sh.dtype === 'bool' ? new Uint8Array(n) : new Float32Array(n));
          for (let j = 0; j < s.ins.length; j++) s.buf[j] = toStorage(vals[s.ins[j]] as Array) as ArrayLike<number>;
          s.kernel(s.buf, out, n);
          s.buf.fill(null as never);
          let r = fromStorage(out, sh.shape, sh.dtype);
          if (sh.weakType) r = lax.convertElementType(r, sh.dtype, true);
          vals[s.out] = r;
          break;
        }
        case 'prim': {
          for (let j = 0; j < s.ins.length; j++) s.buf[j] = vals[s.ins[j]] as Array;
          const outs = evalPrimitive(s.inst.prim!, s.buf, s.params);
          s.buf.fill(null as never);
          vals[s.out] = s.inst.isTuple ? outs : outs[0];
          break;
        }
      }
    }
    const res = outSlots.map((k) => vals[k] as Array);
    vals.fill(null);
    if (donating) donor.land(res, args);
    return res;
  };
  const fusedKernels = steps.filter((s) => s.kind === 'fusion').length;
  const primitiveOps = steps.filter((s) => s.kind === 'prim').length;
  const bodies = c.instructions.filter((i) => i.opcode === 'fusion').map((i) => i.called[0].instructions.filter((m) => m.opcode !== 'parameter').length);
  const multiOpFusions = bodies.filter((n) => n > 1).length;
  const fusedOps = bodies.reduce((a, b) => a + b, 0);
  return { run, stats: { fusedKernels, multiOpFusions, fusedOps, primitiveOps }, donor };
}
