/**
 * Lowering: a core `ClosedJaxpr` becomes an `HloModule`. Each equation becomes one instruction
 * (its primitive kept for execution, its opcode renamed to XLA's vocabulary), literals and
 * closed-over constants become `constant` instructions, multi-output equations become a
 * tuple-shaped instruction read through `get-tuple-element`, and every sub-jaxpr in an
 * equation's parameters (cond branches, scan/while bodies, nested jit, custom-rule and remat
 * bodies) is lowered recursively into a called computation.
 */
import { ClosedJaxpr } from '@tpukit/core';
import { Lit, type Primitive, type Var } from '@tpukit/core/internal';
import { HloComputation, HloInstruction, HloModule } from './hlo';

/** The HLO opcode a primitive lowers to: the `hlo` field of its record (as XLA prints it), else its name. */
export const opcodeOf = (prim: Primitive): string => prim.hlo ?? prim.name;

/** Lowers a closed jaxpr to a module whose entry computation takes the jaxpr's inputs. */
export function lowerJaxpr(closed: ClosedJaxpr, name = 'main'): HloModule {
  const subs: HloComputation[] = [];
  const entry = lowerComputation(closed, `${name}`, subs);
  const mod = new HloModule(name, entry);
  mod.computations = [...subs, entry];
  return mod;
}

let compCounter = 0;

function lowerComputation(closed: ClosedJaxpr, name: string, subs: HloComputation[]): HloComputation {
  const { jaxpr, consts } = closed;
  const comp = new HloComputation(name);
  const env = new Map<Var, HloInstruction>();
  jaxpr.constvars.forEach((v, i) => {
    const c = comp.add(new HloInstruction('constant', [v.aval], [], {}, null));
    c.literal = consts[i];
    env.set(v, c);
  });
  for (const v of jaxpr.invars) env.set(v, comp.addParameter(v.aval));
  const read = (a: Var | Lit): HloInstruction => {
    if (a instanceof Lit) {
      const c = comp.add(new HloInstruction('constant', [a.aval], [], {}, null));
      c.literal = a.val;
      return c;
    }
    const i = env.get(a);
    if (!i) throw new Error(`xla-lite lower ${name}: variable read before it was bound (malformed jaxpr)`);
    return i;
  };
  for (const e of jaxpr.eqns) {
    const prim = e.prim as Primitive;
    const operands = e.inputs.map(read);
    const inst = new HloInstruction(opcodeOf(prim), e.outBinders.map((v) => v.aval), operands, { ...(e.params ?? {}) }, prim);
    const direction = prim.elementwise?.compare;
    if (direction) inst.params.direction = direction;
    for (const [k, v] of Object.entries(e.params ?? {})) {
      const jaxprs = v instanceof ClosedJaxpr ? [v] : globalThis.Array.isArray(v) && v.every((x) => x instanceof ClosedJaxpr) && v.length ? (v as ClosedJaxpr[]) : [];
      jaxprs.forEach((j, bi) => {
        const sub = lowerComputation(j, `${prim.name}_${k}${jaxprs.length > 1 ? bi : ''}.${compCounter++}`, subs);
        subs.push(sub);
        inst.called.push(sub);
      });
    }
    comp.add(inst);
    if (e.outBinders.length === 1) env.set(e.outBinders[0], inst);
    else {
      e.outBinders.forEach((v, idx) => {
        env.set(v, comp.add(new HloInstruction('get-tuple-element', [v.aval], [inst], { index: idx }, null)));
      });
    }
  }
  comp.outputs = jaxpr.outs.map(read);
  return comp;
}
