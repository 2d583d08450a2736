/**
 * Text formatting for `debug.print`: a subset of Python's `str.format` (`{}` auto-numbered,
 * `{0}` positional, `{name}` keyword fields, `{{`/`}}` escapes, `!s`/`!r` conversions and
 * `:spec` with width, precision and the types f/e/g/d/% on scalar values) over values printed
 * the way NumPy's `str()` prints an array: `[1.  2.5 3. ]`, `[[1 2]\n [3 4]]`, `[ True False]`,
 * shortest round-tripping digits per dtype, a shared column width, scientific notation when
 * the magnitudes call for it, and `...` summaries above 1000 elements. `parseFormat` runs at
 * trace time (so a bad format string or an unused argument is an error where `debug.print` is
 * called, as in JAX); `renderFormat` runs at run time with the concrete values.
 */
import { Array } from '../array';
import * as bf16 from '../bf16';
import type { DType } from '../dtype';
import * as f16 from '../f16';
import { showValue } from '../describe';

export type Field = { kind: 'text'; text: string } | { kind: 'field'; key: number | string; conv: 's' | 'r' | null; spec: string };

/** Splits a format string into literal text and replacement fields; numbers `{}` fields. */
export function parseFormat(fmt: string, what = 'debug.print'): Field[] {
  const out: Field[] = [];
  let text = '';
  let auto = 0;
  let sawAuto = false;
  let sawManual = false;
  for (let i = 0; i < fmt.length; i++) {
    const c = fmt[i];
    if (c === '}') {
      if (fmt[i + 1] !== '}') throw new Error(`${what}: single '}' encountered in format string ${showValue(fmt)} at position ${i}; write '}}' for a literal brace`);
      text += '}';
      i++;
      continue;
    }
    if (c !== '{') {
      text += c;
      continue;
    }
    if (fmt[i + 1] === '{') {
      text += '{';
      i++;
      continue;
    }
    const end = fmt.indexOf('}', i);
    if (end < 0) throw new Error(`${what}: unmatched '{' in format string ${showValue(fmt)} at position ${i}`);
    const body = fmt.slice(i + 1, end);
    const m = /^([A-Za-z_][A-Za-z0-9_]*|\d+)?(?:!([sr]))?(?::(.*))?$/.exec(body);
    if (!m) throw new Error(`${what}: cannot parse replacement field {${body}} in ${showValue(fmt)}; use {}, {0}, {name}, optionally with !r or :spec`);
    let key: number | string;
    if (m[1] === undefined) {
      sawAuto = true;
      key = auto++;
    } else if (/^\d+$/.test(m[1])) {
      sawManual = true;
      key = Number(m[1]);
    } else key = m[1];
    if (sawAuto && sawManual) throw new Error(`${what}: cannot switch between automatic field numbering ({}) and manual field specification ({0}) in ${showValue(fmt)}`);
    if (text) out.push({ kind: 'text', text });
    text = '';
    out.push({ kind: 'field', key, conv: (m[2] as 's' | 'r' | undefined) ?? null, spec: m[3] ?? '' });
    i = end;
  }
  if (text) out.push({ kind: 'text', text });
  return out;
}

const SPEC = /^(?:(.)?([<>^]))?([+\- ])?(0)?(\d+)?(?:\.(\d+))?([fFeEgGd%])?$/;

/** Checks `fields` against the arguments (by position and name) at trace time. */
export function checkFields(fields: Field[], positional: readonly unknown[], named: Readonly<Record<string, unknown>>, fmt: string, what = 'debug.print'): void {
  const used = new Set<number | string>();
  for (const f of fields) {
    if (f.kind !== 'field') continue;
    if (typeof f.key === 'number' && f.key >= positional.length) {
      throw new RangeError(`${what}: format ${showValue(fmt)} reads positional argument ${f.key} but ${positional.length} were given`);
    }
    if (typeof f.key === 'string' && !(f.key in named)) {
      throw new Error(`${what}: format ${showValue(fmt)} reads keyword argument ${showValue(f.key)}; given: ${Object.keys(named).join(', ') || 'none'} (pass keyword values as a trailing object: debug.print('{x}', { x }))`);
    }
    used.add(f.key);
    const v = typeof f.key === 'number' ? positional[f.key] : named[f.key];
    if (f.spec) {
      if (!SPEC.test(f.spec)) throw new Error(`${what}: unsupported format spec ${showValue(f.spec)} in ${showValue(fmt)}; supported: [[fill]align][sign][0][width][.precision][f|e|g|d|%]`);
      if (v instanceof Array && v.ndim !== 0) throw new TypeError(`${what}: format spec ${showValue(f.spec)} needs a scalar; argument ${typeof f.key === 'number' ? f.key : showValue(f.key)} is ${v.dtype}[${v.shape.join(',')}] (as NumPy, arrays take no format spec)`);
    }
  }
  const unusedPos = positional.map((_, i) => i).filter((i) => !used.has(i));
  if (unusedPos.length) throw new Error(`${what}: unused positional arguments ${unusedPos.join(', ')} for format ${showValue(fmt)}`);
  const unusedNamed = Object.keys(named).filter((k) => !used.has(k));
  if (unusedNamed.length) {
    throw new Error(`${what}: unused keyword arguments ${unusedNamed.join(', ')} for format ${showValue(fmt)} (a template literal \`\${x}\` formats at trace time; write '{x}' and pass { x } instead)`);
  }
}

/** Fills the fields with concrete values. */
export function renderFormat(fields: Field[], positional: readonly unknown[], named: Readonly<Record<string, unknown>>): string {
  let s = '';
  for (const f of fields) {
    if (f.kind === 'text') s += f.text;
    else {
      const v = typeof f.key === 'number' ? positional[f.key] : named[f.key];
      s += f.spec ? applySpec(scalarOf(v), f.spec) : f.conv === 'r' ? reprValue(v) : strValue(v);
    }
  }
  return s;
}

function scalarOf(v: unknown): number | boolean | string {
  if (v instanceof Array) return v.item();
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'string') return v;
  return String(v);
}

/** Python's format-spec mini-language (the common subset) for one scalar. */
export function applySpec(v: number | boolean | string, spec: string): string {
  const m = SPEC.exec(spec)!;
  const [, fill = ' ', align, sign = '-', zero, widthS, precS, type] = m;
  const prec = precS === undefined ? undefined : Number(precS);
  let body: string;
  if (typeof v === 'string') body = prec === undefined ? v : v.slice(0, prec);
  else {
    const x = typeof v === 'boolean' ? Number(v) : v;
    const neg = x < 0 || Object.is(x, -0);
    const a = Math.abs(x);
    let digits: string;
    if (!Number.isFinite(a)) digits = Number.isNaN(a) ? 'nan' : 'inf';
    else if (type === 'f' || type === 'F') digits = a.toFixed(prec ?? 6);
    else if (type === 'e' || type === 'E') digits = pyExp(a.toExponential(prec ?? 6));
    else if (type === '%') digits = (a * 100).toFixed(prec ?? 6) + '%';
    else if (type === 'd') {
      if (!Number.isInteger(a)) throw new TypeError(`debug.print: format code 'd' needs an integer value; got ${x}`);
      digits = String(a);
    } else if (type === 'g' || type === 'G') digits = pyGeneral(a, prec ?? 6);
    else digits = prec === undefined ? (typeof v === 'boolean' ? (v ? 'True' : 'False') : scalarRepr(x, 'float32')) : pyGeneral(a, prec);
    if (type === 'E' || type === 'G' || type === 'F') digits = digits.toUpperCase();
    if (typeof v === 'boolean' && prec === undefined && !type) return pad(digits, fill, align ?? '<', widthS, zero);
    const sg = neg ? '-' : sign === '+' ? '+' : sign === ' ' ? ' ' : '';
    if (zero && !align && widthS) return sg + digits.padStart(Number(widthS) - sg.length, '0');
    body = sg + digits;
  }
  return pad(body, fill, align ?? (typeof v === 'string' ? '<' : '>'), widthS, undefined);
}

function pad(s: string, fill: string, align: string, widthS: string | undefined, _zero: string | undefined): string {
  const w = widthS === undefined ? 0 : Number(widthS);
  if (s.length >= w) return s;
  const n = w - s.length;
  if (align === '<') return s + fill.repeat(n);
  if (align === '^') return fill.repeat(Math.floor(n / 2)) + s + fill.repeat(Math.ceil(n / 2));
  return fill.repeat(n) + s;
}

/** JS exponent `1.5e+0` as Python writes it: `1.5e+00`. */
function pyExp(s: string): string {
  return s.replace(/e([+-])(\d)$/, 'e$10$2');
}

function pyGeneral(a: number, prec: number): string {
  const p = prec === 0 ? 1 : prec;
  if (a === 0) return '0';
  const exp = Math.floor(Math.log10(a));
  const s = exp < -4 || exp >= p ? pyExp(a.toExponential(p - 1)).replace(/\.?0+e/, 'e') : a.toPrecision(p);
  return s.includes('e') ? s : s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

// ---------------------------------------------------------------------------------------------
// NumPy-style str() of arrays

const roundTrip: Partial<Record<DType, (x: number) => number>> = {
  float32: Math.fround,
  bfloat16: (x) => bf16.toFloat32(bf16.fromFloat32(x)),
  float16: (x) => f16.toFloat32(f16.fromFloat32(x)),
};

/** The fewest significant digits that read back to the same value in `dtype`. */
function shortest(x: number, dtype: DType): string {
  const rt = roundTrip[dtype] ?? ((y: number) => y);
  for (let p = 1; p <= 17; p++) {
    const s = x.toPrecision(p);
    if (rt(Number(s)) === x) return s;
  }
  return String(x);
}

/** Splits a positive finite value's shortest digits into integer and fraction parts (positional). */
function positional(a: number, dtype: DType): [string, string] {
  const s = shortest(a, dtype);
  const plain = s.includes('e') ? expandExp(Number(s), s) : s;
  const [i, f = ''] = plain.split('.');
  return [i, f.replace(/0+$/, '')];
}

function expandExp(v: number, s: string): string {
  const digits = s.replace(/e.*$/, '').replace('.', '').length;
  const exp = Math.floor(Math.log10(v));
  return v.toFixed(Math.max(0, digits - 1 - exp));
}

function scientific(a: number, dtype: DType): [string, string, string] {
  const s = shortest(a, dtype);
  const n = Number(s);
  const digits = s.replace(/e.*$/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '') || '0';
  const e = n.toExponential(Math.max(0, digits.length - 1));
  const [mant, ex] = e.split('e');
  const [mi, mf = ''] = mant.split('.');
  const sign = ex[0] === '-' ? '-' : '+';
  const num = ex.replace(/^[+-]/, '');
  return [mi, mf, `e${sign}${num.padStart(2, '0')}`];
}

const isFloat = (d: DType): boolean => d === 'float32' || d === 'bfloat16' || d === 'float16';

/** A scalar as NumPy prints a 0-d array or a scalar: `1.0`, `0.1`, `1e-05`, `3`, `True`. */
export function scalarRepr(v: number, dtype: DType): string {
  if (dtype === 'bool') return v ? 'True' : 'False';
  if (!isFloat(dtype)) return String(v);
  if (Number.isNaN(v)) return 'nan';
  if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
  const a = Math.abs(v);
  const sg = v < 0 || Object.is(v, -0) ? '-' : '';
  if (a !== 0 && (a >= 1e16 || a < 1e-4)) {
    const [mi, mf, ex] = scientific(a, dtype);
    return `${sg}${mi}${mf ? '.' + mf : ''}${ex}`;
  }
  const [i, f] = positional(a, dtype);
  return `${sg}${i}.${f || '0'}`;
}

const EDGE = 3;
const THRESHOLD = 1000;
const LINE_WIDTH = 75;

/** Formats every shown element of a float array to a common width (NumPy's FloatingFormat). */
function floatFormatter(vals: number[], dtype: DType): (v: number) => string {
  const finite = vals.filter((v) => Number.isFinite(v));
  const abs = finite.map(Math.abs).filter((a) => a !== 0);
  const max = abs.length ? Math.max(...abs) : 0;
  const min = abs.length ? Math.min(...abs) : 0;
  const exp = abs.length > 0 && (max >= 1e8 || min < 1e-4 || max / min > 1e3);
  const neg = vals.some((v) => v < 0 || Object.is(v, -0));
  if (exp) {
    const parts = finite.map((v) => scientific(Math.abs(v), dtype));
    const fw = Math.max(...parts.map((p) => p[1].length));
    const ew = Math.max(...parts.map((p) => p[2].length));
    const width = (neg ? 1 : 0) + Math.max(...parts.map((p) => p[0].length)) + 1 + fw + ew;
    return (v) => {
      if (!Number.isFinite(v)) return nonFinite(v).padStart(width);
      const [mi, mf, ex] = scientific(Math.abs(v), dtype);
      return `${v < 0 || Object.is(v, -0) ? '-' : ''}${mi}.${mf.padEnd(fw, '0')}${ex}`.padStart(width);
    };
  }
  const parts = finite.map((v) => positional(Math.abs(v), dtype));
  const fw = parts.length ? Math.max(...parts.map((p) => p[1].length)) : 0;
  const iw = Math.max(0, ...parts.map((p) => p[0].length)) + (neg ? 1 : 0);
  const width = Math.max(iw + 1 + fw, ...vals.filter((v) => !Number.isFinite(v)).map((v) => nonFinite(v).length));
  return (v) => {
    if (!Number.isFinite(v)) return nonFinite(v).padStart(width);
    const [i, f] = positional(Math.abs(v), dtype);
    const sg = v < 0 || Object.is(v, -0) ? '-' : '';
    return `${(sg + i).padStart(iw)}.${f.padEnd(fw)}`.padStart(width);
  };
}

const nonFinite = (v: number): string => (Number.isNaN(v) ? 'nan' : v > 0 ? 'inf' : '-inf');

/** NumPy's `str()` of a concrete Array. */
export function arrayStr(x: Array, repr = false): string {
  const data = x.dataSync();
  const dtype = x.dtype;
  if (x.ndim === 0) return scalarRepr(data[0], dtype);
  const shape = x.shape;
  const summarize = x.size > THRESHOLD;
  // Which indices of each axis are shown (all, or the first and last EDGE around '...').
  const shown = shape.map((n) => (summarize && n > 2 * EDGE ? [...range(0, EDGE), -1, ...range(n - EDGE, n)] : range(0, n)));
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const visible: number[] = [];
  const collect = (d: number, off: number): void => {
    for (const i of shown[d]) {
      if (i < 0) continue;
      if (d === shape.length - 1) visible.push(data[off + i]);
      else collect(d + 1, off + i * strides[d]);
    }
  };
  collect(0, 0);
  let fmtOne: (v: number) => string;
  if (isFloat(dtype)) fmtOne = floatFormatter(visible, dtype);
  else {
    const strs = visible.map((v) => scalarRepr(v, dtype));
    const w = Math.max(0, ...strs.map((s) => s.length));
    fmtOne = (v) => scalarRepr(v, dtype).padStart(w);
  }
  const nd = shape.length;
  const rec = (d: number, off: number, indent: string): string => {
    if (d === nd - 1) {
      const words = shown[d].map((i) => (i < 0 ? '...' : fmtOne(data[off + i])));
      // Wrap long rows as NumPy does, continuing under the first element.
      const lines: string[] = [];
      let line = '[';
      for (let k = 0; k < words.length; k++) {
        const w = words[k];
        const sep = line === '[' ? '' : repr ? ', ' : ' ';
        const closing = k === words.length - 1 ? 1 + d : 0;
        if (line.length + sep.length + w.length + closing > LINE_WIDTH && line !== '[') {
          lines.push(line);
          line = indent + ' ' + w;
        } else line += sep + w;
      }
      lines.push(line + ']');
      return lines.join('\n');
    }
    const sep = (repr ? ',' : '') + '\n'.repeat(nd - d - 1) + indent + (repr ? '       ' : ' ');
    const parts = shown[d].map((i) => (i < 0 ? '...' : rec(d + 1, off + i * strides[d], indent + ' ')));
    return '[' + parts.join(sep) + ']';
  };
  return rec(0, 0, '');
}

function range(a: number, b: number): number[] {
  const out: number[] = [];
  for (let i = a; i < b; i++) out.push(i);
  return out;
}

/** `str()` of a print argument: Arrays as NumPy prints them, containers element by element. */
export function strValue(v: unknown): string {
  if (v instanceof Array) return arrayStr(v);
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'string') return v;
  if (globalThis.Array.isArray(v)) return `[${v.map(reprValue).join(', ')}]`;
  if (v !== null && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `'${k}': ${reprValue(x)}`).join(', ')}}`;
  return String(v);
}

/** `repr()`: Arrays as `Array([1., 2.], dtype=float32)`, strings quoted. */
export function reprValue(v: unknown): string {
  if (v instanceof Array) {
    const body = arrayStr(v, true);
    const weak = v.weakType ? ', weak_type=True' : '';
    return `Array(${body}, dtype=${v.dtype}${weak})`;
  }
  if (typeof v === 'string') return `'${v}'`;
  return strValue(v);
}
