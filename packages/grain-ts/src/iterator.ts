/**
 * The stateful iterator every dataset hands out (Grain's `DatasetIterator`). Operations chain
 * iterators through `nextOrEnd()`, which returns the element or the `END` marker without
 * allocating a result object; `next()` wraps it for the JS iterator protocols. Each iterator
 * implements core's `Checkpointable`: `getState()` is small JSON (positions and counters, never
 * elements) and `setState()` on a freshly built pipeline resumes on exactly the next element.
 */
import type { Checkpointable } from '@tpukit/core';

/** JSON values (what `getState()` returns). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Marks the end of a stream in `nextOrEnd()`. */
export const END: unique symbol = Symbol('grain.END');
export type End = typeof END;

export abstract class DatasetIterator<T, S extends JsonValue = JsonValue> implements Checkpointable<S>, IterableIterator<T> {
  /** The next element, or `END` when the stream is exhausted. */
  abstract nextOrEnd(): T | End;
  abstract getState(): S;
  abstract setState(state: S): void;

  next(): IteratorResult<T> {
    const v = this.nextOrEnd();
    return v === END ? { done: true, value: undefined } : { done: false, value: v };
  }

  /**
   * The global index of the record behind the element last returned, where an elastic shard
   * sits underneath (NaN where unknown). Packing uses it to resume exactly under a new shard count.
   */
  lastIndex(): number {
    return Number.NaN;
  }

  /** The source-end iterator of a linear chain (through one-parent operations). */
  root(): DatasetIterator<unknown> {
    return this as DatasetIterator<unknown>;
  }

  /** Releases resources (worker threads, file handles) held by this iterator and its parents. */
  close(): void {}

  [Symbol.iterator](): this {
    return this;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    const self = this;
    return {
      next: async () => self.next(),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** Up to `n` next elements (fewer at the end of the stream). */
  take(n: number): T[] {
    const out: T[] = [];
    for (let i = 0; i < n; i++) {
      const v = this.nextOrEnd();
      if (v === END) break;
      out.push(v);
    }
    return out;
  }
}

/** Throws a uniform error for a state that does not fit an iterator. */
export function badState(op: string, what: string, state: unknown): never {
  let shown: string;
  try {
    shown = JSON.stringify(state);
  } catch {
    shown = String(state);
  }
  if (shown !== undefined && shown.length > 200) shown = `${shown.slice(0, 200)}...`;
  throw new Error(`${op}.setState: ${what}; got ${shown}`);
}

/** Checks `state` is a plain object holding the listed keys (with the given JS types). */
export function checkState(op: string, state: unknown, keys: Record<string, 'number' | 'object' | 'boolean' | 'string' | 'any'>): Record<string, any> {
  if (typeof state !== 'object' || state === null || Array.isArray(state)) badState(op, 'expected an object state', state);
  const s = state as Record<string, unknown>;
  for (const [k, t] of Object.entries(keys)) {
    if (!(k in s)) badState(op, `state is missing "${k}" (this state was saved by a different pipeline?)`, state);
    if (t !== 'any' && typeof s[k] !== t) badState(op, `state field "${k}" must be a ${t}`, state);
  }
  return s;
}

/** Checks a non-negative integer argument. */
export function checkCount(op: string, name: string, v: number, min = 0): number {
  if (!Number.isSafeInteger(v) || v < min) throw new RangeError(`${op}: ${name} must be an integer >= ${min}; got ${v}`);
  return v;
}
