/**
 * Dot epilogue fusion, XLA's output fusion (`kind=kOutput`): a dot whose only user is a loop
 * fusion that reads the dot's result elementwise (bias add through a broadcast, relu/max,
 * tanh-gelu, logistic, the residual add, the activation-derivative product of a backward pass,
 * ...) becomes one fusion whose body is the dot followed by that elementwise epilogue.
 *
 * It runs after elementwise fusion, so the epilogue is whatever the loop-fusion rule grouped.
 * At run time (see `executable.ts`) the dot runs as its core primitive (on whatever backend is
 * set, e.g. the systolic WebAssembly GEMM) and the epilogue kernel then rewrites the dot's
 * output buffer in place: element k is read before element k is written and nothing else
 * holds that buffer, so no second output buffer and no intermediate is materialised.
 */
import { type HloComputation, HloComputation as Comp, HloInstruction, type HloModule } from '../hlo';

let outputCounter = 0;

/**
 * Whether `d` is a dot whose result can be the input of an epilogue over a loop of `shape`
 * (dims joined by commas): a float32 dot of that shape. The one rule this pass and
 * elementwise fusion's choices around epilogues (passes/fusion.ts) share.
 */
export const epilogueDot = (d: HloInstruction, shape: string): boolean => d.prim?.name === 'dot_general' && !d.isTuple && d.shape.dtype === 'float32' && d.shape.shape.join() === shape;

/** The parameter of a loop fusion's body fed by `operand`, when every use of it is elementwise (not a broadcast). */
function elementwiseParam(f: HloInstruction, operand: HloInstruction): HloInstruction | null {
  const body = f.called[0];
  const k = f.operands.indexOf(operand);
  if (k < 0 || f.operands.lastIndexOf(operand) !== k) return null;
  const p = body.params[k];
  for (const m of body.instructions) if (m.operands.includes(p) && m.prim?.name === 'broadcast_in_dim') return null;
  return p;
}

/** Fuses single-user dots into the loop fusion consuming them; returns the number of kOutput fusions made. */
export function fuseDotEpilogues(c: HloComputation, mod?: HloModule): number {
  const users = c.users();
  let made = 0;
  for (const f of [...c.instructions]) {
    if (f.opcode !== 'fusion' || (f.params as { kind: string }).kind !== 'kLoop' || f.isTuple || f.shape.dtype !== 'float32') continue;
    const d = f.operands.find((o) => epilogueDot(o, f.shape.shape.join()) && users.get(o)!.length === 1 && elementwiseParam(f, o) !== null);
    if (!d) continue;
    const loop = f.called[0];
    const dp = elementwiseParam(f, d)!;
    const body = new Comp(`fused_dot.${outputCounter++}`);
    const externals: HloInstruction[] = [];
    const param = (o: HloInstruction): HloInstruction => {
      const p = body.addParameter(o.shape);
      p.layout = o.layout;
      externals.push(o);
      return p;
    };
    const dot = body.add(new HloInstruction(d.opcode, d.shapes, d.operands.map(param), d.params, d.prim));
    const map = new Map<HloInstruction, HloInstruction>([[dp, dot]]);
    loop.params.forEach((p, k) => {
      if (p !== dp) map.set(p, param(f.operands[k]));
    });
    body.outputs = [body.addCopies(loop, map)[0]];
    const fused = new HloInstruction('fusion', f.shapes, externals, { kind: 'kOutput' }, null);
    fused.called = [body];
    c.instructions[c.instructions.indexOf(f)] = fused;
    c.instructions = c.instructions.filter((i) => i !== d);
    c.replaceUses(f, fused);
    mod?.computations.unshift(body);
    made++;
  }
  return made;
}

/** The parts of a kOutput fusion body the executable needs: its dot, and its epilogue as a loop body. */
export interface OutputFusionParts {
  dot: HloInstruction;
  /** Body param positions of the dot's lhs and rhs. */
  dotOperands: number[];
  /** The epilogue as a loop-fusion body: param 0 is the dot's result, then `epilogueOperands`. */
  epilogue: HloComputation;
  /** Body param positions feeding the epilogue's params 1.. */
  epilogueOperands: number[];
}

export function splitOutputFusion(body: HloComputation): OutputFusionParts {
  const dot = body.instructions.find((m) => m.prim?.name === 'dot_general');
  if (!dot) throw new Error(`xla-lite: output fusion ${body.name} has no dot`);
  const epilogue = new Comp(`${body.name}.epilogue`);
  const map = new Map<HloInstruction, HloInstruction>([[dot, epilogue.addParameter(dot.shape)]]);
  const epilogueOperands: number[] = [];
  for (const m of body.instructions) {
    if (m === dot || dot.operands.includes(m)) continue;
    if (m.opcode === 'parameter') {
      if (!body.instructions.some((u) => u !== dot && u.operands.includes(m))) continue;
      map.set(m, epilogue.addParameter(m.shape));
      epilogueOperands.push(m.paramIndex);
      continue;
    }
    map.set(m, epilogue.add(new HloInstruction(m.opcode, m.shapes, m.operands.map((o) => map.get(o)!), m.params, m.prim)));
  }
  epilogue.outputs = [map.get(body.outputs[0])!];
  return { dot, dotOperands: dot.operands.map((o) => o.paramIndex), epilogue, epilogueOperands };
}
