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
 * last one, changes no value any instruction between reads. What grows is the live range of the
 * earlier members' operands: buffer assignment keeps every member's operands live until the
 * group's last member (the products read them when the group runs), or to the end of its window. Each member may lie up to `WINDOW` instructions
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
 *
 * Windows (pipeline option `asyncDotGroups`, default on; env TPUKIT_ASYNC_GROUPS=0 off): as XLA's
 * async-start / async-done pairs, a group may start at its last member and be joined later, the
 * calling thread running meanwhile the fusions that follow it and need none of its results
 * (`dotGroupJoinsOf`). To give it such work, the loop, input and row fusions between a group's
 * members that no member needs (the backward's bias and layer-norm column sums between its
 * weight-gradient dots) move to right after its last member (`sinkIntoWindow`): the only change
 * of instruction order this pass makes. The text exporters print the order from before that move
 * (`exportOrderOf`): the window is this executable's schedule, not the program, so the exported
 * optimised module (pinned by mesh's xlaModules test to what XLA compiled on a device) is the same
 * with and without windows.
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

/** The most instructions a group's window (`dotGroupJoinsOf`) holds. */
export const ASYNC_WINDOW = 16;

const groups = new WeakMap<HloComputation, readonly (readonly HloInstruction[])[]>();
const joins = new WeakMap<HloComputation, readonly (HloInstruction | null)[]>();

/** The dot groups `groupDots` recorded for computation `c` (members in instruction order). */
export function dotGroupsOf(c: HloComputation): readonly (readonly HloInstruction[])[] {
  return groups.get(c) ?? [];
}

/**
 * Per group of `dotGroupsOf(c)` (same order): the last instruction of its window, or null (no
 * window). The window is the run of instructions right after the group's last member, at most
 * `ASYNC_WINDOW`, each a loop, input (column sum) or row fusion or an alias (get-tuple-element,
 * reshape) with no effect that reads no member; it ends before the first other instruction. The
 * executable may start the group at its last member and join it after any prefix of the window
 * (it keeps only kernels that run on the calling thread alone), so buffer assignment keeps every
 * member's operands and result live up to the window's last instruction: nothing in the window
 * writes over what the group's products read or write while they run.
 */
export function dotGroupJoinsOf(c: HloComputation): readonly (HloInstruction | null)[] {
  return joins.get(c) ?? [];
}

const windowed = (i: HloInstruction): boolean => {
  if (i.opcode === 'get-tuple-element' || i.opcode === 'reshape') return true;
  if (i.opcode !== 'fusion') return false;
  const kind = (i.params as { kind?: string }).kind;
  return kind === 'kLoop' || kind === 'kInput' || kind === 'kRow';
};

/** The last instruction of the window after position `end` of a group with members `group` (see `dotGroupJoinsOf`), or null. */
function windowEnd(order: readonly HloInstruction[], end: number, group: ReadonlySet<HloInstruction>): HloInstruction | null {
  let last: HloInstruction | null = null;
  for (let j = end + 1, kernels = 0; j < order.length && kernels < ASYNC_WINDOW; j++) {
    const x = order[j];
    if (!windowed(x) || hasEffect(x) || x.operands.some((o) => group.has(o))) break;
    if (x.opcode === 'fusion') {
      last = x; // (trailing aliases are left out: they cost nothing)
      kernels++;
    }
  }
  return last;
}

/**
 * Moves the instructions between a group's members that no member needs (none reads them, nor
 * an instruction that stays between the members) and that could lie in a window (`windowed`:
 * the column sums of the backward's bias and layer-norm gradients between its weight-gradient
 * dots) to right after the group's last member, in their order: there they run beside the
 * group's products instead of before them. Sound: none reads a member (the group's condition),
 * none is read before its new place, and nothing between has an effect. Returns how many moved.
 */
function sinkIntoWindow(c: HloComputation, group: readonly HloInstruction[]): number {
  const order = c.instructions;
  const p1 = order.indexOf(group[0]);
  const pn = order.indexOf(group[group.length - 1]);
  const members = new Set(group);
  const moved = new Set<HloInstruction>();
  for (let k = p1 + 1; k < pn; k++) if (!members.has(order[k]) && windowed(order[k]) && !hasEffect(order[k])) moved.add(order[k]);
  // What stays (the members included) keeps every instruction it reads before it.
  for (let changed = true; changed; ) {
    changed = false;
    for (let k = pn; k > p1; k--) {
      const x = order[k];
      if (moved.has(x)) continue;
      for (const o of x.operands) {
        if (moved.delete(o)) changed = true;
      }
    }
  }
  if (moved.size === 0) return 0;
  const range = order.slice(p1, pn + 1);
  const next = [...range.filter((x) => !moved.has(x)), ...range.filter((x) => moved.has(x))];
  order.splice(p1, next.length, ...next);
  return moved.size;
}

const groupable = (i: HloInstruction): boolean => i.prim?.name === 'dot_general' && i.shapes.length === 1 && i.shape.dtype === 'float32' && !i.shape.weakType;

/**
 * Groups the independent dots of `c` (see above); returns how many dots joined a group. With
 * `windows` (pipeline option `asyncDotGroups`), each group also gets its window
 * (`dotGroupJoinsOf`), the instructions between its members that no member needs moved into it.
 */
export function groupDots(c: HloComputation, windows = false): number {
  const order = c.instructions;
  const found: HloInstruction[][] = [];
  const ends: (HloInstruction | null)[] = [];
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
  // The windows (after every group is found: moving instructions within a group's span moves no
  // other group's member, as no groupable dot lies inside a span but the group's own).
  const before = windows && found.length > 0 ? order.slice() : null;
  let sunk = 0;
  for (const g of found) {
    if (!windows) {
      ends.push(null);
      continue;
    }
    sunk += sinkIntoWindow(c, g);
    ends.push(windowEnd(c.instructions, c.instructions.indexOf(g[g.length - 1]), new Set(g)));
  }
  groups.set(c, found);
  joins.set(c, ends);
  if (before !== null && sunk > 0) exportOrders.set(c, before);
  else exportOrders.delete(c);
  return grouped;
}

/** The order each computation had before its windows moved instructions (a valid topological order). */
const exportOrders = new WeakMap<HloComputation, HloInstruction[]>();

/**
 * The order the text exporters (StableHLO, HLO text) print `c` in: the order before the windows
 * moved the column sums (the windows are a schedule of this executable, not part of the program,
 * so the exported program is the same with and without them), or `c.instructions` when no window
 * moved anything or `c` changed since (then the recorded order no longer holds its instructions).
 */
export function exportOrderOf(c: HloComputation): readonly HloInstruction[] {
  const o = exportOrders.get(c);
  if (o === undefined || o.length !== c.instructions.length) return c.instructions;
  const now = new Set(c.instructions);
  return o.every((i) => now.has(i)) ? o : c.instructions;
}
