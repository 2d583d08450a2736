/**
 * How error messages show a user's value: by kind, shape and dtype, in a bounded number of
 * characters. Never `JSON.stringify` of an arbitrary value in an error path: it throws on BigInt
 * and on cyclic objects (a tracer points at its own recipe), and it dumps every element of a
 * large array (a 1M-element Array became a 10.9M-character message).
 *
 * - `describeValue(v)`: what the value is: `Array float32[2,3]`, `traced Array float32[3]
 *   (traced by jvp)`, `bigint 1n`, `list of 2: [Array float32[], traced ...]`, `object {a, b}`.
 * - `showValue(v)`: a value an argument was given as, for "...; got X": strings quoted, numbers
 *   and short lists of numbers literally, anything else as `describeValue`.
 */

/** Characters a description may take before it is cut with an ellipsis. */
const MAX_CHARS = 160;
/** Elements of a list, or keys of an object, named before "...". */
const MAX_ITEMS = 4;

interface Shaped {
  aval: { shape: readonly number[]; dtype: string };
}

function isShaped(v: object): v is Shaped {
  const aval = (v as { aval?: unknown }).aval;
  return typeof aval === 'object' && aval !== null && globalThis.Array.isArray((aval as Shaped['aval']).shape) && typeof (aval as Shaped['aval']).dtype === 'string';
}

function cut(s: string, max = MAX_CHARS): string {
  return s.length <= max ? s : `${s.slice(0, max - 3)}...`;
}

function quote(s: string): string {
  return JSON.stringify(s.length > 200 ? `${s.slice(0, 197)}...` : s);
}

function number(v: number): string {
  return Object.is(v, -0) ? '-0' : String(v);
}

function ctorName(v: object): string | undefined {
  const c = (v as { constructor?: { name?: unknown } }).constructor;
  return typeof c === 'function' && typeof c.name === 'string' && c.name !== '' ? c.name : undefined;
}

function describeIn(v: unknown, depth: number, seen: Set<object>): string {
  switch (typeof v) {
    case 'number':
      return `number ${number(v)}`;
    case 'bigint':
      return `bigint ${v}n`;
    case 'string':
      return `string ${quote(v)}`;
    case 'boolean':
      return `boolean ${v}`;
    case 'undefined':
      return 'undefined';
    case 'symbol':
      return `symbol ${cut(String(v.description ?? ''), 40)}`;
    case 'function':
      return v.name ? `function ${v.name}` : 'a function';
  }
  if (v === null) return 'null';
  const o = v as object;
  if (seen.has(o)) return 'a cycle back to an enclosing value';
  if (isShaped(o)) {
    const s = `${o.aval.dtype}[${o.aval.shape.join(',')}]`;
    // Tracers extend Array and answer `_trace`; a concrete Array's `_trace` is null.
    const trace = (o as { _trace?: { main?: { name?: unknown } } | null })._trace;
    if (trace === null || trace === undefined) return `Array ${s}`;
    const by = typeof trace.main?.name === 'string' ? ` (traced by ${trace.main.name})` : '';
    return `traced Array ${s}${by}`;
  }
  if (ArrayBuffer.isView(o)) {
    const n = (o as unknown as { length?: number }).length ?? (o as ArrayBufferView).byteLength;
    return `${ctorName(o) ?? 'typed array'}(${n})`;
  }
  if (depth >= 2) {
    if (globalThis.Array.isArray(o)) return `list of ${o.length}`;
    if (o instanceof Map) return `Map of ${o.size}`;
    return ctorName(o) === 'Object' || ctorName(o) === undefined ? 'object' : `${ctorName(o)} object`;
  }
  seen.add(o);
  try {
    if (globalThis.Array.isArray(o)) {
      const items = o.slice(0, MAX_ITEMS).map((x) => describeIn(x, depth + 1, seen));
      if (o.length > MAX_ITEMS) items.push(`... ${o.length - MAX_ITEMS} more`);
      return `list of ${o.length}: [${items.join(', ')}]`;
    }
    if (o instanceof Map) {
      const keys = [...o.keys()].slice(0, MAX_ITEMS).map((k) => (typeof k === 'string' ? quote(k) : describeIn(k, depth + 1, seen)));
      return `Map of ${o.size}${keys.length ? ` {${keys.join(', ')}${o.size > MAX_ITEMS ? ', ...' : ''}}` : ''}`;
    }
    if (o instanceof Error) return `${ctorName(o) ?? 'Error'} ${quote(o.message)}`;
    const name = ctorName(o);
    const keys = Object.keys(o);
    const shown = keys.slice(0, MAX_ITEMS).join(', ') + (keys.length > MAX_ITEMS ? `, ... ${keys.length - MAX_ITEMS} more` : '');
    const plain = name === undefined || name === 'Object';
    return `${plain ? 'object' : `${name} object`} {${shown}}`;
  } finally {
    seen.delete(o);
  }
}

/** What a value is, by kind, shape and dtype, in at most 160 characters; never throws. */
export function describeValue(v: unknown): string {
  try {
    return cut(describeIn(v, 0, new Set()));
  } catch {
    // A hostile getter or proxy: say what little is safe to say.
    return `a value of type ${typeof v}`;
  }
}

/**
 * A value as an argument was given: a string quoted, a number or boolean as written, a short
 * list of numbers literally (`[1,2]`), null/undefined by name; anything else as `describeValue`.
 */
export function showValue(v: unknown): string {
  if (typeof v === 'string') return quote(v);
  if (typeof v === 'number') return number(v);
  if (typeof v === 'boolean' || v === null || v === undefined) return String(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (globalThis.Array.isArray(v) && v.length <= 16 && v.every((x) => typeof x === 'number' || typeof x === 'string' || typeof x === 'boolean' || x === null)) {
    return cut(`[${v.map((x) => (typeof x === 'string' ? quote(x) : typeof x === 'number' ? number(x) : String(x))).join(',')}]`);
  }
  if (globalThis.Array.isArray(v) && v.length <= 8 && v.every((x) => globalThis.Array.isArray(x) && x.length <= 8 && x.every((y) => typeof y === 'number'))) {
    return cut(`[${v.map((x) => `[${(x as number[]).map(number).join(',')}]`).join(',')}]`);
  }
  return describeValue(v);
}
