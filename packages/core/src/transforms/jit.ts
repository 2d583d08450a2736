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
import { defaultSharding } from '../device';
import { definePrimitive } from '../primitive';
import { bind } from '../trace';
import * as tree from '../tree';
import { Tracer } from './core';
import { evalJaxpr } from './eval';
import { ClosedJaxpr, Jaxpr } from './jaxpr';
import { jvpJaxpr, type JvpRule } from './jvp';
import { avalStr } from './jaxpr';
import { partialEvalCall, type PartialEvalRule } from './partialEval';
import { isUndef, transposeJaxpr, type TransposeRule, UndefPrimal } from './transpose';
import { type BatchRule, moveBdim, vmapJaxpr } from './batching';
import { avalOf, flattenArgs, traceFlat } from './tracing';
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
  compile(jaxpr: ClosedJaxpr, opts: { name: string; donateArgnums: readonly number[]; donateLabels?: readonly string[]; inShardings?: readonly string[] }): Executable;
}

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
      hit = { compiler, exe: compiler.compile(jaxpr, { name, donateArgnums, donateLabels, inShardings: args.map((a) => String(a.sharding)) }) };
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
    console.warn(`jit(${name}): Some donated buffers were not usable: ${bad.map((d) => `${labels?.[donated.indexOf(d)] ?? `input ${d}`} ${avalStr(jaxpr.inAvals[d])}`).join(', ')} (no output of the same shape and dtype; they are not deleted)`);
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

/** Constants hoisted to leading inputs, so outer transformations see closed-over tracers. */
function hoistConsts(c: ClosedJaxpr): [ClosedJaxpr, Array[]] {
  if (c.consts.length === 0) return [c, []];
  const j = c.jaxpr;
  return [new ClosedJaxpr(new Jaxpr([], [...j.constvars, ...j.invars], j.eqns, j.outs), []), c.consts];
}

export interface JitOptions {
  /** Positional arguments treated as compile-time constants (part of the cache key; any JS value). */
  staticArgnums?: number | readonly number[];
  /** Keys of plain-object arguments treated as static (the options-object analogue of keyword arguments). */
  staticArgnames?: string | readonly string[];
  /** Positional arguments whose buffers the call may reuse: they are deleted after the call. */
  donateArgnums?: number | readonly number[];
}

export interface Jitted<F extends (...args: any[]) => any> {
  (...args: Parameters<F>): ReturnType<F>;
  /** How many times the function was traced (one per new abstract signature). */
  readonly traceCount: number;
  /** The jaxpr for these arguments (traces if needed). */
  lower(...args: Parameters<F>): ClosedJaxpr;
  clearCache(): void;
}

const asList = <T>(x: T | readonly T[] | undefined): T[] => (x === undefined ? [] : globalThis.Array.isArray(x) ? [...(x as T[])] : [x as T]);

function staticKey(v: unknown): string {
  if (v instanceof Array) throw new TypeError('jit: a static argument must be hashable (not an Array); pass the array as a traced argument');
  if (typeof v === 'function') return `fn:${v.name}:${fnId(v)}`;
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}
const fnIds = new WeakMap<object, number>();
let nextFnId = 0;
/**
 * A function's identity for jit caches: a number given to `f` on first sight, the same for
 * that function object for as long as it lives, different for every other function (two
 * closures with the same source are two functions, as JAX hashes functions by identity).
 * Core's `jit` keys static function arguments by it; exported so that a compiler's own cache
 * (xla-lite's `jit`) uses the same ids rather than a second counter.
 */
export function fnId(f: object): number {
  let id = fnIds.get(f);
  if (id === undefined) fnIds.set(f, (id = nextFnId++));
  return id;
}

const DEFAULT_SHARDING = String(defaultSharding);

const isPlain = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && Object.getPrototypeOf(x) === Object.prototype;

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

/** `jax.jit`: trace once per abstract signature, cache, run as one program. */
export function jit<F extends (...args: any[]) => any>(f: F, opts: JitOptions = {}): Jitted<F> {
  const staticNums = asList(opts.staticArgnums);
  const staticNames = asList(opts.staticArgnames);
  const donate = asList(opts.donateArgnums);
  const name = f.name || 'fn';
  const cache = new Map<string, { jaxpr: ClosedJaxpr; consts: Array[]; outTree: tree.TreeDef; donated: number[]; labels: string[] }>();
  let traceCount = 0;

  const prepare = (args: unknown[]) => {
    for (const n of [...staticNums, ...donate]) {
      if (!Number.isInteger(n) || n < 0 || n >= args.length) throw new RangeError(`jit ${name}: argnum ${n} out of range for ${args.length} arguments`);
    }
    const statics: string[] = [];
    const dyn: unknown[] = args.map((a, i) => {
      if (staticNums.includes(i)) {
        statics.push(`${i}=${staticKey(a)}`);
        return null;
      }
      if (staticNames.length && isPlain(a)) {
        const rest: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(a)) {
          if (staticNames.includes(k)) statics.push(`${i}.${k}=${staticKey(v)}`);
          else rest[k] = v;
        }
        return rest;
      }
      return a;
    });
    const [leaves, inTree] = flattenArgs(dyn);
    const avals = leaves.map((l, i) => {
      if (typeof l === 'number' || typeof l === 'boolean') throw new TypeError(`jit ${name}: leaf ${i} is a JS ${typeof l}; pass an Array or mark the argument static`);
      return avalOf(l, `jit ${name}`);
    });
    // Shardings other than the default single-device one are part of the signature (as in JAX).
    const shardings = leaves.map((l) => (l instanceof Array && l._sharding !== defaultSharding && String(l._sharding) !== DEFAULT_SHARDING ? `@${String(l._sharding)}` : '')).join(',');
    const key = `${statics.join(';')}|${inTree}|${avals.map((a) => `${avalStr(a)}${a.weakType ? 'w' : ''}`).join(',')}|${shardings}`;
    let entry = cache.get(key);
    if (!entry) {
      traceCount++;
      let outTree: tree.TreeDef | null = null;
      const closed = traceFlat((...ins) => {
        const rebuilt = tree.unflatten(inTree, ins) as unknown[];
        const call = args.map((a, i) => {
          if (staticNums.includes(i)) return a;
          if (staticNames.length && isPlain(a)) {
            const o: Record<string, unknown> = { ...(rebuilt[i] as Record<string, unknown>) };
            for (const k of Object.keys(a)) if (staticNames.includes(k)) o[k] = a[k];
            return o;
          }
          return rebuilt[i];
        });
        const [outs, ot] = tree.flatten(f(...call), { isLeaf: (x) => x instanceof Array });
        outTree = ot;
        return outs.map((o) => {
          if (!(o instanceof Array)) throw new TypeError(`jit ${name}: the function must return a pytree of Arrays; got a ${typeof o} leaf`);
          return o;
        });
      }, avals, `jit(${name})`);
      const [jaxpr, consts] = hoistConsts(closed);
      // Which flat leaves belong to donated arguments.
      const donated: number[] = [];
      const labels: string[] = [];
      let pos = 0;
      dyn.forEach((d, i) => {
        const n = flattenArgs(d)[0].length;
        if (donate.includes(i)) for (let k = 0; k < n; k++) {
          donated.push(pos + k);
          labels.push(n === 1 ? `argument ${i}` : `argument ${i} leaf ${k}`);
        }
        pos += n;
      });
      entry = { jaxpr, consts, outTree: outTree!, donated, labels };
      if (!consts.some((c) => c instanceof Tracer)) cache.set(key, entry);
    }
    return { entry, leaves: leaves as Array[] };
  };

  const jitted = ((...args: unknown[]) => {
    const { entry, leaves } = prepare(args);
    const nc = entry.consts.length;
    leaves.forEach((l, i) => {
      if (!l.isDeleted()) return;
      try {
        l._assertLive('use');
      } catch (e) {
        throw new Error(`jit(${name}): flat argument ${i}: ${(e as Error).message}`);
      }
    });
    if (entry.donated.length) checkDonations(name, entry.donated, entry.labels, leaves, entry.consts);
    const outs = bind(pjit, [...entry.consts, ...leaves], { jaxpr: entry.jaxpr, name, donateArgnums: entry.donated.map((d) => d + nc), donateLabels: entry.labels } satisfies PjitParams);
    return tree.unflatten(entry.outTree, outs);
  }) as unknown as Jitted<F>;
  Object.defineProperty(jitted, 'traceCount', { get: () => traceCount });
  (jitted as { lower: unknown }).lower = (...args: unknown[]) => prepare(args).entry.jaxpr;
  (jitted as { clearCache: unknown }).clearCache = () => cache.clear();
  return jitted;
}
