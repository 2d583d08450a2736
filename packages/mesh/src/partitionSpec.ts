/**
 * `PartitionSpec` (alias `P`): for each array dimension, the mesh axis it is split over, a tuple
 * of axes (split over their product, the first axis major), or `null` (not split). Dimensions
 * past the spec's length are not split. Checked against a mesh and a shape by `NamedSharding`.
 */

export type SpecEntry = string | readonly string[] | null;

export class PartitionSpec {
  readonly entries: readonly SpecEntry[];

  constructor(...entries: SpecEntry[]) {
    entries.forEach((e, i) => {
      const ok = e === null || typeof e === 'string' || (globalThis.Array.isArray(e) && e.every((a) => typeof a === 'string'));
      if (!ok) throw new TypeError(`PartitionSpec: entry ${i} must be an axis name, a tuple of axis names or null; got ${JSON.stringify(e)}`);
    });
    this.entries = Object.freeze(entries.map((e) => (globalThis.Array.isArray(e) ? Object.freeze([...e]) : e)));
  }

  get length(): number {
    return this.entries.length;
  }

  /** The axes of entry `i` (empty for null or past the end). */
  axesOf(i: number): readonly string[] {
    const e = this.entries[i];
    return e === undefined || e === null ? [] : typeof e === 'string' ? [e] : e;
  }

  /** Every axis the spec names, in order. */
  axes(): string[] {
    return this.entries.flatMap((_, i) => [...this.axesOf(i)]);
  }

  equals(other: PartitionSpec): boolean {
    const a = this.entries;
    const b = other.entries;
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) {
      const x = this.axesOf(i);
      const y = other.axesOf(i);
      if (x.length !== y.length || x.some((v, k) => v !== y[k])) return false;
    }
    return true;
  }

  toString(): string {
    const show = (e: SpecEntry) => (e === null ? 'null' : typeof e === 'string' ? `'${e}'` : `[${e.map((a) => `'${a}'`).join(', ')}]`);
    return `P(${this.entries.map(show).join(', ')})`;
  }
}

/** `P('x', null, ['y', 'z'])` is `new PartitionSpec('x', null, ['y', 'z'])`. */
export function P(...entries: SpecEntry[]): PartitionSpec {
  return new PartitionSpec(...entries);
}
