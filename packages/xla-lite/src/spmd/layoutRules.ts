/**
 * How layouts (the box each device holds) travel through ops, shared by sharding propagation
 * (which picks each value's sharding) and the partitioner (which makes it so). Rules map
 * boxes dimension by dimension: broadcast, transpose and reshape move boxes between operand
 * and result; reductions and dots may leave each device with a partial sum, described by the
 * groups of devices whose partial results must be combined. `planDot` chooses the cheapest
 * way to run a dot_general on the devices (GSPMD's dot handler in miniature): operands that
 * already line up are used as they are (partial sums and all); otherwise it tries one operand
 * aligned to the other and replicated fallbacks, counting the elements each device must
 * receive plus the partial-sum reduction.
 */
import { type Box, boxKey, boxSize, HloSharding, type Layout } from './hloSharding';

export const fullBox = (shape: readonly number[]): Box => shape.map((n): [number, number] => [0, n]);
export const fullLayout = (shape: readonly number[], n: number): Layout => new globalThis.Array(n).fill(fullBox(shape));
export const layoutKey = (l: Layout): string => l.map(boxKey).join('|');

const within = (a: Box, b: Box): boolean => a.every(([s, e], d) => s >= b[d][0] && e <= b[d][1]);
export const layoutWithin = (a: Layout, b: Layout): boolean => a.every((box, d) => within(box, b[d]));

function overlap(a: Box, b: Box): number {
  let n = 1;
  for (let d = 0; d < a.length; d++) n *= Math.max(0, Math.min(a[d][1], b[d][1]) - Math.max(a[d][0], b[d][0]));
  return n;
}

/** Elements the devices must receive to go from layout `from` to `to` (0 when only local slicing is needed). */
export function reshardCost(from: Layout, to: Layout): number {
  let c = 0;
  for (let d = 0; d < to.length; d++) c += boxSize(to[d]) - overlap(from[d], to[d]);
  return c;
}

/**
 * Groups of devices holding partial results to combine: devices with the same result box
 * and different `part` keys (the part of the reduced/contracted space each summed), or null
 * when the parts do not cover `partTotal` elements evenly (the plan is invalid). An empty
 * list means nothing to combine.
 */
export function partialGroups(outBoxes: Layout, parts: readonly Box[], partTotal: number): number[][] | null {
  const byOut = new Map<string, Map<string, number[]>>();
  outBoxes.forEach((b, dev) => {
    const k = boxKey(b);
    let m = byOut.get(k);
    if (!m) byOut.set(k, (m = new Map()));
    const pk = boxKey(parts[dev]);
    const g = m.get(pk);
    if (g) g.push(dev);
    else m.set(pk, [dev]);
  });
  const groups: number[][] = [];
  for (const m of byOut.values()) {
    const keys = [...m.keys()];
    let covered = 0;
    for (const k of keys) covered += boxSize(parts[m.get(k)![0]]);
    if (covered !== partTotal) return null;
    const r = m.get(keys[0])!.length;
    if (keys.some((k) => m.get(k)!.length !== r)) return null;
    if (keys.length === 1) continue;
    // Members in the order of their part (so a reduce-scatter chunk order is well defined).
    keys.sort((a, b) => parts[m.get(a)![0]].map(([s]) => s).join() < parts[m.get(b)![0]].map(([s]) => s).join() ? -1 : 1);
    for (let i = 0; i < r; i++) groups.push(keys.map((k) => m.get(k)![i]));
  }
  return groups;
}

// ---- broadcast, transpose, reshape ----

/** Result boxes of broadcast_in_dim from operand boxes. */
export const broadcastForward = (l: Layout, inShape: readonly number[], outShape: readonly number[], bd: readonly number[]): Layout =>
  l.map((b) => outShape.map((n, j): [number, number] => {
    const i = bd.indexOf(j);
    return i >= 0 && inShape[i] === n ? [b[i][0], b[i][1]] : [0, n];
  }));

/** Operand boxes broadcast_in_dim needs for result boxes `l`. */
export const broadcastBackward = (l: Layout, inShape: readonly number[], outShape: readonly number[], bd: readonly number[]): Layout =>
  l.map((b) => inShape.map((n, i): [number, number] => (n === outShape[bd[i]] ? [b[bd[i]][0], b[bd[i]][1]] : [0, n])));

/** Result boxes of transpose (result dim j is operand dim perm[j]). */
export const transposeForward = (l: Layout, perm: readonly number[]): Layout => l.map((b) => perm.map((p) => b[p]));
export const transposeBackward = (l: Layout, perm: readonly number[]): Layout =>
  l.map((b) => {
    const out: [number, number][] = new globalThis.Array(perm.length);
    perm.forEach((p, j) => (out[p] = [b[j][0], b[j][1]]));
    return out;
  });

/** Runs of dimensions of two shapes of equal size whose products agree (reshape's dimension groups). */
function reshapeGroups(a: readonly number[], b: readonly number[]): { as: number[]; bs: number[] }[] {
  const groups: { as: number[]; bs: number[] }[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const g = { as: [i], bs: [j] };
    let pa = a[i++];
    let pb = b[j++];
    while (pa !== pb) {
      if (pa < pb) {
        if (i >= a.length) return [];
        g.as.push(i);
        pa *= a[i++];
      } else {
        if (j >= b.length) return [];
        g.bs.push(j);
        pb *= b[j++];
      }
    }
    groups.push(g);
  }
  const last = groups[groups.length - 1];
  if (!last) return [];
  while (i < a.length) last.as.push(i++);
  while (j < b.length) last.bs.push(j++);
  return groups;
}

/**
 * Boxes of a reshape's other side: within each group of dimensions only the major one may be
 * split, and its tiles must map onto whole tiles of the other side's major dimension.
 * Null when the layout cannot pass through this reshape without moving data.
 */
export function reshapeLayout(l: Layout, from: readonly number[], to: readonly number[]): Layout | null {
  const groups = reshapeGroups(from, to);
  if (!groups.length && from.length && to.length) return null;
  const out: Box[] = [];
  for (const b of l) {
    const box: [number, number][] = to.map((n) => [0, n]);
    for (const { as, bs } of groups) {
      const split = as.filter((d) => b[d][0] !== 0 || b[d][1] !== from[d]);
      if (split.length === 0) continue;
      if (split.length > 1 || split[0] !== as[0]) return null;
      const rf = as.slice(1).reduce((p, d) => p * from[d], 1);
      const rt = bs.slice(1).reduce((p, d) => p * to[d], 1);
      const [s, e] = b[as[0]];
      if ((s * rf) % rt !== 0 || (e * rf) % rt !== 0) return null;
      box[bs[0]] = [(s * rf) / rt, (e * rf) / rt];
    }
    out.push(box);
  }
  return out;
}

// ---- reductions ----

/** Result boxes of a reduction over `axes`, and the groups holding partial results. */
export function reduceLayout(l: Layout, shape: readonly number[], axes: readonly number[]): { out: Layout; groups: number[][] } {
  const out = l.map((b) => b.filter((_, d) => !axes.includes(d)));
  const parts = l.map((b) => axes.map((a) => b[a]));
  const groups = partialGroups(out, parts, axes.reduce((p, a) => p * shape[a], 1));
  if (groups === null) throw new Error(`spmd: reduction over axes ${JSON.stringify(axes)} of [${shape.join(',')}]: the operand's shards do not cover the reduced axes evenly (shards ${JSON.stringify(l)})`);
  return { out, groups };
}

// ---- dot_general ----

export type DimensionNumbers = readonly [readonly [readonly number[], readonly number[]], readonly [readonly number[], readonly number[]]];

export interface DotPlan {
  lhs: Layout;
  rhs: Layout;
  /** Result boxes (each device's partial result when `groups` is non-empty). */
  out: Layout;
  /** Devices whose partial sums must be added (empty: the result is complete). */
  groups: number[][];
  /** Elements received to reshard the operands, plus the partial-sum traffic. */
  cost: number;
}

interface DotDims {
  lb: readonly number[];
  rb: readonly number[];
  lc: readonly number[];
  rc: readonly number[];
  lf: number[];
  rf: number[];
}

function dotDims(lr: number, rr: number, [[lc, rc], [lb, rb]]: DimensionNumbers): DotDims {
  return { lb, rb, lc, rc, lf: [...Array(lr).keys()].filter((d) => !lc.includes(d) && !lb.includes(d)), rf: [...Array(rr).keys()].filter((d) => !rc.includes(d) && !rb.includes(d)) };
}

/** The plan for these operand layouts as given, or null when they do not line up. */
function evalDot(lhs: Layout, rhs: Layout, ls: readonly number[], dd: DotDims): Omit<DotPlan, 'cost'> | null {
  const n = lhs.length;
  const out: Box[] = [];
  const parts: Box[] = [];
  for (let d = 0; d < n; d++) {
    const l = lhs[d];
    const r = rhs[d];
    for (let k = 0; k < dd.lb.length; k++) if (boxKey([l[dd.lb[k]]]) !== boxKey([r[dd.rb[k]]])) return null;
    for (let k = 0; k < dd.lc.length; k++) if (boxKey([l[dd.lc[k]]]) !== boxKey([r[dd.rc[k]]])) return null;
    out.push([...dd.lb.map((a) => l[a]), ...dd.lf.map((a) => l[a]), ...dd.rf.map((a) => r[a])]);
    parts.push(dd.lc.map((a) => l[a]));
  }
  const total = dd.lc.reduce((p, a) => p * ls[a], 1);
  const groups = partialGroups(out, parts, total);
  if (groups === null) return null;
  // Every result element must be computed somewhere, in an even tiling.
  const outShape = out[0].map((_, j) => Math.max(...out.map((b) => b[j][1])));
  if (HloSharding.fromBoxes(out, outShape) === null) return null;
  return { lhs, rhs, out, groups };
}

/**
 * The cheapest way to compute a dot_general with operands currently laid out as `lhs`, `rhs`;
 * `target` (optional) is the result layout wanted afterwards, counted in the cost.
 */
export function planDot(lhs: Layout, rhs: Layout, ls: readonly number[], rs: readonly number[], dn: DimensionNumbers, target: Layout | null = null): DotPlan {
  const dd = dotDims(ls.length, rs.length, dn);
  // Operand B re-laid so that its batch/contracting boxes follow A's, and its free dims are kept (or made whole).
  const align = (a: Layout, aDims: [readonly number[], readonly number[]], b: Layout, bShape: readonly number[], bDims: [readonly number[], readonly number[]], keepFree: boolean): Layout =>
    b.map((bb, d) => bShape.map((sz, j): [number, number] => {
      const bi = bDims[0].indexOf(j);
      if (bi >= 0) return [a[d][aDims[0][bi]][0], a[d][aDims[0][bi]][1]];
      const ci = bDims[1].indexOf(j);
      if (ci >= 0) return [a[d][aDims[1][ci]][0], a[d][aDims[1][ci]][1]];
      return keepFree ? [bb[j][0], bb[j][1]] : [0, sz];
    }));
  const wholeContract = (x: Layout, cdims: readonly number[], shape: readonly number[], wholeFree: readonly number[]): Layout =>
    x.map((b) => b.map(([s, e], j): [number, number] => (cdims.includes(j) || wholeFree.includes(j) ? [0, shape[j]] : [s, e])));
  const L = [dd.lb, dd.lc] as [readonly number[], readonly number[]];
  const R = [dd.rb, dd.rc] as [readonly number[], readonly number[]];
  const lw = wholeContract(lhs, dd.lc, ls, []);
  const candidates: [Layout, Layout][] = [
    [lhs, rhs],
    [lhs, align(lhs, L, rhs, rs, R, true)],
    [align(rhs, R, lhs, ls, L, true), rhs],
    [lhs, align(lhs, L, rhs, rs, R, false)],
    [align(rhs, R, lhs, ls, L, false), rhs],
    [lw, align(lw, L, rhs, rs, R, true)],
    [lw, align(lw, L, rhs, rs, R, false)],
    [wholeContract(lhs, dd.lc, ls, dd.lf), align(lw, L, rhs, rs, R, true)],
    [fullLayoutOf(lhs, ls), fullLayoutOf(rhs, rs)],
  ];
  let best: DotPlan | null = null;
  for (const [cl, cr] of candidates) {
    const p = evalDot(cl, cr, ls, dd);
    if (!p) continue;
    // Operands that already line up are used as they are (GSPMD's first choice), partial sums and all.
    if (cl === lhs && cr === rhs) return { ...p, cost: target ? reshardCost(p.out, target) : 0 };
    let cost = reshardCost(lhs, cl) + reshardCost(rhs, cr);
    const outSize = boxSize(p.out[0]);
    if (p.groups.length) cost += (2 * outSize * (p.groups[0].length - 1)) / p.groups[0].length * lhs.length;
    if (target) cost += reshardCost(p.out, target);
    if (!best || cost < best.cost) best = { ...p, cost };
  }
  return best!;
}

const fullLayoutOf = (l: Layout, shape: readonly number[]): Layout => fullLayout(shape, l.length);

// ---- slice ----

/** Which dims a slice keeps whole (start 0, full limit, stride 1): only those may stay split. */
export function sliceKeeps(opShape: readonly number[], start: readonly number[], limit: readonly number[], strides: readonly number[] | null): boolean[] {
  return opShape.map((n, d) => start[d] === 0 && limit[d] === n && (strides === null || strides[d] === 1));
}

/** A slice's layout mapped from one side (`from`) to the other (`to`): null when a dim it cuts is split. */
export function sliceLayout(l: Layout, from: readonly number[], to: readonly number[], keeps: readonly boolean[]): Layout | null {
  if (l.some((b) => b.some(([s, e], d) => !keeps[d] && (s !== 0 || e !== from[d])))) return null;
  return l.map((b): Box => b.map(([s, e], d) => (keeps[d] ? [s, e] : [0, to[d]])));
}

// ---- gather ----

export interface GatherDims {
  offsetDims: readonly number[];
  collapsedSliceDims: readonly number[];
  startIndexMap: readonly number[];
  operandBatchingDims: readonly number[];
}

/**
 * For a gather (no operand batching dims): which result dims come from which index dims
 * (batch dims, in order) and which from which operand dims taken whole (window dims whose
 * slice is the entire dimension and that no index addresses: they pass a split through).
 */
export function gatherDims(dn: GatherDims, sliceSizes: readonly number[], opShape: readonly number[], outRank: number): { fromIndex: Map<number, number>; fromOperand: Map<number, number> } | null {
  if (dn.operandBatchingDims.length) return null;
  const windowDims = opShape.map((_, d) => d).filter((d) => !dn.collapsedSliceDims.includes(d));
  const fromIndex = new Map<number, number>();
  const fromOperand = new Map<number, number>();
  let b = 0;
  let w = 0;
  for (let j = 0; j < outRank; j++) {
    if (dn.offsetDims.includes(j)) {
      const od = windowDims[w++];
      if (sliceSizes[od] === opShape[od] && !dn.startIndexMap.includes(od)) fromOperand.set(j, od);
    } else fromIndex.set(j, b++);
  }
  return { fromIndex, fromOperand };
}

/** Result boxes of a gather from its operand's and indices' boxes (split index-vector or addressed operand dims are not passed). */
export function gatherForward(op: Layout, idx: Layout, outShape: readonly number[], g: NonNullable<ReturnType<typeof gatherDims>>): Layout {
  const out = (withOperand: boolean): Layout =>
    op.map((ob, d) => outShape.map((n, j): [number, number] => {
      const k = g.fromIndex.get(j);
      if (k !== undefined) return [idx[d][k][0], idx[d][k][1]];
      const od = withOperand ? g.fromOperand.get(j) : undefined;
      return od !== undefined ? [ob[od][0], ob[od][1]] : [0, n];
    }));
  // Indices and operand split over the same devices (a batch-split lookup into an FSDP-split
  // table) give no even tiling: the indices' split wins and the operand is gathered.
  const both = out(true);
  return HloSharding.fromBoxes(both, outShape) ? both : out(false);
}

/** Operand and indices boxes a gather needs for result boxes `out`. */
export function gatherBackward(out: Layout, opShape: readonly number[], idxShape: readonly number[], g: NonNullable<ReturnType<typeof gatherDims>>): { op: Layout; idx: Layout } {
  const op = out.map((b) => opShape.map((n, od): [number, number] => {
    for (const [j, o] of g.fromOperand) if (o === od) return [b[j][0], b[j][1]];
    return [0, n];
  }));
  const idx = out.map((b) => idxShape.map((n, k): [number, number] => {
    for (const [j, kk] of g.fromIndex) if (kk === k) return [b[j][0], b[j][1]];
    return [0, n];
  }));
  return { op, idx };
}
