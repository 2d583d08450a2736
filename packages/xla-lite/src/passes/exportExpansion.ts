/**
 * Standard-op expansions of xla-lite's own fused instructions, for StableHLO export
 * (stablehlo.ts): a real XLA cannot run a `tpukit.*` custom call, so each of these becomes a
 * computation over plain primitives (dot_general, iota, compare, select, exp, log, reductions)
 * that computes the same function, which the exporter then prints inline. Expanded:
 *
 * - `dot_product_attention`, `_fwd` and `_bwd` (core's fused attention): scores as a batched
 *   dot_general over (B, N) with float32 results, scaled; the mask (the optional bool operand
 *   and/or causality, `s <= t` from two iotas) by select: hidden logits become -0.7 * float32
 *   max, or 0 in a row that sees no key at all (so that row is uniform and its logsumexp is
 *   log S, as the fused kernels define it); softmax as max-reduce, exp, sum-reduce; the
 *   weighted sum as a second dot_general; with `saveProbs` the forward also returns P. The
 *   backward pass recomputes P = exp(logits - lse) (also when the forward kept P: it ignores
 *   that last operand, so the exported text does not depend on `saveProbs`) and forms dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)) (zero where hidden), dQ =
 *   scale dS K, dK = scale dS^T Q. Grouped-query heads read their key/value head through a
 *   broadcast; dK and dV sum over the group. bfloat16 operands are converted to float32 first
 *   (the MXU's bf16 passes round float32 operands back to bf16 under the default precision).
 * - `onehot_gather` / `onehot_segment_sum` (passes/oneHotDot.ts): back into the one-hot dot
 *   they replaced (iota, compare, convert, dot_general with the dot's precision).
 *
 * Each expansion is an `HloComputation` whose parameters are the instruction's operands and
 * whose outputs are its outputs, so a test can run it through xla-lite's own executor and
 * compare with the fused kernel (test/exportExpansion.test.ts).
 */
import { np } from '@tpukit/core';
import type { ShapedArray } from '@tpukit/core/internal';
import { HloComputation, HloInstruction, makeInstruction } from '../hlo';
import type { OneHotParams } from '../js/oneHotKernels';

type Dims = readonly number[];

/** Appends instructions of plain primitives to a computation. */
class Builder {
  constructor(readonly c: HloComputation) {}
  op(prim: string, operands: HloInstruction[], params: Record<string, unknown> = {}): HloInstruction {
    return this.c.add(makeInstruction(prim, operands, params));
  }
  scalar(value: number, dtype: 'float32' | 'int32' = 'float32'): HloInstruction {
    const k = this.c.add(new HloInstruction('constant', [{ shape: [], dtype, weakType: false }], [], {}, null));
    k.literal = np.array(value, dtype);
    return k;
  }
  /** A scalar broadcast to `shape`. */
  full(value: number, shape: Dims): HloInstruction {
    return this.bcast(this.scalar(value), shape, []);
  }
  bcast(x: HloInstruction, shape: Dims, dims: Dims): HloInstruction {
    return this.op('broadcast_in_dim', [x], { shape: [...shape], broadcastDimensions: [...dims] });
  }
  f32(x: HloInstruction): HloInstruction {
    return this.convert(x, 'float32');
  }
  convert(x: HloInstruction, dtype: string): HloInstruction {
    return x.shape.dtype === dtype ? x : this.op('convert_element_type', [x], { newDtype: dtype, weakType: false });
  }
  dot(a: HloInstruction, b: HloInstruction, contract: [Dims, Dims], batch: [Dims, Dims], precision: unknown = null, preferred: string | null = null): HloInstruction {
    return this.op('dot_general', [a, b], { dimensionNumbers: [contract, batch], precision, preferredElementType: preferred });
  }
  transpose(x: HloInstruction, perm: Dims): HloInstruction {
    return this.op('transpose', [x], { permutation: [...perm] });
  }
  reshape(x: HloInstruction, shape: Dims): HloInstruction {
    return this.op('reshape', [x], { newSizes: [...shape] });
  }
  /** select(pred, onTrue, onFalse). */
  select(pred: HloInstruction, onTrue: HloInstruction, onFalse: HloInstruction): HloInstruction {
    return this.op('select_n', [pred, onFalse, onTrue]);
  }
  /** Reduces the last dim of a [B,N,T,S] value, broadcast back to [B,N,T,S]. */
  rowReduce(kind: 'reduce_max' | 'reduce_sum', x: HloInstruction): { row: HloInstruction; full: HloInstruction } {
    const shape = x.shape.shape;
    const row = this.op(kind, [x], { axes: [shape.length - 1] });
    return { row, full: this.bcast(row, shape, shape.slice(0, -1).map((_, d) => d)) };
  }
}

/** A computation with parameters of the instruction's operand shapes. */
function start(i: HloInstruction, name: string): { b: Builder; ps: HloInstruction[] } {
  const c = new HloComputation(name);
  const ps = i.operands.map((o) => c.addParameter(o.shape));
  return { b: new Builder(c), ps };
}

interface AttnShape {
  B: number;
  T: number;
  N: number;
  H: number;
  S: number;
  K: number;
  G: number;
}

/** Key/value [B,S,K,H] as float32 [B,S,N,H]: each query head reads its group's head. */
function perQueryHead(b: Builder, x: HloInstruction, d: AttnShape): HloInstruction {
  const f = b.f32(x);
  if (d.G === 1) return f;
  return b.reshape(b.bcast(f, [d.B, d.S, d.K, d.G, d.H], [0, 1, 2, 4]), [d.B, d.S, d.N, d.H]);
}

/** [B,S,N,H] summed over each group of query heads -> [B,S,K,H]. */
function perKvHead(b: Builder, x: HloInstruction, d: AttnShape): HloInstruction {
  if (d.G === 1) return x;
  return b.op('reduce_sum', [b.reshape(x, [d.B, d.S, d.K, d.G, d.H])], { axes: [3] });
}

/** Which logits are visible ([B,N,T,S] bool), or null when all are; and per row whether any is (broadcast back). */
function visibility(b: Builder, d: AttnShape, causal: boolean, mask: HloInstruction | undefined): { vis: HloInstruction; anyVisible: HloInstruction } | null {
  const shape = [d.B, d.N, d.T, d.S];
  let vis: HloInstruction | null = null;
  if (causal) vis = b.op('le', [b.op('iota', [], { dtype: 'int32', shape, dimension: 3 }), b.op('iota', [], { dtype: 'int32', shape, dimension: 2 })]);
  if (mask) {
    // [B|1, N|1, T, S]: size-1 dims broadcast.
    const m = b.reshape(mask, mask.shape.shape.filter((_, k) => k >= 2 || mask.shape.shape[k] !== 1));
    const dims = [0, 1, 2, 3].filter((k) => k >= 2 || mask.shape.shape[k] !== 1);
    const full = b.bcast(m, shape, dims);
    vis = vis ? b.op('and', [vis, full]) : full;
  }
  if (!vis) return null;
  const any = b.rowReduce('reduce_max', b.convert(vis, 'float32')).full;
  return { vis, anyVisible: b.op('gt', [any, b.full(0, shape)]) };
}

/** Scaled float32 logits [B,N,T,S] with hidden ones replaced (see the file comment). */
function logits(b: Builder, q: HloInstruction, kN: HloInstruction, d: AttnShape, scale: number, v: ReturnType<typeof visibility>): HloInstruction {
  const shape = [d.B, d.N, d.T, d.S];
  const s = b.op('mul', [b.dot(b.f32(q), kN, [[3], [3]], [[0, 2], [0, 2]], null, 'float32'), b.full(scale, shape)]);
  if (!v) return s;
  const hidden = b.select(v.anyVisible, b.full(-0.7 * 3.4028234663852886e38, shape), b.full(0, shape));
  return b.select(v.vis, s, hidden);
}

function attentionDimsOf(i: HloInstruction): AttnShape {
  const [B, T, N, H] = i.operands[0].shape.shape;
  const [, S, K] = i.operands[1].shape.shape;
  return { B, T, N, H, S, K, G: N / K };
}

/** [out, lse] of the fused forward attention, and P with `saveProbs`. */
function attentionForward(i: HloInstruction, withLse: boolean): HloComputation {
  const { b, ps } = start(i, `expand_${i.prim!.name}.${i.id}`);
  const [q, k, v, mask] = ps;
  const p = i.params as { scale: number; isCausal: boolean; saveProbs?: boolean };
  const d = attentionDimsOf(i);
  const vis = visibility(b, d, p.isCausal, mask);
  const L = logits(b, q, perQueryHead(b, k, d), d, p.scale, vis);
  const m = b.rowReduce('reduce_max', L);
  const e = b.op('exp', [b.op('sub', [L, m.full])]);
  const z = b.rowReduce('reduce_sum', e);
  const P = b.op('div', [e, z.full]);
  const o = b.dot(P, perQueryHead(b, v, d), [[3], [1]], [[0, 1], [0, 2]], null, 'float32');
  const out = b.convert(b.transpose(o, [0, 2, 1, 3]), q.shape.dtype);
  b.c.outputs = [out];
  if (withLse) b.c.outputs.push(b.op('add', [m.row, b.op('log', [z.row])]));
  if (withLse && p.saveProbs === true) b.c.outputs.push(P);
  return b.c;
}

/** [dq, dk, dv] of the fused backward attention (q, k, v, lse, dOut[, mask][, probs]). */
function attentionBackward(i: HloInstruction): HloComputation {
  const { b, ps } = start(i, `expand_${i.prim!.name}.${i.id}`);
  const [q, k, v, lse, dout] = ps;
  const mask = ps[5]?.shape.dtype === 'bool' ? ps[5] : undefined;
  const p = i.params as { scale: number; isCausal: boolean };
  const d = attentionDimsOf(i);
  const shape = [d.B, d.N, d.T, d.S];
  const vis = visibility(b, d, p.isCausal, mask);
  const kN = perQueryHead(b, k, d);
  const vN = perQueryHead(b, v, d);
  const L = logits(b, q, kN, d, p.scale, vis);
  const P = b.op('exp', [b.op('sub', [L, b.bcast(lse, shape, [0, 1, 2])])]);
  const dO = b.f32(dout);
  // dV[b,s,n,h] = sum_t P[b,n,t,s] dO[b,t,n,h]; dP[b,n,t,s] = sum_h dO[b,t,n,h] V[b,s,n,h].
  const dV = b.transpose(b.dot(P, dO, [[2], [1]], [[0, 1], [0, 2]], null, 'float32'), [0, 2, 1, 3]);
  const dP = b.dot(dO, vN, [[3], [3]], [[0, 2], [0, 2]], null, 'float32');
  const D = b.rowReduce('reduce_sum', b.op('mul', [P, dP])).full;
  let dS = b.op('mul', [b.op('mul', [P, b.op('sub', [dP, D])]), b.full(p.scale, shape)]);
  if (vis) dS = b.select(vis.vis, dS, b.full(0, shape));
  // dQ[b,t,n,h] = sum_s dS[b,n,t,s] K[b,s,n,h]; dK[b,s,n,h] = sum_t dS[b,n,t,s] Q[b,t,n,h].
  const dQ = b.transpose(b.dot(dS, kN, [[3], [1]], [[0, 1], [0, 2]], null, 'float32'), [0, 2, 1, 3]);
  const dK = b.transpose(b.dot(dS, b.f32(q), [[2], [1]], [[0, 1], [0, 2]], null, 'float32'), [0, 2, 1, 3]);
  b.c.outputs = [b.convert(dQ, q.shape.dtype), b.convert(perKvHead(b, dK, d), k.shape.dtype), b.convert(perKvHead(b, dV, d), v.shape.dtype)];
  return b.c;
}

/**
 * The one-hot [R, classes] of an index vector: the compare with a float32 iota for a float index
 * (1.5 matches no class; the pass keeps classes <= 2^24, where the iota is exact), else with an
 * int32 iota, the index converted to int32 (an int8 or uint8 iota would wrap past 127 or 255
 * classes; a uint32 index of 2^31 or more becomes negative and matches no class, as before).
 */
function oneHotMatrix(b: Builder, index: HloInstruction, classes: number, dtype: string): HloInstruction {
  const R = index.shape.shape[0];
  const iotaType = index.shape.dtype === 'float32' ? 'float32' : 'int32';
  const idx = b.bcast(b.convert(index, iotaType), [R, classes], [0]);
  return b.convert(b.op('eq', [idx, b.op('iota', [], { dtype: iotaType, shape: [R, classes], dimension: 1 })]), dtype);
}

function oneHotDot(i: HloInstruction, gather: boolean): HloComputation {
  const { b, ps } = start(i, `expand_${i.prim!.name}.${i.id}`);
  const [x, index] = ps;
  const p = i.params as unknown as OneHotParams;
  const oh = oneHotMatrix(b, index, p.classes, x.shape.dtype);
  const preferred = p.dtype === x.shape.dtype ? null : p.dtype;
  b.c.outputs = [gather ? b.dot(oh, x, [[1], [0]], [[], []], p.precision, preferred) : b.dot(oh, x, [[0], [0]], [[], []], p.precision, preferred)];
  return b.c;
}

const EXPANSIONS: Record<string, (i: HloInstruction) => HloComputation> = {
  dot_product_attention: (i) => attentionForward(i, false),
  dot_product_attention_fwd: (i) => attentionForward(i, true),
  dot_product_attention_bwd: attentionBackward,
  onehot_gather: (i) => oneHotDot(i, true),
  onehot_segment_sum: (i) => oneHotDot(i, false),
};

/** Whether export expands this primitive into standard ops. */
export const hasExpansion = (name: string): boolean => Object.hasOwn(EXPANSIONS, name);

/** The standard-op computation of an instruction that has one (see the file comment), else null. */
export function expandForExport(i: HloInstruction): HloComputation | null {
  const name = i.prim?.name;
  if (name === undefined || !hasExpansion(name)) return null;
  const c = EXPANSIONS[name](i);
  const want = i.shapes.map((s: ShapedArray) => `${s.dtype}[${s.shape.join(',')}]`).join();
  const got = c.outputs.map((o) => `${o.shape.dtype}[${o.shape.shape.join(',')}]`).join();
  if (want !== got) throw new Error(`xla-lite export: the expansion of ${name}.${i.id} gives ${got}, not ${want}`);
  return c;
}
