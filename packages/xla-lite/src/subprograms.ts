/**
 * Compiling control-flow bodies. Core's `cond`, `scan` and `while` run their sub-jaxprs with
 * `evalJaxpr`, op by op. Before execution, xla-lite replaces each sub-jaxpr (with at least
 * two equations) by a one-equation jaxpr that calls it through `pjit`, so every branch, loop
 * body and loop condition goes through the registered compiler (lowered, optimised, fused,
 * compiled once and cached by core per jaxpr) while core keeps the loop semantics.
 */
import { ClosedJaxpr } from '@tpukit/core';
import { getPrimitive, Jaxpr, type JaxprEqn, Var } from '@tpukit/core/internal';

const CONTROL: Record<string, readonly string[]> = { scan: ['jaxpr'], while: ['condJaxpr', 'bodyJaxpr'], cond: ['branches'] };

function wrap(body: ClosedJaxpr, name: string): ClosedJaxpr {
  if (body.jaxpr.eqns.length < 2) return body;
  const ins = body.jaxpr.invars.map((v) => new Var(v.aval));
  const outs = body.outAvals.map((a) => new Var(a));
  const eqn: JaxprEqn = { prim: getPrimitive('pjit'), inputs: ins, params: { jaxpr: body, name, donateArgnums: [] }, outBinders: outs };
  return new ClosedJaxpr(new Jaxpr([], ins, [eqn], outs), []);
}

/** Parameters of a control-flow primitive with its sub-jaxprs routed through the compiler. */
export function compileSubprograms(primName: string, params: Record<string, unknown>, name: string): Record<string, unknown> {
  const keys = CONTROL[primName];
  if (!keys) return params;
  const out = { ...params };
  for (const k of keys) {
    const v = params[k];
    if (v instanceof ClosedJaxpr) out[k] = wrap(v, `${name}/${primName}.${k}`);
    else if (globalThis.Array.isArray(v)) out[k] = v.map((b, i) => (b instanceof ClosedJaxpr ? wrap(b, `${name}/${primName}.${k}${i}`) : b));
  }
  return out;
}
