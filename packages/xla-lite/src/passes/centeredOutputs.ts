/**
 * Centered outputs recomputed by their readers (after fusion): a row fusion (kRow) that writes
 * both `a` and `a - broadcast(m)` as full outputs, `m` one of its row values (a training step's
 * layer norm writes the residual sum h and x - mean = h - mean for its backward), writes `m`
 * instead of the centered value (one value per row against one per element), and every fusion
 * reading the centered value computes `a - broadcast(m)` itself from `a` and `m`: the same
 * float32 subtract of the same values, so the same bits, and 4 bytes per element fewer written
 * by the row kernel (the layer norm's 1 MiB of x - mean at [2048,128]); the readers load `a`
 * where they loaded the centered value.
 *
 * Only where every reader is a loop, input or row fusion (their kernels take the subtract and
 * the row broadcast of a parameter), none is an output of the computation, and `a` is an output
 * of the same fusion. The exporters print the computation as it was before (passes/exportView.ts):
 * which fusion writes which value is this executable's choice, and the exported optimised module
 * stays the one XLA was checked on. The fusion bodies are rebuilt, not edited, so the view's
 * instructions keep theirs. Pipeline option `centeredOutputs` (default true), env
 * `TPUKIT_CENTERED_OUTPUTS=0` off.
 */
import { type HloComputation, HloComputation as Comp, HloInstruction, type HloModule, numel } from '../hlo';
import { keepExportView } from './exportView';
import { fusedComputationName } from './fusion';

const READERS = new Set(['kLoop', 'kInput', 'kRow']);
const kindOf = (i: HloInstruction): unknown => (i.opcode === 'fusion' ? (i.params as { kind?: unknown }).kind : undefined);

/** A copy of `body` with parameters of `shapes`, in which `body`'s parameter k stands for `param(copy, its parameters, k)`. */
function rebuild(body: HloComputation, shapes: HloInstruction['shapes'][], param: (copy: Comp, ps: HloInstruction[], k: number) => HloInstruction): { copy: Comp; map: Map<HloInstruction, HloInstruction> } {
  const copy = new Comp(fusedComputationName());
  const ps = shapes.map((s) => copy.addParameter(s[0]));
  const map = new Map<HloInstruction, HloInstruction>();
  for (const p of body.params) map.set(p, param(copy, ps, p.paramIndex));
  copy.addCopies(body, map);
  copy.outputs = body.outputs.map((o) => map.get(o)!);
  return { copy, map };
}

/** `next` in place of `old` in the module's list (the export view's instructions still call `old`). */
function replaceBody(mod: HloModule | undefined, old: HloComputation, next: HloComputation): void {
  if (!mod) return;
  const at = mod.computations.indexOf(old);
  if (at >= 0) mod.computations[at] = next;
  else mod.computations.unshift(next);
}

/** Rewrites every row fusion of `c` as the module comment says; returns the number of centered outputs no longer written. */
export function recomputeCenteredOutputs(c: HloComputation, mod?: HloModule): number {
  let done = 0;
  for (const f of [...c.instructions]) {
    if (kindOf(f) !== 'kRow' || !f.isTuple) continue;
    for (let k = f.called[0].outputs.length - 1; k >= 1; k--) {
      const body = f.called[0];
      const e = body.outputs[k];
      if (e.prim?.name !== 'sub' || e.shape.dtype !== 'float32' || body.outputs.indexOf(e) !== k) continue;
      const [a, bc] = e.operands;
      const ia = body.outputs.indexOf(a);
      if (ia < 0 || bc.prim?.name !== 'broadcast_in_dim') continue;
      const m = bc.operands[0];
      if (m.opcode === 'parameter' || m.shape.dtype !== 'float32' || numel(m.shape) >= numel(e.shape)) continue;
      const gtes = new Map(c.instructions.filter((i) => i.opcode === 'get-tuple-element' && i.operands[0] === f).map((i) => [(i.params as { index: number }).index, i]));
      const g = gtes.get(k);
      const ga = gtes.get(ia);
      if (!g || !ga) continue;
      const users = c.users();
      const readers = users.get(g)!;
      if (readers.length === 0 || readers.some((u) => u === null || !READERS.has(kindOf(u) as string))) continue;
      if (done === 0) keepExportView(c);
      // The row fusion: output k dropped, m written (appended) unless it is an output already.
      const im0 = body.outputs.indexOf(m);
      const { copy: fb, map: fm } = rebuild(body, body.params.map((p) => p.shapes), (_c, ps, q) => ps[q]);
      const outs = fb.outputs.filter((_, q) => q !== k);
      if (im0 < 0) outs.push(fm.get(m)!);
      fb.outputs = outs;
      const im = outs.indexOf(fm.get(m)!);
      f.called = [fb];
      f.shapes = outs.map((o) => o.shape);
      replaceBody(mod, body, fb);
      for (const [q, h] of gtes) if (q > k) h.params = { ...h.params, index: q - 1 };
      let gm = im0 >= 0 ? gtes.get(im0) : undefined;
      if (!gm) {
        gm = new HloInstruction('get-tuple-element', [m.shape], [f], { index: im }, null);
        c.instructions.splice(c.instructions.indexOf(f) + 1, 0, gm);
      }
      // Each reader: the parameter(s) reading g replaced by a - broadcast(m) over two parameters reading ga and gm.
      for (const u of new Set(readers as HloInstruction[])) {
        const ub = u.called[0];
        const ops = u.operands.filter((o) => o !== g);
        for (const o of [ga, gm]) if (!ops.includes(o)) ops.push(o);
        const pos = (o: HloInstruction): number => ops.indexOf(o);
        const { copy: rb } = rebuild(
          ub,
          ops.map((o) => [o.shape]),
          (copy, ps, q) => {
            if (u.operands[q] !== g) return ps[pos(u.operands[q])];
            const b = copy.add(new HloInstruction(bc.opcode, bc.shapes, [ps[pos(gm!)]], bc.params, bc.prim));
            return copy.add(new HloInstruction(e.opcode, e.shapes, [ps[pos(ga)], b], e.params, e.prim));
          },
        );
        u.operands = ops;
        u.called = [rb];
        replaceBody(mod, ub, rb);
      }
      c.instructions = c.instructions.filter((i) => i !== g);
      done++;
    }
  }
  if (done) c.sort();
  return done;
}
