/**
 * Elementwise (loop) fusion, XLA's producer-into-consumer instruction fusion restricted to
 * elementwise work: visiting instructions consumers-first, an elementwise instruction joins
 * the fusion group of its users when every user is in that same group and it has the group's
 * output shape (or, as XLA's multi-output fusion, when its other users all come after a loop
 * group's root: it then joins that group and also leaves it as an extra output), so a chain
 * or DAG of elementwise ops (with scalar broadcasts folded in) becomes one `fusion`
 * instruction whose body is a fused computation, executed as one pass over the data (see
 * `kernel.ts`). Groups with one member are left unfused. Intermediate values of a
 * group are never materialised, which is what the "bytes moved" numbers measure.
 *
 * A fusible broadcast (or index value: an iota, a mask computed from iotas) read by several
 * groups (or by a group and something outside it) is duplicated, one copy per group, as
 * XLA's instruction fusion duplicates cheap producers: inside a kernel a broadcast is only an
 * index computation, while a shared one would be a kernel of its own writing the full array
 * that every consumer then reads back. Readers
 * outside any group (a dot, a program output) keep the original, materialised for them.
 * Likewise a cheap elementwise value read only by loop groups is recomputed in each of them
 * when that reads no more arrays than reading it back would (`rematerializes`).
 */
import { type HloComputation, HloComputation as Comp, HloInstruction, type HloModule, isScalarConstant, numel } from '../hlo';
import { epilogueDot } from './outputFusion';

/**
 * The primitives both fused-kernel generators implement (`js/kernel.ts` and
 * `wasm/emitExpr.ts`; float32 arithmetic, bool predicates): core primitives with an
 * `elementwise` descriptor (a test checks each has one), plus `broadcast_in_dim`, read through
 * its index map, and a float32 `iota`, computed from the loop coordinates (passes/indexValues.ts
 * turns integer masks and one-hot compares into float32 ones). One list for fusion and both
 * code generators.
 */
export const FUSED_OPS: ReadonlySet<string> = new Set([
  'neg', 'exp', 'log', 'tanh', 'logistic', 'sqrt', 'rsqrt', 'abs', 'sin', 'cos', 'square', 'sign', 'floor', 'ceil', 'log1p', 'expm1', 'integer_pow', 'convert_element_type', 'stop_gradient',
  'add', 'sub', 'mul', 'div', 'max', 'min', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'select_n',
  'broadcast_in_dim', 'iota',
]);
/** The comparison primitives. */
export const COMPARE: ReadonlySet<string> = new Set(['eq', 'ne', 'lt', 'le', 'gt', 'ge']);
/** Largest count whose integers 0..n are all exact float32 values (an iota of up to this extent converts exactly). */
export const EXACT_F32_INT = 1 << 24;

/** Whether an instruction can be a member of an elementwise (loop) fusion. */
export function isFusible(i: HloInstruction): boolean {
  const name = i.prim?.name;
  if (!name || i.isTuple || i.called.length) return false;
  if (!FUSED_OPS.has(name)) return false;
  const out = i.shape;
  if (name === 'select_n') {
    if (i.operands.length !== 3 || i.operands[0].shape.dtype !== 'bool') return false;
  }
  if (COMPARE.has(name)) {
    if (out.dtype !== 'bool' || i.operands.some((o) => o.shape.dtype !== 'float32')) return false;
  } else if (out.dtype !== 'float32') return false;
  if (name === 'convert_element_type' && !['float32', 'bool'].includes(i.operands[0].shape.dtype)) return false;
  if (name === 'broadcast_in_dim') return i.operands[0].shape.dtype === 'float32';
  // Every operand is elementwise-aligned with the output, or a scalar (read at index 0).
  return i.operands.every((o) => !o.isTuple && (numel(o.shape) === 1 || o.shape.shape.join() === out.shape.join()) && (o.shape.dtype === 'float32' || o.shape.dtype === 'bool'));
}

/**
 * Whether `x` is computed from float32 iotas and scalar constants alone by fusible elementwise
 * ops (float32 values, or bool compares of float32 values: what fusion can take). `memo` holds
 * the answers for the nodes already visited in this call (values share operands: without it a
 * deep chain of diamonds is visited exponentially often).
 */
export function generated(x: HloInstruction, memo = new Map<HloInstruction, boolean>()): boolean {
  let r = memo.get(x);
  if (r === undefined) {
    r = generatedNode(x, memo);
    memo.set(x, r);
  }
  return r;
}

function generatedNode(x: HloInstruction, memo: Map<HloInstruction, boolean>): boolean {
  if (x.isTuple) return false;
  const name = x.prim?.name;
  const dt = x.shape.dtype;
  if (dt !== 'float32' && !(dt === 'bool' && x.operands.length > 0 && x.operands.every((o) => !o.isTuple && o.shape.dtype === 'float32'))) return false;
  if (name === 'iota') return true;
  if (x.opcode === 'constant') return x.shape.shape.length === 0;
  if (name === 'broadcast_in_dim') return x.operands[0].shape.shape.length === 0 && generated(x.operands[0], memo);
  return name !== undefined && FUSED_OPS.has(name) && x.operands.length > 0 && x.operands.every((o) => generated(o, memo));
}

/**
 * An index value: a float32 iota, or a fusible value computed from iotas and scalar constants
 * alone by cheap ops (a causal mask; no transcendentals). Fusion passes recompute one per
 * fusion reading it, as they do broadcasts, instead of materialising it.
 */
export function isIndexValue(x: HloInstruction): boolean {
  if (x.opcode === 'constant' || x.prim?.name === 'broadcast_in_dim' || !generated(x)) return false;
  // No transcendental anywhere below (each node visited once).
  const seen = new Set<HloInstruction>();
  const stack = [x];
  while (stack.length) {
    const v = stack.pop()!;
    if (seen.has(v)) continue;
    seen.add(v);
    if (v.prim?.elementwise?.transcendental === true) return false;
    stack.push(...v.operands);
  }
  return true;
}

/**
 * A value any kernel computes from what it reads at row or vector size: made by cheap
 * (`REMAT_OPS`) or comparison ops from broadcasts (of anything), float32 iotas and scalar
 * constants alone, such as a one-hot of labels (`labels[row] == iota`). Row fusion recomputes
 * one in every fusion reading it, as it does broadcasts, instead of writing it at full size
 * (an index value is the case without broadcasts of non-scalars).
 */
export function isBroadcastValue(x: HloInstruction, memo = new Map<HloInstruction, boolean>()): boolean {
  let r = memo.get(x);
  if (r !== undefined) return r;
  const name = x.prim?.name;
  if (x.isTuple || name === undefined) r = false;
  else if (name === 'broadcast_in_dim' || name === 'iota') r = isFusible(x);
  else r = (REMAT_OPS.has(name) || COMPARE.has(name)) && isFusible(x) && x.operands.every((o) => isScalarConstant(o) || isBroadcastValue(o, memo));
  memo.set(x, r);
  return r;
}

/** A reduction's axes in increasing order. */
export const sortedAxes = (r: HloInstruction): number[] => [...(r.params as { axes: readonly number[] }).axes].sort((a, b) => a - b);

/** What makes two reductions the same loop (`reduce_sum|2048,128|0`): kind, operand shape and axes. */
export const reductionKey = (r: HloInstruction): string => `${r.prim?.name}|${r.operands[0].shape.shape.join()}|${sortedAxes(r).join()}`;

/** Reductions the kernel generator fuses with their producers: float32 sum/max over a leading or trailing run of axes. */
export function isFusibleReduce(i: HloInstruction): boolean {
  const name = i.prim?.name;
  if ((name !== 'reduce_sum' && name !== 'reduce_max') || i.isTuple || i.shape.dtype !== 'float32') return false;
  const x = i.operands[0].shape;
  if (x.dtype !== 'float32') return false;
  const axes = sortedAxes(i);
  if (axes.length === 0) return false;
  const contiguous = axes.every((a, k) => k === 0 || a === axes[k - 1] + 1);
  return contiguous && (axes[0] === 0 || axes[axes.length - 1] === x.shape.length - 1);
}

let fusionCounter = 0;

/** A fresh name for a fused computation (unique across every fusion pass). */
export const fusedComputationName = (): string => `fused_computation.${fusionCounter++}`;

/**
 * Fuses elementwise groups of `c` (and reductions with their elementwise producers); returns
 * the number of fusion instructions created. `minSize` is the smallest group worth a kernel.
 * `remat` (default true) recomputes cheap values in every group reading them
 * (`rematerializes`) and lets a value leave a group for readers whose own fusion runs later.
 */
export function fuseElementwise(c: HloComputation, mod?: HloModule, minSize = 2, remat = true): number {
  const users = c.users();
  const group = new Map<HloInstruction, number>();
  const roots: HloInstruction[] = [];
  /** The shape each group's loop runs over (the root's, or a reduction's operand's). */
  const loopShape: string[] = [];
  const pos = new Map(c.instructions.map((x, j) => [x, j]));
  const end = c.instructions.length;
  /**
   * Where `u` runs: a member of a group runs inside that group's fusion, at its root (with
   * `minSize` <= 2 every group whose root is not `u` itself becomes a fusion).
   */
  const at = (u: HloInstruction | null): number => {
    if (u === null) return end;
    const h = group.get(u);
    return pos.get(remat && h !== undefined && minSize <= 2 ? roots[h] : u)!;
  };
  /** Whether `u` (outside group g) runs after g's fusion, so it can read an extra output of it. */
  const after = (u: HloInstruction | null, g: number): boolean => at(u) > pos.get(roots[g])!;
  /** Whether `u` itself (not its group's fusion) comes after g's root: all that `after` allows without `remat`. */
  const follows = (u: HloInstruction | null, g: number): boolean => (u === null ? end : pos.get(u)!) > pos.get(roots[g])!;
  /**
   * Multi-output fusion: the loop group an elementwise value `i` read by a loop group and by
   * later instructions joins, leaving it as an extra output (written once, where it is
   * computed, instead of by a kernel of its own that the group then reads back); undefined if
   * none. (float32 outputs only: the wasm loop kernel stores those; bool extras would leave it.)
   * With `remat`, a reader counts as later when its group's fusion runs later (`after`); a
   * join that needs that wider rule is not made when it would cost a dot epilogue, which
   * fusion without `remat` keeps: for a value computed from a dot's result that only it reads
   * (`readsOwnDot`; as the root of its own group, output fusion (outputFusion.ts) makes that
   * group the dot's epilogue and the dot's result is never stored, where as an extra output
   * the dot would write it and the group read it back), or into a group that would be a dot's
   * epilogue (`epilogue`: an extra output would keep it from being one).
   */
  const multiOutput = (i: HloInstruction): number | undefined => {
    if (i.shape.dtype !== 'float32') return undefined;
    const us = users.get(i)!;
    // (readsOwnDot walks the value's operands: asked only where the wider rule is needed)
    let ownDot: boolean | undefined;
    return [...new Set(us.map((u) => (u === null ? undefined : group.get(u))))].find((h) => {
      if (h === undefined || isFusibleReduce(roots[h]) || roots[h].shape.dtype !== 'float32' || loopShape[h] !== i.shape.shape.join()) return false;
      const outside = us.filter((u) => u === null || group.get(u) !== h);
      if (!outside.every((u) => after(u, h))) return false;
      return outside.every((u) => follows(u, h)) || !((ownDot ??= remat && readsOwnDot(i, users)) || epilogue(h));
    });
  };
  /** The dot results the members of each group read. */
  const dotsRead = new Map<number, HloInstruction[]>();
  /** Whether group h reads a dot's result of its loop shape that nothing outside h reads (output fusion can make h its epilogue). */
  const epilogue = (h: number): boolean => (dotsRead.get(h) ?? []).some((d) => epilogueDot(d, loopShape[h]) && users.get(d)!.every((u) => u !== null && group.get(u) === h));
  for (let k = c.instructions.length - 1; k >= 0; k--) {
    const i = c.instructions[k];
    const reduce = isFusibleReduce(i);
    if (!reduce && !isFusible(i)) continue;
    const cheap = i.prim?.name === 'broadcast_in_dim' || isIndexValue(i);
    if (cheap && duplicateBroadcast(c, k, users, group, loopShape, pos)) continue;
    // A cheap elementwise value read by several loop groups is recomputed in each of them
    // instead of written by one and read back by the others (XLA duplicates inexpensive
    // producers into every consumer fusion the same way).
    if (remat && !cheap && !reduce && rematerializes(i, users, group, loopShape, multiOutput) && duplicateBroadcast(c, k, users, group, loopShape, pos)) continue;
    const us = users.get(i)!;
    const g = !reduce && us.length > 0 && us[0] !== null ? group.get(us[0]) : undefined;
    const joins = g !== undefined && us.every((u) => u !== null && group.get(u) === g) && i.shape.shape.join() === loopShape[g];
    const multi = joins || reduce || cheap ? undefined : multiOutput(i);
    if (joins) group.set(i, g);
    else if (multi !== undefined) group.set(i, multi);
    else {
      group.set(i, roots.length);
      roots.push(i);
      loopShape.push((reduce ? i.operands[0].shape : i.shape).shape.join());
    }
    for (const o of i.operands) {
      if (o.prim?.name !== 'dot_general') continue;
      const h = group.get(i)!;
      const read = dotsRead.get(h);
      if (read) read.push(o);
      else dotsRead.set(h, [o]);
    }
  }
  const members: HloInstruction[][] = roots.map(() => []);
  for (const i of c.instructions) if (group.has(i)) members[group.get(i)!].push(i);
  let made = 0;
  members.forEach((ms, g) => {
    if (ms.length < minSize) return;
    outlineFusion(c, ms, roots[g], isFusibleReduce(roots[g]) ? 'kInput' : 'kLoop', mod);
    made++;
  });
  return made;
}

/**
 * Elementwise ops cheap enough to recompute in every loop fusion reading them (XLA's
 * "inexpensive" elementwise ops: no division, no transcendental).
 */
export const REMAT_OPS: ReadonlySet<string> = new Set(['neg', 'abs', 'square', 'sign', 'floor', 'ceil', 'add', 'sub', 'mul', 'max', 'min', 'select_n', 'convert_element_type', 'stop_gradient']);

/**
 * Whether `i` computes from a dot's result that nothing else reads, through elementwise values
 * that nothing but `i` (and values like them) reads: the loop group rooted at `i` would then
 * hold that whole chain, and output fusion (outputFusion.ts) makes such a single-output group
 * the dot's epilogue, storing `i` in place of the dot's result.
 */
function readsOwnDot(i: HloInstruction, users: Map<HloInstruction, (HloInstruction | null)[]>): boolean {
  const cone = new Set([i]);
  const stack = [i];
  while (stack.length) {
    for (const o of stack.pop()!.operands) {
      if (cone.has(o) || !users.get(o)!.every((u) => u !== null && cone.has(u))) continue;
      if (o.prim?.name === 'dot_general') {
        if (epilogueDot(o, i.shape.shape.join())) return true;
      } else if (isFusible(o) && o.prim?.name !== 'broadcast_in_dim' && o.shape.shape.join() === i.shape.shape.join()) {
        cone.add(o);
        stack.push(o);
      }
    }
  }
  return false;
}

/**
 * Whether a wasm kernel would contract the product `m`, read by `readers` (once per operand
 * slot) inside one fusion, into one fused multiply-add with its reader (emitExpr.ts: a product
 * that is not an output, used once, by an add or as a sub's subtrahend). Recomputing a value
 * somewhere it would be contracted changes its rounding, so rematerialisation avoids that.
 */
export function contractsInto(m: HloInstruction, readers: readonly HloInstruction[]): boolean {
  if (m.prim?.name !== 'mul' || readers.length !== 1) return false;
  const u = readers[0];
  const un = u.prim?.name;
  return un === 'add' || (un === 'sub' && u.operands[1] === m && u.operands[0] !== m);
}

/**
 * Whether the fusible float32 value `i`, whose readers are all members of two or more loop
 * groups of its shape, is better recomputed inside each of them than written once and read
 * back: it is a cheap op (`REMAT_OPS`), and for every reading group at most one of its
 * full-size operands is not already read by that group, and such an operand is written for
 * some other reader anyway (so each group reads at most as many arrays as before and `i`'s
 * own write disappears). Broadcast and index-value operands are free (computed in the
 * kernel). A product whose only reader in a group is an add (or the subtrahend of a sub) is
 * left alone: the wasm kernel would contract that pair into one fused multiply-add and round
 * differently from the value written once, and recomputing must not change results.
 */
function rematerializes(
  i: HloInstruction,
  users: Map<HloInstruction, (HloInstruction | null)[]>,
  group: Map<HloInstruction, number>,
  loopShape: string[],
  multiOutput: (x: HloInstruction) => number | undefined,
): boolean {
  const name = i.prim?.name;
  if (name === undefined || !REMAT_OPS.has(name) || i.shape.dtype !== 'float32') return false;
  const us = users.get(i)!;
  const shape = i.shape.shape.join();
  const byGroup = new Map<number, HloInstruction[]>();
  for (const u of us) {
    const g = u === null ? undefined : group.get(u);
    if (g === undefined || loopShape[g] !== shape) return false;
    byGroup.set(g, [...(byGroup.get(g) ?? []), u!]);
  }
  if (byGroup.size < 2) return false;
  const free = (o: HloInstruction): boolean => numel(o.shape) === 1 || o.prim?.name === 'broadcast_in_dim' || isIndexValue(o);
  const full = [...new Set(i.operands)].filter((o) => !free(o));
  for (const [g, gus] of byGroup) {
    if (contractsInto(i, gus)) return false;
    const fresh = full.filter((o) => !users.get(o)!.some((u) => u !== null && group.get(u) === g));
    if (fresh.length > 1) return false;
    // A fresh fusible operand must be written anyway: read by an output, by an instruction no
    // loop group holds, or by a group other than this one and its own (a reader fused with it
    // does not make it written: recomputing `i` would then move a write, not remove one). An
    // operand not yet in a group (visited later, consumers first) whose other readers all sit
    // in one group joins that group when `i`, not recomputed, would join it too (as an extra
    // output): then it would not be written either.
    const written = (f: HloInstruction): boolean => {
      const others = users.get(f)!.filter((u) => u !== i);
      if (others.some((u) => u === null || group.get(u) === undefined)) return true;
      const gs = new Set(others.map((u) => group.get(u!)!));
      const own = group.get(f);
      if (own !== undefined) return [...gs].some((h) => h !== g && h !== own);
      return gs.size > 1 || (gs.size === 1 && !gs.has(multiOutput(i)!));
    };
    if (fresh.length === 1 && isFusible(fresh[0]) && !written(fresh[0])) return false;
  }
  return true;
}

/**
 * Gives each group reading `c.instructions[k]` its own copy of it (inserted at `k`, so program
 * order holds; the copy joins that group), when its readers are not already all in one group:
 * a broadcast (or index value), which costs nothing inside a kernel, or a cheap value that
 * `rematerializes` chose to recompute in each group reading it. A group gets a copy only if
 * the value has its loop shape. The original keeps the other readers; with none left it is
 * removed. Returns whether it was removed.
 */
function duplicateBroadcast(
  c: HloComputation,
  k: number,
  users: Map<HloInstruction, (HloInstruction | null)[]>,
  group: Map<HloInstruction, number>,
  loopShape: string[],
  pos: Map<HloInstruction, number>,
): boolean {
  const i = c.instructions[k];
  const us = users.get(i)!;
  const byGroup = new Map<number, HloInstruction[]>();
  for (const u of us) {
    const g = u === null ? undefined : group.get(u);
    if (g === undefined || i.shape.shape.join() !== loopShape[g]) continue;
    const gus = byGroup.get(g) ?? [];
    if (!gus.includes(u!)) gus.push(u!);
    byGroup.set(g, gus);
  }
  const allInOne = byGroup.size === 1 && us.every((u) => u !== null && byGroup.has(group.get(u)!));
  if (byGroup.size === 0 || allInOne) return false;
  // (users lists hold a reader once per operand slot: `mul(x, x)` is in x's list twice)
  for (const [g, gus] of byGroup) {
    const copy = new HloInstruction(i.opcode, i.shapes, i.operands, i.params, i.prim);
    c.instructions.splice(k, 0, copy);
    for (const u of gus) u.operands = u.operands.map((o) => (o === i ? copy : o));
    users.set(copy, us.filter((u) => u !== null && gus.includes(u)));
    pos.set(copy, pos.get(i)!);
    for (const o of i.operands) users.get(o)?.push(copy);
    group.set(copy, g);
  }
  const rest = us.filter((u) => u === null || !byGroup.has(group.get(u)!));
  users.set(i, rest);
  if (rest.length > 0) return false;
  c.instructions.splice(c.instructions.indexOf(i), 1);
  users.delete(i);
  for (const o of i.operands) {
    const src = users.get(o);
    if (src) src.splice(src.indexOf(i), 1);
  }
  return true;
}

/**
 * Replaces the group `ms` of `c` (in program order, every member's users inside the group
 * except `root`'s) by one `fusion` instruction of `kind` calling a new fused computation
 * holding copies of the members; values from outside become its parameters. Shared by every
 * fusion pass. Returns the fusion instruction.
 */
export function outlineFusion(c: HloComputation, ms: HloInstruction[], root: HloInstruction, kind: string, mod?: HloModule): HloInstruction {
  const inGroup = new Set(ms);
  const body = new Comp(fusedComputationName());
  const map = new Map<HloInstruction, HloInstruction>();
  const externals: HloInstruction[] = [];
  for (const m of ms) {
    const ops = m.operands.map((o) => {
      if (inGroup.has(o)) return map.get(o)!;
      let p = map.get(o);
      if (!p) {
        p = body.addParameter(o.shape);
        map.set(o, p);
        externals.push(o);
      }
      return p;
    });
    const copy = body.add(new HloInstruction(m.opcode, m.shapes, ops, m.params, m.prim));
    map.set(m, copy);
  }
  // Members other than the root that are also used outside the group leave as extra outputs
  // (a multi-output fusion, read through get-tuple-element).
  const users = c.users();
  const extras = ms.filter((m) => m !== root && users.get(m)!.some((u) => u === null || !inGroup.has(u)));
  body.outputs = [map.get(root)!, ...extras.map((m) => map.get(m)!)];
  const fusion = new HloInstruction('fusion', [root.shape, ...extras.map((m) => m.shape)], externals, { kind }, null);
  fusion.called = [body];
  c.instructions = c.instructions.filter((i) => !inGroup.has(i) || i === root);
  c.instructions[c.instructions.indexOf(root)] = fusion;
  mod?.computations.unshift(body);
  if (!extras.length) {
    c.replaceUses(root, fusion);
    return fusion;
  }
  const at = c.instructions.indexOf(fusion) + 1;
  const gtes = [root, ...extras].map((m, k) => new HloInstruction('get-tuple-element', [m.shape], [fusion], { index: k }, null));
  c.instructions.splice(at, 0, ...gtes);
  [root, ...extras].forEach((m, k) => c.replaceUses(m, gtes[k]));
  return fusion;
}
