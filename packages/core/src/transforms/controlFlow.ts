/**
 * Helpers the control-flow primitives (cond.ts, scan.ts, while.ts) share: aval comparison and
 * printing, re-wiring and constant hoisting of closed jaxprs.
 */
import { Array } from '../array';
import { type ShapedArray } from '../primitive';
import { evalClosed } from './eval';
import { avalStr, ClosedJaxpr, Jaxpr } from './jaxpr';
import { traceFlat } from './tracing';

export const sameAvals = (a: readonly ShapedArray[], b: readonly ShapedArray[]): boolean =>
  a.length === b.length && a.every((x, i) => x.dtype === b[i].dtype && x.shape.join() === b[i].shape.join());
export const sig = (a: readonly ShapedArray[]): string => `(${a.map(avalStr).join(', ')})`;

/** A closed jaxpr re-wired: new input order `inPerm[k]` = old input index; outputs likewise. */
export function rewire(c: ClosedJaxpr, inPerm: readonly number[], outPerm: readonly number[]): ClosedJaxpr {
  const inAvals = inPerm.map((i) => c.inAvals[i]);
  return traceFlat((...xs) => {
    const args = new globalThis.Array<Array>(xs.length);
    inPerm.forEach((old, k) => (args[old] = xs[k]));
    const outs = evalClosed(c, args);
    return outPerm.map((o) => outs[o]);
  }, inAvals, 'rewire');
}

/** Constants of a traced closed jaxpr turned into leading inputs. */
export function hoist(c: ClosedJaxpr): [ClosedJaxpr, Array[]] {
  if (c.consts.length === 0) return [c, []];
  const j = c.jaxpr;
  return [new ClosedJaxpr(new Jaxpr([], [...j.constvars, ...j.invars], j.eqns, j.outs), []), c.consts];
}

export const range = (n: number, s = 0): number[] => globalThis.Array.from({ length: n }, (_, i) => s + i);
