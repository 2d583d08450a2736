/**
 * Row fusion (`kind=kRow`): softmax, log-softmax, layer norm, RMSNorm, and their gradients, as
 * one kernel that walks each row once per reduction stage with the row in cache and writes only
 * the result. XLA:GPU gets the same effect from its Triton "softmax" fusions (kind=kCustom);
 * `kRow` is xla-lite's name for it.
 *
 * The rule is structural, not a pattern of one jaxpr. For a loop shape S of rank n split into
 * row dims S[0..k) and trailing row dims S[k..n) (row length C >= 2), a group may hold:
 * - full values: float32 elementwise ops of shape S (operands of shape S, scalars, or
 *   broadcasts of any outside value);
 * - row reductions: `reduce_sum` / `reduce_max` of a full value over exactly the axes k..n-1;
 * - row values: elementwise ops, reshapes and scalar broadcasts on values of the row shape
 *   S[0..k) (optionally with trailing size-1 dims, as `keepdims` makes them);
 * - row broadcasts: `broadcast_in_dim` of a row value back to S along the row dims.
 * Groups grow consumers-first as elementwise fusion does (an instruction joins a group when it
 * fits that group's S and k and each of its users is in the group or comes after the group's
 * root; a value with users outside becomes an extra output of the fusion, so a training step's
 * forward softmax/norm, whose intermediates the backward pass reads, still fuses), and one becomes a fusion when it
 * holds a reduction whose row value flows back to full shape through a row broadcast, rooted
 * at a full value (softmax, norms) or at a row reduction (a log-softmax feeding the loss sum).
 * Groups without that round trip are left to elementwise fusion (kLoop/kInput).
 */
import { type HloComputation, HloInstruction, type HloModule, numel } from '../hlo';
import { dce } from './dce';
import { contractsInto, isBroadcastValue, isFusible, isFusibleReduce, isIndexValue, outlineFusion, REMAT_OPS } from './fusion';

interface Group {
  /** The loop shape S. */
  shape: readonly number[];
  /** Number of row dims (k), once a reduction or row broadcast fixed it. */
  k: number | null;
  root: HloInstruction;
  /** Its instructions, kept as they join (`fuses` reads them per (instruction, user) pair). */
  members: HloInstruction[];
}

const eqShape = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((d, i) => d === b[i]);
const prod = (xs: readonly number[]): number => xs.reduce((a, b) => a * b, 1);

/** The row count k implied by reducing axes of a rank-n shape, if they are a trailing run. */
function rowDimsOfReduce(i: HloInstruction, g: Group): number | null {
  const name = i.prim?.name;
  if ((name !== 'reduce_sum' && name !== 'reduce_max') || i.isTuple || i.shape.dtype !== 'float32') return null;
  const x = i.operands[0].shape;
  if (x.dtype !== 'float32' || !eqShape(x.shape, g.shape)) return null;
  const axes = [...(i.params as { axes: readonly number[] }).axes].sort((a, b) => a - b);
  const n = g.shape.length;
  const k = n - axes.length;
  if (k < 1 || !axes.every((a, j) => a === k + j)) return null;
  return k;
}

/** The row count k implied by a broadcast of a row-shaped value to S, if it is one. */
function rowDimsOfBroadcast(i: HloInstruction, g: Group): number | null {
  if (i.prim?.name !== 'broadcast_in_dim' || i.shape.dtype !== 'float32' || !eqShape(i.shape.shape, g.shape)) return null;
  const src = i.operands[0].shape;
  if (src.dtype !== 'float32' || numel(src) === 1) return null;
  const dims = (i.params as { broadcastDimensions: readonly number[] }).broadcastDimensions;
  const mapped = src.shape.map((sz, j) => (sz === 1 ? -1 : dims[j])).filter((d) => d >= 0);
  const k = g.k ?? Math.max(...mapped) + 1;
  const rows = g.shape.slice(0, k).map((sz, d) => (sz === 1 ? -1 : d)).filter((d) => d >= 0);
  return eqShape(mapped, rows) && prod(g.shape.slice(0, k)) === numel(src) ? k : null;
}

/** Whether a shape is the row shape S[0..k), optionally followed by size-1 dims. */
function isRowShape(s: readonly number[], g: Group, k: number): boolean {
  const rows = g.shape.slice(0, k);
  return eqShape(s.slice(0, k), rows) && s.slice(k).every((d) => d === 1);
}

type Role = 'full' | 'reduce' | 'row' | 'rowBroadcast';

/** How `i` would take part in group `g` (and the k it implies), or null if it cannot. */
function roleIn(i: HloInstruction, g: Group): { role: Role; k: number | null } | null {
  if (i.isTuple || i.called.length) return null;
  const k = rowDimsOfReduce(i, g);
  if (k !== null) return g.k === null || g.k === k ? { role: 'reduce', k } : null;
  const kb = rowDimsOfBroadcast(i, g);
  if (kb !== null) return g.k === null || g.k === kb ? { role: 'rowBroadcast', k: kb } : null;
  if (eqShape(i.shape.shape, g.shape)) return isFusible(i) ? { role: 'full', k: g.k } : null;
  const name = i.prim?.name;
  // An iota is only ever a full value (the kernels compute it from the loop position).
  if (name === 'iota' || g.k === null || i.shape.dtype !== 'float32' || !isRowShape(i.shape.shape, g, g.k)) return null;
  if (name === 'reshape' && i.operands[0].shape.dtype === 'float32' && isRowShape(i.operands[0].shape.shape, g, g.k)) return { role: 'row', k: g.k };
  return isFusible(i) ? { role: 'row', k: g.k } : null;
}

/**
 * A broadcast (or index value: an iota, a mask computed from iotas) whose users sit in several
 * groups (or in a group and outside) is cloned, one copy per group it fits, each joining that
 * group: broadcasts cost nothing inside a kernel, so XLA duplicates them rather than let a
 * shared one split fusions. The original keeps the
 * remaining users (or dies). Returns whether any clone was made.
 */
function cloneBroadcast(
  c: HloComputation,
  i: HloInstruction,
  j: number,
  users: Map<HloInstruction, (HloInstruction | null)[]>,
  groupOf: Map<HloInstruction, Group>,
  roles: Map<HloInstruction, Role>,
  pos: Map<HloInstruction, number>,
): boolean {
  const us = users.get(i)!;
  const byGroup = new Map<Group, HloInstruction[]>();
  for (const u of us) {
    const g = u === null ? undefined : groupOf.get(u);
    if (g && !byGroup.get(g)?.includes(u!)) byGroup.set(g, [...(byGroup.get(g) ?? []), u!]);
  }
  if (byGroup.size === 0 || (byGroup.size === 1 && [...byGroup.values()][0].length === us.length)) return false;
  let remaining = us;
  let made = false;
  for (const [g, gus] of byGroup) {
    const r = roleIn(i, g);
    if (!r) continue;
    const clone = new HloInstruction(i.opcode, i.shapes, i.operands, i.params, i.prim);
    c.instructions.splice(j, 0, clone);
    for (const u of gus) u.operands = u.operands.map((o) => (o === i ? clone : o));
    remaining = remaining.filter((u) => u === null || !gus.includes(u));
    users.set(clone, gus);
    for (const o of new Set(i.operands)) users.get(o)?.push(clone);
    // Its program position: just before its first user (where it is needed).
    pos.set(clone, Math.min(...gus.map((u) => pos.get(u)!)) - 0.5);
    g.k = r.k;
    join(clone, g, r.role, groupOf, roles);
    made = true;
  }
  users.set(i, remaining);
  if (remaining.length === 0) {
    for (const o of new Set(i.operands)) {
      const src = users.get(o);
      if (src) src.splice(src.indexOf(i), 1);
    }
  }
  return made && remaining.length === 0;
}

/**
 * Drops the extra outputs of the row fusion `f` that the loop fusions reading them can
 * recompute from what `f` writes anyway: a cheap elementwise value (`REMAT_OPS`) of `f`'s
 * other outputs, its inputs and broadcasts of those, read only by instructions elementwise
 * fusion takes. Each is rebuilt after `f` from those values (elementwise fusion then folds it
 * into its readers) and `f` no longer writes it: a training step's layer norm writes
 * x - mean and 1/sqrt(var + eps) for its backward anyway, so γ's gradient recomputes
 * x̂ = (x - mean) * rstd instead of reading a written x̂. A product is kept where taking it out
 * of the outputs (or recomputing it) would let a kernel contract it into a fused multiply-add.
 */
function dropRecomputableOutputs(c: HloComputation, f: HloInstruction): void {
  const body = f.called[0];
  const gtesOf = (): Map<number, HloInstruction> => new Map(c.instructions.filter((i) => i.opcode === 'get-tuple-element' && i.operands[0] === f).map((i) => [(i.params as { index: number }).index, i]));
  for (let k = body.outputs.length - 1; k >= 1; k--) {
    const e = body.outputs[k];
    const gtes = gtesOf();
    const g = gtes.get(k);
    const users = c.users();
    if (!g || e.prim === null || !REMAT_OPS.has(e.prim.name) || e.shape.dtype !== 'float32' || body.outputs.indexOf(e) !== k) continue;
    const readers = users.get(g)!;
    if (readers.length === 0 || readers.some((u) => u === null || !(isFusible(u) || isFusibleReduce(u)))) continue;
    const inside = body.instructions.flatMap((m) => m.operands.filter((o) => o === e).map(() => m));
    if (contractsInto(e, readers as HloInstruction[]) || contractsInto(e, inside)) continue;
    const outside = (o: HloInstruction): HloInstruction | undefined => (o.opcode === 'parameter' ? f.operands[o.paramIndex] : body.outputs.indexOf(o) !== k ? gtes.get(body.outputs.indexOf(o)) : undefined);
    const made: HloInstruction[] = [];
    const ops = e.operands.map((o) => {
      const v = outside(o);
      if (v !== undefined || o.prim?.name !== 'broadcast_in_dim') return v;
      const src = outside(o.operands[0]);
      if (src === undefined) return undefined;
      const bcast = new HloInstruction(o.opcode, o.shapes, [src], o.params, o.prim);
      made.push(bcast);
      return bcast;
    });
    if (ops.some((o) => o === undefined)) continue;
    const copy = new HloInstruction(e.opcode, e.shapes, ops as HloInstruction[], e.params, e.prim);
    made.push(copy);
    c.instructions.splice(c.instructions.indexOf(g), 1, ...made);
    c.replaceUses(g, copy);
    body.outputs.splice(k, 1);
    f.shapes.splice(k, 1);
    for (const [j, h] of gtes) if (j > k) h.params = { ...h.params, index: j - 1 };
  }
  dce(body);
  if (f.shapes.length === 1) {
    const g0 = gtesOf().get(0);
    if (g0) {
      c.replaceUses(g0, f);
      c.instructions.splice(c.instructions.indexOf(g0), 1);
    }
  }
}

/** Puts `i` in group `g` with role `role`. */
function join(i: HloInstruction, g: Group, role: Role, groupOf: Map<HloInstruction, Group>, roles: Map<HloInstruction, Role>): void {
  groupOf.set(i, g);
  roles.set(i, role);
  g.members.push(i);
}

/**
 * Whether group `g` becomes a kRow fusion: a row length of at least 2, a row reduction, and a
 * row value broadcast back to full shape. Groups only grow, so once true it stays true.
 */
function fuses(g: Group, groupOf: Map<HloInstruction, Group>, roles: Map<HloInstruction, Role>): boolean {
  if (g.k === null || prod(g.shape.slice(g.k)) < 2) return false;
  const ms = g.members;
  return ms.some((m) => roles.get(m) === 'reduce') && ms.some((m) => roles.get(m) === 'rowBroadcast' && groupOf.get(m.operands[0]) === g);
}

/**
 * Fuses row groups of `c`; returns the number of kRow fusions made. `recompute` (default true):
 * drop the extra outputs loop fusions can recompute (`dropRecomputableOutputs`).
 */
export function fuseRows(c: HloComputation, mod?: HloModule, recompute = true): number {
  if (typeof recompute !== 'boolean') throw new TypeError(`fuseRows: recompute must be a boolean; got ${String(recompute)}`);
  const users = c.users();
  const groupOf = new Map<HloInstruction, Group>();
  const roles = new Map<HloInstruction, Role>();
  const groups: Group[] = [];
  const pos = new Map(c.instructions.map((i, j) => [i, j]));
  for (let j = c.instructions.length - 1; j >= 0; j--) {
    const i = c.instructions[j];
    // Join the group of a user when every other user runs after that group's root: then the
    // value can also leave the fusion as an extra output (multi-output fusion) without a cycle,
    // as a forward softmax's exp and sum do when the backward pass reads them again. A user in
    // a group that is already sure to become a fusion runs at that group's root (a backward
    // norm's `2 * sqrt(var + eps)`, computed early, runs inside the backward row kernel).
    // Broadcasts, index values and values made from broadcasts alone (a one-hot of labels)
    // never leave a fusion (recomputing them is free; materialising is not).
    const after = (u: HloInstruction | null, g: Group): boolean => {
      if (u === null) return true;
      const h = groupOf.get(u);
      return pos.get(h !== undefined && h !== g && fuses(h, groupOf, roles) ? h.root : u)! > pos.get(g.root)!;
    };
    const cheap = i.prim?.name === 'broadcast_in_dim' || isIndexValue(i) || isBroadcastValue(i);
    if (cheap && cloneBroadcast(c, i, j, users, groupOf, roles, pos)) continue;
    const us = users.get(i)!;
    const candidates = [...new Set(us.map((u) => (u === null ? undefined : groupOf.get(u))).filter((g): g is Group => g !== undefined))];
    const joined = candidates.some((g) => {
      const inside = us.filter((u) => u !== null && groupOf.get(u) === g);
      const escapes = inside.length !== us.length;
      if (escapes && (cheap || !us.every((u) => (u !== null && groupOf.get(u) === g) || after(u, g)))) return false;
      const r = roleIn(i, g);
      if (!r) return false;
      g.k = r.k;
      join(i, g, r.role, groupOf, roles);
      return true;
    });
    if (joined) continue;
    // Start a group at a full-shape elementwise op or at a trailing-axes reduction.
    if (!i.isTuple && i.shape.dtype === 'float32') {
      const fresh: Group = { shape: i.shape.shape, k: null, root: i, members: [] };
      if (isFusible(i)) {
        groups.push(fresh);
        join(i, fresh, 'full', groupOf, roles);
        continue;
      }
      const isReduce = i.prim?.name === 'reduce_sum' || i.prim?.name === 'reduce_max';
      const red: Group = { shape: isReduce ? i.operands[0].shape.shape : [], k: null, root: i, members: [] };
      const k = isReduce ? rowDimsOfReduce(i, red) : null;
      if (k !== null) {
        red.k = k;
        groups.push(red);
        join(i, red, 'reduce', groupOf, roles);
      }
    }
  }
  let made = 0;
  // Each group's members in program order (one pass; clones sit where they were inserted).
  const ordered = new Map<Group, HloInstruction[]>();
  for (const i of c.instructions) {
    const g = groupOf.get(i);
    if (g === undefined) continue;
    const l = ordered.get(g);
    if (l === undefined) ordered.set(g, [i]);
    else l.push(i);
  }
  for (const g of groups) {
    const ms = ordered.get(g) ?? [];
    if (!fuses(g, groupOf, roles)) continue;
    const f = outlineFusion(c, ms, g.root, 'kRow', mod);
    if (recompute) dropRecomputableOutputs(c, f);
    made++;
  }
  // Broadcast clones sit where the original was; a fusion consuming another's extra output sits
  // at its root, after that output's producer. Every user of an extra output comes after the
  // producing group's root, so the graph is acyclic and a re-sort restores program order.
  if (made) c.sort();
  return made;
}
