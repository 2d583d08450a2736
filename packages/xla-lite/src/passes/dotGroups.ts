/**
 * Dot groups: independent dot_generals brought next to each other in the entry computation's
 * order and recorded as a group, so the executable runs each group with one core
 * `evalDotsInto` call (the systolic GEMM engine then runs the group's products as one thread-pool
 * job, each thread starting on a different product on its one-thread path; see core's
 * `GemmEngine.beginGroup`). Per layer of a transformer step: the forward's q/k/v projections
 * (same input), and in the backward each linear layer's dX = dY W^T and dW = X^T dY.
 *
 * A dot joins the group of an earlier dot when it lies at most `WINDOW` instructions after the
 * group's last member, no effectful instruction lies between them, and every operand is defined
 * before the group's first member or is a `get-tuple-element` / `reshape` of such a value (moved
 * up with the dot): so it depends on no member, and moving it up (past instructions that cannot
 * read it, since they come before it) keeps the order a valid schedule and lengthens only its
 * own result's live range, by at most the window. Groups hold 2 to `MAX_DOT_GROUP` dots of
 * float32 results; dots under an output-fusion epilogue (kOutput fusions) are not grouped.
 * Buffer assignment keeps every member's operands live until the group's last member (the
 * products read them when the group runs, after every member's result buffer is assigned).
 *
 * What XLA does: its DotMerger pass merges dots that share an operand into one larger dot
 * (concatenating the other operands, then slicing the result), and XLA:CPU's thunk executor
 * runs independent thunks concurrently. This pass mirrors neither exactly: it merges no
 * operands (no concatenation or slices, each product keeps its own shapes, precision and
 * destination, and dots sharing nothing group too), and it runs the group's products on the
 * pool together rather than independent instructions of any kind concurrently.
 */
import { type HloComputation, type HloInstruction } from '../hlo';
import { hasEffect } from '../effects';

/** The most dots one group holds (core's GEMM engine runs at most 4 products as one job). */
export const MAX_DOT_GROUP = 4;
/** How far (in instructions) a dot may be moved up to join a group. */
export const WINDOW = 24;

const groups = new WeakMap<HloComputation, readonly (readonly HloInstruction[])[]>();

/** The dot groups `groupDots` recorded for computation `c` (members adjacent, in order). */
export function dotGroupsOf(c: HloComputation): readonly (readonly HloInstruction[])[] {
  return groups.get(c) ?? [];
}

const groupable = (i: HloInstruction): boolean => i.prim?.name === 'dot_general' && i.shapes.length === 1 && i.shape.dtype === 'float32' && !i.shape.weakType;
const ALIAS = new Set(['get-tuple-element', 'reshape']);

/** Groups the independent dots of `c` (see above); returns how many dots joined a group. */
export function groupDots(c: HloComputation): number {
  const list = [...c.instructions];
  const pos = new Map<HloInstruction, number>();
  const reindex = (from: number): void => {
    for (let k = from; k < list.length; k++) pos.set(list[k], k);
  };
  reindex(0);
  const found: HloInstruction[][] = [];
  const member = new Set<HloInstruction>();
  let grouped = 0;
  for (let k = 0; k < list.length; k++) {
    const first = list[k];
    if (!groupable(first) || member.has(first)) continue;
    const group = [first];
    let end = k; // position of the group's last member
    for (let j = k + 1; j < list.length && j <= end + WINDOW && group.length < MAX_DOT_GROUP; j++) {
      const x = list[j];
      if (hasEffect(x)) break;
      if (!groupable(x) || member.has(x)) continue;
      // What must move up with x: aliases of values defined before the group (none a member).
      const moves: HloInstruction[] = [];
      const ok = (o: HloInstruction): boolean => {
        const p = pos.get(o);
        if (p === undefined || p < k) return true;
        if (!ALIAS.has(o.opcode) || member.has(o) || p > j) return false;
        if (!o.operands.every(ok)) return false;
        if (p > end && !moves.includes(o)) moves.push(o);
        return true;
      };
      if (!x.operands.every(ok)) continue;
      moves.sort((a, b) => pos.get(a)! - pos.get(b)!);
      moves.push(x);
      for (const m of moves) {
        list.splice(pos.get(m)!, 1);
        reindex(k);
      }
      list.splice(end + 1, 0, ...moves);
      reindex(k);
      end += moves.length;
      group.push(x);
      j = end;
    }
    if (group.length < 2) continue;
    for (const g of group) member.add(g);
    found.push(group);
    grouped += group.length;
  }
  c.instructions = list;
  groups.set(c, found);
  return grouped;
}
