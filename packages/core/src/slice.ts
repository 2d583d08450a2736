/**
 * `Slice`: a Python-style slice object, one kind of index item (`x.get(np.s(1, 4, 2))`). It
 * lives below array.ts because `Array.get` / `Array.at` name it in their types; the indexing
 * itself is numpy/indexing.ts.
 */

/** A Python-style slice object: `s(start, stop, step)`; null means the default. */
export class Slice {
  constructor(
    readonly start: number | null = null,
    readonly stop: number | null = null,
    readonly step: number | null = null,
  ) {
    for (const [name, v] of [['start', start], ['stop', stop], ['step', step]] as const) {
      if (v !== null && !Number.isInteger(v)) throw new TypeError(`slice: ${name} must be an integer or null; got ${String(v)}`);
    }
    if (step === 0) throw new Error('slice: step cannot be zero');
  }
  toString(): string {
    const f = (v: number | null): string => (v === null ? '' : String(v));
    return `${f(this.start)}:${f(this.stop)}${this.step === null ? '' : `:${this.step}`}`;
  }
}
