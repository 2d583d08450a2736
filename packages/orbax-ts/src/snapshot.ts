/**
 * The blocking half of a save: turns the items of one step into the files to write, copying
 * every array out of its live buffers exactly once (so training may continue, and buffers may
 * be donated or disposed, as soon as `save` returns). Each array becomes a Zarr v2 directory
 * whose chunk grid follows the array's sharding: every distinct shard index is written once
 * (replicas are skipped), and a chunk never spans two shards. The resulting buffers are owned
 * by the job (or lent to it by the manager's SnapshotPool), so the background writer gets them
 * without another copy.
 */
import { Array as TArray, toStorage, tree, type KeyPath } from '@tpukit/core';
import { JsonSave, type SaveArg, StandardSave } from './args';
import { copyBox } from './box';
import { type Alloc, freshAlloc } from './snapshotPool';
import { JSON_ITEM_FILE, PYTREE_METADATA, STRINGS_FILE } from './layout';
import { SHARDING_FILE, shardingDocument } from './orbaxSharding';
import { type LeafRecord, type TpukitSection, emptyNodes, encodeTreeDef, keyMetadata, keyTupleString, paramName } from './treeMetadata';
import type { FileToWrite } from './writer';
import { ITEMSIZE, chunkGrid, chunkKey, forEachCoord, makeZArray, scalarZArray } from './zarr';

const encoder = new TextEncoder();
/** File names of an item directory that no parameter may take. */
const RESERVED = new Set([PYTREE_METADATA, STRINGS_FILE, SHARDING_FILE, 'manifest.ocdbt']);
/** JSON as bytes in a buffer of its own (transferable, unlike Buffer's shared pool). */
export const jsonBytes = (x: unknown): Uint8Array => encoder.encode(JSON.stringify(x));

function bytesOf(x: TArray): Uint8Array {
  const s = toStorage(x);
  return new Uint8Array(s.buffer, s.byteOffset, s.byteLength);
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** Chunk shape aligned with the shards: per axis, the gcd of every interior shard boundary. */
function chunkShapeFor(shape: readonly number[], indices: ReadonlyArray<ReadonlyArray<readonly [number, number]>>): number[] {
  return shape.map((n, d) => {
    let g = 0;
    for (const idx of indices) {
      const [s, e] = idx[d];
      if (s !== 0) g = gcd(g, s);
      if (e !== n) g = gcd(g, e);
    }
    return g === 0 ? Math.max(n, 1) : g;
  });
}

export interface ArrayPlan {
  chunks: number[];
  /** `ready`: the copy's number in `defer`'s order (see `Defer`); absent when already filled. */
  pieces: { key: string; data: Uint8Array; ready?: number }[];
}

/**
 * Where async saves put their copies off until the whole plan (and so the job) exists: the copy
 * is queued and its 1-based number in the queue returned. The manager runs the queue before
 * `save` returns; with `writeWhileCopying` (the default) it posts the job to the writer first, so
 * the writer starts on the first files while later ones are still being copied (see
 * `WriteJob.progress`).
 */
export type Defer = (copy: () => void) => number;

/**
 * Copies `x` into full-size chunk buffers from `alloc`, one per chunk, each from one
 * (non-replica) shard. With `alloc` null (sync saves, which finish before returning) chunks that
 * are whole shards are the shards' own storage, not copies. With `defer`, copies are queued.
 */
export function planArray(x: TArray, alloc: Alloc | null = freshAlloc, defer: Defer | null = null): ArrayPlan {
  const shape = x.shape;
  const item = ITEMSIZE[x.dtype];
  const shards = x.addressableShards;
  const later = (copy: () => void): number | undefined => {
    if (defer) return defer(copy);
    copy();
    return undefined;
  };
  const copyOf = (src: Uint8Array): { data: Uint8Array; ready?: number } => {
    const data = alloc!(src.length);
    return { data, ready: later(() => data.set(src)) };
  };
  const whole = (): ArrayPlan => {
    const chunks = shape.map((d) => Math.max(d, 1));
    if (x.size === 0) return { chunks, pieces: [] };
    const src = shards.length === 1 ? bytesOf(shards[0].data) : bytesOf(x);
    const key = chunkKey(shape.map(() => 0));
    return { chunks, pieces: [alloc ? { key, ...copyOf(src) } : { key, data: shards.length !== 1 ? src.slice() : src }] };
  };
  if (shards.length === 1 || x.size === 0) return whole();
  const primary = shards.filter((s) => s.replicaId === 0);
  const chunks = chunkShapeFor(shape, primary.map((s) => s.index));
  const chunkBytes = chunks.reduce((a, b) => a * b, 1) * item;
  // Each chunk's box and the shard holding it; shards that do not tile the array on a grid fall
  // back to one chunk of the assembled value.
  const cells: { c: number[]; box: (readonly [number, number])[]; sh: (typeof primary)[number] }[] = [];
  let ok = true;
  forEachCoord(chunkGrid(shape, chunks), (c) => {
    if (!ok) return;
    const box = c.map((k, d) => [k * chunks[d], Math.min((k + 1) * chunks[d], shape[d])] as const);
    const sh = primary.find((s) => s.index.every(([a, b], d) => a <= box[d][0] && box[d][1] <= b));
    if (sh) cells.push({ c, box, sh });
    else ok = false;
  });
  if (!ok) return whole();
  const bytes = new Map<object, Uint8Array>();
  const pieces = cells.map(({ c, box, sh }): ArrayPlan['pieces'][number] => {
    let src = bytes.get(sh);
    if (!src) bytes.set(sh, (src = bytesOf(sh.data)));
    const key = chunkKey(c);
    const size = box.map(([a, b]) => b - a);
    const full = size.every((n, d) => n === chunks[d]);
    if (full && src.length === chunkBytes && box.every(([a], d) => a === sh.index[d][0])) return alloc ? { key, ...copyOf(src) } : { key, data: src };
    const data = (alloc ?? freshAlloc)(chunkBytes);
    const from = src;
    const ready = later(() => {
      // A reused buffer holds the last save's bytes: an edge chunk's padding must read as zeros.
      if (!full) data.fill(0);
      copyBox({ data: from, shape: sh.index.map(([a, b]) => b - a) }, box.map(([a], d) => a - sh.index[d][0]), { data, shape: chunks }, chunks.map(() => 0), size, item);
    });
    return { key, data, ready };
  });
  return { chunks, pieces };
}

/** The files of a StandardSave item, relative to the item directory. */
export function planStandardItem(item: unknown, opName: string, alloc: Alloc | null = freshAlloc, defer: Defer | null = null): FileToWrite[] {
  const [pairs, def] = tree.flattenWithPath(item);
  const enc = encodeTreeDef(def, opName);
  const files: FileToWrite[] = [];
  const leaves: LeafRecord[] = [];
  const treeMetadata: Record<string, unknown> = {};
  const names = new Map<string, string>();
  const strings: Record<string, string> = {};
  const claim = (path: KeyPath, where: string): string => {
    const name = paramName(path, opName);
    if (RESERVED.has(name)) throw new Error(`${opName}: leaf ${where} would be stored as "${name}", a file name Orbax reserves in an item directory (${[...RESERVED].join(', ')}); rename the key`);
    const prev = names.get(name);
    if (prev !== undefined) throw new Error(`${opName}: leaves ${prev || 'the root'} and ${where} both map to parameter name "${name}"; rename one key`);
    names.set(name, where);
    return name;
  };
  const entry = (path: KeyPath, valueType: string, skip: boolean, extra: Record<string, unknown> = {}): void => {
    treeMetadata[keyTupleString(path)] = { key_metadata: keyMetadata(path), value_metadata: { value_type: valueType, skip_deserialize: skip, ...extra } };
  };
  for (const [path, leaf] of pairs as [KeyPath, unknown][]) {
    const where = tree.keystr(path) || 'the root';
    const pathStr = tree.keystr(path);
    if (leaf instanceof TArray) {
      const name = claim(path, where);
      const plan = planArray(leaf, alloc, defer);
      files.push({ rel: `${name}/.zarray`, data: jsonBytes(makeZArray({ shape: leaf.shape.slice(), chunks: plan.chunks, dtype: leaf.dtype })) });
      for (const p of plan.pieces) files.push({ rel: `${name}/${p.key}`, data: p.data, ready: p.ready });
      leaves.push({ kind: 'array', path: pathStr, name, dtype: leaf.dtype, shape: leaf.shape.slice(), chunks: plan.chunks, sharding: String(leaf.sharding) });
      entry(path, 'jax.Array', false, { write_shape: plan.chunks });
    } else if (typeof leaf === 'number' || typeof leaf === 'boolean') {
      // As Orbax's ScalarHandler: a 0-d Zarr array under the parameter name.
      const name = claim(path, where);
      const { zarray, chunk } = scalarZArray(leaf);
      files.push({ rel: `${name}/.zarray`, data: jsonBytes(zarray) }, { rel: `${name}/0`, data: chunk });
      leaves.push(typeof leaf === 'number' ? { kind: 'number', path: pathStr, value: Object.is(leaf, -0) ? '-0' : String(leaf) } : { kind: 'json', path: pathStr, value: leaf });
      entry(path, 'scalar', false);
    } else if (typeof leaf === 'string') {
      // As Orbax's StringHandler: one `_strings.json` per item, {parameter name: value}.
      strings[claim(path, where)] = leaf;
      leaves.push({ kind: 'json', path: pathStr, value: leaf });
      entry(path, 'string', false);
    } else {
      const what = typeof leaf === 'object' ? `a ${(leaf as object).constructor?.name ?? 'object'}` : typeof leaf;
      throw new Error(`${opName}: leaf at ${where} is ${what}; StandardSave holds Arrays, numbers, strings and booleans (in dicts, lists, Maps)`);
    }
  }
  // Empty containers and null/undefined: leaves of Orbax's tree_metadata, skipped on deserialize.
  for (const { path, typestr } of emptyNodes(def)) entry(path, typestr, true);
  if (Object.keys(strings).length > 0) files.push({ rel: STRINGS_FILE, data: jsonBytes(strings) });
  // What Orbax needs to restore the arrays without a target (see orbaxSharding.ts).
  const arrayNames = leaves.flatMap((l) => (l.kind === 'array' ? [l.name] : []));
  if (arrayNames.length > 0) files.push({ rel: SHARDING_FILE, data: jsonBytes(shardingDocument(arrayNames)) });
  const tpukit: TpukitSection = { format: 1, tree: enc, leaves };
  const metadata = {
    tree_metadata: treeMetadata,
    use_ocdbt: false,
    use_zarr3: false,
    store_array_data_equal_to_fill_value: true,
    custom_metadata: null,
    tpukit,
  };
  files.push({ rel: PYTREE_METADATA, data: jsonBytes(metadata) });
  return files;
}

/**
 * The files of one item of any kind, relative to the item directory. Array chunks are copied
 * into buffers from `alloc`; with `alloc` null (sync saves, which finish before returning)
 * chunks that are whole shards are written straight from the arrays' storage instead.
 */
export function planItem(arg: SaveArg, opName: string, alloc: Alloc | null = freshAlloc, defer: Defer | null = null): FileToWrite[] {
  if (arg instanceof StandardSave) return planStandardItem(arg.item, opName, alloc, defer);
  if (arg instanceof JsonSave) {
    let text: string | undefined;
    try {
      text = JSON.stringify(arg.item);
    } catch (e) {
      throw new Error(`${opName}: JsonSave item is not JSON-serialisable: ${(e as Error).message}`);
    }
    if (text === undefined) throw new Error(`${opName}: JsonSave item is not JSON-serialisable (${typeof arg.item})`);
    return [{ rel: JSON_ITEM_FILE, data: encoder.encode(text) }];
  }
  throw new Error(`${opName}: unknown save argument ${String(arg)}`);
}
