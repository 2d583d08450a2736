/**
 * The restore side: reads one committed step, verifying every file it opens against the step's
 * checksum manifest (itself verified through the commit marker) and naming the file that does
 * not match. Arrays are read chunk by chunk straight into the shards the target sharding asks
 * for (via core's `makeArrayFromCallback`), so restoring onto more, fewer or differently split
 * devices never assembles the whole array first unless the target is a single device. Every
 * path is built from validated components and checked to stay inside the step directory.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Array as TArray, type DType, type Index, type Sharding, SingleDeviceSharding, fromStorage, makeArrayFromCallback, tree, type KeyPath } from '@tpukit/core';
import { JsonRestore, ShapeDtypeStruct, StandardRestore } from './args';
import { copyBox, intersect } from './box';
import { CHECKPOINT_METADATA, CHECKSUMS, COMMIT_MARKER, JSON_ITEM_FILE, PYTREE_METADATA, checkInside, safeComponent, stepDirName } from './layout';
import { orbaxLayoutProblem, orbaxSection } from './orbaxRead';
import { type LeafRecord, type TpukitSection, decodeTree } from './treeMetadata';
import { type ChecksumManifest, crc32 } from './writer';
import { ITEMSIZE, chunkGrid, chunkKey, forEachCoord, parseZArray } from './zarr';

const STORAGE: Record<DType, new (b: ArrayBuffer, o: number, n: number) => ArrayLike<number>> = {
  bool: Uint8Array, int8: Int8Array, uint8: Uint8Array, int32: Int32Array, uint32: Uint32Array, float16: Uint16Array, bfloat16: Uint16Array, float32: Float32Array,
};

function storageOf(buf: Uint8Array, dtype: DType, n: number): any {
  return new STORAGE[dtype](buf.buffer as ArrayBuffer, buf.byteOffset, n);
}

/** A committed step opened for reading. */
export class StepReader {
  readonly dir: string;
  /** The checksum manifest; null for a step Python Orbax wrote (nothing to verify against). */
  readonly manifest: ChecksumManifest | null;
  readonly metadata: Record<string, unknown>;

  constructor(readonly root: string, readonly step: number) {
    this.dir = path.join(root, stepDirName(step));
    const markerPath = path.join(this.dir, COMMIT_MARKER);
    checkInside(root, markerPath, 'restore');
    const marker = fs.readFileSync(markerPath, 'utf8');
    const m = /tpukit _CHECKSUMS crc32=([0-9a-f]{8})/.exec(marker);
    const mpath = path.join(this.dir, CHECKSUMS);
    if (!m && !fs.existsSync(mpath)) {
      // Committed by Python Orbax (its marker, no tpukit manifest): read without verification;
      // the paths are still checked to stay inside the step directory.
      this.manifest = null;
      this.metadata = this.readJson(CHECKPOINT_METADATA) as Record<string, unknown>;
      return;
    }
    if (!m) throw new Error(`restore: ${markerPath} has no tpukit checksum line but ${CHECKSUMS} exists; the checkpoint at step ${step} is corrupt`);
    checkInside(root, mpath, 'restore');
    const mbytes = fs.readFileSync(mpath);
    const got = crc32(mbytes);
    if (got !== m[1]) throw new Error(`restore: checksum mismatch in ${mpath}: expected CRC-32 ${m[1]} (from ${COMMIT_MARKER}), got ${got}; the checkpoint at step ${step} is corrupt`);
    const parsed = JSON.parse(mbytes.toString('utf8')) as ChecksumManifest;
    if (parsed?.algorithm !== 'crc32' || typeof parsed.files !== 'object' || parsed.files === null) throw new Error(`restore: ${mpath}: not a crc32 manifest`);
    this.manifest = parsed;
    this.metadata = this.readJson(CHECKPOINT_METADATA) as Record<string, unknown>;
  }

  /** Checks `rel` (built from safe components) against the manifest and the filesystem. */
  #locate(rel: string): { file: string; real: string; size: number } {
    const file = path.join(this.dir, ...rel.split('/'));
    // Without a manifest (a checkpoint Orbax wrote) any regular file inside the step is read.
    const entry = this.manifest === null ? null : Object.prototype.hasOwnProperty.call(this.manifest.files, rel) ? this.manifest.files[rel] : undefined;
    if (entry === undefined) throw new Error(`restore: ${file} is not listed in ${path.join(this.dir, CHECKSUMS)}; the checkpoint at step ${this.step} is incomplete or corrupt`);
    const real = checkInside(this.dir, file, 'restore');
    const st = fs.lstatSync(real);
    if (!st.isFile()) throw new Error(`restore: ${file} is not a regular file`);
    if (entry !== null && st.size !== entry.size) throw new Error(`restore: ${file} has ${st.size} bytes, expected ${entry.size}; the checkpoint at step ${this.step} is corrupt`);
    return { file, real, size: st.size };
  }

  /** Throws, naming the file, unless `bytes` match the manifest's CRC-32 for `rel`. */
  #verify(rel: string, bytes: Uint8Array): Uint8Array {
    if (this.manifest === null) return bytes;
    const got = crc32(bytes);
    const want = this.manifest.files[rel].crc32;
    if (got !== want) throw new Error(`restore: checksum mismatch in ${path.join(this.dir, ...rel.split('/'))}: expected CRC-32 ${want}, got ${got}; the checkpoint at step ${this.step} is corrupt`);
    return bytes;
  }

  /** Reads and verifies `rel` (built from safe components), into a buffer of its own. */
  readFile(rel: string): Uint8Array {
    const { file, real, size } = this.#locate(rel);
    const out = new Uint8Array(new ArrayBuffer(size));
    const fd = fs.openSync(real, 'r');
    try {
      for (let off = 0; off < out.length; ) {
        const n = fs.readSync(fd, out, off, Math.min(out.length - off, 1 << 30), off);
        if (n === 0) throw new Error(`restore: ${file} ended at byte ${off}, expected ${out.length}`);
        off += n;
      }
    } finally {
      fs.closeSync(fd);
    }
    return this.#verify(rel, out);
  }

  /**
   * Reads `rel` on libuv's thread pool without verifying it: `fetchAll` verifies each file on
   * this thread while the pool reads the next one. The file is opened synchronously and read in
   * one pool request, so the read does not wait for this thread between steps (an awaited
   * `open` would only issue the read once this thread is free again, after the checksum).
   */
  async #readAsync(rel: string): Promise<Uint8Array> {
    const { file, real, size } = this.#locate(rel);
    const out = new Uint8Array(new ArrayBuffer(size));
    const fd = fs.openSync(real, 'r');
    try {
      for (let off = 0; off < out.length; ) {
        const n = await new Promise<number>((resolve, reject) => fs.read(fd, out, off, Math.min(out.length - off, 1 << 30), off, (e, got) => (e ? reject(e) : resolve(got))));
        if (n === 0) throw new Error(`restore: ${file} ended at byte ${off}, expected ${out.length}`);
        off += n;
      }
    } finally {
      fs.closeSync(fd);
    }
    return out;
  }

  /**
   * Reads and verifies the files `rels` in order, handing each to `use` before the next is
   * verified: the read of file k+1 runs on the thread pool while file k's CRC-32 is computed
   * here (read and checksum took about as long each; done one after the other, restore was
   * their sum). At most two files are held beyond the one `use` is given.
   */
  async fetchAll(rels: readonly string[], use: (k: number, bytes: Uint8Array) => void): Promise<void> {
    const started: Promise<Uint8Array>[] = [];
    const start = (k: number): void => {
      if (k < rels.length && started[k] === undefined) {
        started[k] = this.#readAsync(rels[k]);
        started[k].catch(() => {}); // awaited below in order; this only keeps an early failure from going unhandled
      }
    };
    start(0);
    for (let k = 0; k < rels.length; k++) {
      start(k + 1);
      start(k + 2);
      const bytes = await started[k];
      delete started[k];
      use(k, this.#verify(rels[k], bytes));
    }
  }

  readJson(rel: string): unknown {
    const bytes = this.readFile(rel);
    try {
      return JSON.parse(new TextDecoder().decode(bytes));
    } catch (e) {
      throw new Error(`restore: ${path.join(this.dir, ...rel.split('/'))}: invalid JSON (${(e as Error).message})`);
    }
  }

  /** Item names recorded in `_CHECKPOINT_METADATA`, each validated as a safe directory name. */
  itemHandlers(): Map<string, string> {
    const h = this.metadata.item_handlers;
    const out = new Map<string, string>();
    if (typeof h !== 'object' || h === null) return out;
    for (const [k, v] of Object.entries(h)) out.set(safeComponent(k, `restore: item name in ${CHECKPOINT_METADATA}`), String(v));
    return out;
  }
}

/**
 * How to read one saved array into `sharding` (one region buffer per distinct shard index):
 * the chunk files it needs, in order, and `take` to place each chunk's bytes as it arrives;
 * `done` wraps the regions as the restored Array once every chunk is placed.
 */
interface ArrayRead {
  readonly rels: string[];
  take(k: number, bytes: Uint8Array): void;
  done(): TArray;
}

function planArrayRead(r: StepReader, item: string, leaf: Extract<LeafRecord, { kind: 'array' }>, sharding: Sharding | undefined): ArrayRead {
  const name = safeComponent(leaf.name, `restore: parameter name in ${item}/${PYTREE_METADATA}`);
  const zfile = `${item}/${name}/.zarray`;
  const z = parseZArray(r.readJson(zfile), path.join(r.dir, item, name, '.zarray'));
  const shape = z.shape;
  if (z.dtype !== leaf.dtype || shape.length !== leaf.shape.length || shape.some((d, i) => d !== leaf.shape[i])) {
    throw new Error(`restore: ${path.join(r.dir, zfile)} says ${z.dtype}[${shape}] but ${item}/${PYTREE_METADATA} says ${leaf.dtype}[${leaf.shape}]`);
  }
  const item_ = ITEMSIZE[z.dtype];
  const chunkBytes = z.chunks.reduce((a, b) => a * b, 1) * item_;
  const size = shape.reduce((a, b) => a * b, 1);
  const target = sharding ?? new SingleDeviceSharding();
  const map = target.devicesIndicesMap(shape);
  type Region = { index: Index; shape: number[]; data: Uint8Array };
  const regions = new Map<string, Region>();
  for (const index of map.values()) {
    const key = JSON.stringify(index);
    if (!regions.has(key)) {
      const rs = index.map(([a, b]) => b - a);
      regions.set(key, { index, shape: rs, data: new Uint8Array(rs.reduce((a, b) => a * b, 1) * item_) });
    }
  }
  const grid = chunkGrid(shape, z.chunks);
  const single = regions.size === 1 && [...regions.values()][0].shape.every((d, i) => d === shape[i]);
  const wholeChunk = single && grid.every((g) => g === 1) && chunkBytes === size * item_;
  const chunks: { rel: string; box: [number, number][]; hits: { g: Region; x: [number, number][] }[] }[] = [];
  forEachCoord(grid, (c) => {
    const box = c.map((k, d) => [k * z.chunks[d], Math.min((k + 1) * z.chunks[d], shape[d])] as [number, number]);
    const hits = [...regions.values()].flatMap((g) => {
      const x = intersect(box, g.index);
      return x === null ? [] : [{ g, x }];
    });
    if (hits.length > 0) chunks.push({ rel: `${item}/${name}/${chunkKey(c)}`, box, hits });
  });
  const wrap = (g: { shape: number[]; data: Uint8Array }): TArray =>
    fromStorage(storageOf(g.data, z.dtype, g.shape.reduce((a, b) => a * b, 1)), g.shape, z.dtype);
  return {
    rels: chunks.map((c) => c.rel),
    take(k, bytes) {
      const { rel, box, hits } = chunks[k];
      if (bytes.length !== chunkBytes) throw new Error(`restore: ${path.join(r.dir, rel)} has ${bytes.length} bytes; a ${z.dtype} chunk of [${z.chunks}] has ${chunkBytes}`);
      if (wholeChunk) {
        hits[0].g.data = bytes; // the one chunk is the whole array: use the buffer as is
        return;
      }
      for (const { g, x } of hits) {
        copyBox({ data: bytes, shape: z.chunks }, x.map(([a], d) => a - box[d][0]), { data: g.data, shape: g.shape }, x.map(([a], d) => a - g.index[d][0]), x.map(([a, b]) => b - a), item_);
      }
    },
    done() {
      if (!sharding || (single && map.size === 1 && sharding instanceof SingleDeviceSharding)) return wrap([...regions.values()][0]);
      const arrays = new Map<string, TArray>();
      return makeArrayFromCallback(shape, z.dtype, sharding, (index) => {
        const key = JSON.stringify(index);
        let a = arrays.get(key);
        if (!a) arrays.set(key, (a = wrap(regions.get(key)!)));
        return a;
      });
    },
  };
}

/**
 * Reads every planned array, their chunk files in one pipelined pass (`StepReader.fetchAll`),
 * and returns the Arrays in plan order.
 */
async function readArrays(r: StepReader, plans: readonly ArrayRead[]): Promise<TArray[]> {
  const owner: [ArrayRead, number][] = [];
  for (const p of plans) p.rels.forEach((_, k) => owner.push([p, k]));
  await r.fetchAll(plans.flatMap((p) => p.rels), (i, bytes) => owner[i][0].take(owner[i][1], bytes));
  return plans.map((p) => p.done());
}

function leafValue(leaf: LeafRecord): unknown {
  if (leaf.kind === 'number') return Number(leaf.value);
  if (leaf.kind === 'json') return leaf.value;
  throw new Error('unreachable');
}

function readSection(r: StepReader, item: string): TpukitSection {
  const itemDir = path.join(r.dir, item);
  if (r.manifest === null && !fs.existsSync(path.join(itemDir, PYTREE_METADATA))) {
    throw new Error(`restore: ${itemDir} has no ${PYTREE_METADATA}${orbaxLayoutProblem(itemDir, {}) ? `: ${orbaxLayoutProblem(itemDir, {})}` : ''}`);
  }
  const doc = r.readJson(`${item}/${PYTREE_METADATA}`) as { tpukit?: TpukitSection };
  const sec = doc?.tpukit;
  const file = path.join(r.dir, item, PYTREE_METADATA);
  if (!sec && r.manifest === null) return orbaxSection(r, item, doc as Record<string, unknown>);
  // A tpukit section is always committed with a checksum manifest: a step that lost both the
  // manifest and the marker's checksum line must not pass as an (unverified) Orbax-written one.
  if (sec && r.manifest === null) throw new Error(`restore: ${file} was written by tpukit but the step has no ${CHECKSUMS} and no checksum line in ${COMMIT_MARKER}; the checkpoint at step ${r.step} is corrupt`);
  if (!sec || sec.format !== 1 || !Array.isArray(sec.leaves)) throw new Error(`restore: ${file} has no tpukit section (format 1); only checkpoints written by tpukit can be restored`);
  for (const l of sec.leaves) {
    if (typeof l !== 'object' || l === null || typeof l.path !== 'string') throw new Error(`restore: ${file}: malformed leaf record ${JSON.stringify(l)}`);
    if (l.kind === 'array') {
      if (!Array.isArray(l.shape) || !l.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw new Error(`restore: ${file}: leaf ${l.path} has a bad shape ${JSON.stringify(l.shape)}`);
    } else if (l.kind !== 'number' && l.kind !== 'json') throw new Error(`restore: ${file}: leaf ${(l as LeafRecord).path} has unknown kind ${JSON.stringify((l as { kind: unknown }).kind)}`);
  }
  return sec;
}

const describeLeaf = (l: LeafRecord): string => (l.kind === 'array' ? `${l.dtype}[${l.shape}]` : `${l.kind} ${JSON.stringify(l.value)}`);

/** Restores a StandardSave item, into the target's structure and shardings when one is given. */
export async function restoreStandard(r: StepReader, item: string, arg: StandardRestore | undefined): Promise<unknown> {
  const sec = readSection(r, item);
  const file = path.join(r.dir, item, PYTREE_METADATA);
  if (arg?.item === undefined) {
    const plans = sec.leaves.flatMap((l) => (l.kind === 'array' ? [planArrayRead(r, item, l, undefined)] : []));
    const arrays = await readArrays(r, plans);
    let a = 0;
    const leaves = sec.leaves.map((l) => (l.kind === 'array' ? arrays[a++] : leafValue(l)));
    return decodeTree(sec.tree, leaves, file);
  }
  const [pairs, def] = tree.flattenWithPath(arg.item);
  const saved = new Map(sec.leaves.map((l) => [l.path, l]));
  const problems: string[] = [];
  const wanted = new Set<string>();
  for (const [p, t] of pairs as [KeyPath, unknown][]) {
    const ps = tree.keystr(p);
    wanted.add(ps);
    const l = saved.get(ps);
    const where = ps || '(root)';
    if (!l) {
      problems.push(`${where}: in the target but not in the checkpoint`);
      continue;
    }
    const spec = t instanceof TArray || t instanceof ShapeDtypeStruct ? t : null;
    if (spec) {
      if (l.kind !== 'array') problems.push(`${where}: target is ${spec.dtype}[${spec.shape}], checkpoint holds ${describeLeaf(l)}`);
      else if (spec.dtype !== l.dtype || spec.shape.length !== l.shape.length || spec.shape.some((d, i) => d !== l.shape[i])) {
        problems.push(`${where}: target is ${spec.dtype}[${spec.shape}], checkpoint holds ${l.dtype}[${l.shape}]`);
      }
    } else if (l.kind === 'array') problems.push(`${where}: target is ${typeof t} ${JSON.stringify(t)}, checkpoint holds an array ${l.dtype}[${l.shape}]`);
  }
  const extra = sec.leaves.filter((l) => !wanted.has(l.path)).map((l) => l.path || '(root)');
  if (extra.length && !arg.options.partial) for (const e of extra) problems.push(`${e}: in the checkpoint but not in the target (pass { partial: true } to skip it)`);
  if (problems.length) {
    throw new Error(`restore: item "${item}" of step ${r.step} does not match the target (${problems.length} differing path${problems.length > 1 ? 's' : ''}):\n  ${problems.join('\n  ')}`);
  }
  arg.skipped = extra;
  const plans: ArrayRead[] = [];
  const slots: number[] = []; // where in `out` each planned Array goes
  const out = (pairs as [KeyPath, unknown][]).map(([p, t], i): unknown => {
    const l = saved.get(tree.keystr(p))!;
    if (l.kind !== 'array') return leafValue(l);
    const sharding = t instanceof TArray ? t.sharding : (t as ShapeDtypeStruct).sharding;
    plans.push(planArrayRead(r, item, l, sharding));
    slots.push(i);
    return undefined;
  });
  (await readArrays(r, plans)).forEach((x, a) => (out[slots[a]] = x));
  return def.unflatten(out);
}

export function restoreJson(r: StepReader, item: string, arg: JsonRestore | undefined): unknown {
  const value = r.readJson(`${item}/${JSON_ITEM_FILE}`);
  arg?.into?.setState(value);
  return value;
}
