/**
 * Positional reads from a file through one cached block, so scanning a file (building an
 * index) and reading neighbouring records cost one system call per block instead of one per
 * record. A returned view is valid until the next `read`.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

export class BlockFile {
  readonly size: number;
  readonly #fd: number;
  readonly #buf: Buffer;
  readonly #view: Uint8Array;
  #start = 0;
  #len = 0;

  constructor(readonly path: string, readonly blockSize = 1 << 20) {
    try {
      this.#fd = openSync(path, 'r');
    } catch (e) {
      throw new Error(`cannot open ${path}: ${(e as Error).message}`);
    }
    this.size = fstatSync(this.#fd).size;
    this.#buf = Buffer.allocUnsafe(blockSize);
    this.#view = new Uint8Array(this.#buf.buffer, this.#buf.byteOffset, blockSize);
  }

  /** The cached block's bytes as a plain Uint8Array (see `locate`). */
  get block(): Uint8Array {
    return this.#view;
  }

  /**
   * Loads the block holding `[pos, pos+len)` and returns the offset of `pos` in `block`, or -1
   * when the range is larger than a block or runs past the end of the file (use `read`).
   * Allocation-free on a cache hit.
   */
  locate(pos: number, len: number): number {
    if (len > this.blockSize || pos + len > this.size) return -1;
    if (pos < this.#start || pos + len > this.#start + this.#len) this.read(pos, len);
    return pos - this.#start;
  }

  /** Bytes `[pos, pos+len)` (fewer at the end of the file). */
  read(pos: number, len: number): Buffer {
    const end = Math.min(pos + len, this.size);
    if (pos >= this.#start && end <= this.#start + this.#len) return this.#buf.subarray(pos - this.#start, end - this.#start);
    if (len > this.blockSize) {
      const out = Buffer.allocUnsafe(Math.max(0, end - pos));
      let got = 0;
      while (got < out.length) {
        const n = readSync(this.#fd, out, got, out.length - got, pos + got);
        if (n === 0) break;
        got += n;
      }
      return out.subarray(0, got);
    }
    let got = 0;
    const want = Math.min(this.blockSize, this.size - pos);
    while (got < want) {
      const n = readSync(this.#fd, this.#buf, got, want - got, pos + got);
      if (n === 0) break;
      got += n;
    }
    this.#start = pos;
    this.#len = got;
    return this.#buf.subarray(0, Math.min(got, end - pos));
  }

  close(): void {
    closeSync(this.#fd);
  }
}

/** Accepts one path or a non-empty list. */
export function pathList(op: string, paths: string | readonly string[]): string[] {
  const list = typeof paths === 'string' ? [paths] : Array.isArray(paths) ? [...paths] : null;
  if (!list || list.length === 0 || list.some((p) => typeof p !== 'string')) {
    throw new TypeError(`${op}: expected a path or a non-empty list of paths; got ${JSON.stringify(paths)}`);
  }
  return list;
}
