/**
 * The `debug` namespace (jax.debug): `debug.print(fmt, ...args)` and `debug.callback(fn, ...args)`
 * stage a `debug_callback` primitive (see `callback.ts`) that runs on the values at run time,
 * every call: eagerly it prints at once; under `jit` it prints each time the compiled program
 * runs (never at trace time); under `vmap` once per batch element; under `grad`/`jvp` the
 * primal values; inside scan/while/cond bodies once per iteration or taken branch.
 *
 * Arguments are pytrees; their Array leaves become operands, other leaves (numbers, strings)
 * are fixed at trace time. Keyword fields (`{name}`) read a trailing plain object:
 * `debug.print('x={x} y={}', y, { x })`; in that object the key `ordered` is JAX's `ordered=`
 * option, not a field. Printed lines go through a replaceable sink (default `console.log`);
 * `capturePrints()` collects them instead (for tests).
 */
import { Array } from '../array';
import * as tree from '../tree';
import { bind } from '../trace';
import { type DebugEffect, debugCallbackP } from './callback';
import { checkFields, parseFormat, renderFormat } from './format';

export { applySpec, arrayStr, parseFormat, reprValue, scalarRepr, strValue } from './format';
export { type DebugCallbackParams, type DebugEffect, debugCallbackP, isEffectful } from './callback';

export type PrintSink = (line: string) => void;

const consoleSink: PrintSink = (line) => console.log(line);
let sink: PrintSink = consoleSink;

/** Routes `debug.print` output to `fn` (null: back to console.log). Returns the previous sink. */
export function setPrintSink(fn: PrintSink | null): PrintSink {
  const prev = sink;
  sink = fn ?? consoleSink;
  return prev;
}

/** Lines captured by `capturePrints`, until `restore()` (or `using`) puts the previous sink back. */
export interface PrintCapture {
  /** Every line printed since the capture began, in order. */
  readonly lines: string[];
  /** Puts back the sink that was set when the capture began (a second call does nothing). */
  restore(): void;
  [Symbol.dispose](): void;
}

/**
 * Captures `debug.print` output in `lines` instead of printing it, until `restore()`: what a
 * test (or a notebook cell) uses to read what a program printed. Captures nest; restore them
 * in reverse order.
 */
export function capturePrints(): PrintCapture {
  const lines: string[] = [];
  const prev = setPrintSink((line) => lines.push(line));
  let restored = false;
  const restore = (): void => {
    if (restored) return;
    restored = true;
    setPrintSink(prev);
  };
  return { lines, restore, [Symbol.dispose]: restore };
}

const isPlainObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !(x instanceof Array) && (Object.getPrototypeOf(x) === Object.prototype || Object.getPrototypeOf(x) === null);

/** Stages `callback` on the Array leaves of `values`; it gets `values` rebuilt with concrete Arrays. */
function stage(values: unknown, onRun: (rebuilt: any) => void, effect: DebugEffect, label: string): void {
  const [leaves, def] = tree.flatten(values, { isLeaf: (x) => x instanceof Array });
  const arrayPos: number[] = [];
  leaves.forEach((l, i) => {
    if (l instanceof Array) arrayPos.push(i);
  });
  const fixed = leaves.slice();
  const callback = (args: Array[]): void => {
    const full = fixed.slice();
    arrayPos.forEach((p, k) => (full[p] = args[k]));
    onRun(tree.unflatten(def, full));
  };
  bind(debugCallbackP, arrayPos.map((p) => leaves[p] as Array), { callback, effect, label });
}

function splitOptions(args: unknown[], wantsNamed: boolean): { positional: unknown[]; named: Record<string, unknown>; ordered: boolean } {
  const last = args[args.length - 1];
  const onlyOrdered = isPlainObject(last) && Object.keys(last).length === 1 && 'ordered' in last;
  if (args.length && isPlainObject(last) && (wantsNamed || onlyOrdered)) {
    const { ordered, ...named } = last as Record<string, unknown>;
    if (ordered !== undefined && typeof ordered !== 'boolean') throw new TypeError(`debug: option ordered must be a boolean; got ${typeof ordered}`);
    return { positional: args.slice(0, -1), named, ordered: ordered === true };
  }
  return { positional: args, named: {}, ordered: false };
}

/**
 * `jax.debug.print`: formats `fmt` (Python str.format syntax: `{}`, `{0}`, `{name}`, `{x:.3f}`)
 * with the arguments' values at run time and writes the line to the print sink. The format is
 * checked now: a missing or unused argument is an error here, at the call.
 */
export function print(fmt: string, ...args: unknown[]): void {
  if (typeof fmt !== 'string') throw new TypeError(`debug.print: the first argument must be a format string; got ${fmt === null ? 'null' : typeof fmt}`);
  const fields = parseFormat(fmt);
  const wantsNamed = fields.some((f) => f.kind === 'field' && typeof f.key === 'string');
  const { positional, named, ordered } = splitOptions(args, wantsNamed);
  checkFields(fields, positional, named, fmt);
  stage({ positional, named }, (v: { positional: unknown[]; named: Record<string, unknown> }) => sink(renderFormat(fields, v.positional, v.named)), ordered ? 'ordered' : 'unordered', `print ${JSON.stringify(fmt)}`);
}

/**
 * `jax.debug.callback`: calls `fn(...args)` with the arguments' concrete values at run time
 * (same pytree structure, Array leaves concrete). Its result is ignored. A trailing
 * `{ ordered: true }` is JAX's `ordered=True`.
 */
export function callback(fn: (...args: any[]) => unknown, ...args: unknown[]): void {
  if (typeof fn !== 'function') throw new TypeError(`debug.callback: the first argument must be a function; got ${fn === null ? 'null' : typeof fn}`);
  const { positional, ordered } = splitOptions(args, false);
  stage(positional, (v: unknown[]) => void fn(...v), ordered ? 'ordered' : 'unordered', `callback ${fn.name || 'fn'}`);
}
