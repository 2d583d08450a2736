/**
 * `jit` (jax.jit) and the `Compiler` seam. `jit(f)` traces `f` to a jaxpr once per abstract
 * signature (argument structure, shapes, dtypes, weak types, static argument values, and
 * input shardings other than the default single-device one), caches
 * it, and applies it as one `pjit` primitive whose parameter is the jaxpr. Without a registered
 * compiler `pjit` runs the jaxpr op by op (same results, no fusion); `@tpukit/xla-lite`
 * registers a real compiler behind the same call. Because `pjit` is a primitive with jvp,
 * transpose, batching and partial-eval rules (each transforming its jaxpr), jit composes with
 * every transformation in both directions: `jit(vmap(grad(f)))` and `grad(jit(f))`.
 *
 * Shardings travel with the program: a call under an outer transformation (whose arguments are
 * tracers, so the compiler's partitioned path cannot take it) puts the flat inputs' and outputs'
 * shardings into the `pjit` parameters (`inShardings` / `outShardings`: the jit's options, else
 * the sharding of the concrete value a jvp / linearize tracer carries). The jvp, partial-eval
 * and transpose rules derive the shardings of the programs they make (a tangent is sharded as
 * its primal, a cotangent as its primal's output, residuals as they come out), so the
 * programs `grad(jit(f))` runs reach the compiler with shardings and are partitioned there
 * (`CompileRequest.shardings`), not gathered to one device. The compiled-program cache keys on
 * the shardings of each call.
 */
import { Array } from '../array';
import { asArray } from '../convert';
import { definePrimitive } from '../primitive';
import { bind } from '../trace';
import * as tree from '../tree';
import type { Sharding } from '../interfaces';
import { Tracer } from './core';
import { evalJaxpr } from './eval';
import type { ClosedJaxpr } from './jaxpr';
import { jvpJaxpr, type JvpRule, JVPTracer } from './jvp';
import { avalStr } from './jaxpr';
import { partialEvalCall, type PartialEvalRule, PETracer } from './partialEval';
import { isUndef, transposeJaxpr, type TransposeRule, UndefPrimal } from './transpose';
import { type BatchRule, moveBdim, vmapJaxpr } from './batching';
import { type ArgSig, explainMiss, type FlatCall, flattenCall, isPlain, leafAval, paramNamesOf, type SignatureSpec } from './jitSignature';
import { isJitDisabled } from './disableJit';
import { hoist } from './controlFlow';
import { traceFlat } from './tracing';
import { instantiate } from './zeros';

/**
 * A compiled program: concrete inputs in, concrete outputs out. A compiler that implements
 * donation lists the donated input positions it could not reuse for any output in
 * `unusableDonations`; those inputs stay alive (every other donated input is deleted after
 * the call, as JAX deletes donated arrays).
 */
export type Executable = ((args: Array[]) => Array[]) & { readonly unusableDonations?: readonly number[] };

/** What `jit` needs from a compiler (implemented by @tpukit/xla-lite). */
export interface Compiler {
  readonly name: string;
  /**
   * Compiles a closed jaxpr (constants already hoisted to inputs, so `consts` is empty).
   * `donateLabels` names each donated input for messages; `inShardings` describes each input's
   * sharding (`Sharding.toString()`) for compilers whose caches key on it.
   */
  compile(jaxpr: ClosedJaxpr, opts: CompileRequest): Executable;
  /**
   * Optional: a partitioned (multi-device) path for one jitted function, made on its first call.
   * `jit` keeps the one signature, cache statistics and donation checks, and hands calls whose
   * arguments or options ask for shardings over several devices to it (xla-lite's GSPMD).
   */
  partitioned?(f: (...a: any[]) => unknown, opts: JitOptions, name: string, names: readonly string[]): PartitionedPath;
}

/** A compiler's multi-device path for one jitted function (see `Compiler.partitioned`). */
export interface PartitionedPath {
  /** True when these arguments (or the function's sharding options) need the partitioned program. */
  active(args: unknown[]): boolean;
  /** Runs the call; `key` is the abstract signature; `onCompile` gets each compile's milliseconds. */
  call(args: unknown[], key: string, onCompile: (ms: number) => void): unknown;
  /** The lowered partitioned program for these arguments. */
  lower(args: unknown[]): unknown;
  readonly traceCount: number;
  clear(): void;
}

/** What `jit` passes to `Compiler.compile`. */
export interface CompileRequest {
  name: string;
  donateArgnums: readonly number[];
  donateLabels?: readonly string[];
  inShardings?: readonly string[];
  /**
   * Per flat input and output, the sharding the program runs with (null: unconstrained; an
   * input's own single-device placement, an output's chosen by the compiler), present when
   * one spans several devices. A compiler that partitions (xla-lite) compiles one program per
   * device from it; others may ignore it (the program then runs on one device).
   */
  shardings?: ProgramShardings;
  /** Where compile-time warnings go: the jitted function's `onWarning`, else console.warn. */
  warn?: (message: string) => void;
}

/** The shardings of one program's flat inputs and outputs (see `CompileRequest.shardings`). */
export interface ProgramShardings {
  readonly in: readonly (Sharding | null)[];
  readonly out: readonly (Sharding | null)[];
}

/** Where the jitted call in progress collects compile times and sends warnings. */
interface CallSink {
  readonly compileMs: number[];
  readonly warn: (message: string) => void;
}
let activeSink: CallSink | null = null;
const warn = (message: string): void => (activeSink ? activeSink.warn(message) : console.warn(message));

let compiler: Compiler | null = null;

/** Registers the compiler `jit` uses (null: run op by op). Returns the previous one. */
export function registerCompiler(c: Compiler | null): Compiler | null {
  const prev = compiler;
  compiler = c;
  return prev;
}

export function getCompiler(): Compiler | null {
  return compiler;
}

export interface PjitParams {
  readonly jaxpr: ClosedJaxpr;
  readonly name: string;
  readonly donateArgnums: readonly number[];
  /** For messages: what each donated input is to the user (e.g. `argument 0 (params) leaf 2`). */
  readonly donateLabels?: readonly string[];
  /** Per flat input / output: the sharding the program runs with (absent when nothing is sharded over several devices). */
  readonly inShardings?: readonly (Sharding | null)[];
  readonly outShardings?: readonly (Sharding | null)[];
}

/** Compiled programs per jaxpr, per sharding key ('' when nothing is sharded). */
const compiled = new WeakMap<ClosedJaxpr, Map<string, { compiler: Compiler; exe: Executable }>>();

const multiDevice = (s: Sharding | null | undefined): s is Sharding => s != null && s.deviceSet.length > 1;

// The per-call checks below are loops, not arrow functions passed to some / map: a closure made
// per call loses its optimised code at every major GC (see tree.ts), and these run on every call.

/** Whether some argument spans several devices. */
function anyMultiDevice(args: readonly Array[]): boolean {
  for (let k = 0; k < args.length; k++) if (multiDevice(args[k].sharding)) return true;
  return false;
}

/**
 * The shardings one pjit call runs with: the parameters' where given, else each argument's own
 * when it spans several devices; null when nothing does. All must span the same devices.
 */
function callShardings(args: readonly Array[], p: PjitParams): (ProgramShardings & { key: string }) | null {
  if (p.inShardings === undefined && p.outShardings === undefined && !anyMultiDevice(args)) return null;
  const ins = args.map((a, k) => p.inShardings?.[k] ?? (multiDevice(a.sharding) ? a.sharding : null));
  const outs = p.outShardings ?? p.jaxpr.outAvals.map(() => null);
  if (!ins.some(multiDevice) && !outs.some(multiDevice)) return null;
  sameDevices(`pjit ${p.name}`, [...ins.map((s, k) => ({ s, what: `input ${k}` })), ...outs.map((s, k) => ({ s, what: `output ${k}` }))]);
  const show = (xs: readonly (Sharding | null)[]) => xs.map((s) => (s === null ? '' : String(s))).join(';');
  return { in: ins, out: outs, key: `${show(ins)}->${show(outs)}` };
}

/** One device set for every multi-device sharding of a program, else an error naming two that differ. */
function sameDevices(where: string, items: readonly { s: Sharding | null; what: string }[]): void {
  let first: { ids: string; what: string } | null = null;
  for (const { s, what } of items) {
    if (!multiDevice(s)) continue;
    const ids = s.deviceSet.map((d) => d.id).sort((a, b) => a - b).join(',');
    if (first === null) first = { ids, what };
    else if (ids !== first.ids) throw new Error(`${where}: mismatched meshes: ${first.what} is sharded over devices [${first.ids}] but ${what} over [${ids}]`);
  }
}

export const pjit = definePrimitive<PjitParams>({
  name: 'pjit',
  hlo: 'call',
  abstractEval(avals, { jaxpr, name }) {
    const want = jaxpr.inAvals;
    if (avals.length !== want.length || avals.some((a, i) => a.dtype !== want[i].dtype || a.shape.join() !== want[i].shape.join())) {
      throw new TypeError(`pjit ${name}: arguments ${avals.map(avalStr).join(', ')} do not match the traced signature ${want.map(avalStr).join(', ')}`);
    }
    return jaxpr.outAvals;
  },
  impl() {
    throw new Error('pjit: runs through its eval rule, never as a backend kernel');
  },
});

pjit.rules.eval = (args: Array[], params: PjitParams): Array[] => {
  const { jaxpr, name, donateArgnums, donateLabels } = params;
  let outs: Array[];
  let unusable: readonly number[] = [];
  if (compiler === null) {
    outs = evalJaxpr(jaxpr.jaxpr, jaxpr.consts, args);
    if (donateArgnums.length) unusable = unusableOpByOp(jaxpr, donateArgnums, donateLabels, name);
  } else {
    const shardings = callShardings(args, params);
    let byKey = compiled.get(jaxpr);
    if (!byKey) compiled.set(jaxpr, (byKey = new Map()));
    let hit = byKey.get(shardings?.key ?? '');
    if (!hit || hit.compiler !== compiler) {
      const t0 = performance.now();
      const req: CompileRequest = { name, donateArgnums, donateLabels, inShardings: args.map((a) => String(a.sharding)), warn };
      hit = { compiler, exe: compiler.compile(jaxpr, shardings === null ? req : { ...req, shardings: { in: shardings.in, out: shardings.out } }) };
      activeSink?.compileMs.push(performance.now() - t0);
      byKey.set(shardings?.key ?? '', hit);
    }
    outs = hit.exe(args);
    unusable = hit.exe.unusableDonations ?? [];
  }
  // Donated inputs are deleted (JAX semantics); one returned as an output as is stays alive.
  // (Sets of the outputs and their buffers: a training step donates and returns hundreds of leaves.)
  if (donateArgnums.length === 0) return outs;
  const returned = new Set<Array>(outs);
  const bufs = new Map<unknown, Array>();
  for (const o of outs) bufs.set(o._buf, o);
  const reasons = donationReasons(name, donateArgnums, donateLabels);
  for (let k = 0; k < donateArgnums.length; k++) {
    const d = donateArgnums[k];
    const a = args[d];
    if (unusable.includes(d) || returned.has(a)) continue;
    const o = bufs.get(a._buf);
    const sharesBuffer = o !== undefined && (o._backend === a._backend || sharesBufferOf(outs, a));
    a._markDeleted(reasons[k], !sharesBuffer);
  }
  return outs;
};

/** Per program's donated inputs (its `donateArgnums` list), why each is deleted after a call: made once, not per call. */
const reasonsByProgram = new WeakMap<readonly number[], { name: string; labels: readonly string[] | undefined; reasons: string[] }>();
function donationReasons(name: string, donateArgnums: readonly number[], donateLabels: readonly string[] | undefined): string[] {
  const hit = reasonsByProgram.get(donateArgnums);
  if (hit !== undefined && hit.name === name && hit.labels === donateLabels) return hit.reasons;
  const reasons: string[] = new globalThis.Array(donateArgnums.length);
  for (let k = 0; k < donateArgnums.length; k++) reasons[k] = `it was donated to jit(${name}) as ${donateLabels?.[k] ?? `input ${donateArgnums[k]}`} and its buffer reused; use that call's outputs instead`;
  reasonsByProgram.set(donateArgnums, { name, labels: donateLabels, reasons });
  return reasons;
}

/** Whether some output holds `a`'s buffer on `a`'s backend. */
function sharesBufferOf(outs: readonly Array[], a: Array): boolean {
  for (const x of outs) if (x._buf === a._buf && x._backend === a._backend) return true;
  return false;
}

const warnedOpByOp = new WeakSet<ClosedJaxpr>();
/**
 * Without a compiler, a donated input counts as reused when some output has its shape and
 * dtype (as XLA would alias them); the others stay alive, with JAX's warning once per program.
 */
function unusableOpByOp(jaxpr: ClosedJaxpr, donated: readonly number[], labels: readonly string[] | undefined, name: string): number[] {
  const free = jaxpr.outAvals.map((a) => avalStr(a));
  const bad: number[] = [];
  donated.forEach((d) => {
    const k = free.indexOf(avalStr(jaxpr.inAvals[d]));
    if (k >= 0) free[k] = '';
    else bad.push(d);
  });
  if (bad.length && !warnedOpByOp.has(jaxpr)) {
    warnedOpByOp.add(jaxpr);
    warn(`jit(${name}): Some donated buffers were not usable: ${bad.map((d) => `${labels?.[donated.indexOf(d)] ?? `input ${d}`} ${avalStr(jaxpr.inAvals[d])}`).join(', ')} (no output of the same shape and dtype; they are not deleted)`);
  }
  return bad;
}

/** The params of a program derived from `params` (no donation); `sh` gives its shardings from the parent's. */
const withJaxpr = (params: PjitParams, jaxpr: ClosedJaxpr, suffix: string, sh?: (ins: readonly (Sharding | null)[], outs: readonly (Sharding | null)[]) => [(Sharding | null)[], (Sharding | null)[]]): PjitParams => {
  const p: PjitParams = { jaxpr, name: `${suffix}(${params.name})`, donateArgnums: [] };
  if (!sh || (params.inShardings === undefined && params.outShardings === undefined)) return p;
  const [inShardings, outShardings] = sh(params.inShardings ?? params.jaxpr.inAvals.map(() => null), params.outShardings ?? params.jaxpr.outAvals.map(() => null));
  return { ...p, inShardings, outShardings };
};
const pick = <T>(xs: readonly T[], keep: readonly boolean[], want = true): T[] => xs.filter((_, i) => keep[i] === want);
const nulls = (n: number): null[] => new globalThis.Array(n).fill(null);

pjit.rules.jvp = ((primals, tangents, params: PjitParams) => {
  const nonzero = tangents.map((t) => t !== null);
  const { jaxpr, outNonzero } = jvpJaxpr(params.jaxpr, nonzero, false);
  // A tangent is sharded as its primal, an output tangent as its output.
  const sh = withJaxpr(params, jaxpr, 'jvp', (ins, outs) => [[...ins, ...pick(ins, nonzero)], [...outs, ...pick(outs, outNonzero)]]);
  const outs = bind(pjit, [...primals, ...(tangents.filter((t) => t !== null) as Array[])], sh);
  const n = params.jaxpr.outAvals.length;
  let k = n;
  return [outs.slice(0, n), outNonzero.map((nz) => (nz ? outs[k++] : null))];
}) satisfies JvpRule;

pjit.rules.batch = ((vals, dims, params: PjitParams, size) => {
  const batched = dims.map((d) => d !== null);
  const { jaxpr, outBatched } = vmapJaxpr(params.jaxpr, batched, size, false);
  const outs = bind(pjit, vals.map((v, i) => (dims[i] === null ? v : moveBdim(v, dims[i], 0, size))), withJaxpr(params, jaxpr, 'vmap'));
  return [outs, outBatched.map((b) => (b ? 0 : null))];
}) satisfies BatchRule;

pjit.rules.transpose = ((cts, args, params: PjitParams) => {
  const linear = args.map(isUndef);
  const tj = transposeJaxpr(params.jaxpr, linear);
  const outAvals = params.jaxpr.outAvals;
  // Residuals keep theirs, a cotangent is sharded as its output, an input's cotangent as the input.
  const sh = withJaxpr(params, tj, 'transpose', (ins, outs) => [[...pick(ins, linear, false), ...outs], pick(ins, linear)]);
  const res = bind(pjit, [...(args.filter((a) => !isUndef(a)) as Array[]), ...cts.map((c, i) => instantiate(c, outAvals[i]))], sh);
  let k = 0;
  return args.map((a) => (a instanceof UndefPrimal ? res[k++] : null));
}) satisfies TransposeRule;

pjit.rules.partialEval = ((trace, tracers, params: PjitParams) =>
  partialEvalCall(pjit, trace, tracers, params.jaxpr, (j, part, split, unknowns) =>
    // Known part: known inputs -> known outputs, then residuals (sharded as they come out);
    // unknown part: residuals, then unknown inputs -> unknown outputs.
    withJaxpr(params, j, 'pe', (ins, outs) =>
      part === 'known'
        ? [pick(ins, unknowns, false), [...pick(outs, split.outUnknowns, false), ...nulls(split.numRes)]]
        : [[...nulls(split.numRes), ...pick(ins, unknowns)], pick(outs, split.outUnknowns)],
    ))) satisfies PartialEvalRule;

export interface JitOptions {
  /** Positional arguments treated as compile-time constants (part of the cache key; hashable values). */
  staticArgnums?: number | readonly number[];
  /** Keys of plain-object arguments treated as static (the options-object analogue of keyword arguments). */
  staticArgnames?: string | readonly string[];
  /** Positional arguments whose buffers the call may reuse: they are deleted after the call. */
  donateArgnums?: number | readonly number[];
  /** Warn once after this many recompiles of this function (default 10; Infinity to never warn). */
  warnAfterRecompiles?: number;
  /** Called instead of console.warn for the recompile warning and compile-time warnings. */
  onWarning?: (message: string) => void;
  /** Shardings of the arguments (one per argument, or one for all; null keeps an argument's own). Needs a compiler with a partitioned path. */
  inShardings?: unknown;
  /** Shardings of the outputs (one per output leaf, or one for all). */
  outShardings?: unknown;
}

export interface CompileStats {
  hits: number;
  misses: number;
  /** Misses after the first (each one a recompilation). */
  recompiles: number;
  /** One line per recompile: which argument changed. */
  explanations: string[];
  /** Milliseconds of each compilation made for this function by the registered compiler. */
  compileMs: number[];
}

/** The program `jit` runs for one signature (JAX's `Traced`): what a compiler's `lower` starts from. */
export interface Traced {
  /** Closed-over constants are its leading inputs (its `consts` are empty). */
  readonly jaxpr: ClosedJaxpr;
  readonly name: string;
  /** Flat input positions of donated arguments, and what each is to the user. */
  readonly donateArgnums: readonly number[];
  readonly donateLabels: readonly string[];
  /** The hoisted constants' values (the jaxpr's leading inputs), for exports that embed them. */
  readonly consts: readonly Array[];
}

export interface Jitted<F extends (...args: any[]) => any> {
  (...args: Parameters<F>): ReturnType<F>;
  /** How many times the function was traced (one per new abstract signature). */
  readonly traceCount: number;
  /** The jaxpr for these arguments (traces if needed). */
  lower(...args: Parameters<F>): ClosedJaxpr;
  /** The program and its donations for these arguments (traces if needed). */
  trace(...args: Parameters<F>): Traced;
  /** Cache hits and misses of the calls so far, recompile explanations, compile times. */
  compileStats(): CompileStats;
  clearCache(): void;
  /** The compiler's lowered multi-device program when these arguments need one, else null. */
  lowerPartitioned(...args: Parameters<F>): unknown;
}

/** The sharding a traced leaf carries into a call: a concrete Array's own, or under jvp / linearize its primal's; null unless it spans several devices. */
function carriedSharding(x: unknown): Sharding | null {
  let v = x;
  for (;;) {
    if (v instanceof JVPTracer) v = v.primal;
    else if (v instanceof PETracer && v.known !== null) v = v.known;
    else break;
  }
  if (!(v instanceof Array) || v instanceof Tracer) return null;
  return multiDevice(v.sharding) ? v.sharding : null;
}

const isSharding = (s: unknown): s is Sharding => typeof s === 'object' && s !== null && typeof (s as Sharding).devicesIndicesMap === 'function' && globalThis.Array.isArray((s as Sharding).deviceSet);

const asList = <T>(x: T | readonly T[] | undefined): T[] => (x === undefined ? [] : globalThis.Array.isArray(x) ? [...(x as T[])] : [x as T]);

/**
 * A donated buffer may be handed over once: the same Array donated twice, or donated and also
 * passed (or closed over) elsewhere in the call, is an error (its storage would be overwritten
 * while still read).
 */
function checkDonations(name: string, donated: readonly number[], labels: readonly string[], leaves: readonly Array[], consts: readonly Array[]): void {
  const pos = new Map<Array, number>(); // donated Array -> its index in `donated`
  for (let k = 0; k < donated.length; k++) {
    const a = leaves[donated[k]];
    if (a instanceof Tracer) continue;
    const prev = pos.get(a);
    if (prev !== undefined) throw new Error(`jit(${name}): the same ${avalStr(a.aval)} Array is donated twice (${labels[prev]} and ${labels[k]}); a buffer can be donated once per call`);
    pos.set(a, k);
  }
  if (pos.size === 0) return;
  for (let j = 0; j < leaves.length; j++) {
    const k = pos.get(leaves[j]);
    if (k !== undefined && donated[k] !== j) throw new Error(`jit(${name}): ${labels[k]} is donated but the same Array is also passed as flat input ${j}; pass a copy or do not donate it`);
  }
  for (const c of consts) {
    const k = pos.get(c);
    if (k !== undefined) throw new Error(`jit(${name}): ${labels[k]} is donated but the function also closes over the same Array; pass a copy or do not donate it`);
  }
}

/** An argument deleted by an earlier donation (or disposed) is an error naming the function and the argument. */
function checkLive(call: FlatCall, args: readonly unknown[], fname: string, names: readonly string[]): void {
  let pos = 0;
  for (let i = 0; i < args.length; i++) {
    const n = call.inTree.children[i].numLeaves;
    for (let k = 0; k < n; k++) {
      const l = call.leaves[pos + k];
      if (!(l instanceof Array) || !l.isDeleted()) continue;
      try {
        l._assertLive('use');
      } catch (e) {
        throw new Error(`jit(${fname}): argument ${i}${names[i] ? ` (${names[i]})` : ''}${n > 1 ? ` leaf ${k}` : ''} is deleted. ${(e as Error).message}`);
      }
    }
    pos += n;
  }
}

/** Whether some flat leaf carries a multi-device sharding into the call. */
function anyCarriedSharding(leaves: readonly unknown[]): boolean {
  for (let k = 0; k < leaves.length; k++) if (carriedSharding(leaves[k]) !== null) return true;
  return false;
}

/** The call's flat leaves as Arrays (JS numbers and booleans converted). */
function leafArrays(leaves: readonly unknown[]): Array[] {
  const out: Array[] = new globalThis.Array(leaves.length);
  for (let k = 0; k < leaves.length; k++) {
    const l = leaves[k];
    out[k] = l instanceof Array ? l : asArray(l as number | boolean);
  }
  return out;
}

/** The outputs of a jitted function as flat Arrays, or an error naming the leaf that is not one. */
function outputLeaves(out: unknown, fname: string): [Array[], tree.TreeDef] {
  const [leaves, td] = tree.flatten(out, { isLeaf: (x) => x instanceof Array });
  leaves.forEach((l, k) => {
    if (!(l instanceof Array)) {
      const shown = typeof l === 'number' || typeof l === 'boolean' ? ` (${String(l)})` : '';
      throw new TypeError(`jit(${fname}): output leaf ${k} of ${String(td)} is a ${l === null ? 'null' : typeof l}${shown}, not an Array; a jitted function must return a pytree of Arrays (wrap scalars with np.array)`);
    }
  });
  return [leaves as Array[], td];
}

interface CacheEntry {
  readonly traced: Traced;
  readonly consts: Array[];
  readonly outTree: tree.TreeDef;
  /** Donated flat leaf positions (before the constants) and their labels. */
  readonly donated: number[];
}

/**
 * `jax.jit`: trace once per abstract signature, cache, run as one program through the
 * registered compiler (op by op without one). The one `jit`: `@tpukit/xla-lite`'s `jit` is
 * this function with a `lower()` that returns its `Lowered`.
 */
export function jit<F extends (...args: any[]) => any>(f: F, opts: JitOptions = {}): Jitted<F> {
  const staticNums = asList(opts.staticArgnums);
  const staticNames = asList(opts.staticArgnames);
  const donate = asList(opts.donateArgnums);
  const name = f.name || 'fn';
  const names = paramNamesOf(f);
  const spec: SignatureSpec = { fname: name, staticNums, staticNames, names, last: null };
  const warnAfter = opts.warnAfterRecompiles ?? 10;
  const sink: CallSink = { compileMs: [], warn: opts.onWarning ?? ((m: string) => console.warn(m)) };
  const cache = new Map<string, CacheEntry>();
  const partitionedSeen = new Set<string>();
  const stats = { hits: 0, misses: 0, recompiles: 0, explanations: [] as string[] };
  let last: ArgSig[] | null = null;
  let warned = false;
  let traceCount = 0;

  /** `opts.inShardings` / `outShardings` as given per argument / output leaf (null: none asked for). */
  const optSharding = (o: unknown, k: number, what: string): Sharding | null => {
    const s = globalThis.Array.isArray(o) ? (o[k] ?? null) : (o ?? null);
    if (s !== null && !isSharding(s)) throw new TypeError(`jit(${name}): ${what}[${k}] is ${typeof s === 'object' ? (s as object).constructor?.name ?? 'an object' : typeof s}, not a Sharding (NamedSharding, SingleDeviceSharding) or null`);
    return s as Sharding | null;
  };
  /**
   * For a call whose arguments are tracers (the partitioned path cannot take it): per flat input
   * (constants first) and output, the sharding its program runs with, from the options or the
   * concrete value each leaf carries; null when none spans several devices.
   */
  const tracedShardings = (args: unknown[], call: FlatCall, nConsts: number, nOuts: number): { inShardings: (Sharding | null)[]; outShardings: (Sharding | null)[] } | null => {
    const inOpt = opts.inShardings ?? null;
    const outOpt = opts.outShardings ?? null;
    if (inOpt === null && outOpt === null && !anyCarriedSharding(call.leaves)) return null;
    if (globalThis.Array.isArray(inOpt) && inOpt.length !== args.length) {
      throw new Error(`jit(${name}): inShardings has ${inOpt.length} entries but the call passes ${args.length} positional arguments (give one per argument, null to keep an argument's own)`);
    }
    const ins: (Sharding | null)[] = new globalThis.Array(nConsts).fill(null);
    const what: string[] = ins.map((_, k) => `constant ${k}`);
    let pos = 0;
    args.forEach((_, i) => {
      const n = call.inTree.children[i].numLeaves;
      const want = optSharding(inOpt, i, 'inShardings');
      for (let k = 0; k < n; k++) {
        ins.push(want ?? carriedSharding(call.leaves[pos + k]));
        what.push(`argument ${i}${names[i] ? ` (${names[i]})` : ''}${n > 1 ? ` leaf ${k}` : ''}`);
      }
      pos += n;
    });
    const outs = globalThis.Array.isArray(outOpt) ? outOpt.map((_, k) => optSharding(outOpt, k, 'outShardings')) : new globalThis.Array(nOuts).fill(optSharding(outOpt, 0, 'outShardings'));
    if (outs.length !== nOuts) throw new Error(`jit(${name}): outShardings has ${outs.length} entries but the function returns ${nOuts} arrays`);
    if (!ins.some(multiDevice) && !outs.some(multiDevice)) return null;
    sameDevices(`jit(${name})`, [...ins.map((s, k) => ({ s, what: what[k] })), ...outs.map((s, k) => ({ s, what: `outShardings[${k}]` }))]);
    return { inShardings: ins, outShardings: outs };
  };

  const checkArgnums = (n: number): void => {
    for (const k of [...staticNums, ...donate]) {
      if (!Number.isInteger(k) || k < 0 || k >= n) throw new RangeError(`jit ${name}: argnum ${k} out of range for ${n} arguments`);
    }
  };

  const traceEntry = (args: unknown[], call: FlatCall): CacheEntry => {
    traceCount++;
    let outTree: tree.TreeDef | null = null;
    const closed = traceFlat((...ins) => {
      const rebuilt = tree.unflatten(call.inTree, ins) as unknown[];
      const callArgs = args.map((a, i) => {
        if (staticNums.includes(i)) return a;
        if (staticNames.length && isPlain(a)) {
          const o: Record<string, unknown> = { ...(rebuilt[i] as Record<string, unknown>) };
          for (const k of Object.keys(a)) if (staticNames.includes(k)) o[k] = a[k];
          return o;
        }
        return rebuilt[i];
      });
      let out: unknown;
      try {
        out = f(...callArgs);
      } catch (e) {
        // Name the function in errors raised by the ops inside it.
        if (e instanceof Error && !e.message.startsWith(`jit(${name})`)) e.message = `jit(${name}): while tracing: ${e.message}`;
        throw e;
      }
      const [outs, ot] = outputLeaves(out, name);
      outTree = ot;
      return outs;
    }, call.leaves.map(leafAval), `jit(${name})`);
    // Constants hoisted to leading inputs, so outer transformations see closed-over tracers.
    const [jaxpr, consts] = hoist(closed);
    // Which flat leaves belong to donated arguments.
    const donated: number[] = [];
    const labels: string[] = [];
    let pos = 0;
    args.forEach((_, i) => {
      const n = call.inTree.children[i].numLeaves;
      if (donate.includes(i)) for (let k = 0; k < n; k++) {
        donated.push(pos + k);
        labels.push(n === 1 ? `argument ${i}` : `argument ${i} leaf ${k}`);
      }
      pos += n;
    });
    const traced: Traced = { jaxpr, name, donateArgnums: donated.map((d) => d + consts.length), donateLabels: labels, consts };
    return { traced, consts, outTree: outTree!, donated };
  };

  /** The cache entry for these arguments (traced on a miss); `count` records hits and misses. */
  /** Checks and flattens a call's arguments (deleted donated inputs are an error when `count`). */
  const admit = (args: unknown[], count: boolean): FlatCall => {
    checkArgnums(args.length);
    const call = flattenCall(args, spec);
    if (donate.length && count) checkLive(call, args, name, names);
    return call;
  };

  const prepare = (args: unknown[], count: boolean): { entry: CacheEntry; call: FlatCall } => {
    const call = admit(args, count);
    let entry = cache.get(call.key);
    if (count) record(call, entry !== undefined);
    if (!entry) {
      entry = traceEntry(args, call);
      if (!entry.consts.some((c) => c instanceof Tracer)) cache.set(call.key, entry);
    }
    return { entry, call };
  };

  const record = (call: FlatCall, hit: boolean): void => {
    if (hit) stats.hits++;
    else {
      stats.misses++;
      if (last !== null) {
        stats.recompiles++;
        const why = explainMiss(last, call.sigs, names);
        stats.explanations.push(why);
        if (stats.recompiles >= warnAfter && !warned) {
          warned = true;
          sink.warn(`jit(${name}): recompiled ${stats.recompiles} times; last because ${why}. Fix shapes or mark values static to stop recompiling.`);
        }
      }
    }
    last = call.sigs;
  };

  // The registered compiler's partitioned path, made on first use (and again if the compiler changes).
  let route: { compiler: Compiler; path: PartitionedPath } | null = null;
  const partitioned = (): PartitionedPath | null => {
    if (compiler === null || !compiler.partitioned) return null;
    if (route === null || route.compiler !== compiler) route = { compiler, path: compiler.partitioned(f, opts, name, names) };
    return route.path;
  };
  const routed = (args: unknown[]): PartitionedPath | null => {
    const path = partitioned();
    return path !== null && path.active(args) ? path : null;
  };

  /**
   * `fn(a, b, c)` with this function's sink collecting compile times and warnings. The arguments
   * are passed through (not captured) so that a call makes no closure.
   */
  const withSink = <A, B, C, T>(fn: (a: A, b: B, c: C) => T, a: A, b: B, c: C): T => {
    const prev = activeSink;
    activeSink = sink;
    try {
      return fn(a, b, c);
    } finally {
      activeSink = prev;
    }
  };
  const pushCompileMs = (ms: number): void => {
    sink.compileMs.push(ms);
  };
  const callPartitioned = (path: PartitionedPath, args: unknown[], key: string): unknown => path.call(args, key, pushCompileMs);
  const callTraced = (entry: CacheEntry, leaves: Array[], sharded: ReturnType<typeof tracedShardings>): unknown => {
    const { traced } = entry;
    const params: PjitParams = { jaxpr: traced.jaxpr, name, donateArgnums: traced.donateArgnums, donateLabels: traced.donateLabels, ...sharded };
    const outs = bind(pjit, entry.consts.length === 0 ? leaves : [...entry.consts, ...leaves], params);
    return tree.unflatten(entry.outTree, outs);
  };

  const jitted = ((...args: unknown[]) => {
    if (isJitDisabled()) return f(...args);
    const path = routed(args);
    if (path !== null) {
      const call = admit(args, true);
      record(call, partitionedSeen.has(call.key));
      partitionedSeen.add(call.key);
      return withSink(callPartitioned, path, args, call.key);
    }
    const { entry, call } = prepare(args, true);
    const leaves = leafArrays(call.leaves);
    if (entry.donated.length) checkDonations(name, entry.donated, entry.traced.donateLabels, leaves, entry.consts);
    const sharded = tracedShardings(args, call, entry.consts.length, entry.traced.jaxpr.jaxpr.outs.length);
    return withSink(callTraced, entry, leaves, sharded);
  }) as unknown as Jitted<F>;
  Object.defineProperty(jitted, 'traceCount', { get: () => traceCount + (route?.path.traceCount ?? 0) });
  jitted.trace = ((...args: unknown[]) => prepare(args, false).entry.traced) as Jitted<F>['trace'];
  jitted.lower = ((...args: unknown[]) => prepare(args, false).entry.traced.jaxpr) as Jitted<F>['lower'];
  jitted.compileStats = () => ({ ...stats, explanations: [...stats.explanations], compileMs: [...sink.compileMs] });
  jitted.clearCache = () => {
    cache.clear();
    partitionedSeen.clear();
    route?.path.clear();
  };
  jitted.lowerPartitioned = (...args: unknown[]) => {
    const path = routed(args);
    return path === null ? null : path.lower(args);
  };
  return jitted;
}
