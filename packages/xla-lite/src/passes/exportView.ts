/**
 * The computation the exporters (HLO text, StableHLO) print in place of an entry computation that
 * a pass rewrote for the executable only (`keepExportView`): horizontal loop fusion
 * (passes/horizontalLoops.ts) merges independent fusions into one at the later one's place, a
 * schedule choice of this executable, and centered outputs (passes/centeredOutputs.ts) moves a
 * subtract from a row fusion into its readers, so the exported module stays the one before them, as the dot
 * groups' windows keep their order before the move (`exportOrderOf`). The view is a snapshot: its
 * own instruction objects (same ids, so the same names, same parameters, called computations and
 * primitives) wired to one another as the computation was.
 */
import { HloComputation, HloInstruction } from '../hlo';

const views = new WeakMap<HloComputation, HloComputation>();

/** What the exporters print for `c`: its recorded view, else `c` itself. */
export function exportViewOf(c: HloComputation): HloComputation {
  return views.get(c) ?? c;
}

/** A snapshot of `c` as it is now (`keepExportView`). */
function snapshotOf(c: HloComputation): HloComputation {
  const v = new HloComputation(c.name);
  const map = new Map<HloInstruction, HloInstruction>();
  for (const i of c.instructions) {
    const j = Object.assign(Object.create(Object.getPrototypeOf(i) as object) as HloInstruction, i);
    j.operands = i.operands.map((o) => map.get(o) ?? o);
    map.set(i, j);
  }
  v.params.push(...c.params.map((p) => map.get(p)!));
  v.instructions = c.instructions.map((i) => map.get(i)!);
  v.outputs = c.outputs.map((o) => map.get(o) ?? o);
  return v;
}

/**
 * Records `c` as it is now as what the exporters print for it, unless a view is recorded already:
 * each executable-only rewrite (horizontal loop fusion, centered outputs) calls it right before its
 * first change, so the exported module is the one from before all of them, whichever runs first.
 * (The snapshot has its own instruction objects and arrays; the passes replace a fusion's
 * `called`, `params` and the computation's lists rather than editing them in place.)
 */
export function keepExportView(c: HloComputation): void {
  if (!views.has(c)) views.set(c, snapshotOf(c));
}
