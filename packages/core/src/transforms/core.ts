/**
 * The trace machinery every transformation shares (Autodidax's design). Transformations nest:
 * each active one owns a `MainTrace` on a stack, with a level (its depth). A `Tracer` is an
 * `Array` subclass that belongs to one trace, so every np / lax / nn function runs on tracers
 * unchanged: `bind` (trace.ts) hands each primitive to the innermost trace among its arguments
 * (or the dynamic trace of jaxpr tracing), and that trace lifts ("raises") the other arguments
 * into itself. A tracer has no data: reading its values is a concretization error.
 */
import { Array } from '../array';
import type { Primitive, ShapedArray } from '../primitive';
import { fmt } from '../shape';
import { type Trace as TraceIface, setDynamicTrace } from '../trace';

export interface MainTrace {
  readonly level: number;
  /** The transformation's name, for error messages ('jvp', 'vmap', 'makeJaxpr', ...). */
  readonly name: string;
  active: boolean;
}

const stack: MainTrace[] = [];

/** Thrown when a traced value is used where a concrete value is needed (JAX's ConcretizationTypeError). */
export class ConcretizationTypeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConcretizationTypeError';
  }
}

/** Thrown when a tracer is used after its transformation has finished (JAX's UnexpectedTracerError). */
export class UnexpectedTracerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnexpectedTracerError';
  }
}

export abstract class Trace implements TraceIface {
  constructor(readonly main: MainTrace) {}

  get level(): number {
    return this.main.level;
  }

  /** Wraps a value of a lower level (a concrete array or an outer tracer) as a tracer of this trace. */
  abstract pure(x: Array): Tracer;

  /** Applies `prim` to tracers of this trace; returns tracers (or lower-level values). */
  protected abstract process(prim: Primitive, tracers: Tracer[], params: any): Array[];

  processPrimitive(prim: Primitive, args: Array[], params: unknown): Array[] {
    if (!this.main.active) {
      throw new UnexpectedTracerError(
        `${prim.name}: an intermediate value of a finished ${this.main.name} transformation was used; it escaped the function being transformed (return it, or pass it in as an argument)`,
      );
    }
    return this.process(prim, args.map((a) => this.fullRaise(a)), params);
  }

  /** Brings `x` into this trace: lower-level values are lifted, this trace's tracers pass. */
  fullRaise(x: Array): Tracer {
    const t = x._trace as Trace | null;
    if (t === this) return x as Tracer;
    if (t === null || t.level < this.level) return this.pure(x);
    if (!t.main.active) {
      throw new UnexpectedTracerError(`${this.main.name}: a tracer of a finished ${t.main.name} transformation was passed in; it escaped its function`);
    }
    throw new UnexpectedTracerError(
      `${this.main.name} (level ${this.level}): met a tracer of ${t.main.name} (level ${t.level}) that does not belong to this transformation`,
    );
  }

  toString(): string {
    return `${this.main.name}Trace(level=${this.level})`;
  }
}

export abstract class Tracer extends Array {
  readonly #trace: Trace;

  constructor(trace: Trace, aval: ShapedArray) {
    super(aval, null, null);
    this.#trace = trace;
  }

  override get _trace(): Trace {
    return this.#trace;
  }

  override _storage(): never {
    throw new ConcretizationTypeError(
      `Abstract tracer value encountered where a concrete value is expected: a ${this.dtype}${fmt(this.shape)} value traced by ${this.#trace.main.name}. ` +
        'Inside jit/vmap/grad tracing a value has no data; use lax.cond / lax.whileLoop for value-dependent control flow, or mark the argument static (jit staticArgnums).',
    );
  }

  override toString(): string {
    return `Traced<${this.dtype}${fmt(this.shape)}>with<${this.#trace}>`;
  }
}

/**
 * Runs `fn` with a new transformation on top of the stack. `dynamic` makes the trace see every
 * bind, even of constants (jaxpr tracing stages everything out).
 */
export function withMain<T extends Trace, R>(name: string, make: (main: MainTrace) => T, fn: (trace: T) => R, dynamic = false): R {
  const main: MainTrace = { level: stack.length + 1, name, active: true };
  stack.push(main);
  const trace = make(main);
  const prev = dynamic ? setDynamicTrace(trace) : null;
  try {
    return fn(trace);
  } finally {
    stack.pop();
    main.active = false;
    if (dynamic) setDynamicTrace(prev);
  }
}
