/**
 * The abstract signature `jit` caches by (one flatten of the arguments per call; a call repeating the last one's structure and leaf types reuses its signature): per argument,
 * its structure, shapes, dtypes and weak types, its static values, and the shardings of its
 * leaves other than the default single-device one. JS numbers and booleans are traced leaves
 * typed as JAX types Python scalars (`scalarType`: integers weak int32, other numbers weak
 * float32, booleans bool), so `step(params, 0.1)` and `step(params, 0.2)` share one entry.
 * Per-argument descriptions also explain a recompile ("argument 0 (x): f32[2] -> f32[4]").
 */
import { Array } from '../array';
import { showValue } from '../describe';
import { defaultSharding } from '../device';
import { type DType, scalarType } from '../dtype';
import type { ShapedArray } from '../primitive';
import { sameAval } from '../aval';
import * as tree from '../tree';
import { isShapeDtypeStruct } from './tracing';

const DTYPE_SHORT: Record<string, string> = { float32: 'f32', bfloat16: 'bf16', float16: 'f16', int32: 'i32', uint32: 'u32', int8: 'i8', uint8: 'u8', bool: 'bool' };

/** A traced leaf: an Array, a `{shape, dtype}` struct (for `lower`/`trace`), or a JS number / boolean. */
export const isArgLeaf = (x: unknown): boolean => x instanceof Array || isShapeDtypeStruct(x);

const typeStr = (dtype: string, shape: readonly unknown[], weak: boolean | undefined): string => `${DTYPE_SHORT[dtype] ?? dtype}[${shape.join(',')}]${weak ? '{weak}' : ''}`;

/** How a leaf reads in a signature and in messages. */
export function describeLeaf(l: unknown): string {
  if (l instanceof Array) return typeStr(l.dtype, l.shape, l.weakType);
  if (isShapeDtypeStruct(l)) return typeStr(l.dtype, l.shape, l.weakType);
  if (typeof l === 'number' || typeof l === 'boolean') {
    const t = scalarType(l);
    return typeStr(t.dtype, [], t.weak);
  }
  if (ArrayBuffer.isView(l)) return `${l.constructor.name}(${(l as unknown as ArrayLike<number>).length})`;
  return typeof l;
}

/** The abstract value of a checked traced leaf. */
export function leafAval(l: unknown): ShapedArray {
  if (l instanceof Array) return l.aval;
  if (typeof l === 'number' || typeof l === 'boolean') {
    const t = scalarType(l);
    return { shape: [], dtype: t.dtype, weakType: t.weak };
  }
  const s = l as { shape: number[]; dtype: DType; weakType?: boolean };
  return { shape: [...s.shape], dtype: s.dtype, weakType: s.weakType ?? false };
}

/**
 * A traced argument's leaf must be an Array, a JS number or boolean, or a `{shape, dtype}`
 * struct with concrete sizes: anything else (strings, bigints, null, symbolic dimensions) is an
 * error naming the function and the argument.
 */
function checkLeaf(l: unknown, where: string, i: number, fname: string): void {
  if (l instanceof Array || typeof l === 'boolean') return;
  if (typeof l === 'number') {
    if (Number.isInteger(l) && (l < -(2 ** 31) || l >= 2 ** 31)) {
      throw new RangeError(`jit(${fname}): ${where} is the JS integer ${l}, outside int32 (a traced integer is a weak int32 scalar); pass np.array(${l}, 'float32') or mark it static (staticArgnums: [${i}])`);
    }
    return;
  }
  if (isShapeDtypeStruct(l)) {
    const k = l.shape.findIndex((d) => !(Number.isInteger(d) && (d as number) >= 0));
    if (k >= 0) {
      throw new TypeError(
        `jit(${fname}): ${where} has shape [${l.shape.join(',')}] whose dimension ${k} is ${showValue(l.shape[k])}; xla-lite compiles static shapes only, as does jit without it (no shape polymorphism or symbolic dimensions): pass concrete non-negative sizes (jit retraces once per distinct shape)`,
      );
    }
    return;
  }
  if (typeof l === 'bigint') {
    throw new TypeError(`jit(${fname}): ${where} is a JS bigint (${String(l)}), not an Array; pass np.array(${Number(l)}, 'int32') to trace it, or mark it static (staticArgnums: [${i}])`);
  }
  throw new TypeError(`jit(${fname}): ${where} is ${l === null ? 'null' : `a ${typeof l === 'object' ? ((l as object).constructor?.name ?? 'object') : typeof l}`}, not an Array; traced arguments are pytrees of Arrays and JS numbers (mark other values static with staticArgnums)`);
}

export const isPlain = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && (Object.getPrototypeOf(x) === Object.prototype || Object.getPrototypeOf(x) === null);

const fnIds = new WeakMap<object, number>();
let nextFnId = 0;
/**
 * A function's identity for jit caches: a number given to `f` on first sight, the same for
 * that function object for as long as it lives, different for every other function (two
 * closures with the same source are two functions, as JAX hashes functions by identity).
 */
export function fnId(f: object): number {
  let id = fnIds.get(f);
  if (id === undefined) fnIds.set(f, (id = nextFnId++));
  return id;
}

/** A stable key for a static value, or an error naming what is not hashable. */
function hashStatic(v: unknown, where: string, fname: string): string {
  return valueKey(v, (what: string): never => {
    throw new TypeError(
      `jit(${fname}): static ${where} is not hashable: ${what}; pass a number, string, boolean, null, a function, or plain arrays/objects of those (Arrays must be traced arguments)`,
    );
  });
}

/**
 * A pytree node's aux data (or a Map key) in jit's cache key: by value where `hashStatic` can
 * hash it, else by identity (Python's default `__hash__`/`__eq__` for an object without them).
 */
export function hashAux(v: unknown): string {
  return valueKey(v, null);
}

/** `hashStatic`'s walk; what has no value key is `opaque`'s error, or by identity when `opaque` is null. */
function valueKey(v: unknown, opaque: ((what: string) => never) | null): string {
  const seen = new Set<unknown>();
  const walk = (x: unknown): string => {
    if (typeof x === 'number' && Object.is(x, -0)) return 'number:-0';
    if (x === null || x === undefined || typeof x === 'number' || typeof x === 'string' || typeof x === 'boolean' || typeof x === 'bigint') return `${typeof x}:${String(x)}`;
    // Functions are static by identity, named for messages.
    if (typeof x === 'function') return `fn:${x.name}#${fnId(x)}`;
    if (typeof x === 'symbol') return `sym:${String(x)}`;
    if (x instanceof Array) return opaque ? opaque(`an Array ${describeLeaf(x)}`) : `obj#${fnId(x)}`;
    if (seen.has(x)) return opaque ? opaque('a cyclic object') : `obj#${fnId(x as object)}`;
    seen.add(x);
    if (globalThis.Array.isArray(x)) return `[${x.map(walk).join(',')}]`;
    if (isPlain(x)) return `{${Object.keys(x).sort().map((k) => `${k}:${walk(x[k])}`).join(',')}}`;
    return opaque ? opaque(`a ${(x as object).constructor?.name ?? 'object'} (mutable objects have no value identity)`) : `obj#${fnId(x as object)}`;
  };
  return walk(v);
}

/** The default single-device sharding as messages print it. */
export const DEFAULT_SHARDING = String(defaultSharding);

/** A leaf's sharding for the signature: '' for the default single-device one (checked by identity first). */
function shardingOf(l: Array): string {
  const s = l._sharding;
  if (s === defaultSharding) return '';
  const str = String(s);
  return str === DEFAULT_SHARDING ? '' : str;
}

/** Per Array leaf its sharding ('' for the default), or [] when every leaf has the default. */
function leafShardings(leaves: readonly unknown[]): string[] {
  const sh: string[] = [];
  let any = false;
  for (let k = 0; k < leaves.length; k++) {
    const l = leaves[k];
    if (!(l instanceof Array)) continue;
    const x = shardingOf(l);
    sh.push(x);
    any ||= x !== '';
  }
  return any ? sh : [];
}

/** One argument's part of the abstract signature: its types and (when not default) its leaves' shardings. */
export interface ArgSig {
  readonly types: string;
  /** Per Array leaf, '' for the default sharding; empty when every leaf has the default. */
  readonly shardings: readonly string[];
}

const sigKey = (s: ArgSig): string => (s.shardings.length ? `${s.types} @${s.shardings.join(',')}` : s.types);

/** The flattened call: its dynamic leaves, their structure, per-argument signatures, and the cache key. */
export interface FlatCall {
  /** The arguments with static ones replaced (static argnums by null, static argnames removed). */
  readonly leaves: unknown[];
  readonly inTree: tree.TreeDef;
  readonly sigs: ArgSig[];
  readonly key: string;
}

export interface SignatureSpec {
  readonly fname: string;
  readonly staticNums: readonly number[];
  readonly staticNames: readonly string[];
  /** Parameter names of the function, for messages. */
  readonly names: readonly string[];
  /** The last call's signature, reused while the next call repeats it (`flattenCall`); set by `flattenCall`. */
  last?: LastCall | null;
}

/**
 * A call whose leaves were all Arrays with the default sharding and no static arguments: its
 * structure, each leaf's abstract value (no Array held: their buffers stay collectable), and
 * the signature built from them.
 */
interface LastCall {
  readonly inTree: tree.TreeDef;
  readonly avals: readonly ShapedArray[];
  readonly sigs: ArgSig[];
  readonly key: string;
}

/** Whether `leaf` is an Array with the default sharding (the leaves a reused signature covers). */
const isPlainLeaf = (leaf: unknown): leaf is Array => leaf instanceof Array && leaf._sharding === defaultSharding;

/** Whether `leaves` are Arrays with the default sharding and `last`'s abstract values, leaf by leaf. */
function sameLeaves(leaves: readonly unknown[], last: LastCall): boolean {
  const avals = last.avals;
  if (leaves.length !== avals.length) return false;
  for (let k = 0; k < leaves.length; k++) {
    const l = leaves[k];
    if (!isPlainLeaf(l) || !sameAval(l.aval, avals[k])) return false;
  }
  return true;
}

/** The call's abstract values when every leaf is an Array with the default sharding (what `sameLeaves` compares), else null. */
function plainAvals(leaves: readonly unknown[]): ShapedArray[] | null {
  const avals: ShapedArray[] = new globalThis.Array(leaves.length);
  for (let k = 0; k < leaves.length; k++) {
    const l = leaves[k];
    if (!isPlainLeaf(l)) return null;
    avals[k] = l.aval;
  }
  return avals;
}

/** The flatten options of a call's arguments (one object: no closure made per call). */
const ARG_LEAVES: tree.FlattenOptions = { isLeaf: isArgLeaf };

/**
 * One flatten of `args` and its abstract signature (see the file comment). Plain loops rather
 * than arrow functions per call: those lose their optimised code at every major GC (see tree.ts).
 */
export function flattenCall(args: readonly unknown[], spec: SignatureSpec): FlatCall {
  const { fname, staticNums, staticNames, names } = spec;
  // A call repeating the last one's structure and leaf types (a training loop) reuses its
  // signature: no strings built per leaf, no long key hashed anew (the cache's Map holds it).
  // Without static arguments the flatten of `args` is the one the signature below needs.
  const plain = staticNums.length === 0 && staticNames.length === 0;
  const flat = plain ? tree.flatten(args, ARG_LEAVES) : null;
  const last = spec.last;
  if (flat !== null && last != null && flat[1].equals(last.inTree) && sameLeaves(flat[0], last)) return { leaves: flat[0], inTree: flat[1], sigs: last.sigs, key: last.key };
  // Static arguments and static fields split off (without any, `flat` is already the signature's flatten).
  const staticParts: string[][] = new globalThis.Array(args.length);
  const dyn: unknown[] = new globalThis.Array(args.length);
  for (let i = 0; flat === null && i < args.length; i++) {
    const a = args[i];
    const parts: string[] = (staticParts[i] = []);
    if (staticNums.includes(i)) {
      parts.push(`static ${hashStatic(a, `argument ${i}`, fname)}`);
      dyn[i] = null;
    } else if (staticNames.length && isPlain(a)) {
      const rest: Record<string, unknown> = {};
      for (const k of Object.keys(a).sort()) {
        if (staticNames.includes(k)) parts.push(`${k}=static ${hashStatic(a[k], `argument ${i}.${k}`, fname)}`);
        else rest[k] = a[k];
      }
      dyn[i] = rest;
    } else dyn[i] = a;
  }
  const [leaves, inTree] = flat ?? tree.flatten(dyn, ARG_LEAVES);
  let pos = 0;
  const sigs: ArgSig[] = new globalThis.Array(args.length);
  let key = '';
  for (let i = 0; i < args.length; i++) {
    const td = inTree.children[i];
    const mine = leaves.slice(pos, pos + td.numLeaves);
    pos += td.numLeaves;
    if (staticNums.includes(i)) sigs[i] = { types: staticParts[i][0], shardings: [] };
    else {
      const argName = `argument ${i}${names[i] ? ` (${names[i]})` : ''}`;
      const whole = td.isLeaf;
      // (An Array leaf always passes: the message is built only for the others.)
      for (let k = 0; k < mine.length; k++) if (!(mine[k] instanceof Array)) checkLeaf(mine[k], `${argName}${whole ? '' : ` leaf ${k}`}`, i, fname);
      let types = whole ? describeLeaf(args[i]) : `${td.keyText(hashAux)} ${mine.map(describeLeaf).join(',')}`;
      if (staticParts[i]?.length) types = `{${staticParts[i].join('; ')}} ${types}`;
      sigs[i] = { types, shardings: leafShardings(mine) };
    }
    key += `${i > 0 ? '|' : ''}${sigKey(sigs[i])}`;
  }
  if (plain) {
    // Only lists, plain objects and null/undefined: `TreeDef.equals` compares their aux data
    // exactly as the key does (a registered node's aux or a Map key is compared by value there
    // but keyed by `hashAux`, and could hold Arrays the reused signature would keep alive).
    const avals = inTree.builtinsOnly ? plainAvals(leaves) : null;
    spec.last = avals === null ? null : { inTree, avals, sigs, key };
  }
  return { leaves, inTree, sigs, key };
}

/** Why a new signature missed the cache: which argument changed and how. */
export function explainMiss(prev: readonly ArgSig[], next: readonly ArgSig[], names: readonly string[]): string {
  const diffs: string[] = [];
  for (let i = 0; i < Math.max(prev.length, next.length); i++) {
    const p = prev[i];
    const n = next[i];
    const arg = `argument ${i}${names[i] ? ` (${names[i]})` : ''}`;
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

/** Parameter names of a function, best effort, for messages. */
export function paramNamesOf(f: (...a: any[]) => unknown): string[] {
  const src = Function.prototype.toString.call(f);
  // A one-parameter arrow without parentheses (`t => ...`, as esbuild emits `(t: T) => ...`).
  const bare = /^\s*(?:async\s+)?([A-Za-z_$][\w$]*)\s*=>/.exec(src);
  if (bare) return [bare[1]];
  const m = /^[^(]*\(([^)]*)\)/.exec(src);
  if (!m) return [];
  return m[1].split(',').map((s) => s.trim().replace(/[=:].*$/, '').replace(/^\.\.\./, '').trim());
}
