/**
 * The stateful iterator every dataset hands out (Grain's `DatasetIterator`). Operations chain
 * iterators through `nextOrEnd()`, which returns the element or the `END` marker without
 * allocating a result object; `next()` wraps it for the JS iterator protocols. Each iterator
 * implements core's `Checkpointable`: `getState()` is small JSON (positions and counters, never
 * elements) and `setState()` on a freshly built pipeline resumes on exactly the next element.
 *
 * Every state is fingerprinted: `getState()` returns `{ pipeline, state }`, where `pipeline` is
 * `describe()` of the whole chain (source, seeds, operations and their options; not the worker
 * count or prefetch, which do not change the stream) and `state` is the chain's own positions
 * (`innerState()`, which operations use to nest their parents' states). `setState()` refuses a
 * state whose pipeline differs, naming the first difference, so a state cannot silently resume
 * the wrong stream.
 */
import type { Checkpointable } from '@tpukit/core';

/** JSON values (what `getState()` returns). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Marks the end of a stream in `nextOrEnd()`. */
export const END: unique symbol = Symbol('grain.END');
export type End = typeof END;

/** What `getState()` returns: the pipeline's description and the positions within it. */
export type PipelineState<S extends JsonValue = JsonValue> = { pipeline: string; state: S };

export abstract class DatasetIterator<T, S extends JsonValue = JsonValue> implements Checkpointable<JsonValue>, IterableIterator<T> {
  /** The next element, or `END` when the stream is exhausted. */
  abstract nextOrEnd(): T | End;
  /**
   * This chain's positions without the fingerprint (what operations nest in their own states).
   * Implement this (and `setInnerState`) in a custom iterator; users call `getState()`.
   */
  abstract innerState(): S;
  /** Restores `innerState()`'s output (or, where an operation supports it, a list of them). */
  abstract setInnerState(state: S): void;

  /**
   * The pipeline this iterator reads, as text: the source, seeds, operations and the options
   * that change the stream. A custom iterator should override it (default: its class name).
   */
  describe(): string {
    return this.constructor.name;
  }

  /** The name errors from `setState` start with. */
  protected get stateOp(): string {
    return 'DatasetIterator';
  }

  /** `{ pipeline: describe(), state: innerState() }`: JSON, small, restorable by `setState`. */
  getState(): PipelineState<S> {
    return { pipeline: this.describe(), state: this.innerState() };
  }

  /**
   * Resumes from `getState()` of an iterator of the same pipeline (or, for elastic shards, a
   * list of every old shard's state). A state of a different pipeline, or one without a
   * fingerprint, is refused before anything changes.
   */
  setState(state: JsonValue): void {
    const mine = this.describe();
    const op = this.stateOp;
    const inner = Array.isArray(state) ? state.map((s, i) => unwrapState(op, s, mine, `states[${i}]`)) : unwrapState(op, state, mine, 'the state');
    this.setInnerState(inner as S);
  }

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

/** The positions inside a fingerprinted state, after checking it was saved by pipeline `mine`. */
function unwrapState(op: string, state: unknown, mine: string, what: string): JsonValue {
  const s = state as { pipeline?: unknown; state?: unknown } | null;
  if (typeof s !== 'object' || s === null || Array.isArray(s) || typeof s.pipeline !== 'string' || !('state' in s)) {
    badState(op, `${what} has no pipeline fingerprint (expected { pipeline, state } from getState(); states saved before grain-ts fingerprinted them are refused because they cannot be checked against this pipeline, ${JSON.stringify(mine)}; if you know it came from this very pipeline, pass { pipeline: it.describe(), state: <old state> })`, state);
  }
  if (s.pipeline !== mine) {
    throw new Error(`${op}.setState: ${what} was saved by a different pipeline; first difference: ${firstDifference(s.pipeline, mine)}\n  saved: ${s.pipeline}\n  this:  ${mine}`);
  }
  return s.state as JsonValue;
}

const STEP_BREAK = new Set(['.', '(', ')', '[', ']', ',', ' ']);

/** The step around the first character where two descriptions differ: `saved "seed(0)" vs this "seed(7)"`. */
export function firstDifference(saved: string, mine: string): string {
  let i = 0;
  while (i < saved.length && i < mine.length && saved[i] === mine[i]) i++;
  // Start at the innermost call or list around the difference (`range(0,10,1)`, `seed(0)`,
  // `[1, 2]`), or at the step boundary where one description goes on (`.map`).
  let from = i;
  if (saved[i] !== '.' && mine[i] !== '.') {
    let depth = 0;
    for (let k = i - 1; k >= 0; k--) {
      const c = saved[k];
      if (c === ')' || c === ']') depth++;
      else if (c === '(' || c === '[') {
        if (depth-- > 0) continue;
        from = k;
        while (from > 0 && !STEP_BREAK.has(saved[from - 1])) from--;
        break;
      } else if (c === '.' && depth === 0) {
        from = k + 1;
        break;
      } else if (k === 0) from = 0;
    }
  }
  const until = (t: string) => {
    let depth = 0;
    for (let k = from; k < t.length; k++) {
      const c = t[k];
      if (c === '(' || c === '[') depth++;
      else if (c === ')' || c === ']') {
        if (depth === 0) return k;
        if (--depth === 0 && k >= i) return k + 1;
      } else if (depth === 0 && k > i && STEP_BREAK.has(c)) return k;
    }
    return t.length;
  };
  const show = (t: string) => {
    if (from >= t.length) return '(end)';
    const end = until(t);
    return JSON.stringify(end - from > 160 ? `${t.slice(from, from + 160)}...` : t.slice(from, end));
  };
  return `saved ${show(saved)} vs this ${show(mine)} (at character ${i})`;
}

/** `name(k=v, ...)` for the options that are set, in the order given (for `describe()`). */
export function describeCall(name: string, options: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(options)) if (v !== undefined) parts.push(`${k}=${Array.isArray(v) ? `[${v.join(',')}]` : String(v)}`);
  return `${name}(${parts.join(', ')})`;
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
