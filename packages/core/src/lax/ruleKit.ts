/**
 * Building blocks for the rules that the lax modules give their primitives (see `PrimitiveRules`
 * in primitive.ts). This module sits right above `primitive.ts` and `trace.ts` and below every
 * primitive definition, so a definition can use them without an import cycle; the helpers that
 * need other primitives (moving a batch dim, zeros) live with those primitives.
 */
import type { Array } from '../array';
import type { JvpRule, Primitive, TransposeRule, UndefPrimal } from '../primitive';
import { bind } from '../trace';

/** Binds a one-output primitive. */
export const p1 = (prim: Primitive, xs: Array[], params: any): Array => bind(prim, xs, params)[0];

/** A jvp rule for a one-output primitive from a tangent formula (`y` is the primal output). */
export function jvpFrom(prim: Primitive, f: (x: Array[], t: (Array | null)[], y: Array, params: any) => Array | null): JvpRule {
  return (xs, ts, params) => {
    const y = p1(prim, xs, params);
    return [[y], [f(xs, ts, y, params)]];
  };
}

/** The jvp rule of a primitive linear in its one operand: the tangent goes through the primitive. */
export function linearJvp(prim: Primitive): JvpRule {
  return ([x], [t], params) => [[p1(prim, [x], params)], [t === null ? null : p1(prim, [t], params)]];
}

/** A transpose rule for a one-operand linear primitive from its cotangent formula. */
export const lin1 = (f: (ct: Array, x: UndefPrimal, params: any) => Array): TransposeRule => ([ct], [x], params) => [f(ct!, x as UndefPrimal, params)];

/** Shifts axis numbers past a new leading batch dimension. */
export const shift = (ax: readonly number[]): number[] => ax.map((a) => a + 1);
