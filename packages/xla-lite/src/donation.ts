/**
 * Buffer donation made real (jax.jit's `donate_argnums`): decides, once per compiled program,
 * which output lands in which donated argument's storage, and applies that decision per call.
 *
 * Planning (`planDonation`), as JAX/XLA alias inputs to outputs: each donated flat input is
 * paired with an output of the same shape and dtype. The buffer assignment
 * (`passes/bufferAssignment.ts`) is asked first: an output it placed wholly into a donated
 * argument's buffer takes that argument. Then an output the argument's last use allows to be
 * written in place (a loop fusion at or after the argument's last read, reading it only
 * elementwise) is preferred; any other matching output is copied into the donated storage once
 * the program has finished reading it. An output that *is* the argument (returned as is) uses
 * it trivially. A donated input no output can take (no same shape/dtype output, or an output
 * that may share its storage) is unusable: it stays alive and JAX's warning "Some donated
 * buffers were not usable" is raised at compile time.
 *
 * At run time (`DonationRuntime`): a planned in-place fusion writes straight into the donated
 * argument's storage instead of allocating; every other paired output is copied into it at the
 * end, so each paired output Array shares the donated storage. This needs the argument's buffer
 * to be host storage on the current backend (the reference backend); otherwise the output is
 * left where it was computed. Core's `pjit` then marks the donated inputs deleted. With
 * zero-copy dots, an output a wasm kernel writes in place that nothing else reads stays in the
 * wasm arena between calls instead (`resident`; `wasm/program.ts`, `Resident`).
 *
 * Values that may share an argument's storage: the argument, anything a core primitive computed
 * from it (a primitive may return an operand's buffer as is, e.g. a reshape or a loop carry),
 * transitively, and tuple elements of those. Fusions and dots always write fresh storage (a
 * dot's result is computed into storage of its own, never an operand's buffer), so the values
 * computed from them do not count: a weight read by a backward dot whose product feeds later
 * primitives (attention's output projection: dot, reshape, the attention backward) is last read
 * by that dot, and its update can still be written in place.
 */
import { Array, getBackend, type StorageArray, toStorage } from '@tpukit/core';
import { bytesOf, type HloComputation, type HloInstruction, numel } from './hlo';
import { assignBuffers } from './passes/bufferAssignment';
import { isResidentView } from './wasm/residentViews';

export interface DonationPlan {
  /** Output index -> donated flat input whose storage holds it after the call. */
  readonly outputToParam: ReadonlyMap<number, number>;
  /** Entry instruction index of a fusion -> donated flat input it writes into directly. */
  readonly inPlace: ReadonlyMap<number, number>;
  /**
   * Entry instruction index of a multi-output loop fusion -> (its output index -> donated flat
   * input): outputs a WebAssembly kernel's copy out of its arena writes straight into donated
   * storage (the kernel has read all its inputs by then). The executable keeps only fusions a
   * wasm kernel runs (`Compiled.donation` is that plan): a JavaScript kernel's outputs are
   * copied at the end of the call like any other paired output.
   */
  readonly inPlaceTuple: ReadonlyMap<number, ReadonlyMap<number, number>>;
  /** Donated flat inputs that no output can reuse (left alive). */
  readonly unusable: readonly number[];
  /** JAX's warning for unusable donations, or null. */
  readonly warning: string | null;
  /** How messages name donated flat input `j`: the caller's label (e.g. "argument 0 (params) leaf 3"), else `input j`. */
  readonly describe: (j: number) => string;
}

const sameType = (a: HloInstruction, b: HloInstruction): boolean =>
  a.shape.dtype === b.shape.dtype && a.shape.shape.length === b.shape.shape.length && a.shape.shape.every((d, i) => d === b.shape.shape[i]);

const typeStr = (i: HloInstruction): string => `${i.shape.dtype}[${i.shape.shape.join(',')}]`;

/**
 * The operands of fusion `f` that its output `q` (null: its only output) is computed from: the
 * body's parameters its value reaches, as `f`'s operands.
 */
function fusionInputs(f: HloInstruction, q: number | null): HloInstruction[] {
  const body = f.called[0];
  const seen = new Set<HloInstruction>();
  const found = new Set<HloInstruction>();
  const walk = (i: HloInstruction): void => {
    if (seen.has(i)) return;
    seen.add(i);
    if (i.opcode === 'parameter') found.add(f.operands[i.paramIndex]);
    for (const o of i.operands) walk(o);
  };
  if (body !== undefined) walk(body.outputs[q ?? 0] ?? body.outputs[0]);
  return [...found];
}

/** Whether `i` always writes storage of its own (never an operand's buffer): fusions, dots. */
const writesFresh = (i: HloInstruction): boolean => i.opcode === 'fusion' || i.prim?.name === 'dot_general';

/** Every instruction that may share storage with `p` (see the file comment). */
function aliasClosure(c: HloComputation, p: HloInstruction): Set<HloInstruction> {
  const set = new Set<HloInstruction>([p]);
  for (const i of c.instructions) {
    if (set.has(i) || writesFresh(i) || i.opcode === 'constant' || i.opcode === 'parameter') continue;
    if (i.operands.some((o) => set.has(o))) set.add(i);
  }
  return set;
}

export function planDonation(c: HloComputation, donated: readonly number[], name: string, labels: readonly string[] = []): DonationPlan {
  const outputToParam = new Map<number, number>();
  const inPlace = new Map<number, number>();
  const inPlaceTuple = new Map<number, Map<number, number>>();
  const unusable: number[] = [];
  const describe = (j: number): string => labels[donated.indexOf(j)] ?? `input ${j}`;
  if (donated.length === 0) return { outputToParam, inPlace, inPlaceTuple, unusable, warning: null, describe };
  const ba = assignBuffers(c, donated);
  const pos = new Map(c.instructions.map((i, k) => [i, k]));
  const taken = new Set<number>();
  const outs = c.outputs;
  const params = [...new Set(donated)].filter((d) => d >= 0 && d < c.params.length);

  for (const j of params) {
    const p = c.params[j];
    // An output returned as is uses its own buffer.
    const self = outs.findIndex((o, k) => o === p && !taken.has(k));
    if (self >= 0) {
      taken.add(self);
      outputToParam.set(self, j);
      continue;
    }
    const closure = aliasClosure(c, p);
    const lastRead = Math.max(...[...closure].map((i) => ba.lastUse.get(i) ?? -1));
    // Outputs that may share this argument's storage cannot be overwritten by another output.
    const sharing = outs.map((o, k) => (closure.has(o) ? k : -1)).filter((k) => k >= 0);
    const candidates = outs
      .map((o, k) => k)
      .filter((k) => !taken.has(k) && sameType(outs[k], p) && outs[k].opcode !== 'parameter' && sharing.every((s) => outs[s] === outs[k]));
    if (candidates.length === 0) {
      unusable.push(j);
      continue;
    }
    const canWriteInPlace = (k: number): boolean => {
      const o = outs[k];
      // The loop fusion computing the output (an element of a multi-output one's tuple, too).
      const f = o.opcode === 'get-tuple-element' ? o.operands[0] : o;
      if (f.opcode !== 'fusion' || (f.params as { kind?: string }).kind !== 'kLoop' || outs.indexOf(o) !== k) return false;
      // (A tuple element is copied out of a WebAssembly arena: float32 only.)
      if (f !== o && (o.shape.dtype !== 'float32' || o.shape.weakType)) return false;
      const t = pos.get(f)!;
      if (lastRead > t) return false;
      if (lastRead < t) return true;
      // Read at the fusion itself: only elementwise (same shape as the output) is safe in place.
      return f.operands.every((x) => !closure.has(x) || (numel(x.shape) === numel(o.shape) && x.shape.shape.join() === o.shape.shape.join()));
    };
    const slot = (k: number) => ba.slots.get(outs[k]);
    const fromAssignment = candidates.find((k) => {
      const s = slot(k);
      return s !== undefined && s.region === 'donated' && s.offset === j && s.size === bytesOf(p.shape);
    });
    // Of the outputs that can be written in place, one computed from this argument (or values
    // computed from it) with the fewest other inputs: in an optimizer update (p, m, v -> p', m',
    // v', one fusion) an argument then mostly takes its own successor (m takes m', not p', which
    // also reads m), so the output comes back as this argument next step and stays in the arena
    // (wasm/program.ts, `Resident`). A heuristic; in the GPT step every leaf takes its own (0.6
    // MiB landed in other leaves' arguments while a dot's product counted as sharing its operand).
    const own = (k: number): number => {
      const o = outs[k];
      const f = o.opcode === 'get-tuple-element' ? o.operands[0] : o;
      if (f.opcode !== 'fusion') return Infinity;
      const ins = fusionInputs(f, f === o ? null : (o.params as { index: number }).index);
      return ins.some((x) => closure.has(x)) ? ins.length : Infinity;
    };
    const inPlaceOk = candidates.filter(canWriteInPlace);
    const closest = inPlaceOk.reduce<number | undefined>((best, k) => (own(k) < (best === undefined ? Infinity : own(best)) ? k : best), undefined);
    const k = fromAssignment ?? closest ?? inPlaceOk[0] ?? candidates[0];
    taken.add(k);
    outputToParam.set(k, j);
    if (canWriteInPlace(k)) {
      const o = outs[k];
      if (o.opcode !== 'get-tuple-element') inPlace.set(pos.get(o)!, j);
      else {
        const t = pos.get(o.operands[0])!;
        if (!inPlaceTuple.has(t)) inPlaceTuple.set(t, new Map());
        inPlaceTuple.get(t)!.set((o.params as { index: number }).index, j);
      }
    }
  }
  const warning = unusable.length
    ? `jit(${name}): Some donated buffers were not usable: ${unusable.map((j) => `${describe(j)} ${typeStr(c.params[j])}`).join(', ')} (no output of the same shape and dtype can take them; they are not deleted)`
    : null;
  return { outputToParam, inPlace, inPlaceTuple, unusable, warning, describe };
}

/**
 * The storage of a donated argument when outputs can be written into it here, else null. Not a
 * resident view of a wasm arena (another program's donated state, `wasm/residentViews.ts`):
 * that program's next call overwrites its region, so an output landing there would change
 * under its caller; such an argument is donated without reuse (its output gets storage of its
 * own).
 */
export function hostStorage(a: Array): StorageArray | null {
  const b = a._backend;
  if (b === null || b.manualMemory || b !== getBackend() || a.isDeleted()) return null;
  const s = b.toHost(a._buf, a.aval);
  return s === a._buf && !isResidentView(s) ? s : null;
}

/** Applies a plan on each call: the in-place targets for fusions, then the copies into donated storage. */
export class DonationRuntime {
  private readonly donatedParams: number[];
  /** Outputs written straight into donated storage, and outputs copied into it, over all calls. */
  readonly counts = { inPlaceWrites: 0, copies: 0 };
  /** Per multi-output fusion, the targets of its outputs (`tupleTargets`). */
  private readonly dests = new Map<number, (Float32Array | Uint8Array | null)[]>();

  constructor(
    readonly plan: DonationPlan,
    private readonly name: string,
    /**
     * Donated arguments whose paired output stays in the wasm arena between calls
     * (`wasm/program.ts`, `Resident`): it is neither written into nor copied into their storage.
     */
    private readonly resident: ReadonlySet<number> = new Set(),
  ) {
    this.donatedParams = [...new Set(plan.outputToParam.values())];
  }

  get active(): boolean {
    return this.donatedParams.length > 0;
  }

  /**
   * A donated argument's storage may not be reachable through any other argument (jit checks
   * this with argument names before the call; `Compiled.call` relies on this check).
   */
  checkArgs(args: readonly Array[]): void {
    const donatedAt = new Map<Array, number>();
    for (const j of this.donatedParams) donatedAt.set(args[j], j);
    args.forEach((a, i) => {
      const j = donatedAt.get(a);
      if (j !== undefined && j !== i) throw new Error(`xla-lite ${this.name}: donated input ${j} is the same Array as input ${i}; a donated buffer cannot also be read through another argument`);
    });
  }

  /** Where the fusion at entry instruction `step` writes its output this call (null: allocate). */
  target(step: number, args: readonly Array[]): Float32Array | Uint8Array | null {
    const j = this.plan.inPlace.get(step);
    if (j === undefined || this.resident.has(j)) return null;
    const s = hostStorage(args[j]);
    if (!(s instanceof Float32Array || s instanceof Uint8Array)) return null;
    this.counts.inPlaceWrites++;
    return s;
  }

  /**
   * Where each output of the multi-output fusion at entry instruction `step` is copied out of
   * the arena this call (null entries: a fresh array), or null when none lands in donated
   * storage. The array is reused call after call.
   */
  tupleTargets(step: number, args: readonly Array[]): (Float32Array | Uint8Array | null)[] | null {
    const m = this.plan.inPlaceTuple.get(step);
    if (m === undefined) return null;
    let d = this.dests.get(step);
    if (d === undefined) {
      d = new globalThis.Array<Float32Array | Uint8Array | null>(Math.max(...m.keys()) + 1).fill(null);
      this.dests.set(step, d);
    }
    let any = false;
    for (const [q, j] of m) {
      const s = this.resident.has(j) ? null : hostStorage(args[j]);
      d[q] = s instanceof Float32Array || s instanceof Uint8Array ? s : null;
      if (d[q] !== null) {
        any = true;
        this.counts.inPlaceWrites++;
      }
    }
    return any ? d : null;
  }

  /** Whether `land` will copy output `k` (now `out`) into a donated argument's storage this call. */
  landsInPlace(k: number, out: Array, args: readonly Array[]): boolean {
    const j = this.plan.outputToParam.get(k);
    if (j === undefined || out === args[j] || this.resident.has(j)) return false;
    const dst = hostStorage(args[j]);
    const src = toStorage(out);
    return dst !== null && src.constructor === dst.constructor && src.length === dst.length;
  }

  /** Makes every paired output live in its donated argument's storage (copying where it was not written in place). */
  land(res: Array[], args: readonly Array[]): void {
    for (const [k, j] of this.plan.outputToParam) {
      const a = args[j];
      const out = res[k];
      if (out === a || this.resident.has(j)) continue;
      const dst = hostStorage(a);
      if (dst === null) continue;
      const src = toStorage(out);
      if (src !== dst) {
        if (src.constructor !== dst.constructor || src.length !== dst.length) continue;
        (dst as Float32Array).set(src as Float32Array);
        this.counts.copies++;
      }
      if (out._buf !== dst) res[k] = new Array(out.aval, a._backend, dst);
    }
  }
}
