/**
 * TFRecord files (TensorFlow's record framing): each record is
 *   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
 *   data[length] | uint32 masked CRC-32C of data.
 * `TFRecordDataSource` builds an index (offset and length of every record) by walking the
 * headers once, checking each length CRC and that the record fits in the file; `get(i)` reads
 * one record at its offset and checks its data CRC (Grain's reader skips CRC checks). A corrupt
 * or truncated record is an error naming the file and byte offset. With `onCorrupt: 'skip'`
 * every record is verified while indexing, bad ones are left out and counted, and reading
 * resynchronises at the next offset where a valid record starts.
 */
import { closeSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { BlockFile, pathList } from './blockFile';
import { maskedCrc32c } from './crc32c';

const HEADER = 12;
const FOOTER = 4;
const TWO32 = 4294967296;

export interface CorruptRecord {
  file: string;
  offset: number;
  reason: string;
}

export interface TFRecordOptions {
  /** 'error' (default): a bad record throws. 'skip': bad records are left out and counted in `corrupt`. */
  onCorrupt?: 'error' | 'skip';
}

function readLength(b: Uint8Array, at: number): number {
  return (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16)) + b[at + 3] * 16777216 + ((b[at + 4] | (b[at + 5] << 8) | (b[at + 6] << 16)) + b[at + 7] * 16777216) * TWO32;
}

function readU32(b: Uint8Array, at: number): number {
  return (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16)) + b[at + 3] * 16777216;
}

function hex(x: number): string {
  return `0x${x.toString(16).padStart(8, '0')}`;
}

export class TFRecordDataSource {
  readonly paths: string[];
  readonly onCorrupt: 'error' | 'skip';
  /** Records left out in 'skip' mode (empty in 'error' mode). */
  readonly corrupt: CorruptRecord[] = [];
  readonly #files: BlockFile[];
  #fileOf: number[] = [];
  #offsets: number[] = [];
  #lengths: number[] = [];

  constructor(paths: string | readonly string[], options: TFRecordOptions = {}) {
    this.paths = pathList('TFRecordDataSource', paths);
    const mode = options.onCorrupt ?? 'error';
    if (mode !== 'error' && mode !== 'skip') throw new RangeError(`TFRecordDataSource: onCorrupt must be 'error' or 'skip'; got ${JSON.stringify(mode)}`);
    this.onCorrupt = mode;
    this.#files = this.paths.map((p) => {
      try {
        return new BlockFile(p);
      } catch (e) {
        throw new Error(`TFRecordDataSource: ${(e as Error).message}`);
      }
    });
    this.#files.forEach((f, i) => (mode === 'error' ? this.#indexStrict(f, i) : this.#indexSkipping(f, i)));
  }

  get length(): number {
    return this.#offsets.length;
  }

  /** Number of records skipped as corrupt. */
  get skipped(): number {
    return this.corrupt.length;
  }

  /** The header problem at `pos`, or null when a record of `len` bytes starts there. */
  #checkHeader(f: BlockFile, pos: number): { len: number } | { error: string } {
    if (f.size - pos < HEADER) return { error: `truncated record header (${f.size - pos} of ${HEADER} bytes before end of file)` };
    const h = f.read(pos, HEADER);
    const len = readLength(h, 0);
    const stored = readU32(h, 8);
    const actual = maskedCrc32c(h, 0, 8);
    if (stored !== actual) return { error: `length CRC mismatch (stored ${hex(stored)}, computed ${hex(actual)})` };
    if (pos + HEADER + len + FOOTER > f.size) return { error: `truncated record: length ${len} needs ${HEADER + len + FOOTER} bytes but only ${f.size - pos} remain` };
    return { len };
  }

  #checkData(f: BlockFile, pos: number, len: number): string | null {
    const b = f.read(pos + HEADER, len + FOOTER);
    const stored = readU32(b, len);
    const actual = maskedCrc32c(b, 0, len);
    return stored === actual ? null : `data CRC mismatch (stored ${hex(stored)}, computed ${hex(actual)})`;
  }

  #indexStrict(f: BlockFile, fi: number): void {
    let pos = 0;
    while (pos < f.size) {
      const h = this.#checkHeader(f, pos);
      if ('error' in h) throw new Error(`TFRecordDataSource: corrupt record in ${f.path} at byte offset ${pos}: ${h.error}`);
      this.#fileOf.push(fi);
      this.#offsets.push(pos);
      this.#lengths.push(h.len);
      pos += HEADER + h.len + FOOTER;
    }
  }

  #indexSkipping(f: BlockFile, fi: number): void {
    let pos = 0;
    while (pos < f.size) {
      const h = this.#checkHeader(f, pos);
      const err = 'error' in h ? h.error : this.#checkData(f, pos, h.len);
      if (err === null) {
        this.#fileOf.push(fi);
        this.#offsets.push(pos);
        this.#lengths.push((h as { len: number }).len);
        pos += HEADER + (h as { len: number }).len + FOOTER;
        continue;
      }
      this.corrupt.push({ file: f.path, offset: pos, reason: err });
      // Resynchronise: the next offset where a whole valid record starts.
      let next = pos + 1;
      for (; next < f.size; next++) {
        const h2 = this.#checkHeader(f, next);
        if (!('error' in h2) && this.#checkData(f, next, h2.len) === null) break;
      }
      pos = next;
    }
  }

  /** Record `index` as bytes (a copy), after checking its data CRC. */
  get(index: number): Uint8Array {
    if (!Number.isSafeInteger(index) || index < 0 || index >= this.length) {
      throw new RangeError(`TFRecordDataSource.get: index must be an integer in [0, ${this.length}); got ${index}`);
    }
    const f = this.#files[this.#fileOf[index]];
    const pos = this.#offsets[index];
    const len = this.#lengths[index];
    let b: Uint8Array;
    let at = f.locate(pos + HEADER, len + FOOTER);
    if (at >= 0) {
      b = f.block;
    } else {
      const r = f.read(pos + HEADER, len + FOOTER);
      b = new Uint8Array(r.buffer, r.byteOffset, r.length);
      at = 0;
      if (b.length < len + FOOTER) throw new Error(`TFRecordDataSource: corrupt record ${index} in ${f.path} at byte offset ${pos}: file shrank since it was indexed`);
    }
    const stored = readU32(b, at + len);
    const actual = maskedCrc32c(b, at, at + len);
    if (stored !== actual) {
      throw new Error(`TFRecordDataSource: corrupt record ${index} in ${f.path} at byte offset ${pos}: data CRC mismatch (stored ${hex(stored)}, computed ${hex(actual)})`);
    }
    return b.slice(at, at + len);
  }

  /** Where record `index` lives. */
  locate(index: number): { file: string; offset: number; length: number } {
    return { file: this.#files[this.#fileOf[index]].path, offset: this.#offsets[index], length: this.#lengths[index] };
  }

  describe(): string {
    return `TFRecordDataSource(${this.paths.join(',')}, len=${this.length})`;
  }

  close(): void {
    for (const f of this.#files) f.close();
  }
}

/**
 * Writes `records` (bytes, or strings as UTF-8) as a TFRecord file. The file appears complete
 * or not at all: it is written under a temporary name and renamed into place.
 */
export function writeTFRecord(path: string, records: Iterable<Uint8Array | string>): { records: number; bytes: number } {
  if (typeof path !== 'string' || path.length === 0) throw new TypeError(`writeTFRecord: path must be a non-empty string; got ${JSON.stringify(path)}`);
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  const fd = openSync(tmp, 'w');
  const enc = new TextEncoder();
  let count = 0;
  let bytes = 0;
  // Records are framed into one buffer and written in large chunks.
  let buf = new Uint8Array(1 << 20);
  let dv = new DataView(buf.buffer);
  let used = 0;
  const flush = (): void => {
    let off = 0;
    while (off < used) off += writeSync(fd, buf, off, used - off);
    used = 0;
  };
  try {
    for (const r of records) {
      const data = typeof r === 'string' ? enc.encode(r) : r;
      if (!(data instanceof Uint8Array)) throw new TypeError(`writeTFRecord: record ${count} must be a Uint8Array or string; got ${typeof r}`);
      const need = HEADER + data.length + FOOTER;
      if (used + need > buf.length) {
        flush();
        if (need > buf.length) {
          buf = new Uint8Array(need);
          dv = new DataView(buf.buffer);
        }
      }
      dv.setUint32(used, data.length % TWO32, true);
      dv.setUint32(used + 4, Math.floor(data.length / TWO32), true);
      dv.setUint32(used + 8, maskedCrc32c(buf, used, used + 8), true);
      buf.set(data, used + HEADER);
      dv.setUint32(used + HEADER + data.length, maskedCrc32c(data), true);
      used += need;
      count++;
      bytes += need;
    }
    flush();
    closeSync(fd);
    renameSync(tmp, path);
  } catch (e) {
    try {
      closeSync(fd);
    } catch {
      /* already closed */
    }
    rmSync(tmp, { force: true });
    throw e;
  }
  return { records: count, bytes };
}
