/**
 * Reading a pytree item that Python Orbax wrote (no tpukit section in `_METADATA`, no
 * `_CHECKSUMS`): the tree comes from Orbax's own `tree_metadata` (key_metadata per leaf: dict
 * keys and sequence indices; value_metadata's value_type), arrays from their Zarr v2
 * directories, Python scalars from their 0-d Zarr arrays (`<i8`, `<f8`, `|b1`) and strings from
 * `_strings.json`. Only Orbax's plain layout is readable: `use_ocdbt=False, use_zarr3=False,
 * use_compression=False`. OCDBT (Orbax's default), Zarr v3 and zstd-compressed chunks are
 * refused with an error that says which option to save with. Checked against checkpoints that
 * orbax-checkpoint 0.12.4 wrote (test/fixtures/orbax_written, FIDELITY.md).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { tree } from '@tpukit/core';
import { PYTREE_METADATA, STRINGS_FILE, safeComponent } from './layout';
import { type LeafRecord, type TpukitSection, encodeTreeDef } from './treeMetadata';
import { parseZArray } from './zarr';

const PLAIN = 'save with use_ocdbt=False, use_zarr3=False and use_compression=False (plain uncompressed Zarr v2)';

const compressed = (file: string, compressor: unknown): string =>
  `restore: ${file}: chunks are compressed (${JSON.stringify(compressor)}; Orbax's default use_compression=True), which orbax-ts does not decode; ${PLAIN}`;

/** A leaf record before its path is known. */
type LeafBody = LeafRecord extends infer L ? (L extends LeafRecord ? Omit<L, 'path'> : never) : never;

/** A leaf's record while the tree is assembled (a class instance, so the tree treats it as a leaf). */
class Slot {
  constructor(readonly rec: LeafBody) {}
}

/** Why an Orbax item cannot be read here, or null: OCDBT, Zarr v3. */
export function orbaxLayoutProblem(itemDir: string, meta: Record<string, unknown>): string | null {
  if (meta.use_ocdbt === true || fs.existsSync(path.join(itemDir, 'manifest.ocdbt'))) {
    return `${itemDir} is in Orbax's OCDBT format (use_ocdbt=True, Orbax's default), which orbax-ts does not read; ${PLAIN}`;
  }
  if (meta.use_zarr3 === true) return `${itemDir} holds Zarr v3 arrays (use_zarr3=True), which orbax-ts does not read; ${PLAIN}`;
  return null;
}

/** What this module reads a step through (reader.ts's StepReader, named here so the two files do not import each other). */
export interface StepFiles {
  readonly dir: string;
  readFile(rel: string): Uint8Array;
  readJson(rel: string): unknown;
}

/** Dict keys a restored tree may not have: assigning them walks or sets Object.prototype. */
const UNSAFE_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** Every sequence in the rebuilt tree has all its elements (Orbax names each index it saved). */
function checkDense(node: unknown, file: string): void {
  if (typeof node !== 'object' || node === null || node instanceof Slot) return;
  if (globalThis.Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) {
      if (!(i in node)) throw new Error(`restore: ${file}: a sequence of ${node.length} elements has no element ${i}`);
      checkDense(node[i], file);
    }
  } else for (const v of Object.values(node)) checkDense(v, file);
}

/** An Orbax array's .zarray, refused with the use_compression hint when its chunks are compressed (parseZArray's own refusal lacks it). */
function plainZArray(r: StepFiles, item: string, name: string): Record<string, unknown> {
  const z = r.readJson(`${item}/${name}/.zarray`) as Record<string, unknown>;
  if (z?.compressor !== null && z?.compressor !== undefined) throw new Error(compressed(path.join(r.dir, item, name, '.zarray'), z.compressor));
  return z;
}

/** One Python scalar leaf: the 0-d array's single chunk, decoded as Orbax's ScalarHandler wrote it. */
function readScalar(r: StepFiles, item: string, name: string): LeafBody {
  const file = path.join(r.dir, item, name, '.zarray');
  const z = plainZArray(r, item, name);
  const bytes = r.readFile(`${item}/${name}/0`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const need = (n: number): void => {
    if (bytes.length !== n) throw new Error(`restore: ${path.join(r.dir, item, name, '0')} has ${bytes.length} bytes; a ${String(z.dtype)} scalar has ${n}`);
  };
  switch (z.dtype) {
    case '<i8':
      need(8);
      return { kind: 'number', value: view.getBigInt64(0, true).toString() };
    case '<f8':
      need(8);
      return { kind: 'number', value: String(view.getFloat64(0, true)) };
    case '|b1':
      need(1);
      return { kind: 'json', value: bytes[0] !== 0 };
    default:
      throw new Error(`restore: ${file}: scalar dtype ${JSON.stringify(z.dtype)} is not one Orbax's ScalarHandler writes (<i8, <f8, |b1)`);
  }
}

/**
 * The tpukit view (tree encoding + leaf records) of an item Orbax wrote, so the regular restore
 * path (targets, strictness, shardings) applies to it unchanged.
 */
export function orbaxSection(r: StepFiles, item: string, meta: Record<string, unknown>): TpukitSection {
  const itemDir = path.join(r.dir, item);
  const file = path.join(itemDir, PYTREE_METADATA);
  const problem = orbaxLayoutProblem(itemDir, meta);
  if (problem) throw new Error(`restore: ${problem}`);
  const tm = meta.tree_metadata;
  if (typeof tm !== 'object' || tm === null) throw new Error(`restore: ${file} has neither a tpukit section nor Orbax's tree_metadata`);
  let strings: Record<string, unknown> | null = null;
  let root: Record<string, unknown> | unknown[] | null = null;
  const entries = Object.keys(tm as Record<string, unknown>).length;
  for (const [keyStr, entry] of Object.entries(tm as Record<string, unknown>)) {
    const e = entry as { key_metadata?: { key: unknown; key_type: unknown }[]; value_metadata?: { value_type?: unknown } };
    const keys = e?.key_metadata;
    const vt = e?.value_metadata?.value_type;
    if (!Array.isArray(keys) || keys.length === 0 || typeof vt !== 'string') throw new Error(`restore: ${file}: tree_metadata entry ${keyStr} has no key_metadata / value_type`);
    const name = safeComponent(keys.map((k) => String(k.key)).join('.'), `restore: parameter name in ${file}`);
    let value: unknown;
    if (vt === 'jax.Array' || vt === 'np.ndarray') value = new Slot({ kind: 'array', name, dtype: '', shape: [], chunks: [], sharding: 'saved by Orbax' });
    else if (vt === 'scalar') value = new Slot(readScalar(r, item, name));
    else if (vt === 'string') {
      strings ??= r.readJson(`${item}/${STRINGS_FILE}`) as Record<string, unknown>;
      if (typeof strings?.[name] !== 'string') throw new Error(`restore: ${path.join(itemDir, STRINGS_FILE)} has no string for ${name}`);
      value = new Slot({ kind: 'json', value: strings[name] as string });
    } else if (vt === 'None') value = null;
    else if (vt === 'Dict') value = {};
    else if (vt === 'List') value = [];
    else throw new Error(`restore: ${file}: leaf ${keyStr} has value_type ${JSON.stringify(vt)}, which orbax-ts does not read (jax.Array, np.ndarray, scalar, string, None, Dict, List)`);
    // Walk / create the containers: key_type 1 is a sequence index, 2 a dict key.
    root ??= keys[0].key_type === 1 ? [] : {};
    let node: Record<string, unknown> | unknown[] = root;
    keys.forEach((k, d) => {
      const isSeq = k.key_type === 1;
      const key = isSeq ? Number(k.key) : String(k.key);
      // A sequence holds at most one element per tree_metadata entry (no sparse arrays from a huge index).
      if (isSeq && !(Number.isSafeInteger(key) && (key as number) >= 0 && (key as number) < entries)) throw new Error(`restore: ${file}: sequence index ${JSON.stringify(k.key)} in ${keyStr} (the tree has ${entries} entries)`);
      // Keys that would reach Object.prototype instead of a container of the tree.
      if (!isSeq && UNSAFE_KEYS.has(key as string)) throw new Error(`restore: ${file}: tree_metadata entry ${keyStr} has the key ${JSON.stringify(key)}, which orbax-ts does not restore`);
      const last = d === keys.length - 1;
      const nextIsSeq = !last && keys[d + 1].key_type === 1;
      const container = node as Record<string | number, unknown>;
      if (last) container[key] = value;
      else {
        if (!Object.hasOwn(container, key)) container[key] = nextIsSeq ? [] : {};
        node = container[key] as Record<string, unknown> | unknown[];
      }
    });
  }
  checkDense(root, file);
  const [pairs, def] = tree.flattenWithPath(root ?? {});
  const leaves = (pairs as [Parameters<typeof tree.keystr>[0], unknown][]).map(([p, slot]) => {
    if (!(slot instanceof Slot)) throw new Error(`restore: ${file}: unexpected leaf at ${tree.keystr(p)}`);
    const rec = { ...slot.rec, path: tree.keystr(p) } as LeafRecord;
    if (rec.kind === 'array') {
      // dtype, shape and chunks come from the array's own .zarray (read when it is planned).
      const info = parseZArray(plainZArray(r, item, rec.name), path.join(itemDir, rec.name, '.zarray'));
      Object.assign(rec, { dtype: info.dtype, shape: info.shape, chunks: info.chunks });
    }
    return rec;
  });
  return { format: 1, tree: encodeTreeDef(def, 'restore'), leaves };
}
