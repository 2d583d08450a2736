/**
 * The systolic backend's fused attention (the kernels of lax/attention.ts's primitives), in the
 * style of FlashAttention with two-pass row softmax: per batch item and key/value head, the
 * query rows go in blocks of 4; each block computes its logits only up to the last key its rows
 * may see (under `isCausal` the key blocks above the diagonal are skipped), the softmax in f32,
 * and P V. The backward pass recomputes P from q, k and the forward's logsumexp, and forms
 * dS = P (dP - rowsum(P dP)) (the composite's softmax gradient), dq = dS k, dk += dS^T q,
 * dv += P^T dO, again only over visible keys; the G query heads that share a key/value head
 * (grouped-query attention) run in one item, so dk and dv accumulate without races.
 *
 * Numerics are the MXU's, as the composite's on this backend: q, k, v, dO, P and dS are rounded
 * to bf16 as matmul operands, products accumulate in f32, softmax is f32. The operands are copied
 * into wasm memory once per call (as f32), then staged per item by wasm kernels (rounded, padded
 * to a head dim and a key count of multiples of 8, key and value also transposed); the kernels
 * are attentionModule.ts's. Results are written back strided in wasm memory and copied out once. With bfloat16 operands the logits and dP are rounded to bf16 first,
 * as the composite's bf16 matmul results are.
 */
import * as bf16 from '../../bf16';
import type { StorageArray } from '../../dtype';
import type { HostArray, ShapedArray } from '../../primitive';
import { type AttentionParams, attentionDims } from '../../lax/attention';
import { WA, type WasmMemory } from '../../wasm/webassemblyTypes';
import { type AttentionKernels, ROWS, attentionModule } from './attentionModule';

const ceil = (x: number, m: number): number => Math.ceil(x / m) * m;

/** One wasm memory for every attention module (grown as needed), its views, and the instances over it. */
class Arena {
  memory: WasmMemory = new WA.Memory({ initial: 1 });
  f32 = new Float32Array(this.memory.buffer);
  u32 = new Uint32Array(this.memory.buffer);
  private readonly instances = new Map<string, AttentionKernels>();

  kernels(H: number, sp: number, relaxed: boolean): AttentionKernels {
    const key = `${H},${sp},${relaxed}`;
    let k = this.instances.get(key);
    if (!k) {
      k = new WA.Instance(attentionModule(H, sp, relaxed, false), { env: { mem: this.memory } }).exports as unknown as AttentionKernels;
      this.instances.set(key, k);
    }
    return k;
  }

  /** Makes the memory at least `bytes` long. */
  reserve(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes <= have) return;
    this.memory.grow(Math.ceil((bytes - have) / 65536));
    this.f32 = new Float32Array(this.memory.buffer);
    this.u32 = new Uint32Array(this.memory.buffer);
  }
}

let arena: Arena | null = null;

/** Sizes and padded sizes of one call, and its region allocator. */
interface Plan {
  readonly B: number;
  readonly T: number;
  readonly N: number;
  readonly H: number;
  readonly S: number;
  readonly K: number;
  readonly G: number;
  readonly tp: number;
  readonly hp: number;
  readonly sp: number;
  readonly bf16: boolean;
}

function plan(q: HostArray, k: HostArray): Plan {
  const d = attentionDims(q.shape, k.shape);
  return { B: d.b, T: d.t, N: d.n, H: d.h, S: d.s, K: d.k, G: d.g, tp: ceil(Math.max(d.t, 1), ROWS), hp: ceil(Math.max(d.h, 1), 8), sp: ceil(Math.max(d.s, 1), 8), bf16: q.dtype === 'bfloat16' };
}

/** Byte offsets of `sizes` (f32 element counts) laid out one after another from 0; reserves the arena. */
function regions(a: Arena, sizes: number[]): number[] {
  const out: number[] = [];
  let at = 0;
  for (const n of sizes) {
    out.push(at);
    at += ceil(n, 16) * 4; // 64-byte aligned regions
  }
  a.reserve(at);
  return out;
}

/** Copies a host operand into wasm memory at byte `dst` as f32 (bf16 storage is widened). */
function copyIn(a: Arena, x: HostArray, dst: number): void {
  const view = a.f32.subarray(dst >> 2, (dst >> 2) + x.data.length);
  if (x.dtype === 'bfloat16') bf16.decode(x.data as Uint16Array, view);
  else view.set(x.data as Float32Array);
}

/** Copies `out.length` f32 results at byte `src` into host storage `out` (rounded when bf16). */
function copyOut(a: Arena, src: number, out: StorageArray): void {
  const view = a.f32.subarray(src >> 2, (src >> 2) + out.length);
  if (out instanceof Uint16Array) bf16.encode(view, undefined, out);
  else (out as Float32Array).set(view);
}

/** Byte address of row 0 of (item b, head n) in a [B, rows, heads, H] f32 operand at byte `base`, and its row stride. */
const rowAt = (base: number, shape: readonly number[], b: number, n: number): number => base + (b * shape[1] * shape[2] + n) * shape[3] * 4;
const strideOf = (shape: readonly number[]): number => shape[2] * shape[3] * 4;

/** How many keys query row t sees (0 for padding rows). */
const visibleKeys = (p: Plan, causal: boolean, t: number): number => (t >= p.T ? 0 : causal ? Math.min(p.S, t + 1) : p.S);

/** The key columns a row block starting at t0 computes (a multiple of 8). */
const blockCols = (p: Plan, causal: boolean, t0: number): number => (causal ? ceil(Math.max(1, Math.min(p.S, t0 + ROWS)), 8) : p.sp);

const alloc = (dtype: string, n: number): StorageArray => (dtype === 'bfloat16' ? new Uint16Array(n) : new Float32Array(n));

/** The forward kernel: [out, lse]. */
export function attentionFwdSystolic(inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean): StorageArray[] {
  const [q, k, v] = inputs;
  const p = plan(q, k);
  const { scale, isCausal } = params;
  const out = alloc(outAvals[0].dtype, q.data.length);
  const lse = new Float32Array(p.B * p.N * p.T);
  if (q.data.length === 0 || k.data.length === 0) return [out, lse.fill(-Infinity)];
  const a = (arena ??= new Arena());
  const { tp, hp, sp } = p;
  const [Qr, Kr, Vr, Or, Q, KT, V, Sb, Pb, O, ML] = regions(a, [q.data.length, k.data.length, v.data.length, q.data.length, tp * hp, hp * sp, sp * hp, ROWS * sp, ROWS * sp, tp * hp, 2 * ROWS]);
  const kern = a.kernels(p.H, sp, relaxed);
  copyIn(a, q, Qr);
  copyIn(a, k, Kr);
  copyIn(a, v, Vr);
  const f = a.f32;
  const bf = p.bf16 ? 1 : 0;
  const [qs, ks] = [strideOf(q.shape), strideOf(k.shape)];
  for (let b = 0; b < p.B; b++)
    for (let kh = 0; kh < p.K; kh++) {
      kern.stageCols(rowAt(Kr, k.shape, b, kh), ks, p.S, KT);
      kern.stageRows(rowAt(Vr, k.shape, b, kh), ks, p.S, V, sp);
      for (let g = 0; g < p.G; g++) {
        const n = kh * p.G + g;
        kern.stageRows(rowAt(Qr, q.shape, b, n), qs, p.T, Q, tp);
        for (let t0 = 0; t0 < tp; t0 += ROWS) {
          const cols = blockCols(p, isCausal, t0);
          kern.scores(Q + t0 * hp * 4, KT, Sb, cols >> 3);
          for (let r = 0; r < ROWS; r++) {
            const t = t0 + r;
            kern.softmaxRow(Sb + r * sp * 4, Pb + r * sp * 4, visibleKeys(p, isCausal, t), cols, scale, ML + r * 8, bf);
            if (t < p.T) lse[(b * p.N + n) * p.T + t] = f[(ML >> 2) + 2 * r] + Math.log(f[(ML >> 2) + 2 * r + 1]);
          }
          kern.rowsTimes(Pb, V, O + t0 * hp * 4, cols);
        }
        kern.unstageRows(O, p.T, rowAt(Or, q.shape, b, n), qs);
      }
    }
  copyOut(a, Or, out);
  return [out, lse];
}

/** The backward kernel: [dq, dk, dv] from (q, k, v, lse, dOut). */
export function attentionBwdSystolic(inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean): StorageArray[] {
  const [q, k, v, lseIn, dout] = inputs;
  const p = plan(q, k);
  const { scale, isCausal } = params;
  const [dq, dk, dv] = outAvals.map((o, i) => alloc(o.dtype, inputs[i].data.length));
  if (q.data.length === 0 || k.data.length === 0) return [dq, dk, dv];
  const a = (arena ??= new Arena());
  const { tp, hp, sp } = p;
  const nq = q.data.length;
  const nk = k.data.length;
  const [Qr, Kr, Vr, DOr, DQr, DKr, DVr, Q, DO, KT, Kb, VT, DQ, DK, DV, Sb, DP] = regions(a, [nq, nk, nk, nq, nq, nk, nk, tp * hp, tp * hp, hp * sp, sp * hp, hp * sp, tp * hp, sp * hp, sp * hp, ROWS * sp, ROWS * sp]);
  const kern = a.kernels(p.H, sp, relaxed);
  copyIn(a, q, Qr);
  copyIn(a, k, Kr);
  copyIn(a, v, Vr);
  copyIn(a, dout, DOr);
  const lse = lseIn.data as Float32Array;
  const bf = p.bf16 ? 1 : 0;
  const [qs, ks] = [strideOf(q.shape), strideOf(k.shape)];
  for (let b = 0; b < p.B; b++)
    for (let kh = 0; kh < p.K; kh++) {
      kern.stageCols(rowAt(Kr, k.shape, b, kh), ks, p.S, KT);
      kern.stageRows(rowAt(Kr, k.shape, b, kh), ks, p.S, Kb, sp);
      kern.stageCols(rowAt(Vr, k.shape, b, kh), ks, p.S, VT);
      a.f32.fill(0, DK >> 2, (DV >> 2) + sp * hp);
      for (let g = 0; g < p.G; g++) {
        const n = kh * p.G + g;
        kern.stageRows(rowAt(Qr, q.shape, b, n), qs, p.T, Q, tp);
        kern.stageRows(rowAt(DOr, q.shape, b, n), qs, p.T, DO, tp);
        for (let t0 = 0; t0 < tp; t0 += ROWS) {
          const cols = blockCols(p, isCausal, t0);
          kern.scores(Q + t0 * hp * 4, KT, Sb, cols >> 3);
          kern.scores(DO + t0 * hp * 4, VT, DP, cols >> 3);
          for (let r = 0; r < ROWS; r++) {
            const t = t0 + r;
            kern.gradRow(Sb + r * sp * 4, DP + r * sp * 4, visibleKeys(p, isCausal, t), cols, scale, t < p.T ? lse[(b * p.N + n) * p.T + t] : 0, bf);
          }
          kern.rowsTimes(DP, Kb, DQ + t0 * hp * 4, cols);
          kern.transAcc(DP, Q + t0 * hp * 4, DK, cols);
          kern.transAcc(Sb, DO + t0 * hp * 4, DV, cols);
        }
        kern.unstageRows(DQ, p.T, rowAt(DQr, q.shape, b, n), qs);
      }
      kern.unstageRows(DK, p.S, rowAt(DKr, k.shape, b, kh), ks);
      kern.unstageRows(DV, p.S, rowAt(DVr, k.shape, b, kh), ks);
    }
  copyOut(a, DQr, dq);
  copyOut(a, DKr, dk);
  copyOut(a, DVr, dv);
  return [dq, dk, dv];
}

/** The systolic kernels of the fused attention primitives, by primitive name (backend.ts dispatches on it). */
export const systolicAttentionKernels: Record<string, (inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean) => StorageArray[]> = {
  dot_product_attention_fwd: attentionFwdSystolic,
  dot_product_attention_bwd: attentionBwdSystolic,
};
