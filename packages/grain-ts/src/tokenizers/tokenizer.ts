/**
 * What a tokenizer offers the pipeline: text to int32 token ids and back, plus a JSON form.
 * Ids `0..255` are raw bytes in both tokenizers here, so any valid Unicode text round-trips.
 */
export interface Tokenizer {
  readonly vocabSize: number;
  encode(text: string): Int32Array;
  decode(ids: ArrayLike<number>): string;
  /** The id of a special token (e.g. `'<eos>'`); throws for an unknown one. */
  specialId(token: string): number;
  toJSON(): unknown;
}

export function checkSpecials(op: string, specials: unknown): string[] {
  if (specials === undefined) return [];
  if (!Array.isArray(specials) || specials.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new TypeError(`${op}: specialTokens must be a list of non-empty strings; got ${JSON.stringify(specials)}`);
  }
  if (new Set(specials).size !== specials.length) throw new RangeError(`${op}: specialTokens has duplicates: ${JSON.stringify(specials)}`);
  return [...specials];
}

export function specialIdOf(op: string, specials: readonly string[], base: number, token: string): number {
  const k = specials.indexOf(token);
  if (k < 0) throw new RangeError(`${op}.specialId: unknown special token ${JSON.stringify(token)}; this tokenizer has ${JSON.stringify(specials)}`);
  return base + k;
}
