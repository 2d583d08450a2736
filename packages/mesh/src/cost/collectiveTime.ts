/**
 * Modelled time of one collective on a slice, the alpha-beta way: every algorithm step costs
 * the topology's per-step latency (alpha) and every byte crossing the busiest link costs
 * 1 / link bandwidth (beta). `bytes` is the collective's full buffer per device: the gathered
 * result of an all-gather, the input of a reduce-scatter, the buffer of an all-reduce,
 * all-to-all or collective-permute. A replica group is a set of chips; the grid dimensions
 * along which its chips differ are the dimensions it spans.
 *
 * Algorithms (p chips in the group, B = one link's bandwidth in one direction, N = bytes):
 * - `ring`: one unidirectional ring through the group: all-gather / reduce-scatter
 *   (p-1) alpha + N (p-1)/p / B; all-reduce twice that (reduce-scatter then all-gather).
 * - `bidirectional-ring`: the data split in halves going both ways round the ring: the
 *   bandwidth term halves when the ring closes (every spanned dimension wraps around and is
 *   spanned whole); a ring laid on a line already needs both directions of each link.
 * - `torus` (default): one bidirectional ring per spanned dimension, in turn (XLA's
 *   dimension-by-dimension decomposition): stage i moves the data grown so far; the dims
 *   are not run concurrently (a conservative choice, see COST_MODEL.md).
 * All-to-all: each of the p-1 chunks of N/p bytes travels p/4 hops on average on a closed
 * bidirectional ring (p/3 on a line), spread over 2p link-directions: N p / (8 B) per
 * dimension (N p / (6 B) on a line), plus (p-1) alpha. Collective-permute: the longest pair
 * distance in hops times alpha plus N / B (pipelined through the path).
 */
import { coordsOf, hops, type Topology } from '../topology';

export type CollectiveKind = 'all-reduce' | 'all-gather' | 'reduce-scatter' | 'all-to-all' | 'collective-permute';
export type Algorithm = 'ring' | 'bidirectional-ring' | 'torus';

export interface CollectiveOp {
  readonly kind: CollectiveKind;
  /** Full buffer bytes per device (see the file header). */
  readonly bytes: number;
  /** One replica group (chip numbers); all groups of the op are assumed to run concurrently on disjoint links. */
  readonly group: readonly number[];
  /** For collective-permute: (source, target) chip pairs. */
  readonly pairs?: readonly (readonly [number, number])[];
}

interface Span {
  /** Extent of the group along each spanned dimension. */
  extents: number[];
  /** Whether that dimension's ring closes (wraps around and is spanned whole). */
  closed: boolean[];
}

/** The grid dimensions a group spans, or an error when it is not a sub-grid of the slice. */
export function spanOf(t: Topology, group: readonly number[]): Span {
  const n = t.dims.reduce((a, b) => a * b, 1);
  for (const k of group) if (!Number.isInteger(k) || k < 0 || k >= n) throw new Error(`collective: chip ${k} is outside topology ${t.name} (${n} chips)`);
  const coords = group.map((k) => coordsOf(t, k));
  const extents: number[] = [];
  const closed: boolean[] = [];
  t.dims.forEach((size, d) => {
    const e = new Set(coords.map((c) => c[d])).size;
    if (e > 1) {
      extents.push(e);
      closed.push(t.wraparound[d] && e === size);
    }
  });
  const prod = extents.reduce((a, b) => a * b, 1);
  if (prod !== group.length) throw new Error(`collective: group [${group.join(',')}] is not a sub-grid of ${t.name} (${t.dims.join('x')}): it spans ${extents.join('x') || '1'} positions but has ${group.length} chips`);
  return { extents, closed };
}

/** Seconds one collective takes on `t` with `algorithm`. */
export function collectiveTime(op: CollectiveOp, t: Topology, algorithm: Algorithm = 'torus'): number {
  const { linkBandwidth: B, linkLatency: alpha } = t.generation;
  const p = op.group.length;
  if (op.bytes < 0 || !Number.isFinite(op.bytes)) throw new Error(`collective ${op.kind}: bytes must be a non-negative number; got ${op.bytes}`);
  if (op.kind === 'collective-permute') {
    const pairs = op.pairs ?? [];
    const h = pairs.reduce((m, [s, d]) => Math.max(m, hops(t, s, d)), 0);
    return h === 0 ? 0 : h * alpha + op.bytes / B;
  }
  if (p <= 1) return 0;
  const span = spanOf(t, op.group);
  const N = op.bytes;
  if (op.kind === 'all-to-all') {
    // Dimension-ordered: every stage reshuffles the whole buffer along one dimension.
    const dims = algorithm === 'torus' ? span.extents.map((e, i) => ({ e, closed: span.closed[i] })) : [{ e: p, closed: span.closed.every(Boolean) && span.extents.length === 1 }];
    return dims.reduce((s, { e, closed }) => s + (e - 1) * alpha + (N * e) / ((closed && algorithm !== 'ring' ? 8 : 6) * B), 0);
  }
  const gatherLike = (): number => {
    if (algorithm === 'ring') return (p - 1) * alpha + (N * (p - 1)) / p / B;
    if (algorithm === 'bidirectional-ring') {
      const closed = span.extents.length === 1 && span.closed[0];
      return (p - 1) * alpha + (N * (p - 1)) / p / (closed ? 2 * B : B);
    }
    // Torus: one ring per spanned dimension; stage i moves N * (e_1 ... e_i) / p bytes.
    let grown = 1;
    let s = 0;
    span.extents.forEach((e, i) => {
      grown *= e;
      s += (e - 1) * alpha + ((N * grown) / p) * ((e - 1) / e) / (span.closed[i] ? 2 * B : B);
    });
    return s;
  };
  return op.kind === 'all-reduce' ? 2 * gatherLike() : gatherLike();
}
