/**
 * Byte-level tokenizer: a token per UTF-8 byte (ids 0..255), special tokens after them.
 * The simplest tokenizer that round-trips any valid text; the baseline for BPE.
 */
import { type Tokenizer, checkSpecials, specialIdOf } from './tokenizer';

const enc = new TextEncoder();
const dec = new TextDecoder('utf-8');

export class ByteTokenizer implements Tokenizer {
  readonly specialTokens: string[];
  constructor(options: { specialTokens?: string[] } = {}) {
    this.specialTokens = checkSpecials('ByteTokenizer', options.specialTokens);
  }
  get vocabSize(): number {
    return 256 + this.specialTokens.length;
  }
  encode(text: string): Int32Array {
    if (typeof text !== 'string') throw new TypeError(`ByteTokenizer.encode: expected a string; got ${typeof text}`);
    const b = enc.encode(text);
    const out = new Int32Array(b.length);
    for (let i = 0; i < b.length; i++) out[i] = b[i];
    return out;
  }
  decode(ids: ArrayLike<number>): string {
    const bytes = new Uint8Array(ids.length);
    let n = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) throw new RangeError(`ByteTokenizer.decode: id ${id} at position ${i} is outside [0, ${this.vocabSize})`);
      if (id < 256) bytes[n++] = id;
    }
    return dec.decode(bytes.subarray(0, n));
  }
  specialId(token: string): number {
    return specialIdOf('ByteTokenizer', this.specialTokens, 256, token);
  }
  toJSON(): { type: 'byte'; version: 1; specialTokens: string[] } {
    return { type: 'byte', version: 1, specialTokens: this.specialTokens };
  }
  static fromJSON(json: unknown): ByteTokenizer {
    const j = json as { type?: string; specialTokens?: string[] };
    if (!j || j.type !== 'byte') throw new TypeError(`ByteTokenizer.fromJSON: expected { type: 'byte', ... }; got ${JSON.stringify(json)?.slice(0, 100)}`);
    return new ByteTokenizer({ specialTokens: j.specialTokens });
  }
}
