/**
 * `jnp.pad(x, padWidth, {mode, constantValues})` with the modes constant, edge, reflect,
 * symmetric and wrap. Constant padding is one `lax.pad` (or one per axis when the values differ
 * by axis); the other modes build, per padded axis, a static source index for every output
 * position and gather it with `take`, which also covers pads wider than the axis (periodic
 * reflection, as NumPy produces).
 */
import type { Array } from '../array';
import { type ArrayLike, asArray } from '../convert';
import * as lax from '../lax/ops';
import { fmt } from '../shape';
import { castTo } from './promote';
import { take } from './rearranging';
import { showValue } from '../describe';

export type PadMode = 'constant' | 'edge' | 'reflect' | 'symmetric' | 'wrap';
export type PadWidth = number | readonly number[] | readonly (readonly number[])[];

export interface PadOptions {
  mode?: PadMode;
  /** For 'constant': a scalar, `[before, after]`, or one `[before, after]` per axis. Default 0. */
  constantValues?: number | readonly number[] | readonly (readonly number[])[];
}

/** NumPy's broadcasting of pad specs to one `[before, after]` per axis. */
function pairs(op: string, arg: string, spec: PadWidth, ndim: number, integer: boolean): [number, number][] {
  const bad = (): never => {
    throw new Error(`${op}: ${arg} ${showValue(spec)} must be a number, [before, after], or one [before, after] per axis (${ndim} axes)`);
  };
  let out: [number, number][];
  if (typeof spec === 'number') out = new globalThis.Array(ndim).fill([spec, spec]);
  else if (!globalThis.Array.isArray(spec)) out = bad();
  else if (spec.every((v) => typeof v === 'number')) {
    const s = spec as readonly number[];
    if (s.length === 1) out = new globalThis.Array(ndim).fill([s[0], s[0]]);
    else if (s.length === 2) out = new globalThis.Array(ndim).fill([s[0], s[1]]);
    else out = bad();
  } else {
    const s = spec as readonly (readonly number[])[];
    if (!s.every((p) => globalThis.Array.isArray(p) && (p.length === 1 || p.length === 2))) bad();
    const ps = s.map((p) => [p[0], p[p.length - 1]] as [number, number]);
    if (ps.length === 1) out = new globalThis.Array(ndim).fill(ps[0]);
    else if (ps.length === ndim) out = ps;
    else out = bad();
  }
  for (const [b, a] of out) {
    if (typeof b !== 'number' || typeof a !== 'number' || Number.isNaN(b) || Number.isNaN(a)) bad();
    if (integer && (!Number.isInteger(b) || !Number.isInteger(a) || b < 0 || a < 0)) {
      throw new RangeError(`${op}: ${arg} ${showValue(spec)} must be non-negative integers`);
    }
  }
  return out;
}

function sourceIndex(mode: PadMode, i: number, n: number): number {
  switch (mode) {
    case 'edge':
      return Math.min(Math.max(i, 0), n - 1);
    case 'wrap':
      return ((i % n) + n) % n;
    case 'reflect': {
      if (n === 1) return 0;
      const p = 2 * n - 2;
      const j = ((i % p) + p) % p;
      return j < n ? j : p - j;
    }
    case 'symmetric': {
      const p = 2 * n;
      const j = ((i % p) + p) % p;
      return j < n ? j : p - 1 - j;
    }
    default:
      throw new Error(`pad: unsupported mode ${showValue(mode)}`);
  }
}

/** `jnp.pad`. */
export function pad(x: ArrayLike, padWidth: PadWidth, opts: PadOptions = {}): Array {
  const a = asArray(x, { op: 'pad' });
  const mode = opts.mode ?? 'constant';
  const modes: PadMode[] = ['constant', 'edge', 'reflect', 'symmetric', 'wrap'];
  if (!modes.includes(mode)) throw new Error(`pad: mode must be one of ${modes.join(', ')}; got ${showValue(mode)}`);
  const widths = pairs('pad', 'pad_width', padWidth, a.ndim, true);
  if (mode === 'constant') {
    const cv = opts.constantValues ?? 0;
    if (typeof cv === 'number') {
      if (widths.every(([b, e]) => b === 0 && e === 0)) return a;
      return lax.pad(a, castTo(cv, a.dtype, false, 'pad'), widths.map(([b, e]) => [b, e, 0] as [number, number, number]));
    }
    const vals = pairs('pad', 'constant_values', cv, a.ndim, false);
    let out = a;
    widths.forEach(([b, e], d) => {
      const cfg = (lo: number, hi: number) => out.shape.map((_, k) => (k === d ? [lo, hi, 0] : [0, 0, 0]) as [number, number, number]);
      if (b) out = lax.pad(out, castTo(vals[d][0], a.dtype, false, 'pad'), cfg(b, 0));
      if (e) out = lax.pad(out, castTo(vals[d][1], a.dtype, false, 'pad'), cfg(0, e));
    });
    return out;
  }
  let out = a;
  widths.forEach(([b, e], d) => {
    if (b === 0 && e === 0) return;
    const n = out.shape[d];
    if (n === 0) throw new Error(`pad: cannot pad the empty axis ${d} of array ${fmt(a.shape)} with mode '${mode}'`);
    const idx: number[] = [];
    for (let i = -b; i < n + e; i++) idx.push(sourceIndex(mode, i, n));
    out = take(out, asArray(idx, { dtype: 'int32' }), { axis: d, mode: 'promise_in_bounds' });
  });
  return out;
}
