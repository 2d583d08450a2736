/**
 * `jit` (jax.jit) and the `Compiler` seam. `jit(f)` traces `f` to a jaxpr once per abstract
 * signature (argument structure, shapes, dtypes, weak types, static argument values, and
 * input shardings other than the default single-device one), caches
 * it, and applies it as one `pjit` primitive whose parameter is the jaxpr. Without a registered
 * compiler `pjit` runs the jaxpr op by op (same results, no fusion); `@tpukit/xla-lite`
 * registers a real compiler behind the same call. Because `pjit` is a primitive with jvp,
 * transpose, batching and partial-eval rules (each transforming its jaxpr), jit composes with
 * every transformation in both directions: `jit(vmap(grad(f)))` and `grad(jit(f))`.
 */
import { Array } from '../array';
import { asArray } from '../convert';
import { definePrimitive } from '../primitive';
import { bind } from '../trace';
import * as tree from '../tree';
import { Tracer } from './core';
import { evalJaxpr } from './eval';
import type { ClosedJaxpr } from './jaxpr';
import { jvpJaxpr, type JvpRule } from './jvp';
import { avalStr } from './jaxpr';
import { partialEvalCall, type PartialEvalRule } from './partialEval';
import { isUndef, transposeJaxpr, type TransposeRule, UndefPrimal } from './transpose';
import { type BatchRule, moveBdim, vmapJaxpr } from './batching';
import { type ArgSig, explainMiss, type FlatCall, flattenCall, isPlain, leafAval, paramNamesOf } from './jitSignature';
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
  /** Where compile-time warnings go: the jitted function's `onWarning`, else console.warn. */
  warn?: (message: string) => void;
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
}

const compiled = new WeakMap<ClosedJaxpr, { compiler: Compiler; exe: Executable }>();

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

pjit.rules.eval = (args: Array[], { jaxpr, name, donateArgnums, donateLabels }: PjitParams): Array[] => {
  let outs: Array[];
  let unusable: readonly number[] = [];
  if (compiler === null) {
    outs = evalJaxpr(jaxpr.jaxpr, jaxpr.consts, args);
    if (donateArgnums.length) unusable = unusableOpByOp(jaxpr, donateArgnums, donateLabels, name);
  } else {
    let hit = compiled.get(jaxpr);
    if (!hit || hit.compiler !== compiler) {
      const t0 = performance.now();
      hit = { compiler, exe: compiler.compile(jaxpr, { name, donateArgnums, donateLabels, inShardings: args.map((a) => String(a.sharding)), warn }) };
      activeSink?.compileMs.push(performance.now() - t0);
      compiled.set(jaxpr, hit);
    }
    outs = hit.exe(args);
    unusable = hit.exe.unusableDonations ?? [];
  }
  // Donated inputs are deleted (JAX semantics); one returned as an output as is stays alive.
  donateArgnums.forEach((d, k) => {
    const a = args[d];
    if (unusable.includes(d) || outs.includes(a)) return;
    const sharesBuffer = outs.some((o) => o._buf === a._buf && o._backend === a._backend);
    a._markDeleted(`it was donated to jit(${name}) as ${donateLabels?.[k] ?? `input ${d}`} and its buffer reused; use that call's outputs instead`, !sharesBuffer);
  });
  return outs;
};

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

const withJaxpr = (params: PjitParams, jaxpr: ClosedJaxpr, suffix: string): PjitParams => ({ jaxpr, name: `${suffix}(${params.name})`, donateArgnums: [] });

pjit.rules.jvp = ((primals, tangents, params: PjitParams) => {
  const nonzero = tangents.map((t) => t !== null);
  const { jaxpr, outNonzero } = jvpJaxpr(params.jaxpr, nonzero, false);
  const outs = bind(pjit, [...primals, ...(tangents.filter((t) => t !== null) as Array[])], withJaxpr(params, jaxpr, 'jvp'));
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
  const res = bind(pjit, [...(args.filter((a) => !isUndef(a)) as Array[]), ...cts.map((c, i) => instantiate(c, outAvals[i]))], withJaxpr(params, tj, 'transpose'));
  let k = 0;
  return args.map((a) => (a instanceof UndefPrimal ? res[k++] : null));
}) satisfies TransposeRule;

pjit.rules.partialEval = ((trace, tracers, params: PjitParams) =>
  partialEvalCall(pjit, trace, tracers, params.jaxpr, (j) => withJaxpr(params, j, 'pe'))) satisfies PartialEvalRule;

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

const asList = <T>(x: T | readonly T[] | undefined): T[] => (x === undefined ? [] : globalThis.Array.isArray(x) ? [...(x as T[])] : [x as T]);

/**
 * A donated buffer may be handed over once: the same Array donated twice, or donated and also
 * passed (or closed over) elsewhere in the call, is an error (its storage would be overwritten
 * while still read).
 */
function checkDonations(name: string, donated: readonly number[], labels: readonly string[], leaves: readonly Array[], consts: readonly Array[]): void {
  const pos = new Map<Array, number>(); // donated Array -> its index in `donated`
  donated.forEach((d, k) => {
    const a = leaves[d];
    if (a instanceof Tracer) return;
    const prev = pos.get(a);
    if (prev !== undefined) throw new Error(`jit(${name}): the same ${avalStr(a.aval)} Array is donated twice (${labels[prev]} and ${labels[k]}); a buffer can be donated once per call`);
    pos.set(a, k);
  });
  if (pos.size === 0) return;
  leaves.forEach((l, j) => {
    const k = pos.get(l);
    if (k !== undefined && donated[k] !== j) throw new Error(`jit(${name}): ${labels[k]} is donated but the same Array is also passed as flat input ${j}; pass a copy or do not donate it`);
  });
  for (const c of consts) {
    const k = pos.get(c);
    if (k !== undefined) throw new Error(`jit(${name}): ${labels[k]} is donated but the function also closes over the same Array; pass a copy or do not donate it`);
  }
}

/** An argument deleted by an earlier donation (or disposed) is an error naming the function and the argument. */
function checkLive(call: FlatCall, args: readonly unknown[], fname: string, names: readonly string[]): void {
  let pos = 0;
  args.forEach((_, i) => {
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
  });
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
  const spec = { fname: name, staticNums, staticNames, names };
  const warnAfter = opts.warnAfterRecompiles ?? 10;
  const sink: CallSink = { compileMs: [], warn: opts.onWarning ?? ((m: string) => console.warn(m)) };
  const cache = new Map<string, CacheEntry>();
  const partitionedSeen = new Set<string>();
  const stats = { hits: 0, misses: 0, recompiles: 0, explanations: [] as string[] };
  let last: ArgSig[] | null = null;
  let warned = false;
  let traceCount = 0;

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
    const traced: Traced = { jaxpr, name, donateArgnums: donated.map((d) => d + consts.length), donateLabels: labels };
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

  /** Runs `fn` with this function's sink collecting compile times and warnings. */
  const withSink = <T>(fn: () => T): T => {
    const prev = activeSink;
    activeSink = sink;
    try {
      return fn();
    } finally {
      activeSink = prev;
    }
  };

  const jitted = ((...args: unknown[]) => {
    if (isJitDisabled()) return f(...args);
    const path = routed(args);
    if (path !== null) {
      const call = admit(args, true);
      record(call, partitionedSeen.has(call.key));
      partitionedSeen.add(call.key);
      return withSink(() => path.call(args, call.key, (ms) => sink.compileMs.push(ms)));
    }
    const { entry, call } = prepare(args, true);
    const leaves = call.leaves.map((l) => (l instanceof Array ? l : asArray(l as number | boolean)));
    if (entry.donated.length) checkDonations(name, entry.donated, entry.traced.donateLabels, leaves, entry.consts);
    const { traced } = entry;
    return withSink(() => {
      const outs = bind(pjit, [...entry.consts, ...leaves], { jaxpr: traced.jaxpr, name, donateArgnums: traced.donateArgnums, donateLabels: traced.donateLabels } satisfies PjitParams);
      return tree.unflatten(entry.outTree, outs);
    });
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
