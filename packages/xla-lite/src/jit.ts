/**
 * xla-lite's `jit`: core's `jit` (trace once per abstract signature, run through the registered
 * compiler) plus what makes compilation visible, as JAX's `explain_cache_misses` and
 * `jax.disable_jit` do. Every call computes the abstract signature per argument (structure,
 * shapes, dtypes, weak types, static values, and shardings other than the default
 * single-device one); a new one is a cache miss, and every miss after the first is a
 * recompile, explained by naming which argument changed and how ("argument 0 (x): sharding
 * changed from SingleDeviceSharding(device=cpu:0) to ..."). After
 * `warnAfterRecompiles` recompiles (default 10) a warning is printed once. `compileStats()`
 * reports hits, misses, recompiles, explanations and compile times. Static arguments must be
 * hashable (primitives, functions, plain JSON-serialisable data), and the function must return
 * a pytree of Arrays; both are checked with errors naming the function and the argument.
 * `.lower(...args)` returns a `Lowered` (HLO text, StableHLO, `compile()`).
 * With `donateArgnums`, an argument deleted by an earlier donation is an error naming the
 * function and the argument before anything runs; compile-time warnings (donations no output
 * can use) go to `onWarning`.
 */
import { Array, fnId, type JitOptions, jit as coreJit, SingleDeviceSharding, tree } from '@tpukit/core';
import { Lowered } from './compiled';
import { compileLog, withWarningHandler } from './compiler';
import { isJitDisabled } from './disable';
import { showValue } from '@tpukit/core';

export interface XlaJitOptions extends JitOptions {
  /** Warn once after this many recompiles of this function (default 10; Infinity to never warn). */
  warnAfterRecompiles?: number;
  /** Called instead of console.warn for the recompile warning and compile-time warnings. */
  onWarning?: (message: string) => void;
}

export interface CompileStats {
  hits: number;
  misses: number;
  /** Misses after the first (each one a recompilation). */
  recompiles: number;
  /** One line per recompile: which argument changed. */
  explanations: string[];
  /** Milliseconds of each compilation made for this function by the xla-lite compiler. */
  compileMs: number[];
}

export interface XlaJitted<F extends (...args: any[]) => any> {
  (...args: Parameters<F>): ReturnType<F>;
  lower(...args: Parameters<F>): Lowered;
  compileStats(): CompileStats;
  readonly traceCount: number;
  clearCache(): void;
}

const asList = <T>(x: T | readonly T[] | undefined): T[] => (x === undefined ? [] : globalThis.Array.isArray(x) ? [...(x as T[])] : [x as T]);
const DTYPE_SHORT: Record<string, string> = { float32: 'f32', bfloat16: 'bf16', float16: 'f16', int32: 'i32', uint32: 'u32', int8: 'i8', uint8: 'u8', bool: 'bool' };

/** An abstract argument (JAX's ShapeDtypeStruct) as `lower` accepts it. */
const isStruct = (x: unknown): x is { shape: unknown[]; dtype: string; weakType?: boolean } =>
  typeof x === 'object' && x !== null && !(x instanceof Array) && globalThis.Array.isArray((x as { shape?: unknown }).shape) && typeof (x as { dtype?: unknown }).dtype === 'string';
const isArgLeaf = (x: unknown): boolean => x instanceof Array || isStruct(x);

function describeLeaf(l: unknown): string {
  if (l instanceof Array) return `${DTYPE_SHORT[l.dtype] ?? l.dtype}[${l.shape.join(',')}]${l.aval.weakType ? '{weak}' : ''}`;
  if (isStruct(l)) return `${DTYPE_SHORT[l.dtype] ?? l.dtype}[${l.shape.join(',')}]${l.weakType ? '{weak}' : ''}`;
  if (ArrayBuffer.isView(l)) return `${l.constructor.name}(${(l as unknown as ArrayLike<number>).length})`;
  return typeof l === 'number' ? 'number' : typeof l === 'boolean' ? 'boolean' : typeof l;
}

/**
 * A traced argument's leaf must be an Array or a `{shape, dtype}` struct with concrete sizes:
 * numbers, strings and symbolic (shape-polymorphic) dimensions are errors naming the argument.
 */
function checkLeaf(l: unknown, where: string, i: number, fname: string): void {
  if (l instanceof Array) return;
  if (isStruct(l)) {
    const k = l.shape.findIndex((d) => !(Number.isInteger(d) && (d as number) >= 0));
    if (k >= 0) {
      throw new TypeError(
        `jit(${fname}): ${where} has shape [${l.shape.join(',')}] whose dimension ${k} is ${showValue(l.shape[k])}; xla-lite compiles static shapes only (no shape polymorphism or symbolic dimensions): pass concrete non-negative sizes (jit retraces once per distinct shape)`,
      );
    }
    return;
  }
  if (typeof l === 'number' || typeof l === 'boolean' || typeof l === 'bigint') {
    throw new TypeError(`jit(${fname}): ${where} is a JS ${typeof l} (${String(l)}), not an Array; pass np.array(${String(l)}) to trace it, or mark it static (staticArgnums: [${i}]) to compile one program per value`);
  }
  throw new TypeError(`jit(${fname}): ${where} is ${l === null ? 'null' : `a ${typeof l === 'object' ? ((l as object).constructor?.name ?? 'object') : typeof l}`}, not an Array; traced arguments are pytrees of Arrays (mark other values static with staticArgnums)`);
}

const isPlain = (x: unknown): boolean => typeof x === 'object' && x !== null && (Object.getPrototypeOf(x) === Object.prototype || Object.getPrototypeOf(x) === null);

/** A stable key for a static value, or an error naming what is not hashable. */
function hashStatic(v: unknown, where: string, fname: string): string {
  const bad = (what: string): never => {
    throw new TypeError(
      `jit(${fname}): static ${where} is not hashable: ${what}; pass a number, string, boolean, null, a function, or plain arrays/objects of those (Arrays must be traced arguments)`,
    );
  };
  const seen = new Set<unknown>();
  const walk = (x: unknown): string => {
    if (x === null || x === undefined || typeof x === 'number' || typeof x === 'string' || typeof x === 'boolean' || typeof x === 'bigint') return `${typeof x}:${String(x)}`;
    // Functions are static by identity, with core's ids (as core's jit keys them), named for messages.
    if (typeof x === 'function') return `fn:${x.name}#${fnId(x)}`;
    if (typeof x === 'symbol') return `sym:${String(x)}`;
    if (x instanceof Array) return bad(`an Array ${describeLeaf(x)}`);
    if (seen.has(x)) return bad('a cyclic object');
    seen.add(x);
    if (globalThis.Array.isArray(x)) return `[${x.map(walk).join(',')}]`;
    if (isPlain(x)) return `{${Object.keys(x as object).sort().map((k) => `${k}:${walk((x as Record<string, unknown>)[k])}`).join(',')}}`;
    return bad(`a ${(x as object).constructor?.name ?? 'object'} (mutable objects have no value identity)`);
  };
  return walk(v);
}

const DEFAULT_SHARDING = String(new SingleDeviceSharding());

/** A leaf's sharding for the signature: '' for the default single-device one (the common case, checked first by identity). */
function shardingOf(l: unknown): string {
  if (!(l instanceof Array)) return '';
  const s = l._sharding;
  if (s === defaultShardingObj) return '';
  const str = String(s);
  if (str !== DEFAULT_SHARDING) return str;
  defaultShardingObj = s; // core's shared default instance: later checks are by identity
  return '';
}
let defaultShardingObj: unknown = null;

/** One argument's part of the abstract signature: its types and (when not default) its leaves' shardings. */
interface ArgSig {
  readonly types: string;
  /** Per Array leaf, '' for the default sharding; empty when every leaf has the default. */
  readonly shardings: readonly string[];
}

const sigKey = (s: ArgSig): string => (s.shardings.length ? `${s.types} @${s.shardings.join(',')}` : s.types);

function leafShardings(leaves: unknown[]): string[] {
  const sh = leaves.filter((l) => l instanceof Array).map(shardingOf);
  return sh.some((x) => x !== '') ? sh : [];
}

/** Per-argument descriptions of the abstract signature (what the cache is keyed by). */
function signature(args: unknown[], staticNums: number[], staticNames: string[], fname: string, names: string[] = []): ArgSig[] {
  return args.map((a, i): ArgSig => {
    const argName = `argument ${i}${names[i] ? ` (${names[i]})` : ''}`;
    if (staticNums.includes(i)) return { types: `static ${hashStatic(a, `argument ${i}`, fname)}`, shardings: [] };
    if (staticNames.length && isPlain(a)) {
      const parts: string[] = [];
      const all: unknown[] = [];
      for (const [k, v] of Object.entries(a as Record<string, unknown>)) {
        if (staticNames.includes(k)) parts.push(`${k}=static ${hashStatic(v, `argument ${i}.${k}`, fname)}`);
        else {
          const leaves = tree.flatten(v, { isLeaf: isArgLeaf })[0];
          leaves.forEach((l, n) => checkLeaf(l, `${argName} key ${showValue(k)}${leaves.length > 1 ? ` leaf ${n}` : ''}`, i, fname));
          all.push(...leaves);
          parts.push(`${k}=${leaves.map(describeLeaf).join(',')}`);
        }
      }
      return { types: `{${parts.join('; ')}}`, shardings: leafShardings(all) };
    }
    const [leaves, td] = tree.flatten(a, { isLeaf: isArgLeaf });
    leaves.forEach((l, k) => checkLeaf(l, `${argName}${leaves.length > 1 || leaves[0] !== a ? ` leaf ${k}` : ''}`, i, fname));
    return { types: leaves.length === 1 && leaves[0] === a ? describeLeaf(a) : `${String(td)} ${leaves.map(describeLeaf).join(',')}`, shardings: leafShardings(leaves) };
  });
}

function explain(prev: ArgSig[], next: ArgSig[], paramNames: string[]): string {
  const diffs: string[] = [];
  for (let i = 0; i < Math.max(prev.length, next.length); i++) {
    const p = prev[i];
    const n = next[i];
    const arg = `argument ${i}${paramNames[i] ? ` (${paramNames[i]})` : ''}`;
    if (p?.types !== n?.types) diffs.push(`${arg}: ${p?.types ?? '<absent>'} -> ${n?.types ?? '<absent>'}`);
    else if (sigKey(p) !== sigKey(n)) {
      const count = Math.max(p.shardings.length, n.shardings.length);
      for (let k = 0; k < count; k++) {
        const from = p.shardings[k] || DEFAULT_SHARDING;
        const to = n.shardings[k] || DEFAULT_SHARDING;
        if (from !== to) diffs.push(`${arg}${count > 1 ? ` leaf ${k}` : ''}: sharding changed from ${from} to ${to}`);
      }
    }
  }
  return diffs.length ? diffs.join('; ') : 'same signature as the previous call (cache was cleared)';
}

/** Arguments deleted by an earlier donation (or disposed) are an error naming the function and argument. */
function checkLive(args: unknown[], staticNums: number[], fname: string, names: string[]): void {
  args.forEach((a, i) => {
    if (staticNums.includes(i)) return;
    const leaves = tree.flatten(a, { isLeaf: (x) => x instanceof Array })[0];
    leaves.forEach((l, k) => {
      if (!(l instanceof Array) || !l.isDeleted()) return;
      try {
        l._assertLive('use');
      } catch (e) {
        throw new Error(`jit(${fname}): argument ${i}${names[i] ? ` (${names[i]})` : ''}${leaves.length > 1 ? ` leaf ${k}` : ''} is deleted. ${(e as Error).message}`);
      }
    });
  });
}

/** Parameter names of a function, best effort, for messages. */
function paramNamesOf(f: (...a: any[]) => unknown): string[] {
  const m = /^[^(]*\(([^)]*)\)/.exec(Function.prototype.toString.call(f));
  if (!m) return [];
  return m[1].split(',').map((s) => s.trim().replace(/[=:].*$/, '').replace(/^\.\.\./, '').trim());
}

function checkOutputs(out: unknown, fname: string): void {
  const [leaves, td] = tree.flatten(out, { isLeaf: (x) => x instanceof Array });
  leaves.forEach((l, k) => {
    if (!(l instanceof Array)) {
      const shown = typeof l === 'number' || typeof l === 'boolean' ? ` (${String(l)})` : '';
      throw new TypeError(`jit(${fname}): output leaf ${k} of ${String(td)} is a ${l === null ? 'null' : typeof l}${shown}, not an Array; a jitted function must return a pytree of Arrays (wrap scalars with np.array)`);
    }
  });
}

export function jit<F extends (...args: any[]) => any>(f: F, opts: XlaJitOptions = {}): XlaJitted<F> {
  const fname = f.name || 'fn';
  const staticNums = asList(opts.staticArgnums);
  const staticNames = asList(opts.staticArgnames);
  const names = paramNamesOf(f);
  const checked = {
    [fname]: (...args: unknown[]) => {
      let out: unknown;
      try {
        out = f(...args);
      } catch (e) {
        // Runs only while tracing: name the function in errors raised by the ops inside it.
        if (e instanceof Error && !e.message.startsWith(`jit(${fname})`)) e.message = `jit(${fname}): while tracing: ${e.message}`;
        throw e;
      }
      checkOutputs(out, fname);
      return out;
    },
  }[fname] as unknown as F;
  const inner = coreJit(checked, opts);
  const seen = new Set<string>();
  let last: ArgSig[] | null = null;
  const donating = asList(opts.donateArgnums).length > 0;
  let warned = false;
  const warnAfter = opts.warnAfterRecompiles ?? 10;
  const stats: CompileStats = { hits: 0, misses: 0, recompiles: 0, explanations: [], compileMs: [] };

  const record = (args: unknown[]): void => {
    const sig = signature(args, staticNums, staticNames, fname, names);
    const key = sig.map(sigKey).join('|');
    if (seen.has(key)) stats.hits++;
    else {
      stats.misses++;
      if (last !== null) {
        stats.recompiles++;
        const why = explain(last, sig, names);
        stats.explanations.push(why);
        if (stats.recompiles >= warnAfter && !warned) {
          warned = true;
          const msg = `jit(${fname}): recompiled ${stats.recompiles} times; last because ${why}. Fix shapes or mark values static to stop recompiling.`;
          (opts.onWarning ?? console.warn)(msg);
        }
      }
      seen.add(key);
    }
    last = sig;
  };

  const jitted = ((...args: unknown[]) => {
    if (isJitDisabled()) return f(...args);
    if (donating) checkLive(args, staticNums, fname, names);
    record(args);
    const before = compileLog().length;
    const out = withWarningHandler(opts.onWarning, () => inner(...(args as Parameters<F>)));
    for (const r of compileLog().slice(before)) stats.compileMs.push(r.ms);
    return out;
  }) as unknown as XlaJitted<F>;
  jitted.lower = (...args: unknown[]) => {
    signature(args, staticNums, staticNames, fname, names);
    const closed = inner.lower(...(args as Parameters<F>));
    // Flat input positions of donated arguments (closed-over constants lead the inputs).
    const donate = asList(opts.donateArgnums);
    const counts = args.map((a, i) => (staticNums.includes(i) ? 0 : tree.flatten(a, { isLeaf: isArgLeaf })[0].length));
    const nc = closed.inAvals.length - counts.reduce((p, q) => p + q, 0);
    const donated: number[] = [];
    const labels: string[] = [];
    let pos = nc;
    counts.forEach((n, i) => {
      if (donate.includes(i)) for (let k = 0; k < n; k++) {
        donated.push(pos + k);
        labels.push(`argument ${i}${names[i] ? ` (${names[i]})` : ''}${n > 1 ? ` leaf ${k}` : ''}`);
      }
      pos += n;
    });
    return new Lowered(closed, fname, donated, labels);
  };
  jitted.compileStats = () => ({ ...stats, explanations: [...stats.explanations], compileMs: [...stats.compileMs] });
  Object.defineProperty(jitted, 'traceCount', { get: () => inner.traceCount });
  jitted.clearCache = () => {
    inner.clearCache();
    seen.clear();
  };
  return jitted;
}

/** `lower(f, opts)(...args)`: the `Lowered` of `f` for these arguments (same as `jit(f).lower(...)`). */
export function lower<F extends (...args: any[]) => any>(f: F, opts: XlaJitOptions = {}): (...args: Parameters<F>) => Lowered {
  return (...args) => jit(f, opts).lower(...args);
}
