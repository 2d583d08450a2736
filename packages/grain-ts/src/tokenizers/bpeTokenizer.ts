/**
 * Byte-level byte-pair encoding, trainable on a corpus. Text is split into pre-tokens (words
 * with their leading space, numbers, punctuation runs, whitespace: the GPT-2 pattern); each
 * pre-token starts as its UTF-8 bytes (ids 0..255) and learned merges are applied in the order
 * they were learned. Training is deterministic: each step merges the most frequent adjacent
 * pair, ties going to the smallest (left id, right id). The model saves as JSON (the merge
 * list) and loads back to the same tokenizer. Pre-token encodings are cached.
 */
import { type Tokenizer, checkSpecials, specialIdOf } from './tokenizer';

const PATTERN = " ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const SHIFT = 1 << 21; // ids < 2^21, so a pair packs into one safe integer
const enc = new TextEncoder();
const dec = new TextDecoder('utf-8');

/**
 * `ids` with every non-overlapping occurrence of the pair (a, b), left to right, replaced by
 * `id`: one merge step, the same in training and in encoding.
 */
function mergePair(ids: readonly number[], a: number, b: number, id: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    if (i + 1 < ids.length && ids[i] === a && ids[i + 1] === b) {
      out.push(id);
      i++;
    } else out.push(ids[i]);
  }
  return out;
}

export interface BpeTrainOptions {
  /** Total vocabulary size including the 256 byte ids and special tokens. */
  vocabSize: number;
  /** Stop merging when the best pair occurs fewer times than this (default 2). */
  minFrequency?: number;
  specialTokens?: string[];
}

export interface BpeJson {
  type: 'bpe';
  version: 1;
  pattern: string;
  merges: [number, number][];
  specialTokens: string[];
}

export class BpeTokenizer implements Tokenizer {
  readonly merges: readonly (readonly [number, number])[];
  readonly specialTokens: string[];
  readonly #rank = new Map<number, number>();
  readonly #bytes: Uint8Array[] = [];
  readonly #cache = new Map<string, Int32Array>();
  readonly #re: RegExp;
  #out = new Int32Array(1024);

  constructor(merges: readonly (readonly [number, number])[], options: { specialTokens?: string[] } = {}) {
    this.specialTokens = checkSpecials('BpeTokenizer', options.specialTokens);
    for (let b = 0; b < 256; b++) this.#bytes.push(Uint8Array.of(b));
    merges.forEach(([a, b], i) => {
      const id = 256 + i;
      if (!Number.isInteger(a) || !Number.isInteger(b) || a < 0 || b < 0 || a >= id || b >= id) {
        throw new RangeError(`BpeTokenizer: merge ${i} is [${a}, ${b}] but may only use ids below ${id}`);
      }
      const key = a * SHIFT + b;
      if (this.#rank.has(key)) throw new RangeError(`BpeTokenizer: merge ${i} [${a}, ${b}] repeats merge ${this.#rank.get(key)}`);
      this.#rank.set(key, i);
      const x = this.#bytes[a];
      const y = this.#bytes[b];
      const m = new Uint8Array(x.length + y.length);
      m.set(x);
      m.set(y, x.length);
      this.#bytes.push(m);
    });
    this.merges = merges.map(([a, b]) => [a, b] as const);
    this.#re = new RegExp(PATTERN, 'gu');
  }

  get vocabSize(): number {
    return 256 + this.merges.length + this.specialTokens.length;
  }

  /** Learns merges from `corpus` until `vocabSize` is reached (or no pair is frequent enough). */
  static train(corpus: Iterable<string>, options: BpeTrainOptions): BpeTokenizer {
    const specials = checkSpecials('BpeTokenizer.train', options?.specialTokens);
    const target = options?.vocabSize;
    if (!Number.isSafeInteger(target) || target < 256 + specials.length) {
      throw new RangeError(`BpeTokenizer.train: vocabSize must be an integer >= ${256 + specials.length} (256 bytes + special tokens); got ${target}`);
    }
    const minFreq = options.minFrequency ?? 2;
    const re = new RegExp(PATTERN, 'gu');
    const wordCounts = new Map<string, number>();
    for (const text of corpus) {
      if (typeof text !== 'string') throw new TypeError(`BpeTokenizer.train: corpus items must be strings; got ${typeof text}`);
      for (const m of text.matchAll(re)) wordCounts.set(m[0], (wordCounts.get(m[0]) ?? 0) + 1);
    }
    // Sorted so that training does not depend on corpus order beyond the counts.
    const entries = [...wordCounts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    const words: number[][] = entries.map(([w]) => [...enc.encode(w)]);
    const freq = entries.map(([, c]) => c);
    const pairCount = new Map<number, number>();
    const pairWords = new Map<number, Set<number>>();
    const addPairs = (wi: number, sign: number): void => {
      const w = words[wi];
      for (let i = 0; i + 1 < w.length; i++) {
        const key = w[i] * SHIFT + w[i + 1];
        pairCount.set(key, (pairCount.get(key) ?? 0) + sign * freq[wi]);
        if (sign > 0) {
          let s = pairWords.get(key);
          if (!s) pairWords.set(key, (s = new Set()));
          s.add(wi);
        }
      }
    };
    for (let wi = 0; wi < words.length; wi++) addPairs(wi, 1);
    const merges: [number, number][] = [];
    const numMerges = target - 256 - specials.length;
    while (merges.length < numMerges) {
      let best = -1;
      let bestCount = 0;
      for (const [key, c] of pairCount) {
        if (c > bestCount || (c === bestCount && c > 0 && key < best)) {
          best = key;
          bestCount = c;
        }
      }
      if (best < 0 || bestCount < Math.max(1, minFreq)) break;
      const a = Math.floor(best / SHIFT);
      const b = best % SHIFT;
      const id = 256 + merges.length;
      merges.push([a, b]);
      const affected = [...(pairWords.get(best) ?? [])].sort((x, y) => x - y);
      for (const wi of affected) {
        addPairs(wi, -1);
        words[wi] = mergePair(words[wi], a, b, id);
        addPairs(wi, 1);
      }
      pairCount.delete(best);
      pairWords.delete(best);
    }
    return new BpeTokenizer(merges, { specialTokens: specials });
  }

  #encodeWord(word: string): Int32Array {
    const hit = this.#cache.get(word);
    if (hit) return hit;
    const b = enc.encode(word);
    let ids: number[] = Array.from(b);
    const rank = this.#rank;
    while (ids.length > 1) {
      let bestRank = Infinity;
      let bestAt = -1;
      for (let i = 0; i + 1 < ids.length; i++) {
        const r = rank.get(ids[i] * SHIFT + ids[i + 1]);
        if (r !== undefined && r < bestRank) {
          bestRank = r;
          bestAt = i;
        }
      }
      if (bestAt < 0) break;
      const [x, y] = this.merges[bestRank];
      const id = 256 + bestRank;
      ids = mergePair(ids, x, y, id);
    }
    const out = Int32Array.from(ids);
    if (this.#cache.size < 1_000_000) this.#cache.set(word, out);
    return out;
  }

  encode(text: string): Int32Array {
    if (typeof text !== 'string') throw new TypeError(`BpeTokenizer.encode: expected a string; got ${typeof text}`);
    let out = this.#out;
    let n = 0;
    const re = this.#re;
    re.lastIndex = 0;
    let m: RegExpExecArray | null;
    while ((m = re.exec(text)) !== null) {
      const ids = this.#encodeWord(m[0]);
      if (n + ids.length > out.length) {
        const grown = new Int32Array(Math.max(out.length * 2, n + ids.length));
        grown.set(out.subarray(0, n));
        out = this.#out = grown;
      }
      out.set(ids, n);
      n += ids.length;
    }
    return out.slice(0, n);
  }

  decode(ids: ArrayLike<number>): string {
    let len = 0;
    const base = 256 + this.merges.length;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) throw new RangeError(`BpeTokenizer.decode: id ${id} at position ${i} is outside [0, ${this.vocabSize})`);
      if (id < base) len += this.#bytes[id].length;
    }
    const bytes = new Uint8Array(len);
    let p = 0;
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] < base) {
        bytes.set(this.#bytes[ids[i]], p);
        p += this.#bytes[ids[i]].length;
      }
    }
    return dec.decode(bytes);
  }

  /** The bytes of token `id` (for inspection). */
  tokenBytes(id: number): Uint8Array {
    const b = this.#bytes[id];
    if (!b) throw new RangeError(`BpeTokenizer.tokenBytes: id ${id} is not a byte or merge id (< ${256 + this.merges.length})`);
    return b.slice();
  }

  specialId(token: string): number {
    return specialIdOf('BpeTokenizer', this.specialTokens, 256 + this.merges.length, token);
  }

  toJSON(): BpeJson {
    return { type: 'bpe', version: 1, pattern: PATTERN, merges: this.merges.map(([a, b]) => [a, b]), specialTokens: this.specialTokens };
  }

  static fromJSON(json: unknown): BpeTokenizer {
    const j = (typeof json === 'string' ? JSON.parse(json) : json) as Partial<BpeJson>;
    if (!j || j.type !== 'bpe' || j.version !== 1 || !Array.isArray(j.merges)) {
      throw new TypeError(`BpeTokenizer.fromJSON: expected { type: 'bpe', version: 1, merges: [...] }; got ${JSON.stringify(json)?.slice(0, 100)}`);
    }
    if (j.pattern !== undefined && j.pattern !== PATTERN) throw new Error(`BpeTokenizer.fromJSON: unsupported pre-tokenizer pattern ${JSON.stringify(j.pattern)}`);
    return new BpeTokenizer(j.merges, { specialTokens: j.specialTokens });
  }
}
