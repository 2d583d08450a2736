/**
 * The computation the exporters (HLO text, StableHLO) print in place of an entry computation that
 * a pass rewrote for the executable only (`setExportView`): horizontal loop fusion
 * (passes/horizontalLoops.ts) merges independent fusions into one at the later one's place, a
 * schedule choice of this executable, so the exported module stays the one before it, as the dot
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

/** A snapshot of `c` as it is now, to be recorded with `setExportView` if a later rewrite happens. */
export function snapshotOf(c: HloComputation): HloComputation {
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

/** Records `view` (a `snapshotOf(c)`) as what the exporters print for `c`. */
export function setExportView(c: HloComputation, view: HloComputation): void {
  views.set(c, view);
}
