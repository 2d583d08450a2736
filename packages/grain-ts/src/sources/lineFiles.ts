/**
 * Line-oriented files as random-access sources: `TextLineDataSource` (each line a string) and
 * `JsonLinesDataSource` (each line one JSON value). The line index (start and end byte of every
 * line in every file) is built once, by one sequential scan at construction; `get(i)` then
 * reads only that line's bytes at its offset.
 */
import { BlockFile, pathList } from './blockFile';

class LineIndex {
  readonly files: BlockFile[];
  fileOf: Int32Array;
  starts: Float64Array;
  ends: Float64Array;
  length = 0;

  constructor(readonly op: string, paths: string[], skipBlank: boolean) {
    this.files = paths.map((p) => {
      try {
        return new BlockFile(p);
      } catch (e) {
        throw new Error(`${op}: ${(e as Error).message}`);
      }
    });
    let cap = 1024;
    this.fileOf = new Int32Array(cap);
    this.starts = new Float64Array(cap);
    this.ends = new Float64Array(cap);
    const push = (f: number, s: number, e: number): void => {
      if (this.length === cap) {
        cap *= 2;
        const g = <A extends Int32Array | Float64Array>(a: A, C: new (n: number) => A): A => {
          const b = new C(cap);
          b.set(a);
          return b;
        };
        this.fileOf = g(this.fileOf, Int32Array);
        this.starts = g(this.starts, Float64Array);
        this.ends = g(this.ends, Float64Array);
      }
      this.fileOf[this.length] = f;
      this.starts[this.length] = s;
      this.ends[this.length] = e;
      this.length++;
    };
    this.files.forEach((file, f) => {
      const block = file.blockSize;
      let lineStart = 0;
      let prevLast = -1;
      for (let pos = 0; pos < file.size; pos += block) {
        const buf = file.read(pos, block);
        let k = buf.indexOf(10);
        while (k >= 0) {
          const end = pos + k;
          let e = end;
          if (e > lineStart && (k > 0 ? buf[k - 1] : prevLast) === 13) e--; // \r\n
          if (!(skipBlank && e === lineStart)) push(f, lineStart, e);
          lineStart = end + 1;
          k = buf.indexOf(10, k + 1);
        }
        prevLast = buf[buf.length - 1];
      }
      if (lineStart < file.size) {
        let e = file.size;
        if (prevLast === 13) e--;
        if (!(skipBlank && e === lineStart)) push(f, lineStart, e);
      }
    });
  }

  line(i: number): Buffer {
    if (!Number.isSafeInteger(i) || i < 0 || i >= this.length) throw new RangeError(`${this.op}.get: index must be an integer in [0, ${this.length}); got ${i}`);
    const s = this.starts[i];
    return this.files[this.fileOf[i]].read(s, this.ends[i] - s);
  }

  where(i: number): string {
    let n = 0;
    const f = this.fileOf[i];
    for (let j = i - 1; j >= 0 && this.fileOf[j] === f; j--) n++;
    return `${this.files[f].path} record ${n} (byte offset ${this.starts[i]})`;
  }

  close(): void {
    for (const f of this.files) f.close();
  }
}

/** Lines of one or more text files, without their line terminators (`\n` or `\r\n`). */
export class TextLineDataSource {
  readonly #index: LineIndex;
  readonly paths: string[];
  constructor(paths: string | readonly string[]) {
    this.paths = pathList('TextLineDataSource', paths);
    this.#index = new LineIndex('TextLineDataSource', this.paths, false);
  }
  get length(): number {
    return this.#index.length;
  }
  get(index: number): string {
    return this.#index.line(index).toString('utf8');
  }
  /** Raw bytes of line `index` (a copy). */
  getBytes(index: number): Uint8Array {
    return new Uint8Array(this.#index.line(index));
  }
  describe(): string {
    return `TextLineDataSource(${this.paths.join(',')}, len=${this.length})`;
  }
  close(): void {
    this.#index.close();
  }
}

/** One JSON value per non-blank line of one or more files. */
export class JsonLinesDataSource<T = unknown> {
  readonly #index: LineIndex;
  readonly paths: string[];
  constructor(paths: string | readonly string[]) {
    this.paths = pathList('JsonLinesDataSource', paths);
    this.#index = new LineIndex('JsonLinesDataSource', this.paths, true);
  }
  get length(): number {
    return this.#index.length;
  }
  get(index: number): T {
    const text = this.#index.line(index).toString('utf8');
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new SyntaxError(`JsonLinesDataSource: invalid JSON in ${this.#index.where(index)}: ${(e as Error).message}`);
    }
  }
  describe(): string {
    return `JsonLinesDataSource(${this.paths.join(',')}, len=${this.length})`;
  }
  close(): void {
    this.#index.close();
  }
}
