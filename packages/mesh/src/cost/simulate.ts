/**
 * `simulateStep(compiled, { topology, chips })`: what one step of a partitioned program would
 * take on a TPU slice. Per-chip compute comes from the program's own cost analysis run on the
 * topology's generation (xla-lite's systolic cost model over the partitioned module: MXU
 * cycles and HBM bytes of every op on its shard shapes); communication from every collective
 * in the partitioned HLO (replica groups, buffer sizes) through `collectiveTime`, those in
 * loop and branch bodies included (a scan's body once per iteration, as cost analysis counts
 * its compute; a while body once, its trip count being unknown; a cond's heaviest branch).
 * A step made of several programs (the forward and backward programs `grad(jit(f))` runs,
 * xla-lite's `compileLog()[k].partitioned.program`) is their list. `overlap`
 * is the fraction of the shorter of the two hidden behind the other (0: collectives wait for
 * compute and compute for collectives; 1: perfect overlap). Reported: step time, MFU (model
 * FLOPs per chip over step time and peak) and scaling efficiency (compute / step: the share
 * of the step that perfect scaling of the compute would leave).
 */
import { type Algorithm, type CollectiveKind, type CollectiveOp, collectiveTime } from './collectiveTime';
import { chipCount, type Generation, type Topology } from '../topology';

/** The parts of an xla-lite `Compiled` (an `SpmdCompiled`) the simulation reads. */
export interface ProgramLike {
  readonly module: { readonly entry: ComputationLike };
  costAnalysis(preset: Generation): { readonly flops: number; readonly seconds: number };
  readonly spec?: { readonly devices: readonly unknown[] };
}
interface ComputationLike {
  readonly instructions: readonly InstructionLike[];
}
interface InstructionLike {
  readonly opcode: string;
  /** The called computations of control flow (scan / while / cond bodies). */
  readonly called?: readonly ComputationLike[];
  readonly prim?: { readonly name: string } | null;
  readonly shapes: readonly { readonly shape: readonly number[]; readonly dtype: string }[];
  readonly operands: readonly InstructionLike[];
  readonly params: Record<string, unknown>;
}

/** What a step is made of, per chip: FLOPs, compute seconds and the collectives. */
export interface ProgramSummary {
  readonly flops: number;
  readonly computeSeconds: number;
  readonly collectives: readonly CollectiveOp[];
  /** Devices the program was partitioned for. */
  readonly devices: number;
}

export interface SimulateOptions {
  readonly topology: Topology;
  /** Chips the program runs on (default: the topology's); must equal the topology's and the program's device count. */
  readonly chips?: number;
  /** Fraction of min(compute, communication) hidden by overlap, 0..1 (default 0). */
  readonly overlap?: number;
  readonly algorithm?: Algorithm;
}

export interface StepEstimate {
  readonly computeSeconds: number;
  readonly communicationSeconds: number;
  readonly overlappedSeconds: number;
  readonly stepSeconds: number;
  readonly flopsPerChip: number;
  readonly mfu: number;
  readonly scalingEfficiency: number;
  /** The overlap assumed: the fraction of min(compute, communication) hidden (0: none). */
  readonly overlap: number;
  readonly collectives: readonly { readonly kind: CollectiveKind; readonly bytes: number; readonly groupSize: number; readonly seconds: number }[];
}

const ITEMSIZE: Record<string, number> = { float32: 4, int32: 4, uint32: 4, bfloat16: 2, float16: 2, int8: 1, uint8: 1, bool: 1 };
const bytesOf = (s: { shape: readonly number[]; dtype: string }): number => s.shape.reduce((a, b) => a * b, 1) * (ITEMSIZE[s.dtype] ?? 4);
const KINDS = new Set<string>(['all-reduce', 'all-gather', 'reduce-scatter', 'all-to-all', 'collective-permute']);

/**
 * The collectives a partitioned module executes, one op per execution of an instruction (its
 * first replica group stands for all): loop and branch bodies included (see the file header).
 */
export function collectivesOf(program: ProgramLike): CollectiveOp[] {
  return collectivesIn(program.module.entry);
}

function collectivesIn(c: ComputationLike): CollectiveOp[] {
  const out: CollectiveOp[] = [];
  for (const i of c.instructions) {
    if (i.called?.length) {
      const bodies = i.called.map(collectivesIn);
      const name = i.prim?.name;
      if (name === 'cond') {
        const total = (ops: CollectiveOp[]) => ops.reduce((s, o) => s + o.bytes, 0);
        out.push(...bodies.reduce((m, b) => (total(b) > total(m) ? b : m), []));
      } else {
        const trips = name === 'scan' ? Number((i.params as { length?: number }).length ?? 1) : 1;
        for (let t = 0; t < trips; t++) for (const b of bodies) out.push(...b);
      }
      continue;
    }
    if (!KINDS.has(i.opcode)) continue;
    const kind = i.opcode as CollectiveKind;
    const p = i.params as { replicaGroups?: number[][]; sourceTargetPairs?: [number, number][] };
    // Full buffer: the gathered result, the scattered input, else the buffer itself.
    const bytes = kind === 'reduce-scatter' ? bytesOf(i.operands[0].shapes[0]) : bytesOf(i.shapes[0]);
    if (kind === 'collective-permute') {
      const pairs = (p.sourceTargetPairs ?? []).filter(([s, t]) => s !== t);
      out.push({ kind, bytes, group: [...new Set(pairs.flat())], pairs });
    } else out.push({ kind, bytes, group: p.replicaGroups?.[0] ?? [] });
  }
  return out;
}

/** Step time of a summary on a topology. */
export function simulate(summary: ProgramSummary, opts: SimulateOptions): StepEstimate {
  const { topology } = opts;
  const n = chipCount(topology);
  if (opts.chips !== undefined && opts.chips !== n) throw new Error(`simulateStep: chips ${opts.chips} but topology ${topology.name} has ${n} chips (${topology.dims.join('x')})`);
  if (summary.devices !== n) throw new Error(`simulateStep: the program is partitioned for ${summary.devices} devices but topology ${topology.name} has ${n} chips; partition it for ${n}`);
  const overlap = opts.overlap ?? 0;
  if (!(overlap >= 0 && overlap <= 1)) throw new Error(`simulateStep: overlap must be in [0, 1]; got ${overlap}`);
  const collectives = summary.collectives.map((c) => ({ kind: c.kind, bytes: c.bytes, groupSize: c.group.length, seconds: collectiveTime(c, topology, opts.algorithm) }));
  const comm = collectives.reduce((s, c) => s + c.seconds, 0);
  const hidden = overlap * Math.min(summary.computeSeconds, comm);
  const step = summary.computeSeconds + comm - hidden;
  return {
    computeSeconds: summary.computeSeconds,
    communicationSeconds: comm,
    overlappedSeconds: hidden,
    stepSeconds: step,
    flopsPerChip: summary.flops,
    mfu: step > 0 ? summary.flops / step / topology.generation.peakBf16Flops : 0,
    scalingEfficiency: step > 0 ? summary.computeSeconds / step : 1,
    overlap,
    collectives,
  };
}

/** The per-chip summary of one step made of `programs` (run one after another). */
export function summarize(programs: ProgramLike | readonly ProgramLike[], generation: Generation): ProgramSummary {
  const list: readonly ProgramLike[] = globalThis.Array.isArray(programs) ? programs : [programs as ProgramLike];
  if (list.length === 0) throw new Error('simulateStep: no programs given (pass a compiled partitioned program, or the list of programs one step runs)');
  let flops = 0;
  let computeSeconds = 0;
  const collectives: CollectiveOp[] = [];
  let devices: number | null = null;
  list.forEach((p, k) => {
    if (typeof p?.costAnalysis !== 'function' || !p.module?.entry) throw new TypeError(`simulateStep: program ${k} is not a compiled program (xla-lite's jit(f).lower(...).compile(), or compileLog()[i].partitioned.program)`);
    const cost = p.costAnalysis(generation);
    const ops = collectivesOf(p);
    const n = p.spec?.devices.length ?? Math.max(1, ...ops.flatMap((c) => c.group.map((g) => g + 1)));
    if (devices !== null && n !== devices) throw new Error(`simulateStep: program ${k} is partitioned for ${n} devices but program 0 for ${devices}; one step runs on one slice`);
    devices = n;
    flops += cost.flops;
    computeSeconds += cost.seconds;
    collectives.push(...ops);
  });
  return { flops, computeSeconds, collectives, devices: devices! };
}

/**
 * Step time, MFU and scaling efficiency of a partitioned program (`jit(f, {inShardings}).lower(...).compile()`),
 * or of the list of programs one step runs, on a slice: its compiled per-device compute and its collectives.
 */
export function simulateStep(compiled: ProgramLike | readonly ProgramLike[], opts: SimulateOptions): StepEstimate {
  return simulate(summarize(compiled, opts.topology.generation), opts);
}
