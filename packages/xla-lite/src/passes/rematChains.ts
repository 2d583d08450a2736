/**
 * Chains recomputed by their readers (after fusion): a loop fusion (kLoop) that writes a value
 * `e` as an extra output only for other fusions (a tanh-GELU forward writes gelu and the tanh,
 * read back by the backward's GELU' epilogue) stops writing it, and each fusion reading it
 * (a loop fusion, or a dot's epilogue: kOutput) computes `e`'s whole expression itself, from the
 * values it reads anyway: the cone of `e` in the writer's body down to the writer's parameters,
 * each of which the reader already reads (an epilogue reads it, not only its dot) or is a scalar.
 * At [16,128,512] that is 4 MiB written and 4 MiB read back per GELU, against recomputing
 * x^3, two products, an add and a tanh per element in the epilogue (XLA's instruction fusion
 * duplicates producers into consumers the same way).
 *
 * Same bits: the copy is the same float32 operations in the same order, and the wasm emitter's
 * FMA contraction (fusion.ts `contractsInto`: a product used once by an add, or as a sub's
 * subtrahend, and not an output) treats it as the original: every product of the cone has the
 * same readers in the copy as in the writer (one read outside the cone is refused), `e` itself
 * is contracted neither in the writer once it is no longer an output nor in a reader, where it
 * was a parameter. At most `MAX_CHAIN` instructions are copied.
 *
 * The exporters print the computation as it was before (passes/exportView.ts), as for centered
 * outputs: which fusion computes which value is this executable's choice, and the exported
 * optimised module stays the one XLA was checked on. Fusion bodies are rebuilt, not edited.
 * Pipeline option `rematChains` (default true), env `TPUKIT_REMAT_CHAINS=0` off.
 */
import { type HloComputation, HloComputation as Comp, HloInstruction, type HloModule, numel } from '../hlo';
import { exportViewOf, setExportView, snapshotOf } from './exportView';
import { contractsInto, fusedComputationName } from './fusion';

/** The most instructions of a writer's body copied into one reader. */
export const MAX_CHAIN = 16;

const kindOf = (i: HloInstruction | null): unknown => (i !== null && i.opcode === 'fusion' ? (i.params as { kind?: unknown }).kind : undefined);
const READERS = new Set(['kLoop', 'kOutput']);

/** `next` in place of `old` in the module's list (the export view's instructions still call `old`). */
function replaceBody(mod: HloModule | undefined, old: HloComputation, next: HloComputation): void {
  if (!mod) return;
  const at = mod.computations.indexOf(old);
  if (at >= 0) mod.computations[at] = next;
  else mod.computations.unshift(next);
}

/**
 * The cone of `e` in body `b`: its instructions other than parameters (in body order), or null
 * when it is too large, reads something other than parameters and instructions of `b`, or a
 * product in it is read outside it (its contraction could differ in a copy).
 */
function coneOf(b: HloComputation, e: HloInstruction, users: Map<HloInstruction, (HloInstruction | null)[]>): { cone: HloInstruction[]; params: HloInstruction[] } | null {
  const cone = new Set<HloInstruction>();
  const params = new Set<HloInstruction>();
  const stack = [e];
  while (stack.length) {
    const m = stack.pop()!;
    if (m.opcode === 'parameter') {
      params.add(m);
      continue;
    }
    if (cone.has(m)) continue;
    if (m.opcode === 'fusion' || m.called.length || m.isTuple || m.prim?.name === 'dot_general') return null;
    cone.add(m);
    if (cone.size > MAX_CHAIN) return null;
    stack.push(...m.operands);
  }
  for (const m of cone) {
    if (m === e) continue;
    const rs = users.get(m)!;
    const readers = rs.filter((u): u is HloInstruction => u !== null);
    // Its contraction in the writer (all its readers; an output is never contracted) must be its
    // contraction in the copy (the cone's readers alone).
    if ((!rs.includes(null) && contractsInto(m, readers)) !== contractsInto(m, readers.filter((u) => cone.has(u)))) return null;
  }
  return { cone: b.instructions.filter((m) => cone.has(m)), params: [...params] };
}

/** Rewrites the fusions of `c` as the module comment says; returns the number of outputs no longer written. */
export function recomputeChains(c: HloComputation, mod?: HloModule): number {
  let done = 0;
  let before: HloComputation | null = null;
  for (const f of [...c.instructions]) {
    if (kindOf(f) !== 'kLoop' || !f.isTuple) continue;
    for (let k = f.called[0].outputs.length - 1; k >= 1; k--) {
      const body = f.called[0];
      const e = body.outputs[k];
      if (e.shape.dtype !== 'float32' || body.outputs.indexOf(e) !== k || e.opcode === 'parameter') continue;
      const gtes = new Map(c.instructions.filter((i) => i.opcode === 'get-tuple-element' && i.operands[0] === f).map((i) => [(i.params as { index: number }).index, i]));
      const g = gtes.get(k);
      if (!g) continue;
      const users = c.users();
      const readers = users.get(g)!;
      if (readers.length === 0 || readers.some((u) => !READERS.has(kindOf(u) as string))) continue;
      const bu = body.users();
      const inBody = bu.get(e)!.filter((u): u is HloInstruction => u !== null);
      // (e must stay read in the writer, and not become a contracted product there)
      if (inBody.length === 0 || contractsInto(e, inBody)) continue;
      const cone = coneOf(body, e, bu);
      if (cone === null) continue;
      const rs = [...new Set(readers as HloInstruction[])];
      /** The reader's body parameter holding `x`, read by its epilogue (not only by its dot). */
      const readerParam = (u: HloInstruction, x: HloInstruction): HloInstruction | undefined => {
        const ub = u.called[0];
        return ub.params.find((p) => u.operands[p.paramIndex] === x && ub.instructions.some((m) => m.operands.includes(p) && m.prim?.name !== 'dot_general'));
      };
      const fits = rs.every((u) => {
        const ub = u.called[0];
        const gp = ub.params.filter((p) => u.operands[p.paramIndex] === g);
        if (gp.length === 0 || (kindOf(u) === 'kOutput' && gp.some((p) => ub.instructions.some((m) => m.prim?.name === 'dot_general' && m.operands.includes(p))))) return false;
        const readsOfE = ub.instructions.filter((m) => m.operands.some((o) => gp.includes(o)));
        const slots = readsOfE.flatMap((m) => m.operands.filter((o) => gp.includes(o)).map(() => m));
        if (ub.outputs.some((o) => gp.includes(o)) || (e.prim?.name === 'mul' && contractsInto(e, slots))) return false;
        return cone.params.every((p) => {
          const x = f.operands[p.paramIndex];
          return readerParam(u, x) !== undefined || numel(x.shape) === 1;
        });
      });
      if (!fits) continue;
      before ??= exportViewOf(c) === c ? snapshotOf(c) : null;
      // The writer: output k dropped.
      const fb = new Comp(fusedComputationName());
      const fmap = new Map<HloInstruction, HloInstruction>();
      for (const p of body.params) {
        const q = fb.addParameter(p.shape);
        q.layout = p.layout;
        fmap.set(p, q);
      }
      fb.addCopies(body, fmap);
      const outs = body.outputs.filter((_, q) => q !== k).map((o) => fmap.get(o)!);
      fb.outputs = outs;
      f.called = [fb];
      f.shapes = outs.map((o) => o.shapes[0]);
      replaceBody(mod, body, fb);
      c.instructions = c.instructions.filter((i) => i !== g);
      if (outs.length === 1) {
        const g0 = gtes.get(0)!;
        c.instructions = c.instructions.filter((i) => i !== g0);
        c.replaceUses(g0, f);
      } else for (const [q, h] of gtes) if (q > k) h.params = { ...h.params, index: q - 1 };
      // Each reader: its parameter(s) reading g replaced by a copy of e's cone.
      for (const u of rs) {
        const ub = u.called[0];
        const ops = u.operands.filter((o) => o !== g);
        const extra = cone.params.map((p) => f.operands[p.paramIndex]).filter((x) => readerParam(u, x) === undefined && !ops.includes(x));
        ops.push(...extra);
        const rb = new Comp(kindOf(u) === 'kOutput' ? ub.name : fusedComputationName());
        const ps = ops.map((o) => {
          const p = rb.addParameter(o.shape);
          const old = ub.params.find((op) => u.operands[op.paramIndex] === o);
          p.layout = old?.layout ?? o.layout;
          return p;
        });
        const at = (x: HloInstruction): HloInstruction => ps[ops.indexOf(x)];
        const map = new Map<HloInstruction, HloInstruction>();
        let top: HloInstruction | undefined;
        const copyCone = (): HloInstruction => {
          const cm = new Map<HloInstruction, HloInstruction>();
          for (const p of cone.params) cm.set(p, at(f.operands[p.paramIndex]));
          for (const m of cone.cone) cm.set(m, rb.add(new HloInstruction(m.opcode, m.shapes, m.operands.map((o) => cm.get(o)!), m.params, m.prim)));
          return cm.get(e)!;
        };
        for (const p of ub.params) {
          if (u.operands[p.paramIndex] !== g) map.set(p, at(u.operands[p.paramIndex]));
        }
        // The copy goes right before the reader's first instruction that reads e.
        for (const m of ub.instructions) {
          if (m.opcode === 'parameter') continue;
          if (top === undefined && m.operands.some((o) => o.opcode === 'parameter' && u.operands[o.paramIndex] === g)) {
            top = copyCone();
            for (const p of ub.params) if (u.operands[p.paramIndex] === g) map.set(p, top);
          }
          map.set(m, rb.add(new HloInstruction(m.opcode, m.shapes, m.operands.map((o) => map.get(o)!), m.params, m.prim)));
        }
        rb.outputs = ub.outputs.map((o) => map.get(o)!);
        u.operands = ops;
        u.called = [rb];
        replaceBody(mod, ub, rb);
      }
      done++;
    }
  }
  if (done) {
    c.sort();
    if (before !== null) setExportView(c, before);
  }
  return done;
}
