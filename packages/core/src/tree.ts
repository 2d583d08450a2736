/**
 * Pytrees (jax.tree_util): nested containers whose leaves are arrays or anything else.
 * Containers are plain objects (keys visited in sorted order, as JAX does for dicts), JS arrays
 * (lists and tuples), Maps (insertion order, like an OrderedDict), and classes registered with
 * `registerNode`. `null` and `undefined` are empty nodes with no leaves (like None). Flattening
 * is stable across runs and processes, so a flat list of leaves can be saved and matched later.
 */
import { showValue } from './describe';

export type PyTree<T = unknown> = T | null | undefined | PyTree<T>[] | { [k: string]: PyTree<T> } | Map<unknown, PyTree<T>>;

/** One step of a path from the root to a leaf. */
export type KeyEntry =
  | { readonly kind: 'dict'; readonly key: string }
  | { readonly kind: 'seq'; readonly idx: number }
  | { readonly kind: 'map'; readonly key: unknown }
  | { readonly kind: 'attr'; readonly name: string };
export type KeyPath = readonly KeyEntry[];

interface NodeKind {
  readonly name: string;
  /** Children and the auxiliary data needed to rebuild the node; their keys when `withKeys` (else null: nothing made per child). */
  flatten(node: any, withKeys: boolean): { children: unknown[]; keys: KeyEntry[] | null; aux: unknown };
  unflatten(aux: unknown, children: unknown[]): unknown;
}

const registered = new Map<Function, NodeKind>();

// The built-in kinds and the walks below loop instead of passing arrow functions to map /
// forEach / reduce: a closure made per call loses its optimised code at every major GC (V8 holds
// it weakly once no closure instance is alive), and jit flattens its arguments on every call,
// so each major GC used to send these closures back to TurboFan (BENCHMARKS.md, bgc).
const listKind: NodeKind = {
  name: 'list',
  flatten: (n: unknown[], withKeys: boolean) => {
    if (!withKeys) return { children: n, keys: null, aux: n.length };
    const keys: KeyEntry[] = new globalThis.Array(n.length);
    for (let idx = 0; idx < n.length; idx++) keys[idx] = { kind: 'seq', idx };
    return { children: n, keys, aux: n.length };
  },
  unflatten: (_aux, ch) => ch,
};
const dictKind: NodeKind = {
  name: 'dict',
  flatten: (n: Record<string, unknown>, withKeys: boolean) => {
    const ks = Object.keys(n).sort();
    const children: unknown[] = new globalThis.Array(ks.length);
    const keys: KeyEntry[] | null = withKeys ? new globalThis.Array(ks.length) : null;
    for (let i = 0; i < ks.length; i++) {
      children[i] = n[ks[i]];
      if (keys !== null) keys[i] = { kind: 'dict', key: ks[i] };
    }
    return { children, keys, aux: ks };
  },
  unflatten: (aux, ch) => {
    const o: Record<string, unknown> = {};
    const ks = aux as string[];
    for (let i = 0; i < ks.length; i++) o[ks[i]] = ch[i];
    return o;
  },
};
const mapKind: NodeKind = {
  name: 'Map',
  flatten: (n: Map<unknown, unknown>, withKeys: boolean) => {
    const ks = [...n.keys()];
    const children: unknown[] = new globalThis.Array(ks.length);
    const keys: KeyEntry[] | null = withKeys ? new globalThis.Array(ks.length) : null;
    for (let i = 0; i < ks.length; i++) {
      children[i] = n.get(ks[i]);
      if (keys !== null) keys[i] = { kind: 'map', key: ks[i] };
    }
    return { children, keys, aux: ks };
  },
  unflatten: (aux, ch) => {
    const ks = aux as unknown[];
    const m = new Map<unknown, unknown>();
    for (let i = 0; i < ks.length; i++) m.set(ks[i], ch[i]);
    return m;
  },
};
const noneKind: NodeKind = {
  name: 'None',
  flatten: (n: null | undefined) => ({ children: [], keys: [], aux: n }),
  unflatten: (aux) => aux,
};

/**
 * Registers a class as a pytree node (jax.tree_util.register_pytree_node): `flatten` returns
 * the children and static aux data; `unflatten` rebuilds an instance from them.
 */
export function registerNode<T extends object>(
  cls: abstract new (...args: any[]) => T,
  flatten: (node: T) => [children: unknown[], aux: unknown],
  unflatten: (aux: unknown, children: unknown[]) => T,
  opts: { keys?: (node: T) => string[] } = {},
): void {
  if (registered.has(cls)) throw new Error(`tree.registerNode: ${cls.name} is already registered`);
  registered.set(cls, {
    name: cls.name,
    flatten: (n: T, withKeys: boolean) => {
      const [children, aux] = flatten(n);
      if (!withKeys) return { children, aux, keys: null };
      const names = opts.keys?.(n);
      const keys: KeyEntry[] = new globalThis.Array(children.length);
      for (let i = 0; i < children.length; i++) keys[i] = names ? { kind: 'attr', name: names[i] } : { kind: 'seq', idx: i };
      return { children, aux, keys };
    },
    unflatten: (aux, ch) => unflatten(aux, ch),
  });
}

function kindOf(x: unknown): NodeKind | null {
  if (x === null || x === undefined) return noneKind;
  if (typeof x !== 'object') return null;
  if (globalThis.Array.isArray(x)) return listKind;
  if (x instanceof Map) return mapKind;
  const proto = Object.getPrototypeOf(x);
  if (proto === Object.prototype || proto === null) return dictKind;
  return registered.get(proto.constructor) ?? null;
}

/** The structure of a pytree without its leaves (jax's PyTreeDef). */
export class TreeDef {
  /** @internal */
  constructor(
    readonly kind: NodeKind | null,
    readonly aux: unknown,
    readonly children: readonly TreeDef[],
    readonly numLeaves: number,
  ) {}

  get isLeaf(): boolean {
    return this.kind === null;
  }

  get numNodes(): number {
    return 1 + this.children.reduce((n, c) => n + c.numNodes, 0);
  }

  /** Rebuilds a tree of this structure from a flat list of leaves. */
  unflatten<L>(leaves: readonly L[]): PyTree<L> {
    if (leaves.length !== this.numLeaves) {
      throw new Error(`tree.unflatten: structure ${this} has ${this.numLeaves} leaves; got ${leaves.length}`);
    }
    return rebuild(this, leaves, { pos: 0 }) as PyTree<L>;
  }

  equals(other: TreeDef): boolean {
    if (this === other) return true;
    if (this.kind !== other.kind || this.children.length !== other.children.length || this.numLeaves !== other.numLeaves) return false;
    if (this.kind !== null && !auxEqual(this.aux, other.aux)) return false;
    // (A loop: jit compares a call's structure with the last call's on every call.)
    for (let i = 0; i < this.children.length; i++) if (!this.children[i].equals(other.children[i])) return false;
    return true;
  }

  toString(): string {
    return this.text(null);
  }

  /**
   * The structure as `toString` writes it, but with each registered node's aux data and each
   * Map key written by `auxText` (jit's cache key: two structures whose aux data differ must
   * not share a trace, as in JAX, where a treedef's aux data is part of jit's cache key).
   */
  keyText(auxText: (aux: unknown) => string): string {
    return this.text(auxText);
  }

  /** Whether every node is a list, a plain object or null/undefined (no Map, no registered class). */
  get builtinsOnly(): boolean {
    if (this.kind === null) return true;
    if (this.kind !== listKind && this.kind !== dictKind && this.kind !== noneKind) return false;
    for (let i = 0; i < this.children.length; i++) if (!this.children[i].builtinsOnly) return false;
    return true;
  }

  private text(auxText: ((aux: unknown) => string) | null): string {
    if (this.kind === null) return '*';
    const ch: string[] = new globalThis.Array(this.children.length);
    for (let i = 0; i < ch.length; i++) ch[i] = this.children[i].text(auxText);
    switch (this.kind) {
      case noneKind: return String(this.aux === undefined ? 'undefined' : 'null');
      case listKind: return `[${ch.join(', ')}]`;
      case dictKind: {
        const ks = this.aux as string[];
        let out = '{';
        for (let i = 0; i < ks.length; i++) out += `${i > 0 ? ', ' : ''}${JSON.stringify(ks[i])}: ${ch[i]}`;
        return `${out}}`;
      }
      case mapKind: return `Map(${(this.aux as unknown[]).map((k, i) => `${auxText ? auxText(k) : String(k)} => ${ch[i]}`).join(', ')})`;
      default: return `${this.kind.name}${auxText ? `<${auxText(this.aux)}>` : ''}(${ch.join(', ')})`;
    }
  }
}

/** The tree of structure `d` over `leaves` from `at.pos` on (`TreeDef.unflatten`). */
function rebuild(d: TreeDef, leaves: readonly unknown[], at: { pos: number }): unknown {
  if (d.kind === null) return leaves[at.pos++];
  const ch: unknown[] = new globalThis.Array(d.children.length);
  for (let i = 0; i < ch.length; i++) ch[i] = rebuild(d.children[i], leaves, at);
  return d.kind.unflatten(d.aux, ch);
}

function auxEqual(a: unknown, b: unknown): boolean {
  if (globalThis.Array.isArray(a) && globalThis.Array.isArray(b)) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false;
    return true;
  }
  return Object.is(a, b) || JSON.stringify(a) === JSON.stringify(b);
}

export interface FlattenOptions {
  /** Treat a subtree as a leaf when this returns true. */
  isLeaf?: (x: unknown) => boolean;
}

/** One flatten: where leaves (and optionally their paths) go, and the nodes on the current path. */
interface Walk {
  opts: FlattenOptions | undefined;
  leaves: unknown[];
  paths: KeyEntry[][] | null;
  /** The container nodes from the root to the current node, for cycle detection. */
  ancestors: object[];
  /** The key of each step from the root to the current node (one per ancestor after the root); null when keys are not tracked (plain `flatten`). */
  keys: KeyEntry[] | null;
}

/**
 * Every leaf's structure: one shared node (a TreeDef is immutable), so a flatten allocates
 * nothing per leaf but the leaf's place in the list.
 */
const LEAF = new TreeDef(null, undefined, Object.freeze([]) as readonly TreeDef[], 1);

/** Thrown by an untracked walk (`keys` null) that met a cycle: `flatten` walks again with keys for the message. */
const CYCLE_UNTRACKED = Symbol('tree cycle');

function build(x: unknown, w: Walk): TreeDef {
  const kind = w.opts?.isLeaf?.(x) ? null : kindOf(x);
  if (kind === null) {
    w.leaves.push(x);
    w.paths?.push(w.keys!.slice());
    return LEAF;
  }
  const node = x as object;
  const seen = w.ancestors.indexOf(node);
  if (seen >= 0) {
    if (w.keys === null) throw CYCLE_UNTRACKED;
    const at = keystr(w.keys) || 'the root';
    const to = keystr(w.keys.slice(0, seen)) || 'the root';
    throw new Error(`tree: the pytree has a cycle: the ${kind.name} node at ${at} is the same object as its ancestor at ${to}; a pytree must be a tree (no node may contain itself)`);
  }
  const keyed = w.keys !== null;
  const { children, keys, aux } = kind.flatten(x, keyed);
  w.ancestors.push(node);
  const defs: TreeDef[] = new globalThis.Array(children.length);
  let numLeaves = 0;
  for (let i = 0; i < children.length; i++) {
    if (keyed) w.keys!.push(keys![i]);
    const d = build(children[i], w);
    if (keyed) w.keys!.pop();
    defs[i] = d;
    numLeaves += d.numLeaves;
  }
  w.ancestors.pop();
  return new TreeDef(kind, aux, defs, numLeaves);
}

/** Leaves in a stable order and the structure to rebuild them (jax.tree_util.tree_flatten). */
export function flatten<L = unknown>(x: unknown, opts?: FlattenOptions): [L[], TreeDef] {
  // (Without key paths: jit flattens its arguments on every call. A cycle is walked again with
  // them, for the message naming where it closes.)
  const leaves: unknown[] = [];
  try {
    return [leaves as L[], build(x, { opts, leaves, paths: null, ancestors: [], keys: null })];
  } catch (e) {
    if (e !== CYCLE_UNTRACKED) throw e;
    build(x, { opts, leaves: [], paths: null, ancestors: [], keys: [] });
    throw new Error('tree: unreachable (a cycle found without key paths was not found with them)');
  }
}

export function unflatten<L>(def: TreeDef, leaves: readonly L[]): PyTree<L> {
  return def.unflatten(leaves);
}

export function leaves<L = unknown>(x: unknown, opts?: FlattenOptions): L[] {
  return flatten<L>(x, opts)[0];
}

export function structure(x: unknown, opts?: FlattenOptions): TreeDef {
  return flatten(x, opts)[1];
}

/** Leaves with their key paths (jax.tree_util.tree_flatten_with_path). */
export function flattenWithPath<L = unknown>(x: unknown, opts?: FlattenOptions): [[KeyPath, L][], TreeDef] {
  const leavesOut: unknown[] = [];
  const paths: KeyEntry[][] = [];
  const def = build(x, { opts, leaves: leavesOut, paths, ancestors: [], keys: [] });
  return [leavesOut.map((l, i) => [paths[i], l as L]), def];
}

/** Leaves of `x` cut at the structure `def` (each leaf of `def` may match a whole subtree of `x`). */
export function flattenUpTo(def: TreeDef, x: unknown, what = 'tree'): unknown[] {
  const out: unknown[] = [];
  const walk = (d: TreeDef, v: unknown, path: KeyEntry[]): void => {
    if (d.kind === null) {
      out.push(v);
      return;
    }
    const k = kindOf(v);
    if (k !== d.kind) {
      throw new Error(`tree: ${what} at ${keystr(path) || 'the root'} is ${describe(v)}, expected a ${d.kind.name} node (structure ${d})`);
    }
    const { children, keys, aux } = k.flatten(v, true);
    if (children.length !== d.children.length || !auxEqual(aux, d.aux)) {
      throw new Error(`tree: ${what} at ${keystr(path) || 'the root'} has a different ${k.name} structure: ${showValue(aux)} vs ${showValue(d.aux)}`);
    }
    children.forEach((c, i) => walk(d.children[i], c, [...path, keys![i]]));
  };
  walk(def, x, []);
  return out;
}

function describe(v: unknown): string {
  if (v === null || v === undefined) return String(v);
  if (globalThis.Array.isArray(v)) return `a list of length ${v.length}`;
  if (typeof v === 'object') return `a ${(v as object).constructor?.name ?? 'object'}`;
  return `a leaf (${typeof v})`;
}

/**
 * jax.tree_util.tree_map: `f` applied to the leaves of `x` and the matching leaves (or
 * subtrees) of `rest`, which must have `x`'s structure as a prefix.
 */
export function map<R = unknown>(f: (...leaves: any[]) => R, x: unknown, ...rest: unknown[]): PyTree<R>;
export function map<R = unknown>(f: (...leaves: any[]) => R, x: unknown, ...rest: unknown[]): PyTree<R> {
  const [xs, def] = flatten(x);
  const others = rest.map((r, i) => flattenUpTo(def, r, `argument ${i + 2} of tree.map`));
  return def.unflatten(xs.map((l, i) => f(l, ...others.map((o) => o[i]))));
}

/** tree_map_with_path: `f(path, leaf, ...restLeaves)`. */
export function mapWithPath<R = unknown>(f: (path: KeyPath, ...leaves: any[]) => R, x: unknown, ...rest: unknown[]): PyTree<R> {
  const [pairs, def] = flattenWithPath(x);
  const others = rest.map((r, i) => flattenUpTo(def, r, `argument ${i + 2} of tree.mapWithPath`));
  return def.unflatten(pairs.map(([p, l], i) => f(p, l, ...others.map((o) => o[i]))));
}

/** A readable path, as jax.tree_util.keystr: `['params'][0].w`. */
export function keystr(path: KeyPath): string {
  return path
    .map((e) => {
      switch (e.kind) {
        case 'dict': return `[${JSON.stringify(e.key).replace(/^"|"$/g, "'")}]`;
        case 'seq': return `[${e.idx}]`;
        case 'map': return `[${typeof e.key === 'string' ? `'${e.key}'` : String(e.key)}]`;
        case 'attr': return `.${e.name}`;
        default: return e satisfies never;
      }
    })
    .join('');
}

/** Reduces over the leaves in flatten order. */
export function reduce<A>(f: (acc: A, leaf: any) => A, x: unknown, initial: A): A {
  return leaves(x).reduce(f, initial);
}

/** Transposes a tree of trees: outer structure `outer`, inner structure `inner`. */
export function transpose(outer: TreeDef, inner: TreeDef, x: unknown): unknown {
  const outerLeaves = flattenUpTo(outer, x, 'tree.transpose input');
  const innerFlat = outerLeaves.map((l) => flattenUpTo(inner, l, 'tree.transpose inner tree'));
  const perInner = Array.from({ length: inner.numLeaves }, (_, j) => outer.unflatten(innerFlat.map((f) => f[j])));
  return inner.unflatten(perInner);
}

/** True when every leaf is Object.is-equal and the structures match. */
export function allEqual(a: unknown, b: unknown): boolean {
  const [la, da] = flatten(a);
  const [lb, db] = flatten(b);
  return da.equals(db) && la.every((l, i) => Object.is(l, lb[i]));
}
