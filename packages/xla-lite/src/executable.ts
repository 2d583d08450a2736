/**
 * Runs an optimised module. The entry computation is turned into a flat plan once: each step
 * reads operand slots and writes its result slot. Parameters come from the call's arguments,
 * constants are their literals, a `fusion` runs its generated kernel over the operands'
 * storage (`kernel.ts`; row fusions `rowKernel.ts`), an output fusion (kOutput) runs its dot
 * as the core primitive and then its epilogue kernel in place over the dot's result,
 * `get-tuple-element` picks an output, and every other
 * instruction (dots, reductions, data movement, control flow with its sub-jaxprs) runs as its
 * core primitive on the current backend, so results agree with eager execution; control-flow
 * bodies are routed through the compiler too (see `subprograms.ts`). Fusions the WebAssembly
 * emitter covers run as SIMD kernels of the executable's wasm program, over its arena (see
 * `wasm/program.ts`); the others keep their JavaScript kernel. Operand lists are preallocated
 * per step. Result buffers are reused call after call where no value but the outputs can
 * outlive a call (see `pooling` below): float32 dots write into their step's buffer through
 * core's `evalPrimitiveInto` (no fresh array from the GEMM), and a dot under a wasm epilogue
 * writes straight into the epilogue's arena buffer, where the epilogue runs in place and wasm
 * kernels read it; only results read outside wasm kernels are copied out of the arena. With
 * zero-copy dots the fused attention's reused result buffers are regions of the backend's
 * kernel memory, which the dots reading them read in place.
 * Donation (see `donation.ts`) hooks in at two points: a fusion planned to land in a donated
 * argument writes into that argument's storage instead of allocating (a wasm kernel's result
 * is copied out of the arena into it), and at the end the other paired outputs are moved into
 * their donated storage. With zero-copy dots, an in-place donated output of a wasm loop fusion
 * that nothing else reads stays in the arena between calls instead (`wasm/program.ts`,
 * `Resident`; `begin(args)` moves out those the caller kept).
 */
import { type Array, ClosedJaxpr, fromStorage, getBackend, lax, toStorage } from '@tpukit/core';
import { type DotInto, evalDotsInto, evalPrimitive, evalPrimitiveInto, evalPrimitiveIntoAll, frozenShape, type IntoMemo, intoMemo, type ResultBands, StartedDots, wasm as coreWasm } from '@tpukit/core/internal';
import { dotGroupJoinsOf, dotGroupsOf } from './passes/dotGroups';
import type { HloInstruction, HloModule } from './hlo';
import { numel } from './hlo';
import { type DonationPlan, DonationRuntime, hostStorage } from './donation';
import { hasEffect } from './effects';
import { compileFusionKernel } from './js/fusionKernels';
import type { FusedKernel } from './js/kernel';
import { physicalParams } from './passes/layoutAssignment';
import { splitOutputFusion } from './passes/outputFusion';
import { cpuNow, describe, profileRecord, type ProfileRecord, profiling } from './profile';
import { compileSubprograms } from './subprograms';
import { countOutputCopy, epilogueBandsEnabled, isOutputValue, isStorageAlias, reserveFloats, WasmProgram, type WasmStep, zeroCopyHost } from './wasm/program';

type PrimStep = { kind: 'prim'; out: number; ins: number[]; inst: HloInstruction; buf: Array[]; params: unknown; into: boolean; pool: Float32Array | Uint8Array | null; direct: { key: number; view: Float32Array } | null; intoAll: boolean; pools: Float32Array[] | null; regions: Float32Array[] | null; memo: IntoMemo };
/** A dot group's step (see `groupDotSteps`): `started` set when it is joined later, by a 'join' step. */
type DotsStep = { kind: 'dots'; out: number; members: PrimStep[]; list: DotInto[]; started: StartedDots | null };
type Step =
  | { kind: 'param'; out: number; index: number }
  | { kind: 'const'; out: number; value: Array }
  | { kind: 'gte'; out: number; src: number; index: number }
  | { kind: 'alias'; out: number; src: number; inst: HloInstruction; shape: readonly number[] }
  | { kind: 'fusion'; out: number; ins: number[]; kernel: FusedKernel; inst: HloInstruction; buf: ArrayLike<number>[]; more: (Float32Array | Uint8Array)[]; pool: Float32Array | Uint8Array | null }
  | { kind: 'wasm'; out: number; step: WasmStep }
  | PrimStep
  | DotsStep
  | { kind: 'grouped'; out: number }
  | { kind: 'join'; out: number; inner: Step; group: DotsStep }
  | { kind: 'output'; out: number; dotIns: number[]; epiIns: number[]; inst: HloInstruction; dot: HloInstruction; params: unknown; dotBuf: Array[]; kernel: FusedKernel; buf: ArrayLike<number>[]; wasm: WasmStep | undefined; arena: Float32Array | null; bands: ResultBands | undefined; pool: Float32Array | Uint8Array | null; memo: IntoMemo };

export interface ExecutableStats {
  /** Generated kernels executed per call (fusions, including single-op ones). */
  fusedKernels: number;
  /** Of those, kernels that fuse two or more ops. */
  multiOpFusions: number;
  /** Ops inside fusions (the dot of a kOutput fusion included). */
  fusedOps: number;
  /** Instructions run outside generated kernels per call: core primitives, and reshapes that share their operand's storage (the dots of output fusions not included). */
  primitiveOps: number;
  /** Of the generated kernels, dot epilogues applied in place over a dot's output (kOutput fusions). */
  outputFusions: number;
  /** Of the generated kernels, row kernels (kRow fusions: softmax, norms and their gradients). */
  rowFusions: number;
  /** Of the generated kernels, those running as WebAssembly SIMD (the rest are JavaScript loops). */
  wasmKernels: number;
  /** Bytes of the WebAssembly arena (0 without wasm kernels). */
  arenaBytes: number;
  /** Whether the arena lies in the backend's kernel memory (zero-copy dots: dots read fusion results in place; see `wasm/program.ts`). */
  arenaInBackend: boolean;
  /** Dot groups started before and joined after steps that run on the calling thread meanwhile (`groupDotSteps`), and those steps (all groups' together). */
  asyncGroups: number;
  asyncWindowSteps: number;
}

/** Whether instruction params hold a function or a jaxpr (custom rules, nested programs). */
function holdsProgram(params: Record<string, unknown>): boolean {
  const isProgram = (v: unknown): boolean => typeof v === 'function' || v instanceof ClosedJaxpr;
  return Object.values(params).some((v) => isProgram(v) || (globalThis.Array.isArray(v) && v.some(isProgram)));
}

/**
 * The plan without in-place tuple outputs for multi-output fusions that run their JavaScript
 * kernel (no wasm kernel covers them): those outputs are computed into fresh arrays and copied
 * into the donated storage at the end of the call, as any other paired output.
 */
function withoutJsTuples(plan: DonationPlan, c: HloModule['entry'], prog: WasmProgram | null): DonationPlan {
  const kept = [...plan.inPlaceTuple].filter(([k]) => prog?.steps.get(c.instructions[k])?.outputs != null);
  return kept.length === plan.inPlaceTuple.size ? plan : { ...plan, inPlaceTuple: new Map(kept) };
}

export function buildExecutable(mod: HloModule, name: string, donation: DonationPlan | null = null): { run: (args: Array[]) => Array[]; stats: ExecutableStats; donor: DonationRuntime | null } {
  const c = mod.entry;
  const slot = new Map<HloInstruction, number>();
  c.instructions.forEach((i, k) => slot.set(i, k));
  const wasmProgram = WasmProgram.build(c, name, donation);
  const donor = donation && new DonationRuntime(withoutJsTuples(donation, c, wasmProgram), name, new Set(wasmProgram?.residents.map((r) => r.param)));
  const donating = donor !== null && donor.active;
  const steps: Step[] = c.instructions.map((i, k): Step => {
    const ins = i.operands.map((o) => slot.get(o)!);
    switch (i.opcode) {
      case 'parameter':
        return { kind: 'param', out: k, index: i.paramIndex };
      case 'constant':
        return { kind: 'const', out: k, value: i.literal! };
      case 'get-tuple-element':
        return { kind: 'gte', out: k, src: ins[0], index: (i.params as { index: number }).index };
      case 'fusion': {
        const step = wasmProgram?.steps.get(i);
        if (step) return { kind: 'wasm', out: k, step };
        if ((i.params as { kind: string }).kind !== 'kOutput') return { kind: 'fusion', out: k, ins, kernel: compileFusionKernel(i), inst: i, buf: new globalThis.Array(ins.length), more: new globalThis.Array(i.shapes.length - 1), pool: null };
        const parts = splitOutputFusion(i.called[0]);
        const dotIns = parts.dotOperands.map((p) => ins[p]);
        const epiIns = parts.epilogueOperands.map((p) => ins[p]);
        const kernel = compileFusionKernel(i, parts.epilogue);
        const wasm = wasmProgram?.epilogues.get(i);
        // A float32 dot under a wasm epilogue writes its result straight into the epilogue's arena buffer.
        const arena = wasm && parts.dot.shape.dtype === 'float32' ? wasmProgram!.view(wasm.acc, numel(parts.dot.shape)) : null;
        // There the epilogue runs over each band of the dot's rows as soon as it is finished (see setEpilogueBands).
        const bands = arena !== null && wasm!.band !== null && epilogueBandsEnabled() ? (e0: number, e1: number): void => wasmProgram!.runEpilogueBand(wasm!, e0, e1) : undefined;
        return { kind: 'output', out: k, dotIns, epiIns, inst: i, dot: parts.dot, params: physicalParams(parts.dot), dotBuf: new globalThis.Array(2), kernel, buf: new globalThis.Array(epiIns.length + 1), wasm, arena, bands, pool: null, memo: intoMemo() };
      }
      default:
        if (!i.prim) throw new Error(`xla-lite ${name}: instruction ${i.opcode} has no executable form`);
        // (The result's shape frozen once: every call's Array shares it.)
        if (isStorageAlias(i, c.outputs)) return { kind: 'alias', out: k, src: ins[0], inst: i, shape: frozenShape(i.shape.shape) };
        return { kind: 'prim', out: k, ins, inst: i, buf: new globalThis.Array(ins.length), params: compileSubprograms(i.prim.name, physicalParams(i), name), into: (i.prim.name === 'dot_general' || i.prim.implInto !== undefined) && !i.isTuple && i.shape.dtype === 'float32' && !i.shape.weakType, pool: null, direct: wasmProgram?.directDots.get(i) ?? null, intoAll: i.isTuple && i.shapes.every((sh) => sh.dtype === 'float32' && !sh.weakType), pools: null, regions: wasmProgram?.resultRegions.get(i) ?? null, memo: intoMemo() };
    }
  });
  // (the steps that write into a donated argument's storage: no group's window holds one)
  const donatedWrites = new Set(donor === null ? [] : [...donor.plan.inPlace.keys(), ...donor.plan.inPlaceTuple.keys()]);
  const started: DotsStep[] = wasmProgram !== null ? groupDotSteps(steps, c, slot, donatedWrites) : [];
  // Results of dots and transposes (primitives the backend can run into caller storage), of
  // JavaScript fusion kernels and those copied out of the wasm arena reuse last call's buffers
  // when nothing but the outputs can outlive a call: no host callbacks, no
  // sub-programs (outputs holding a reused buffer are copied at the end of each call, except
  // those landing in donated storage). Fresh multi-megabyte arrays per call cost page faults
  // and V8's "external memory pressure" garbage collections.
  const pooling = c.instructions.every((i) => !hasEffect(i) && (i.opcode === 'fusion' || (i.called.length === 0 && !holdsProgram(i.params))));
  if (pooling) wasmProgram?.poolResults();
  const pooled = new Set<ArrayBufferLike>();
  // With zero-copy dots, the fused attention's reused result buffers are regions of the
  // backend's kernel memory, so the dots reading them (the projections, their gradients) read
  // them in place instead of staging a copy into the GEMM's memory. They are known by the views
  // themselves (a shared memory's buffer object changes when it grows).
  const host = pooling ? zeroCopyHost() : null;
  const pooledViews = new Set<ArrayBufferView>();
  /** A reused float32 buffer of `n` elements for step `owner`: in the backend's memory when it can hold it (released with the step), else a host array. */
  const reusedFloats = (owner: object, n: number): Float32Array => {
    const v = host !== null ? reserveFloats(host, owner, n) : null;
    if (v === null) return poolBuf({ pool: null }, n) as Float32Array;
    pooledViews.add(v);
    return v;
  };
  // An output of the executable gets a fresh buffer instead of a reused one: the caller keeps
  // it, and a reused buffer would be copied again at the end of the call.
  const isOutput = Uint8Array.from(c.instructions, (i) => (isOutputValue(c, i) ? 1 : 0));
  const pools = (k: number): boolean => pooling && isOutput[k] === 0;
  /** The reused result buffer of a step (made on its first call). */
  const poolBuf = (s: { pool: Float32Array | Uint8Array | null }, n: number, bool = false): Float32Array | Uint8Array => {
    if (s.pool === null) {
      s.pool = bool ? new Uint8Array(n) : new Float32Array(n);
      pooled.add(s.pool.buffer);
    }
    return s.pool;
  };
  /** Runs a float32 dot (or another primitive with a kernel into caller storage) into `dest` when the backend can (else into a fresh array). */
  const runInto = (prim: HloInstruction['prim'], ins: Array[], params: unknown, dest: Float32Array | null, memo: IntoMemo): Array => {
    const d = (dest !== null ? evalPrimitiveInto(prim!, ins, params, dest, memo) : null) ?? evalPrimitive(prim!, ins, params)[0];
    ins.fill(null as never);
    return d;
  };
  const outSlots = c.outputs.map((o) => slot.get(o)!);
  const nargs = c.params.length;
  const vals: (Array | Array[] | null)[] = new globalThis.Array(steps.length).fill(null);
  const exec = (s: Step, args: Array[]): void => {
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
      case 'alias': {
        // A row-major reshape is the same elements: the result shares its operand's storage.
        vals[s.out] = fromStorage(toStorage(vals[s.src] as Array), s.shape, s.inst.shape.dtype);
        break;
      }
      case 'fusion': {
        if (s.inst.isTuple) {
          // A multi-output (row) fusion: every output freshly allocated, read through get-tuple-element.
          const shs = s.inst.shapes;
          const outs = shs.map((sh) => (sh.dtype === 'bool' ? new Uint8Array(numel(sh)) : new Float32Array(numel(sh))));
          for (let j = 1; j < outs.length; j++) s.more[j - 1] = outs[j];
          for (let j = 0; j < s.ins.length; j++) s.buf[j] = toStorage(vals[s.ins[j]] as Array) as ArrayLike<number>;
          s.kernel(s.buf, outs[0], outs[0].length, s.more);
          s.buf.fill(null as never);
          s.more.fill(null as never);
          vals[s.out] = outs.map((o, j) => {
            const r = fromStorage(o, shs[j].shape, shs[j].dtype);
            return shs[j].weakType ? lax.convertElementType(r, shs[j].dtype, true) : r;
          });
          break;
        }
        const sh = s.inst.shape;
        const n = numel(sh);
        const out = (donating ? donor.target(s.out, args) : null) ?? (pools(s.out) ? poolBuf(s, n, sh.dtype === 'bool') : sh.dtype === 'bool' ? new Uint8Array(n) : new Float32Array(n));
        for (let j = 0; j < s.ins.length; j++) s.buf[j] = toStorage(vals[s.ins[j]] as Array) as ArrayLike<number>;
        s.kernel(s.buf, out, n);
        s.buf.fill(null as never);
        let r = fromStorage(out, sh.shape, sh.dtype);
        if (sh.weakType) r = lax.convertElementType(r, sh.dtype, true);
        vals[s.out] = r;
        break;
      }
      case 'wasm':
        if (s.step.outputs !== null) vals[s.out] = wasmProgram!.run(s.step, vals, null, donating ? donor.tupleTargets(s.out, args) : null);
        else vals[s.out] = wasmProgram!.run(s.step, vals, donating ? donor.target(s.out, args) : null);
        break;
      case 'output': {
        // The dot on the current backend, then its epilogue in place over the dot's buffer.
        s.dotBuf[0] = vals[s.dotIns[0]] as Array;
        s.dotBuf[1] = vals[s.dotIns[1]] as Array;
        if (s.arena !== null) {
          // With bands, the epilogue's inputs go into the arena first: it runs over the dot's rows as they are finished.
          if (s.bands !== undefined) wasmProgram!.stage(s.wasm!, vals);
          if (evalPrimitiveInto(s.dot.prim!, s.dotBuf, s.params, s.arena, s.memo, s.bands) !== null) {
            // The dot's result is in the arena already: the epilogue runs there (or has run, by
            // bands), and its result is copied out only where something other than a wasm kernel reads it.
            s.dotBuf.fill(null as never);
            vals[s.out] = wasmProgram!.run(s.wasm!, vals, null, null, s.bands !== undefined);
            break;
          }
        }
        const sh = s.inst.shape;
        const acc = toStorage(runInto(s.dot.prim, s.dotBuf, s.params, pools(s.out) && s.dot.shape.dtype === 'float32' ? (poolBuf(s, numel(s.dot.shape)) as Float32Array) : null, s.memo)) as Float32Array;
        if (s.wasm) {
          vals[s.out] = wasmProgram!.runEpilogue(s.wasm, acc, vals);
          break;
        }
        s.buf[0] = acc;
        for (let j = 0; j < s.epiIns.length; j++) s.buf[j + 1] = toStorage(vals[s.epiIns[j]] as Array) as ArrayLike<number>;
        s.kernel(s.buf, acc, acc.length);
        s.buf.fill(null as never);
        let r = fromStorage(acc, sh.shape, sh.dtype);
        if (sh.weakType) r = lax.convertElementType(r, sh.dtype, true);
        vals[s.out] = r;
        break;
      }
      case 'dots':
        fillDotOperands(s, vals);
        if (s.started !== null) s.started.start(s.list);
        else runDotGroup(s, vals, wasmProgram!, exec, args, evalDotsInto(s.list));
        break;
      case 'join':
        exec(s.inner, args);
        finishJoin(s, args);
        break;
      case 'grouped':
        break;
      case 'prim': {
        for (let j = 0; j < s.ins.length; j++) s.buf[j] = vals[s.ins[j]] as Array;
        if (s.direct !== null) {
          // Only wasm kernels (or, zero-copy, only steps reading it in place) read this dot or
          // transpose: its result goes straight into its arena buffer.
          const r = evalPrimitiveInto(s.inst.prim!, s.buf, s.params, s.direct.view, s.memo);
          if (r !== null) {
            s.buf.fill(null as never);
            wasmProgram!.markStaged(s.direct.key);
            vals[s.out] = r;
            break;
          }
        }
        if (s.into && pools(s.out)) {
          // (The result's shape is the physical one the parameters give, as evalPrimitive's.)
          vals[s.out] = runInto(s.inst.prim, s.buf, s.params, poolBuf(s, numel(s.inst.shape)) as Float32Array, s.memo);
          break;
        }
        if (s.regions !== null) {
          // Results the wasm kernels read in arena regions (the fused attention, zero-copy): the
          // backend writes them there; when it declines, its results are copied there.
          const r = s.intoAll ? evalPrimitiveIntoAll(s.inst.prim!, s.buf, s.params, s.regions, s.memo) : null;
          if (r === null) {
            s.intoAll = false;
            const outs = evalPrimitive(s.inst.prim!, s.buf, s.params);
            for (let q = 0; q < outs.length; q++) s.regions[q].set(toStorage(outs[q]) as Float32Array);
            vals[s.out] = outs;
          } else vals[s.out] = r;
          s.buf.fill(null as never);
          break;
        }
        if (s.intoAll && pools(s.out) && getBackend().executeIntoAll !== undefined) {
          // A multi-result primitive the backend writes into caller storage (the fused attention):
          // every result into its reused buffer (no fresh arrays, no GC pressure per call).
          s.pools ??= s.inst.shapes.map((sh) => reusedFloats(s, numel(sh)));
          const r = evalPrimitiveIntoAll(s.inst.prim!, s.buf, s.params, s.pools, s.memo);
          if (r !== null) {
            s.buf.fill(null as never);
            vals[s.out] = r;
            break;
          }
          // (The backend declines this primitive: fresh results from now on, no buffers held.)
          s.intoAll = false;
          s.pools = null;
        }
        const outs = evalPrimitive(s.inst.prim!, s.buf, s.params);
        s.buf.fill(null as never);
        vals[s.out] = s.inst.isTuple ? outs : outs[0];
        break;
      }
    }
  };
  /**
   * A call threw at step `at` (its steps up to `at` may have run): a donated argument that a
   * fusion among them writes over (in its own storage, or in the arena region where it lies
   * resident) may already hold updated values, so it is deleted, as a successful call would
   * delete it: a retry with it would apply the update twice. Others stay usable.
   */
  const writers: [step: number, param: number][] = donor === null ? [] : [...donor.plan.inPlace, ...[...donor.plan.inPlaceTuple].flatMap(([k, m]) => [...m.values()].map((j): [number, number] => [k, j]))];
  const deleteOverwritten = (at: number, args: readonly Array[], e: unknown): void => {
    for (const [k, j] of writers) {
      const a = args[j];
      if (k > at || a.isDeleted()) continue;
      const r = wasmProgram?.residents.find((x) => x.param === j);
      const written = r !== undefined ? a._buf === r.view : hostStorage(a) !== null;
      if (written) a._markDeleted(`jit(${name}) threw (${e instanceof Error ? e.message : String(e)}) after writing over its donated ${donor!.plan.describe(j)}, which now holds part of that call's update; it is deleted so that a retry does not apply the update twice`, false);
    }
  };
  /** The second half of a 'join' step (after its inner step): joins its group and hands on the group's results. */
  const finishJoin = (s: Extract<Step, { kind: 'join' }>, args: Array[]): void => runDotGroup(s.group, vals, wasmProgram!, exec, args, s.group.started!.join());
  // The pool-job trace's step labels (made on the first traced call): '<name> <k> <step kind> <category> <instruction> <detail>' per step, then '<name> end' (the steps' end), '<name> begin' (the call's start) and '<name> returned' (its results handed back).
  let traceLabels: Int32Array | null = null;
  const traceLabelsOf = (): Int32Array => {
    const kindOf = (s: Step): string => (s.kind === 'join' ? `join(${kindOf(s.inner)})` : s.kind === 'wasm' ? `wasm${s.step.parallel ? '-pool' : ''}` : s.kind);
    const ls = c.instructions.map((i, k) => {
      const d = describe(i);
      return coreWasm.traceStepLabel(`${name} ${k} ${kindOf(steps[k])} ${d.category.replace(/ /g, '_')} ${i.opcode}.${i.id} ${d.detail}`);
    });
    return Int32Array.from([...ls, coreWasm.traceStepLabel(`${name} end`), coreWasm.traceStepLabel(`${name} begin`), coreWasm.traceStepLabel(`${name} returned`)]);
  };
  // Profiler records (see profile.ts): made on the first profiled call, one per step plus the call.
  let prof: ProfileRecord[] | null = null;
  const run = (args: Array[]): Array[] => {
    if (args.length !== nargs) throw new TypeError(`xla-lite ${name}: expected ${nargs} arguments, got ${args.length}`);
    const t0 = profiling() ? performance.now() : 0;
    const tracing = coreWasm.poolJobTrace.records !== null;
    if (tracing) coreWasm.traceStepStart((traceLabels ??= traceLabelsOf())[steps.length + 1]);
    wasmProgram?.begin(args);
    let at = 0; // the step running (for `deleteOverwritten` when one throws)
    try {
      if (t0 === 0) {
        if (!tracing) for (; at < steps.length; at++) exec(steps[at], args);
        else {
          // (core's pool-job trace: each job's set-up in its step, and the step timeline, TPUKIT_POOL_TRACE)
          const ls = traceLabels!;
          for (; at < steps.length; at++) {
            coreWasm.traceStepStart(ls[at]);
            exec(steps[at], args);
          }
          coreWasm.traceStepStart(ls[steps.length]);
        }
      } else {
        prof ??= [...c.instructions.map((i) => profileRecord(name, i)), profileRecord(name, null)];
        const cpu0 = cpuNow();
        let cpu = cpu0;
        for (; at < steps.length; at++) {
          const t = performance.now();
          const s = steps[at];
          if (s.kind === 'join') {
            // The window's last kernel, then the join, booked on the group's own step (its
            // products run there on one thread, and the rest of them on any).
            exec(s.inner, args);
            const tj = performance.now();
            const cj = cpuNow();
            prof[at].ms += tj - t;
            prof[at].cpuMs += cj - cpu;
            prof[at].calls++;
            finishJoin(s, args);
            prof[s.group.out].ms += performance.now() - tj;
            cpu = cpuNow();
            prof[s.group.out].cpuMs += cpu - cj;
            continue;
          }
          exec(s, args);
          prof[at].ms += performance.now() - t;
          const cpu1 = cpuNow();
          prof[at].cpuMs += cpu1 - cpu;
          cpu = cpu1;
          prof[at].calls++;
        }
        prof[steps.length].cpuMs += cpu - cpu0;
      }
    } catch (e) {
      // (a group started and not joined: its workers finish before anything else runs)
      for (const g of started) if (g.started!.pending) joinQuietly(g);
      if (donating) deleteOverwritten(at, args, e);
      throw e;
    }
    // (A loop, not an arrow function made per call: those lose their optimised code at every major GC.)
    const res: Array[] = new globalThis.Array(outSlots.length);
    for (let k = 0; k < res.length; k++) res[k] = vals[outSlots[k]] as Array;
    vals.fill(null);
    if (pooling) {
      for (let k = 0; k < res.length; k++) {
        const r = res[k];
        const d = toStorage(r);
        if (!pooled.has(d.buffer) && !pooledViews.has(d) && !wasmProgram?.isPooled(d)) continue;
        if (donating && donor.landsInPlace(k, r, args)) continue; // copied into the donated storage below
        countOutputCopy(d.byteLength);
        const copy = fromStorage(d.slice(), r.shape, r.dtype);
        res[k] = r.weakType ? lax.convertElementType(copy, r.dtype, true) : copy;
      }
    }
    if (donating) donor.land(res, args);
    if (tracing) coreWasm.traceStepStart(traceLabels![steps.length + 2]);
    if (t0 !== 0) {
      const whole = prof![steps.length];
      whole.ms += performance.now() - t0;
      whole.calls++;
    }
    return res;
  };
  const inner = steps.map((s) => (s.kind === 'join' ? s.inner : s));
  const wasmSteps = inner.filter((s) => s.kind === 'wasm').length;
  const wasmKernels = wasmSteps + inner.filter((s) => s.kind === 'output' && s.wasm).length;
  const fusedKernels = inner.filter((s) => s.kind === 'fusion').length + wasmSteps;
  // (a 'dots' step runs its members' primitives; 'grouped' steps are their emptied places; a 'join' step runs its inner step)
  const primitiveOps = steps.reduce((n, s0) => {
    const s = s0.kind === 'join' ? s0.inner : s0;
    return n + (s.kind === 'prim' || s.kind === 'alias' ? 1 : s.kind === 'dots' ? s.members.length : 0);
  }, 0);
  const bodies = c.instructions.filter((i) => i.opcode === 'fusion').map((i) => i.called[0].instructions.filter((m) => m.opcode !== 'parameter').length);
  const multiOpFusions = bodies.filter((n) => n > 1).length;
  const fusedOps = bodies.reduce((a, b) => a + b, 0);
  const kinds = c.instructions.filter((i) => i.opcode === 'fusion').map((i) => (i.params as { kind: string }).kind);
  const outputFusions = kinds.filter((k) => k === 'kOutput').length;
  const rowFusions = kinds.filter((k) => k === 'kRow').length;
  const asyncGroups = started.length;
  const asyncWindowSteps = steps.reduce((n, s, k) => (s.kind === 'join' ? n + k - s.group.out : n), 0);
  return { run, stats: { fusedKernels: fusedKernels + outputFusions, multiOpFusions, fusedOps, primitiveOps, outputFusions, rowFusions, wasmKernels, arenaBytes: wasmProgram?.arenaBytes ?? 0, arenaInBackend: wasmProgram?.host != null, asyncGroups, asyncWindowSteps }, donor };
}

/**
 * The dot groups of passes/dotGroups.ts as steps: the members of a group that write straight into
 * their arena buffers (`direct`), if at least two, become one 'dots' step at the last such
 * member's place (the others 'grouped', which do nothing), run with one core `evalDotsInto` call
 * (see `runDotGroup`). No instruction between a group's members reads a member (the pass's
 * condition), so every operand is there at the last one and no step before it reads a member's
 * result. The other members run as their own steps.
 *
 * A group with a window (`dotGroupJoinsOf`, whose last member is the last member of the pass's
 * group) runs in two halves (XLA's async-start / async-done): the 'dots' step starts it (core's
 * `StartedDots`: the pool's workers claim its products at once) and a 'join' step, wrapped
 * around the last step of the window's longest prefix of steps that are safe to run meanwhile,
 * joins it after that step (the calling thread then computes what the workers left). A safe step
 * is a wasm kernel that runs on the calling thread alone (not `parallel`: it never uses the
 * kernel pool), that writes no donated argument's storage, no resident output and no weakly typed
 * result (handed on through a primitive on the backend, which refuses it meanwhile), or an alias:
 * it reads no member (the pass's window), uses neither the GEMM engine nor a pool, and buffer
 * assignment kept the members' operands and results live to the window's end, so nothing it
 * writes lies over them. Returns the started groups.
 */
function groupDotSteps(steps: Step[], c: HloModule['entry'], slot: Map<HloInstruction, number>, donatedWrites: ReadonlySet<number>): DotsStep[] {
  const ends = dotGroupJoinsOf(c);
  const started: DotsStep[] = [];
  dotGroupsOf(c).forEach((g, q) => {
    const at = g.map((i) => slot.get(i)!).filter((k) => {
      const s = steps[k];
      return s.kind === 'prim' && s.direct !== null;
    });
    if (at.length < 2) return;
    const members = at.map((k) => steps[k] as PrimStep);
    const list = members.map((s): DotInto => ({ args: s.buf, params: s.params as DotInto['params'], out: s.direct!.view, memo: s.memo }));
    const last = at[at.length - 1];
    const dots: DotsStep = { kind: 'dots', out: last, members, list, started: null };
    steps[last] = dots;
    for (let j = 0; j < at.length - 1; j++) steps[at[j]] = { kind: 'grouped', out: at[j] };
    // The window: only when the group's last member is the pass's (the window follows it).
    const w = ends[q] ?? null;
    if (w === null || last !== slot.get(g[g.length - 1])) return;
    let join = -1;
    for (let k = last + 1; k <= slot.get(w)!; k++) {
      const s = steps[k];
      if (s.kind === 'gte' || s.kind === 'alias') continue;
      // (a weakly typed result is handed on through a convert_element_type on the backend: not while the group runs)
      if (s.kind !== 'wasm' || s.step.parallel || donatedWrites.has(k) || s.step.out.res !== null || (s.step.outputs?.some((x) => x.res !== null) ?? false) || s.step.out.inst.shapes.some((sh) => sh.weakType)) break;
      join = k;
    }
    if (join < 0) return;
    dots.started = new StartedDots();
    steps[join] = { kind: 'join', out: join, inner: steps[join], group: dots };
    started.push(dots);
  });
  return started;
}

/** Puts a 'dots' step's operands into its members' `buf` (its `list` reads them; `runDotGroup` clears them). */
function fillDotOperands(s: DotsStep, vals: (Array | Array[] | null)[]): void {
  for (const m of s.members) for (let j = 0; j < m.ins.length; j++) m.buf[j] = vals[m.ins[j]] as Array;
}

/** After a step threw: joins a started group, dropping what it throws (the first error is the one reported). */
function joinQuietly(s: DotsStep): void {
  try {
    s.started!.join();
  } catch {
    // (reported by the step that threw first)
  }
  for (const m of s.members) m.buf.fill(null as never);
}

/**
 * Hands on a 'dots' step's results `rs` (from `evalDotsInto`, or the group's join): the members'
 * dots into their arena buffers (the GEMM pool ran them as one job); a member the backend
 * declined runs as its own step.
 */
function runDotGroup(s: DotsStep, vals: (Array | Array[] | null)[], prog: WasmProgram, exec: (s: Step, args: Array[]) => void, args: Array[], rs: (Array | null)[]): void {
  const { members } = s;
  for (let j = 0; j < members.length; j++) {
    const m = members[j];
    const r = rs[j];
    m.buf.fill(null as never);
    if (r === null) {
      exec(m, args);
      continue;
    }
    prog.markStaged(m.direct!.key);
    vals[m.out] = r;
  }
}
