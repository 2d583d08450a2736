/**
 * Layout assignment for dots, after XLA's LayoutAssignment + the transpose folding it enables.
 * The GEMM (core's systolic `dot_general`) reads each operand as a strided view: per batch
 * index, a [rows x k] matrix whose free dims merge into one stride and whose contracting dims
 * merge into another, whichever of the two is minor; so a transposed operand costs nothing if
 * the dot is told which dims of the untransposed buffer to contract. This pass:
 *
 * 1. folds a `transpose` feeding a dot into the dot's dimension numbers (the dot reads the
 *    transpose's operand in place) when the free dims keep their order and the GEMM can read
 *    the untransposed buffer as such a view;
 * 2. folds a `transpose` of a dot's result that swaps the lhs and rhs free dims (how backprop
 *    writes `x.T @ g`: `transpose(dot(g, x))`) into the dot by swapping its operands;
 * 3. reorders a dot's contracting-dim pairs when that lets the GEMM read both operands in place,
 *    and only where an operand still cannot be read as a view (its free or contracting dims do not merge
 *    into one stride in row-major order), inserts an explicit `copy` to the layout the GEMM
 *    wants, [batch..., free..., contracting...] major-to-minor: same logical shape, another
 *    physical layout (printed `f32[a,b,c]{...}`). The copy runs as a transpose into a row-major
 *    buffer of the physical shape, and the dot's dimension numbers are translated to physical
 *    dims when the executable is built (`physicalParams`).
 *
 * Every other value keeps the row-major layout: core Arrays are row-major, so outside dots a
 * layout change is always a materialised transpose, which this pass never adds.
 */
import { getPrimitive } from '@tpukit/core/internal';
import { type HloComputation, HloInstruction, makeInstruction } from '../hlo';

type Dims = readonly number[];
export type DotDims = readonly [readonly [Dims, Dims], readonly [Dims, Dims]];

const dimsOf = (i: HloInstruction): DotDims => (i.params as { dimensionNumbers: DotDims }).dimensionNumbers;

/** Free (neither batch nor contracting) dims of an operand of rank `rank`, ascending. */
export function freeDimsOf(rank: number, contract: Dims, batch: Dims): number[] {
  const out: number[] = [];
  for (let d = 0; d < rank; d++) if (!contract.includes(d) && !batch.includes(d)) out.push(d);
  return out;
}

/** Whether `dims` (in this order) of a row-major array of `shape` merge into one stride (size-1 dims ignored). */
function merges(shape: Dims, dims: Dims): boolean {
  const ds = dims.filter((d) => shape[d] !== 1);
  const st = new globalThis.Array<number>(shape.length);
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    st[d] = acc;
    acc *= shape[d];
  }
  for (let k = 0; k + 1 < ds.length; k++) if (st[ds[k]] !== st[ds[k + 1]] * shape[ds[k + 1]]) return false;
  return true;
}

/**
 * Whether the GEMM reads a row-major operand of `shape` in place with these batch and
 * contracting dims: its free dims (ascending) and contracting dims (in list order) each merge
 * into one stride. Batch dims may have any strides.
 */
export function gemmReadable(shape: Dims, batch: Dims, contract: Dims): boolean {
  return merges(shape, freeDimsOf(shape.length, contract, batch)) && merges(shape, contract);
}

/**
 * Contracting dims pair up by position, so their order is free: the order (as given, sorted by
 * lhs dim, or sorted by rhs dim) under which the GEMM reads both operands in place, or null.
 */
export function readableDims(lhs: Dims, rhs: Dims, dn: DotDims): DotDims | null {
  const [[lc, rc], [lb, rb]] = dn;
  const pairs = lc.map((l, j) => [l, rc[j]] as const);
  for (const order of [pairs, [...pairs].sort((a, b) => a[0] - b[0]), [...pairs].sort((a, b) => a[1] - b[1])]) {
    const l2 = order.map((p) => p[0]);
    const r2 = order.map((p) => p[1]);
    if (gemmReadable(lhs, lb, l2) && gemmReadable(rhs, rb, r2)) return [[l2, r2], [lb, rb]];
  }
  return null;
}

const withDims = (d: HloInstruction, operands: HloInstruction[], dn: DotDims): HloInstruction => makeInstruction(d.prim!, operands, { ...d.params, dimensionNumbers: dn });

/** Rule 1: dot(transpose(x), y) -> dot(x, y) with remapped dims (either side). */
function foldOperandTranspose(d: HloInstruction, side: 0 | 1): HloInstruction | null {
  const t = d.operands[side];
  if (t.prim?.name !== 'transpose' || t.opcode === 'copy') return null;
  const perm = (t.params as { permutation: Dims }).permutation;
  const [[lc, rc], [lb, rb]] = dimsOf(d);
  const c = side === 0 ? lc : rc;
  const b = side === 0 ? lb : rb;
  const free = freeDimsOf(t.shape.shape.length, c, b).map((j) => perm[j]);
  if (free.some((f, k) => k > 0 && f < free[k - 1])) return null; // would reorder the output
  const c2 = c.map((j) => perm[j]);
  const b2 = b.map((j) => perm[j]);
  const x = t.operands[0];
  const ops = side === 0 ? [x, d.operands[1]] : [d.operands[0], x];
  const dn = readableDims(ops[0].shape.shape, ops[1].shape.shape, side === 0 ? [[c2, rc], [b2, rb]] : [[lc, c2], [lb, b2]]);
  return dn && withDims(d, ops, dn);
}

/** Rule 2: transpose(dot(a, b)) that swaps the two free groups -> dot(b, a). */
function foldResultTranspose(t: HloInstruction, users: Map<HloInstruction, (HloInstruction | null)[]>): HloInstruction | null {
  const d = t.operands[0];
  if (t.prim?.name !== 'transpose' || t.opcode === 'copy' || d.prim?.name !== 'dot_general' || users.get(d)!.length !== 1) return null;
  const perm = (t.params as { permutation: Dims }).permutation;
  const [[lc, rc], [lb, rb]] = dimsOf(d);
  const [a, b] = d.operands;
  const nb = lb.length;
  const nl = a.shape.shape.length - lc.length - nb;
  const nr = b.shape.shape.length - rc.length - nb;
  const want = [...Array.from({ length: nb }, (_, k) => k), ...Array.from({ length: nr }, (_, k) => nb + nl + k), ...Array.from({ length: nl }, (_, k) => nb + k)];
  if (want.join() !== perm.join()) return null;
  return withDims(d, [b, a], [[rc, lc], [rb, lb]]);
}

/** Rules 1 and 2 over `c`; returns the number of transposes folded into dots. */
export function foldDotTransposes(c: HloComputation): number {
  let n = 0;
  for (let changed = true; changed; ) {
    changed = false;
    const users = c.users();
    for (const i of [...c.instructions]) {
      let r: HloInstruction | null = null;
      if (i.prim?.name === 'dot_general') r = foldOperandTranspose(i, 0) ?? foldOperandTranspose(i, 1);
      else if (i.prim?.name === 'transpose') r = foldResultTranspose(i, users);
      if (!r) continue;
      c.instructions.splice(c.instructions.indexOf(i), 0, r);
      c.replaceUses(i, r);
      // The replaced instruction (and, for a folded result transpose, its dot) is now dead.
      const dead = new Set([i, ...(i.prim?.name === 'transpose' ? [i.operands[0]] : [])]);
      c.instructions = c.instructions.filter((x) => !dead.has(x));
      n++;
      changed = true;
      break;
    }
  }
  if (n) c.sort();
  return n;
}

/** Rule 3: an explicit `copy` to [batch, free, contracting] for operands the GEMM cannot read in place. */
export function insertLayoutCopies(c: HloComputation): number {
  let n = 0;
  const transpose = getPrimitive('transpose');
  const made = new Map<string, HloInstruction>(); // one copy per value and layout
  for (const d of [...c.instructions]) {
    if (d.prim?.name !== 'dot_general') continue;
    const reordered = readableDims(d.operands[0].shape.shape, d.operands[1].shape.shape, dimsOf(d));
    if (reordered) {
      // Pairing the contracting dims in another order is enough: no copy.
      if (reordered[0][0].join() !== dimsOf(d)[0][0].join()) d.params = { ...d.params, dimensionNumbers: reordered };
      continue;
    }
    const [[lc, rc], [lb, rb]] = dimsOf(d);
    d.operands = d.operands.map((o, side) => {
      const ct = side === 0 ? lc : rc;
      const bt = side === 0 ? lb : rb;
      if (o.layout || gemmReadable(o.shape.shape, bt, ct)) return o;
      const majorToMinor = [...bt, ...freeDimsOf(o.shape.shape.length, ct, bt), ...ct];
      const key = `${o.id}:${majorToMinor.join()}`;
      const had = made.get(key);
      if (had) return had;
      const copy = new HloInstruction('copy', [o.shape], [o], { permutation: majorToMinor }, transpose);
      made.set(key, copy);
      copy.layout = [...majorToMinor].reverse();
      c.instructions.splice(c.instructions.indexOf(d), 0, copy);
      n++;
      return copy;
    });
  }
  return n;
}

/** Layout assignment: rules 1-3 (see the file comment); returns folds plus copies. */
export function assignLayouts(c: HloComputation): number {
  return foldDotTransposes(c) + insertLayoutCopies(c);
}

/**
 * The parameters to execute `i` with: a dot reading an operand in a non-default layout gets
 * dimension numbers over that operand's physical (row-major buffer) dims; anything else its own.
 */
export function physicalParams(i: HloInstruction): Record<string, unknown> {
  if (i.prim?.name !== 'dot_general' || !i.operands.some((o) => o.layout)) return i.params;
  const toPhysical = (o: HloInstruction, dims: Dims): number[] => {
    if (!o.layout) return [...dims];
    const majorToMinor = [...o.layout].reverse();
    return dims.map((d) => majorToMinor.indexOf(d));
  };
  const [l, r] = i.operands;
  const [[lc, rc], [lb, rb]] = dimsOf(i);
  return { ...i.params, dimensionNumbers: [[toPhysical(l, lc), toPhysical(r, rc)], [toPhysical(l, lb), toPhysical(r, rb)]] };
}
