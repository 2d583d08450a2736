/**
 * Dot groups: independent dot_generals close to each other in the entry computation's order are
 * recorded as a group, and the executable runs each group with one core `evalDotsInto` call at
 * its last member's place (the systolic GEMM engine then runs the group's products as one
 * thread-pool job, each thread claiming whole products, largest first, on its one-thread path,
 * then sharing what is left; see core's `GemmEngine.beginGroup`). Per layer of a transformer
 * step's backward: each linear layer's dX = dY W^T and dW = X^T dY, and the q/k/v weight
 * gradients.
 *
 * A dot joins the group of an earlier dot when it lies at most `WINDOW` instructions after the
 * group's last member and no instruction from the group's first member up to it has an effect
 * or reads a member: the members then read nothing another member computes (whatever lies
 * between them is not derived from a member), and running the earlier members later, at the
 * last one, changes no value any instruction between reads. The order is left as it is (the
 * exported StableHLO does not change); what grows is the live range of the earlier members'
 * operands: buffer assignment keeps every member's operands live until the group's last member
 * (the products read them when the group runs). Each member may lie up to `WINDOW` instructions
 * after the one before, so a first member's operands can stay live up to (members - 1) x
 * `WINDOW` instructions longer: 5 x `WINDOW` in a group of 6 (in the GPT step the move from 4 to
 * 6 members left its temp and peak memory as they were: 145,014,784 and 146,207,752 bytes). Groups hold 2 to
 * `MAX_DOT_GROUP` dots of float32 results; dots under an output-fusion epilogue (kOutput
 * fusions) are not grouped.
 *
 * What XLA does: its DotMerger pass merges dots that share an operand into one larger dot
 * (concatenating the other operands, then slicing the result), and XLA:CPU's thunk executor
 * runs independent thunks concurrently. This pass mirrors neither exactly: it merges no
 * operands (no concatenation or slices, each product keeps its own shapes, precision and
 * destination, and dots sharing nothing group too), and it runs the group's products on the
 * pool together rather than independent instructions of any kind concurrently.
 */
import { type HloComputation, type HloInstruction } from '../hlo';
import { envNumber } from '@tpukit/core/internal';
import { hasEffect } from '../effects';

/**
 * The most dots one group holds (core's GEMM engine runs at most 6 products as one job). 6, not
 * 4: the GPT step's attention backward then takes the third projection's dX with the other two
 * projections' dX and dW, and its 17 weight gradients at the end of the backward form 3 groups
 * instead of 4 plus one dot alone (6 fewer pool jobs per step; BENCHMARKS.md "wg13").
 */
export const MAX_DOT_GROUP = 6;
/** The limit in force: `MAX_DOT_GROUP`, or env `TPUKIT_DOT_GROUP_MAX` (2..6, read when xla-lite loads; 4 was the limit before, for A/B runs). */
export const DOT_GROUP_LIMIT = envNumber('TPUKIT_DOT_GROUP_MAX', 2, MAX_DOT_GROUP) ?? MAX_DOT_GROUP;
/** How far (in instructions) after a group's last member a dot may join it. */
export const WINDOW = 24;

const groups = new WeakMap<HloComputation, readonly (readonly HloInstruction[])[]>();

/** The dot groups `groupDots` recorded for computation `c` (members in instruction order). */
export function dotGroupsOf(c: HloComputation): readonly (readonly HloInstruction[])[] {
  return groups.get(c) ?? [];
}

const groupable = (i: HloInstruction): boolean => i.prim?.name === 'dot_general' && i.shapes.length === 1 && i.shape.dtype === 'float32' && !i.shape.weakType;

/** Groups the independent dots of `c` (see above); returns how many dots joined a group. */
export function groupDots(c: HloComputation): number {
  const order = c.instructions;
  const found: HloInstruction[][] = [];
  const member = new Set<HloInstruction>();
  let grouped = 0;
  for (let k = 0; k < order.length; k++) {
    const first = order[k];
    if (!groupable(first) || member.has(first) || hasEffect(first)) continue;
    const group = new Set([first]);
    let end = k; // position of the group's last member
    for (let j = k + 1; j < order.length && j <= end + WINDOW && group.size < DOT_GROUP_LIMIT; j++) {
      const x = order[j];
      // (an instruction reading a member must run after the group: the group ends before it)
      if (hasEffect(x) || x.operands.some((o) => group.has(o))) break;
      if (groupable(x) && !member.has(x)) {
        group.add(x);
        end = j;
      }
    }
    if (group.size < 2) continue;
    for (const g of group) member.add(g);
    found.push([...group]);
    grouped += group.size;
  }
  groups.set(c, found);
  return grouped;
}
