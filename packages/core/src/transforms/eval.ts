/**
 * The evaluation interpreter: runs a jaxpr by binding each equation's primitive in order. With
 * no transformation active this executes op by op on the current backend (how `jit` runs when
 * no compiler is registered); under a transformation the same walk re-traces the program
 * through it, which is how jaxpr-to-jaxpr transformations (jvp / vmap of a jit or a scan body)
 * are built.
 */
import type { Array } from '../array';
import { bind } from '../trace';
import { type Atom, type ClosedJaxpr, type Jaxpr, Lit, type Var } from './jaxpr';

export function evalJaxpr(jaxpr: Jaxpr, consts: readonly Array[], args: readonly Array[]): Array[] {
  if (args.length !== jaxpr.invars.length) {
    throw new Error(`evalJaxpr: expected ${jaxpr.invars.length} arguments, got ${args.length}`);
  }
  const env = new Map<Var, Array>();
  jaxpr.constvars.forEach((v, i) => env.set(v, consts[i]));
  jaxpr.invars.forEach((v, i) => env.set(v, args[i]));
  const read = (a: Atom): Array => {
    if (a instanceof Lit) return a.val;
    const x = env.get(a);
    if (x === undefined) throw new Error('evalJaxpr: variable read before it was bound (malformed jaxpr)');
    return x;
  };
  for (const e of jaxpr.eqns) {
    const outs = bind(e.prim, e.inputs.map(read), e.params);
    e.outBinders.forEach((v, i) => env.set(v, outs[i]));
  }
  return jaxpr.outs.map(read);
}

export function evalClosed(closed: ClosedJaxpr, args: readonly Array[]): Array[] {
  return evalJaxpr(closed.jaxpr, closed.consts, args);
}
