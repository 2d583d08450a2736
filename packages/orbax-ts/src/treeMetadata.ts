/**
 * The `_METADATA` document of a pytree item. Orbax's part (`tree_metadata` keyed by the
 * key-tuple string, with `key_metadata` and `value_metadata` per leaf; `use_ocdbt: false`,
 * `use_zarr3: false`) lets Orbax and people recognise the tree; tpukit's own `tpukit` section
 * records what Orbax's does not: the exact container kinds (dict, list, Map, None/undefined),
 * non-array leaves (numbers, strings, booleans) inline, and each array's dtype, shape and the
 * sharding it was saved from. Decoding validates everything, since it comes from disk.
 */
import { tree, type KeyPath, type TreeDef } from '@tpukit/core';
import { safeComponent } from './layout';

export type TreeEnc =
  | { t: 'leaf'; i: number }
  | { t: 'dict'; k: string[]; c: TreeEnc[] }
  | { t: 'list'; c: TreeEnc[] }
  | { t: 'map'; k: (string | number)[]; c: TreeEnc[] }
  | { t: 'null' }
  | { t: 'undefined' };

export type LeafRecord =
  | { kind: 'array'; path: string; name: string; dtype: string; shape: number[]; chunks: number[]; sharding: string }
  | { kind: 'number'; path: string; value: string }
  | { kind: 'json'; path: string; value: string | boolean };

export interface TpukitSection {
  format: 1;
  tree: TreeEnc;
  leaves: LeafRecord[];
}

/** Encodes a TreeDef; registered custom nodes are not representable (they need a restore target). */
export function encodeTreeDef(def: TreeDef, opName: string): TreeEnc {
  let next = 0;
  const walk = (d: TreeDef): TreeEnc => {
    if (d.isLeaf) return { t: 'leaf', i: next++ };
    const name = (d.kind as { name: string }).name;
    const c = () => d.children.map(walk);
    switch (name) {
      case 'dict': return { t: 'dict', k: (d.aux as string[]).slice(), c: c() };
      case 'list': return { t: 'list', c: c() };
      case 'Map': {
        const keys = d.aux as unknown[];
        for (const k of keys) {
          if (typeof k !== 'string' && !(typeof k === 'number' && Number.isFinite(k))) {
            throw new Error(`${opName}: Map keys must be strings or finite numbers to be saved; got ${String(k)}`);
          }
        }
        return { t: 'map', k: keys as (string | number)[], c: c() };
      }
      case 'None': return d.aux === undefined ? { t: 'undefined' } : { t: 'null' };
      default: throw new Error(`${opName}: pytree node ${name} is a registered class; tpukit saves dicts, lists, Maps and null/undefined (convert the node, or restore with a target)`);
    }
  };
  return walk(def);
}

/** Rebuilds a tree from an encoding and its leaves, validating the encoding. */
export function decodeTree(enc: unknown, leaves: readonly unknown[], file: string): unknown {
  const bad = (why: string): never => {
    throw new Error(`restore: ${file}: malformed tpukit.tree (${why})`);
  };
  const seen = new Set<number>();
  const walk = (e: unknown, depth: number): unknown => {
    if (depth > 1000) bad('nested deeper than 1000');
    if (typeof e !== 'object' || e === null) return bad('node is not an object');
    const n = e as Record<string, unknown>;
    const kids = (): unknown[] => {
      if (!Array.isArray(n.c)) bad(`${String(n.t)} node without children list`);
      return (n.c as unknown[]).map((x) => walk(x, depth + 1));
    };
    switch (n.t) {
      case 'leaf': {
        const i = n.i;
        if (typeof i !== 'number' || !Number.isInteger(i) || i < 0 || i >= leaves.length || seen.has(i)) bad(`bad leaf index ${JSON.stringify(i)}`);
        seen.add(i as number);
        return leaves[i as number];
      }
      case 'dict': {
        const ks = n.k;
        const ch = kids();
        if (!Array.isArray(ks) || ks.length !== ch.length || !ks.every((k) => typeof k === 'string')) bad('dict keys do not match children');
        const o: Record<string, unknown> = {};
        (ks as string[]).forEach((k, i) => {
          if (k === '__proto__') bad('dict key __proto__');
          o[k] = ch[i];
        });
        return o;
      }
      case 'list': return kids();
      case 'map': {
        const ks = n.k;
        const ch = kids();
        if (!Array.isArray(ks) || ks.length !== ch.length) bad('Map keys do not match children');
        return new Map((ks as unknown[]).map((k, i) => [k, ch[i]]));
      }
      case 'null': return null;
      case 'undefined': return undefined;
      default: return bad(`unknown node type ${JSON.stringify(n.t)}`);
    }
  };
  const out = walk(enc, 0);
  if (seen.size !== leaves.length) bad(`uses ${seen.size} of ${leaves.length} leaves`);
  return out;
}

/** One path entry as a string (the piece of a parameter name). */
export function entryName(e: KeyPath[number]): string {
  switch (e.kind) {
    case 'dict': return e.key;
    case 'seq': return String(e.idx);
    case 'map': return String(e.key);
    case 'attr': return e.name;
    default: return e satisfies never;
  }
}

/** Orbax's parameter name for a leaf: the path's keys joined with '.', each a safe file name. */
export function paramName(path: KeyPath, opName: string): string {
  if (path.length === 0) return 'root';
  const parts = path.map((e) => safeComponent(entryName(e), `${opName}: key in path ${tree.keystr(path)}`));
  return safeComponent(parts.join('.'), `${opName}: parameter name of ${tree.keystr(path)}`);
}

/**
 * Python's `repr` of a str, as Orbax's `str(tuple(...))` writes it: single quotes unless the
 * text holds a single quote and no double quote; backslashes, the chosen quote and control
 * characters escaped.
 */
export function pyRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\' || ch === quote) out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + quote;
}

/** Orbax's `tree_metadata` key: Python's repr of the tuple of key names, e.g. `('params', 'w')`. */
export function keyTupleString(path: KeyPath): string {
  const parts = path.map((e) => pyRepr(entryName(e)));
  return `(${parts.join(', ')}${parts.length === 1 ? ',' : ''})`;
}

/** Orbax's `key_metadata`: sequence indices as integers (key_type 1), other keys as strings (2). */
export function keyMetadata(path: KeyPath): { key: string | number; key_type: number }[] {
  return path.map((e) => (e.kind === 'seq' ? { key: e.idx, key_type: 1 } : { key: entryName(e), key_type: 2 }));
}

/**
 * The empty nodes of a tree (null/undefined, `{}`, `[]`, empty Map) with their paths: Orbax
 * records each as a leaf of `tree_metadata` with value_type 'None', 'Dict' or 'List' and
 * `skip_deserialize: true`, so that a reader rebuilds them.
 */
export function emptyNodes(def: TreeDef): { path: KeyPath; typestr: 'None' | 'Dict' | 'List' }[] {
  const out: { path: KeyPath; typestr: 'None' | 'Dict' | 'List' }[] = [];
  const walk = (d: TreeDef, path: KeyPath): void => {
    if (d.isLeaf) return;
    const name = (d.kind as { name: string }).name;
    if (d.children.length === 0) {
      if (name === 'None') out.push({ path, typestr: 'None' });
      else if (name === 'list') out.push({ path, typestr: 'List' });
      else if (name === 'dict' || name === 'Map') out.push({ path, typestr: 'Dict' });
      return;
    }
    d.children.forEach((c, i) => {
      const entry: KeyPath[number] =
        name === 'list' ? { kind: 'seq', idx: i } : name === 'Map' ? { kind: 'map', key: (d.aux as unknown[])[i] } : { kind: 'dict', key: (d.aux as string[])[i] };
      walk(c, [...path, entry]);
    });
  };
  walk(def, []);
  return out;
}
