/**
 * The jaxpr: tpukit's one intermediate representation, shared by every transformation (eval,
 * jvp, partial evaluation, transpose, batching) and by the compiler (xla-lite lowers it). A
 * jaxpr has typed input variables (constants first, then arguments), a list of equations (a
 * primitive applied to variables or literals, with parameters, binding new variables), and
 * output atoms. Sub-programs of control flow are `ClosedJaxpr`s held in equation parameters.
 * `toString()` prints it the way JAX does: `{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }`.
 */
import type { Array } from '../array';
import type { DType } from '../dtype';
import type { Primitive, ShapedArray } from '../primitive';

let varCounter = 0;

/** A typed variable, bound once (by the jaxpr's inputs or by one equation). */
export class Var {
  readonly id = varCounter++;
  constructor(readonly aval: ShapedArray) {}
}

/** A constant scalar written inline in the program (JAX's Literal). */
export class Lit {
  constructor(readonly val: Array) {}
  get aval(): ShapedArray {
    return this.val.aval;
  }
}

export type Atom = Var | Lit;

export interface JaxprEqn {
  readonly prim: Primitive;
  readonly inputs: Atom[];
  readonly params: any;
  readonly outBinders: Var[];
}

export class Jaxpr {
  constructor(
    readonly constvars: Var[],
    readonly invars: Var[],
    readonly eqns: JaxprEqn[],
    readonly outs: Atom[],
  ) {}

  get inAvals(): ShapedArray[] {
    return avalsOf(this.invars);
  }
  get outAvals(): ShapedArray[] {
    return avalsOf(this.outs);
  }

  toString(): string {
    return new Printer().jaxpr(this, '');
  }
}

/** The avals of `xs` (a loop: these getters run on every jitted call; see tree.ts on closures). */
function avalsOf(xs: readonly (Var | Atom)[]): ShapedArray[] {
  const out: ShapedArray[] = new globalThis.Array(xs.length);
  for (let k = 0; k < xs.length; k++) out[k] = xs[k].aval;
  return out;
}

/** A jaxpr with values for its constvars. */
export class ClosedJaxpr {
  constructor(
    readonly jaxpr: Jaxpr,
    readonly consts: Array[],
  ) {
    if (consts.length !== jaxpr.constvars.length) {
      throw new Error(`ClosedJaxpr: ${consts.length} consts for ${jaxpr.constvars.length} constvars`);
    }
  }
  get inAvals(): ShapedArray[] {
    return this.jaxpr.inAvals;
  }
  get outAvals(): ShapedArray[] {
    return this.jaxpr.outAvals;
  }
  toString(): string {
    return this.jaxpr.toString();
  }
}

const SHORT: Record<DType, string> = {
  float32: 'f32',
  bfloat16: 'bf16',
  float16: 'f16',
  int32: 'i32',
  uint32: 'u32',
  int8: 'i8',
  uint8: 'u8',
  bool: 'bool',
};

/** `f32[3,4]`, as JAX prints an abstract value. */
export function avalStr(a: ShapedArray): string {
  return `${SHORT[a.dtype]}[${a.shape.join(',')}]`;
}

function varName(n: number): string {
  let s = '';
  do {
    s = String.fromCharCode(97 + (n % 26)) + s;
    n = Math.floor(n / 26);
  } while (n > 0);
  return s;
}

class Printer {
  private names = new Map<Var, string>();
  private next = 0;

  private name(v: Var): string {
    let s = this.names.get(v);
    if (s === undefined) {
      s = varName(this.next++);
      this.names.set(v, s);
    }
    return s;
  }

  private binder(v: Var): string {
    return `${this.name(v)}:${avalStr(v.aval)}`;
  }

  atom(a: Atom): string {
    if (a instanceof Lit) {
      const v = a.val.item();
      const s = typeof v === 'boolean' ? (v ? 'True' : 'False') : a.val.dtype.startsWith('float') || a.val.dtype === 'bfloat16' ? fmtFloat(v) : String(v);
      return `${s}:${avalStr(a.aval)}`;
    }
    return this.names.get(a) ?? `<unbound ${avalStr(a.aval)}>`;
  }

  private param(v: unknown, indent: string): string {
    if (v instanceof ClosedJaxpr) return new Printer().jaxpr(v.jaxpr, indent + '  ');
    if (v instanceof Jaxpr) return new Printer().jaxpr(v, indent + '  ');
    if (globalThis.Array.isArray(v)) {
      const parts = v.map((x) => this.param(x, indent));
      return parts.length === 1 ? `(${parts[0]},)` : `(${parts.join(', ')})`;
    }
    if (v === null || v === undefined) return 'None';
    if (typeof v === 'boolean') return v ? 'True' : 'False';
    if (typeof v === 'function') return v.name || 'fn';
    if (typeof v === 'object') return (v as object).toString === Object.prototype.toString ? JSON.stringify(v) : String(v);
    return String(v);
  }

  private eqn(e: JaxprEqn, indent: string): string {
    const lhs = e.outBinders.length === 0 ? '_' : e.outBinders.map((v) => this.binder(v)).join(' ');
    const keys = Object.keys(e.params ?? {}).filter((k) => e.params[k] !== undefined);
    const ps = keys.length ? `[${keys.map((k) => `${snake(k)}=${this.param(e.params[k], indent)}`).join(' ')}]` : '';
    const args = e.inputs.map((a) => this.atom(a)).join(' ');
    return `${lhs} = ${e.prim.name}${ps}${args ? ' ' + args : ''}`;
  }

  jaxpr(j: Jaxpr, indent: string): string {
    const consts = j.constvars.map((v) => this.binder(v)).join(' ');
    const ins = j.invars.map((v) => this.binder(v)).join(' ');
    const head = `{ lambda ${consts}${consts ? '' : ''}; ${ins}. let`;
    const eqns = j.eqns.map((e) => this.eqn(e, indent));
    const outs = j.outs.map((a) => this.atom(a));
    const tail = `in (${outs.join(', ')}${outs.length === 1 ? ',' : ''}) }`;
    const one = `${head} ${eqns.join(' ')}${eqns.length ? ' ' : ''}${tail}`;
    if (eqns.length <= 1 && one.length <= 80 && !one.includes('\n')) return one;
    return `${head}\n${eqns.map((s) => `${indent}    ${s}`).join('\n')}\n${indent}  ${tail}`;
  }
}

function snake(k: string): string {
  return k.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
}

function fmtFloat(v: number): string {
  if (Number.isInteger(v) && Math.abs(v) < 1e16) return v.toFixed(1);
  return String(v);
}
