/**
 * The arguments after the array of every jnp / jax.nn function that takes an axis (reductions,
 * argmax, cumsum, sort, softmax, logsumexp, standardize, and the Array methods that forward to
 * them). As in jnp, the axis may come positionally, and options follow in one object:
 *
 *   np.sum(x, 0)   np.sum(x, [0, 1], { keepdims: true })   np.sum(x, { axis: 0, keepdims: true })
 *
 * Anything a function does not understand is an error naming the function, the argument and
 * the valid choices: an unknown option name, a second axis, a string where an axis goes, or a
 * surplus argument. (Before, `np.sum(x, 0)` silently reduced every axis.)
 */
import { showValue } from '../describe';
import type { AxisArg } from '../methodArgs';

export type { AxisArg };

function isAxisLike(v: unknown): v is AxisArg {
  return v === null || typeof v === 'number' || (globalThis.Array.isArray(v) && v.every((a) => typeof a === 'number'));
}

function isOptions(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || globalThis.Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Rejects option names outside `keys` (functions that take an options object but no axis use it directly). */
export function checkOptions(op: string, opts: unknown, keys: readonly string[]): void {
  if (opts === undefined) return;
  if (!isOptions(opts)) throw new TypeError(`${op}: options must be an object {${keys.join(', ')}}; got ${showValue(opts)}`);
  checkKeys(op, opts, keys);
}

function checkKeys(op: string, o: Record<string, unknown>, keys: readonly string[]): void {
  for (const k of Object.keys(o)) {
    if (!keys.includes(k)) {
      throw new TypeError(`${op}: unknown option ${showValue(k)}; valid options: ${keys.join(', ') || 'none'}`);
    }
  }
}

/**
 * Parses `args[start..]` of a call `op(x, axisOrOptions?, options?)`. `keys` lists the options
 * the function understands, `axis` included; `oneAxis` makes a list of axes an error (argmax,
 * cumsum, sort take a single axis). Returns the options object with `axis` filled in.
 */
export function axisArgs<O extends { axis?: AxisArg }>(op: string, args: ArrayLike<unknown>, start: number, keys: readonly (keyof O & string)[], oneAxis = false): O {
  const n = args.length - start;
  const first = n > 0 ? args[start] : undefined;
  const second = n > 1 ? args[start + 1] : undefined;
  const rest = keys.filter((k) => k !== 'axis');
  const shape = `${op}(x, axis?, {${rest.join(', ')}}?) or ${op}(x, {${keys.join(', ')}}?)`;
  if (n > 2) throw new TypeError(`${op}: too many arguments (${args.length}); expected ${shape}`);
  let out: Record<string, unknown>;
  if (first === undefined) {
    out = {};
    if (second !== undefined) {
      if (!isOptions(second)) throw new TypeError(`${op}: options must be an object {${rest.join(', ')}}; got ${showValue(second)}`);
      checkKeys(op, second, rest);
      out = { ...second };
    }
  } else if (isAxisLike(first)) {
    if (oneAxis && globalThis.Array.isArray(first)) throw new TypeError(`${op}: axis must be one integer or null; got ${showValue(first)}`);
    if (second !== undefined) {
      if (!isOptions(second)) throw new TypeError(`${op}: the argument after the axis must be an options object {${rest.join(', ')}}; got ${showValue(second)}`);
      if ('axis' in second) throw new TypeError(`${op}: axis given twice: positionally (${showValue(first)}) and as an option (${showValue(second.axis)})`);
      checkKeys(op, second, rest);
    }
    out = { ...(second as object | undefined), axis: first };
  } else if (isOptions(first)) {
    if (second !== undefined) throw new TypeError(`${op}: unexpected argument after the options object: ${showValue(second)}; expected ${shape}`);
    checkKeys(op, first, keys);
    out = { ...first };
    if (out.axis !== undefined && !isAxisLike(out.axis)) throw new TypeError(`${op}: axis must be an integer${oneAxis ? '' : ', a list of integers'} or null; got ${showValue(out.axis)}`);
    if (oneAxis && globalThis.Array.isArray(out.axis)) throw new TypeError(`${op}: axis must be one integer or null; got ${showValue(out.axis)}`);
  } else {
    throw new TypeError(`${op}: argument 1 must be an axis (integer${oneAxis ? '' : ' or list of integers'}) or an options object; got ${showValue(first)}; expected ${shape}`);
  }
  return out as O;
}
