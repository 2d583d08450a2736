/**
 * safetensors (Hugging Face's neutral tensor file) for parameter pytrees: the export format for
 * serving a model trained here elsewhere, and the import format for weights from elsewhere. It
 * lives in orbax-ts beside the checkpoint format because it is the same job (pytree <-> bytes on
 * disk, atomically, with checked reads) and reuses its path naming and file writing.
 *
 * Layout: 8 bytes little-endian u64 `N`, then `N` bytes of UTF-8 JSON header
 * `{ name: { dtype, shape, data_offsets: [begin, end] }, ..., "__metadata__": { str: str } }`,
 * padded with spaces so the data starts 8-byte aligned, then the data: each tensor row-major,
 * little-endian, at `[begin, end)` relative to the data start. Tensors are laid out by element
 * size (largest first) then name, as the reference writer does, so every tensor is aligned to
 * its element size. A read checks everything the reference reader checks: the header length
 * within the file, valid JSON, known dtypes, sizes matching shapes, and offsets that tile the
 * data section exactly (no overlap, no gap, nothing past the end).
 *
 * Names come from pytree paths joined by '.': `{ params: { w }, layers: [a, b] }` gives
 * `params.w`, `layers.0`, `layers.1` (Orbax's parameter names; PyTorch state_dict style).
 */
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { type Array as TArray, type DType, type KeyPath, fromStorage, isArray, toStorage, tree } from '@tpukit/core';
import { ShapeDtypeStruct } from './args';
import { entryName } from './treeMetadata';
import { writeFile } from './writer';

/** What a template leaf provides (an Array or a ShapeDtypeStruct). */
export interface TensorSpec {
  readonly shape: readonly number[];
  readonly dtype: DType;
}

export interface SafetensorsSaveOptions {
  /** String-to-string `__metadata__` (e.g. `{ format: 'pt' }`). */
  metadata?: Record<string, string>;
}

export interface DecodedSafetensors {
  /** Tensors by name (a null-prototype object). */
  tensors: Record<string, TArray>;
  metadata: Record<string, string>;
}

const METADATA_KEY = '__metadata__';
/** The reference reader's limit on the header (100 MB). */
const MAX_HEADER = 100_000_000;

/** tpukit dtype -> safetensors dtype. */
const TO_ST: Record<DType, string> = {
  bool: 'BOOL', int8: 'I8', uint8: 'U8', int32: 'I32', uint32: 'U32', float16: 'F16', bfloat16: 'BF16', float32: 'F32',
};
/** safetensors dtype -> [tpukit dtype, bytes per element in the file]. I64 is narrowed to int32 (checked). */
const FROM_ST: Record<string, [DType, number]> = {
  BOOL: ['bool', 1], I8: ['int8', 1], U8: ['uint8', 1], I32: ['int32', 4], U32: ['uint32', 4], F16: ['float16', 2], BF16: ['bfloat16', 2], F32: ['float32', 4], I64: ['int32', 8],
};
const ITEMSIZE: Record<DType, number> = { bool: 1, int8: 1, uint8: 1, int32: 4, uint32: 4, float16: 2, bfloat16: 2, float32: 4 };

function checkHost(op: string): void {
  if (os.endianness() !== 'LE') throw new Error(`${op}: safetensors data is little-endian and this host is big-endian (not supported)`);
}

/** The safetensors name of a leaf: its path's keys joined by '.'. */
export function tensorName(p: KeyPath): string {
  return p.map(entryName).join('.');
}

const isSpec = (x: unknown): boolean => isArray(x) || x instanceof ShapeDtypeStruct;

/** Named leaves of a tree of Arrays, in flatten order; throws on non-Array leaves or clashing names. */
function namedLeaves<L>(x: unknown, op: string, what: string, ok: (v: unknown) => boolean, expected: string): [string, L][] {
  const [pairs] = tree.flattenWithPath(x, { isLeaf: isSpec });
  const out: [string, L][] = [];
  const seen = new Map<string, KeyPath>();
  for (const [p, v] of pairs) {
    if (p.length === 0) throw new TypeError(`${op}: ${what} must be a pytree (an object or list) of arrays, so each tensor gets a name; wrap a single array as { weight: x }`);
    if (!ok(v)) throw new TypeError(`${op}: ${what} leaf ${tree.keystr(p)} is ${describeValue(v)}; expected ${expected}`);
    const name = tensorName(p);
    if (name === METADATA_KEY) throw new Error(`${op}: ${what} leaf ${tree.keystr(p)} would be named "${METADATA_KEY}", which safetensors reserves`);
    const prev = seen.get(name);
    if (prev) throw new Error(`${op}: ${what} leaves ${tree.keystr(prev)} and ${tree.keystr(p)} both get the tensor name "${name}"`);
    seen.set(name, p);
    out.push([name, v as L]);
  }
  return out;
}

function describeValue(v: unknown): string {
  if (v === null || v === undefined) return String(v);
  if (typeof v !== 'object') return `a ${typeof v} (${String(v).slice(0, 40)})`;
  return `a ${(v as object).constructor?.name ?? 'object'}`;
}

function checkMetadata(op: string, m: unknown, where: string): Record<string, string> {
  if (m === undefined) return {};
  if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new TypeError(`${op}: ${where}${METADATA_KEY} must be an object of strings; got ${describeValue(m)}`);
  for (const [k, v] of Object.entries(m)) {
    if (typeof v !== 'string') throw new TypeError(`${op}: ${where}${METADATA_KEY}["${k}"] must be a string; got ${describeValue(v)}`);
  }
  return { ...(m as Record<string, string>) };
}

/** The bytes of a safetensors file holding every array leaf of `params`. */
export function encodeSafetensors(params: unknown, options: SafetensorsSaveOptions = {}): Uint8Array {
  const op = 'encodeSafetensors';
  checkHost(op);
  const metadata = checkMetadata(op, options.metadata, 'options.');
  const leaves = namedLeaves<TArray>(params, op, 'params', isArray, 'an Array (safetensors holds arrays only; convert numbers with np.array)');
  // Largest elements first, then by name: every tensor starts aligned to its element size.
  leaves.sort(([a, x], [b, y]) => ITEMSIZE[y.dtype] - ITEMSIZE[x.dtype] || (a < b ? -1 : a > b ? 1 : 0));
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header[METADATA_KEY] = metadata;
  const datas: Uint8Array[] = [];
  let offset = 0;
  for (const [name, x] of leaves) {
    const s = toStorage(x);
    const bytes = new Uint8Array(s.buffer, s.byteOffset, s.byteLength);
    Object.defineProperty(header, name, { value: { dtype: TO_ST[x.dtype], shape: x.shape.slice(), data_offsets: [offset, offset + bytes.length] }, enumerable: true, writable: true, configurable: true });
    datas.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  const pad = (8 - (Buffer.byteLength(json) % 8)) % 8;
  json += ' '.repeat(pad);
  const head = Buffer.from(json, 'utf8');
  const out = new Uint8Array(8 + head.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  let at = 8 + head.length;
  for (const d of datas) {
    out.set(d, at);
    at += d.length;
  }
  return out;
}

interface Entry {
  name: string;
  st: string;
  shape: number[];
  begin: number;
  end: number;
}

/** Parses and checks a safetensors file's bytes. `where` (a file name) starts every error. */
export function decodeSafetensors(bytes: Uint8Array, where = 'safetensors bytes'): DecodedSafetensors {
  const op = 'decodeSafetensors';
  checkHost(op);
  const bad = (msg: string): never => {
    throw new Error(`${op}: ${where}: ${msg}`);
  };
  if (!(bytes instanceof Uint8Array)) throw new TypeError(`${op}: expected a Uint8Array; got ${describeValue(bytes)}`);
  if (bytes.length < 8) bad(`the file is ${bytes.length} bytes, shorter than its 8-byte header length`);
  const n64 = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (n64 > BigInt(bytes.length - 8)) bad(`header length ${n64} (bytes 0-7) runs past the end of the file (${bytes.length} bytes; truncated or not a safetensors file?)`);
  const n = Number(n64);
  if (n > MAX_HEADER) bad(`header length ${n} (bytes 0-7) is over the ${MAX_HEADER}-byte limit`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n));
  } catch {
    return bad(`the header (bytes 8-${8 + n}) is not valid UTF-8`);
  }
  let header: unknown;
  try {
    header = JSON.parse(text);
  } catch (e) {
    return bad(`the header (bytes 8-${8 + n}) is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) return bad(`the header (bytes 8-${8 + n}) must be a JSON object; got ${Array.isArray(header) ? 'an array' : typeof header}`);
  const h = header as Record<string, unknown>;
  const metadata = checkMetadata(op, h[METADATA_KEY], `${where}: `);
  const dataStart = 8 + n;
  const dataLen = bytes.length - dataStart;
  const entries: Entry[] = [];
  for (const [name, info] of Object.entries(h)) {
    if (name === METADATA_KEY) continue;
    const t = info as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const at = `tensor "${name}"`;
    if (typeof t !== 'object' || t === null) bad(`${at}: expected { dtype, shape, data_offsets }; got ${describeValue(t)}`);
    if (typeof t.dtype !== 'string' || !(t.dtype in FROM_ST)) bad(`${at}: dtype ${JSON.stringify(t.dtype)} is not supported (supported: ${Object.keys(FROM_ST).join(', ')})`);
    const st = t.dtype as string;
    if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) bad(`${at}: shape must be a list of non-negative integers; got ${JSON.stringify(t.shape)}`);
    const shape = t.shape as number[];
    const o = t.data_offsets;
    if (!Array.isArray(o) || o.length !== 2 || !o.every((v) => Number.isSafeInteger(v) && v >= 0) || o[0] > o[1]) bad(`${at}: data_offsets must be [begin, end] with 0 <= begin <= end; got ${JSON.stringify(o)}`);
    const [begin, end] = o as number[];
    const need = shape.reduce((a, d) => a * d, 1) * FROM_ST[st][1];
    if (end - begin !== need) bad(`${at}: data_offsets [${begin}, ${end}] hold ${end - begin} bytes but shape [${shape.join(', ')}] of ${st} needs ${need}`);
    entries.push({ name, st, shape, begin, end });
  }
  // The tensors must tile the data section: sorted by offset, each starts where the last ended.
  const byOffset = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let pos = 0;
  let prev: Entry | null = null;
  for (const e of byOffset) {
    if (e.begin < pos) bad(`tensor "${e.name}" (data bytes ${e.begin}-${e.end}) overlaps tensor "${prev!.name}" (data bytes ${prev!.begin}-${prev!.end})`);
    if (e.begin > pos) bad(`data bytes ${pos}-${e.begin} (file offset ${dataStart + pos}) belong to no tensor (a gap before tensor "${e.name}")`);
    pos = e.end;
    prev = e;
  }
  if (pos > dataLen) bad(`the tensors need ${pos} data bytes but the file has ${dataLen} after its header (truncated?)`);
  if (pos < dataLen) bad(`the file has ${dataLen} data bytes but the tensors cover only ${pos} (trailing bytes at file offset ${dataStart + pos})`);
  const tensors: Record<string, TArray> = Object.create(null);
  for (const e of entries) tensors[e.name] = toArray(e, bytes.subarray(dataStart + e.begin, dataStart + e.end), (msg) => bad(`tensor "${e.name}" (file offset ${dataStart + e.begin}): ${msg}`));
  return { tensors, metadata };
}

function toArray(e: Entry, raw: Uint8Array, bad: (msg: string) => never): TArray {
  const [dtype] = FROM_ST[e.st];
  const copy = new Uint8Array(raw.length); // own, aligned buffer (a Buffer's slice() would share the file's)
  copy.set(raw);
  const n = e.shape.reduce((a, d) => a * d, 1);
  switch (e.st) {
    case 'I64': {
      const wide = new BigInt64Array(copy.buffer, 0, n);
      const out = new Int32Array(n);
      for (let i = 0; i < n; i++) {
        const v = wide[i];
        if (v < -2147483648n || v > 2147483647n) bad(`I64 element ${i} is ${v}, outside int32 (tpukit has no int64; I64 tensors load as int32 when every value fits)`);
        out[i] = Number(v);
      }
      return fromStorage(out, e.shape, dtype);
    }
    case 'BOOL': {
      for (let i = 0; i < n; i++) if (copy[i] > 1) bad(`BOOL element ${i} is the byte ${copy[i]}; expected 0 or 1`);
      return fromStorage(copy, e.shape, dtype);
    }
    case 'I8': return fromStorage(new Int8Array(copy.buffer, 0, n), e.shape, dtype);
    case 'U8': return fromStorage(copy, e.shape, dtype);
    case 'I32': return fromStorage(new Int32Array(copy.buffer, 0, n), e.shape, dtype);
    case 'U32': return fromStorage(new Uint32Array(copy.buffer, 0, n), e.shape, dtype);
    case 'F16':
    case 'BF16': return fromStorage(new Uint16Array(copy.buffer, 0, n), e.shape, dtype);
    case 'F32': return fromStorage(new Float32Array(copy.buffer, 0, n), e.shape, dtype);
    default: return bad(`internal: no reader for ${e.st}`);
  }
}

const sameShape = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((d, i) => d === b[i]);

/**
 * Places `tensors` onto the structure of `like` (leaves: Arrays, ShapeDtypeStructs), checking
 * that every leaf has a tensor of its shape and dtype and that no tensor is left over.
 */
export function matchSafetensors(tensors: Record<string, TArray>, like: unknown, where = 'safetensors'): unknown {
  const op = 'loadSafetensors';
  const specs = namedLeaves<TensorSpec>(like, op, 'the template', isSpec, 'an Array or a ShapeDtypeStruct');
  const problems: string[] = [];
  const wanted = new Set(specs.map(([n]) => n));
  const missing = specs.filter(([n]) => !(n in tensors)).map(([n]) => n);
  const extra = Object.keys(tensors).filter((n) => !wanted.has(n));
  const list = (xs: string[]) => `${xs.slice(0, 10).map((x) => JSON.stringify(x)).join(', ')}${xs.length > 10 ? `, ... (${xs.length} in all)` : ''}`;
  if (missing.length) problems.push(`missing from the file: ${list(missing)}`);
  if (extra.length) problems.push(`in the file but not in the template: ${list(extra)}`);
  for (const [name, spec] of specs) {
    const t = tensors[name];
    if (!t) continue;
    if (!sameShape(t.shape, spec.shape)) problems.push(`"${name}": shape [${t.shape.join(', ')}] in the file, [${spec.shape.join(', ')}] in the template`);
    else if (t.dtype !== spec.dtype) problems.push(`"${name}": dtype ${t.dtype} in the file, ${spec.dtype} in the template`);
  }
  if (problems.length) throw new Error(`${op}: ${where} does not match the template: ${problems.join('; ')}`);
  const [, def] = tree.flattenWithPath(like, { isLeaf: isSpec });
  return tree.unflatten(def, specs.map(([n]) => tensors[n]));
}

/**
 * Writes `params` (a pytree of Arrays) to `file` as safetensors, atomically: the bytes go to a
 * temporary file beside it, which is fsynced and renamed over `file`; on any failure the
 * temporary file is removed and an existing `file` is left as it was.
 */
export function saveSafetensors(file: string, params: unknown, options: SafetensorsSaveOptions = {}): void {
  const op = 'saveSafetensors';
  if (typeof file !== 'string' || file.length === 0) throw new TypeError(`${op}: path must be a non-empty string; got ${describeValue(file)}`);
  const bytes = encodeSafetensors(params, options); // every argument error comes before the disk is touched
  const target = path.resolve(file);
  const dir = path.dirname(target);
  const tmp = path.join(dir, `.${path.basename(target)}.tmp-${process.pid}-${randomUUID().slice(0, 8)}`);
  try {
    writeFile(tmp, bytes);
    const fd = fs.openSync(tmp, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, target);
    const dfd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(dfd);
    } finally {
      fs.closeSync(dfd);
    }
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw new Error(`${op}: could not write ${target}: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * Reads a safetensors file. With `like` (a pytree of Arrays or ShapeDtypeStructs, e.g. the
 * model's initial parameters) it returns a pytree of that structure, after checking names,
 * shapes and dtypes; without, the tensors by name.
 */
export function loadSafetensors(file: string): Record<string, TArray>;
export function loadSafetensors<T>(file: string, like: T): T;
export function loadSafetensors(file: string, like?: unknown): unknown {
  const op = 'loadSafetensors';
  if (typeof file !== 'string' || file.length === 0) throw new TypeError(`${op}: path must be a non-empty string; got ${describeValue(file)}`);
  let bytes: Uint8Array;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new Error(`${op}: cannot read ${file}: ${(e as Error).message}`, { cause: e });
  }
  const { tensors } = decodeSafetensors(bytes, file);
  return like === undefined ? tensors : matchSafetensors(tensors, like, file);
}
