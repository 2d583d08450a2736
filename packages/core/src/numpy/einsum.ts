/**
 * `jnp.einsum`, `jnp.tensordot` and `jnp.outer`. einsum parses subscripts (letters, one `...`
 * per term, implicit or explicit output), then lowers as JAX does: repeated labels within one
 * operand take a diagonal, labels used by one operand only are summed away, and the operands are
 * contracted left to right with `dot_general` (shared labels still needed later are batch dims,
 * the rest are contracted); a final transpose puts the labels in output order. Ellipsis
 * dimensions broadcast (size 1 against n); named labels must agree exactly.
 */
import type { Array } from '../array';
import { type ArrayLike, asArray, typeOf } from '../convert';
import { type DType, resultType } from '../dtype';
import * as lax from '../lax/ops';
import type { PrecisionLike } from '../lax/precision';
import { fmt, normalizeAxis } from '../shape';
import { diagonal } from './diagonal';
import { multiply } from './math';
import { castTo } from './promote';
import { showValue } from '../describe';

export interface EinsumOptions {
  precision?: PrecisionLike;
  preferredElementType?: DType | null;
}

interface Term {
  labels: string[];
  ellipsisAt: number; // -1 when absent
}

function parseTerm(spec: string, text: string, where: string): Term {
  const labels: string[] = [];
  let ellipsisAt = -1;
  for (let i = 0; i < text.length; ) {
    if (text.startsWith('...', i)) {
      if (ellipsisAt >= 0) throw new SyntaxError(`einsum: subscripts ${showValue(spec)}: ${where} has more than one '...'`);
      ellipsisAt = labels.length;
      i += 3;
    } else if (/[a-zA-Z]/.test(text[i])) labels.push(text[i++]);
    else {
      throw new SyntaxError(`einsum: subscripts ${showValue(spec)}: ${where} has invalid character ${showValue(text[i])}; use letters a-z, A-Z and '...'`);
    }
  }
  return { labels, ellipsisAt };
}

/** `jnp.einsum(subscripts, ...operands)`, e.g. `einsum('bij,bjk->bik', a, b)`. */
export function einsum(subscripts: string, ...operands: ArrayLike[]): Array;
/** With an options object last: `einsum('ij,jk', a, b, { precision: 'highest' })`. */
export function einsum(subscripts: string, ...operandsAndOptions: [...ArrayLike[], EinsumOptions]): Array;
export function einsum(subscripts: string, ...args: unknown[]): Array {
  let operands = args as ArrayLike[];
  let opts: EinsumOptions = {};
  const last = args[args.length - 1];
  if (args.length > 1 && last !== null && typeof last === 'object' && !globalThis.Array.isArray(last) && !ArrayBuffer.isView(last) && !('aval' in (last as object))) {
    opts = last as EinsumOptions;
    operands = args.slice(0, -1) as ArrayLike[];
  }
  if (typeof subscripts !== 'string') throw new TypeError(`einsum: subscripts must be a string; got ${String(subscripts)}`);
  const spec = subscripts.replace(/\s+/g, '');
  const arrow = spec.split('->');
  if (arrow.length > 2) throw new SyntaxError(`einsum: subscripts ${showValue(subscripts)} has more than one '->'`);
  const inTerms = arrow[0].split(',');
  if (operands.length === 0) throw new Error('einsum: needs at least one operand');
  if (inTerms.length !== operands.length) {
    throw new Error(`einsum: subscripts ${showValue(subscripts)} name ${inTerms.length} operand(s) but ${operands.length} were given`);
  }
  const rt = resultType(...operands.map(typeOf));
  let xs = operands.map((o) => castTo(asArray(o, { op: 'einsum' }), rt.dtype, rt.weak, 'einsum'));
  if (rt.dtype === 'bool') xs = xs.map((x) => lax.convertElementType(x, 'int32'));
  const terms = inTerms.map((t, i) => parseTerm(subscripts, t, `operand ${i} term ${showValue(t)}`));

  // Expand ellipses into internal labels ('#k'), right-aligned across operands.
  const ellRanks = terms.map((t, i) => {
    const r = xs[i].ndim;
    const named = t.labels.length;
    if (t.ellipsisAt < 0 ? named !== r : named > r) {
      throw new Error(
        `einsum: subscripts ${showValue(subscripts)}: operand ${i} term ${showValue(inTerms[i])} has ${named} labels${t.ellipsisAt < 0 ? '' : " plus '...'"} but the operand has shape ${fmt(xs[i].shape)} (rank ${r})`,
      );
    }
    return t.ellipsisAt < 0 ? 0 : r - named;
  });
  const E = Math.max(0, ...ellRanks);
  const ellLabels = (k: number): string[] => globalThis.Array.from({ length: k }, (_, j) => `#${E - k + j}`);
  const opLabels = terms.map((t, i) => (t.ellipsisAt < 0 ? t.labels.slice() : [...t.labels.slice(0, t.ellipsisAt), ...ellLabels(ellRanks[i]), ...t.labels.slice(t.ellipsisAt)]));

  // Label sizes: named labels must agree; ellipsis labels broadcast.
  const size = new Map<string, number>();
  opLabels.forEach((ls, i) =>
    ls.forEach((l, d) => {
      const n = xs[i].shape[d];
      const prev = size.get(l);
      if (prev === undefined || prev === 1) size.set(l, n);
      else if (n !== prev && !(l.startsWith('#') && n === 1)) {
        throw new Error(`einsum: subscripts ${showValue(subscripts)}: label ${l.startsWith('#') ? "'...'" : `'${l}'`} has size ${n} in operand ${i} (shape ${fmt(xs[i].shape)}) but ${prev} elsewhere`);
      }
    }),
  );

  let outLabels: string[];
  if (arrow.length === 2) {
    const t = parseTerm(subscripts, arrow[1], `output term ${showValue(arrow[1])}`);
    outLabels = t.ellipsisAt < 0 ? t.labels : [...t.labels.slice(0, t.ellipsisAt), ...ellLabels(E), ...t.labels.slice(t.ellipsisAt)];
    const seen = new Set<string>();
    for (const l of t.labels) {
      if (seen.has(l)) throw new Error(`einsum: subscripts ${showValue(subscripts)}: output label '${l}' appears more than once`);
      seen.add(l);
      if (!size.has(l)) throw new Error(`einsum: subscripts ${showValue(subscripts)}: output label '${l}' does not appear in any input`);
    }
  } else {
    const counts = new Map<string, number>();
    for (const t of terms) for (const l of t.labels) counts.set(l, (counts.get(l) ?? 0) + 1);
    outLabels = [...ellLabels(E), ...[...counts.keys()].filter((l) => counts.get(l) === 1).sort()];
  }

  // Per operand: diagonals for repeated labels, broadcast size-1 ellipsis dims, sum private labels.
  const labelsNow = opLabels.map((ls) => ls.slice());
  xs = xs.map((x, i) => {
    let ls = labelsNow[i];
    for (;;) {
      const p = ls.findIndex((l, j) => ls.indexOf(l) !== j);
      if (p < 0) break;
      const q = ls.indexOf(ls[p]);
      x = diagonal(x, 0, q, p);
      const l = ls[p];
      ls = [...ls.filter((_, j) => j !== p && j !== q), l];
    }
    const want = ls.map((l) => size.get(l)!);
    if (want.some((n, d) => n !== x.shape[d])) x = lax.broadcastInDim(x, want, want.map((_, d) => d));
    const elsewhere = new Set([...outLabels, ...labelsNow.flatMap((o, j) => (j === i ? [] : o))]);
    const priv = ls.flatMap((l, d) => (elsewhere.has(l) ? [] : [d]));
    if (priv.length) {
      x = lax.reduceSum(x, priv);
      ls = ls.filter((_, d) => !priv.includes(d));
    }
    labelsNow[i] = ls;
    return x;
  });

  let acc = xs[0];
  let accLabels = labelsNow[0];
  for (let i = 1; i < xs.length; i++) {
    const b = xs[i];
    const bLabels = labelsNow[i];
    const later = new Set([...outLabels, ...labelsNow.slice(i + 1).flat()]);
    const shared = accLabels.filter((l) => bLabels.includes(l));
    const batch = shared.filter((l) => later.has(l));
    const contract = shared.filter((l) => !later.has(l));
    const dn: lax.DotDimensionNumbers = [
      [contract.map((l) => accLabels.indexOf(l)), contract.map((l) => bLabels.indexOf(l))],
      [batch.map((l) => accLabels.indexOf(l)), batch.map((l) => bLabels.indexOf(l))],
    ];
    acc = lax.dotGeneral(acc, b, dn, opts);
    accLabels = [...batch, ...accLabels.filter((l) => !shared.includes(l)), ...bLabels.filter((l) => !shared.includes(l))];
    // Labels neither in the output nor in a later operand can be summed now.
    const done = accLabels.flatMap((l, d) => (later.has(l) ? [] : [d]));
    if (done.length) {
      acc = lax.reduceSum(acc, done);
      accLabels = accLabels.filter((_, d) => !done.includes(d));
    }
  }
  const perm = outLabels.map((l) => accLabels.indexOf(l));
  return lax.transpose(acc, perm);
}

function axisList(op: string, v: number | readonly number[], rank: number, arg: string): number[] {
  return (typeof v === 'number' ? [v] : [...v]).map((a) => normalizeAxis(a, rank, op, arg));
}

/** `jnp.tensordot(a, b, axes=2)`: `axes` is N (last N of a with first N of b) or `[axesA, axesB]`. */
export function tensordot(a: ArrayLike, b: ArrayLike, axes: number | readonly [number | readonly number[], number | readonly number[]] = 2, opts: EinsumOptions = {}): Array {
  const rt = resultType(typeOf(a), typeOf(b));
  const x = castTo(a, rt.dtype, rt.weak, 'tensordot');
  const y = castTo(b, rt.dtype, rt.weak, 'tensordot');
  let ax: number[];
  let bx: number[];
  if (typeof axes === 'number') {
    if (!Number.isInteger(axes) || axes < 0 || axes > x.ndim || axes > y.ndim) {
      throw new RangeError(`tensordot: axes ${axes} must be an integer between 0 and min(rank a, rank b) = ${Math.min(x.ndim, y.ndim)} (a ${fmt(x.shape)}, b ${fmt(y.shape)})`);
    }
    ax = globalThis.Array.from({ length: axes }, (_, i) => x.ndim - axes + i);
    bx = globalThis.Array.from({ length: axes }, (_, i) => i);
  } else {
    if (!globalThis.Array.isArray(axes) || axes.length !== 2) throw new Error(`tensordot: axes must be an integer or a pair [axesA, axesB]; got ${showValue(axes)}`);
    ax = axisList('tensordot', axes[0], x.ndim, 'axes[0]');
    bx = axisList('tensordot', axes[1], y.ndim, 'axes[1]');
  }
  if (ax.length !== bx.length) throw new Error(`tensordot: axes ${showValue(axes)} list ${ax.length} axes of a but ${bx.length} of b`);
  ax.forEach((d, i) => {
    if (x.shape[d] !== y.shape[bx[i]]) {
      throw new Error(`tensordot: shape mismatch: a ${fmt(x.shape)} axis ${d} (size ${x.shape[d]}) vs b ${fmt(y.shape)} axis ${bx[i]} (size ${y.shape[bx[i]]})`);
    }
  });
  return lax.dotGeneral(x, y, [[ax, bx], [[], []]], opts);
}

/** `jnp.outer(a, b)`: both inputs are flattened. */
export function outer(a: ArrayLike, b: ArrayLike): Array {
  const x = asArray(a, { op: 'outer' });
  const y = asArray(b, { op: 'outer' });
  return multiply(lax.reshape(x, [x.size, 1]), lax.reshape(y, [1, y.size]));
}
