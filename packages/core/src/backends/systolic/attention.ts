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
 * to bf16 as matmul operands, products accumulate in f32, softmax is f32. The operands are
 * staged (rounded, padded to a head dim of a multiple of 8 and a key count of a multiple of 8,
 * key and value also transposed) into wasm memory by the host, one item at a time; the kernels
 * are attentionModule.ts's. With bfloat16 operands the logits and dP are rounded to bf16 first,
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

  kernels(hp: number, sp: number, relaxed: boolean): AttentionKernels {
    const key = `${hp},${sp},${relaxed}`;
    let k = this.instances.get(key);
    if (!k) {
      k = new WA.Instance(attentionModule(hp, sp, relaxed, false), { env: { mem: this.memory } }).exports as unknown as AttentionKernels;
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
    at += n * 4;
  }
  a.reserve(at);
  return out;
}

/**
 * Stages rows of a [B, rows, heads, H] operand (item b, head n) into wasm memory at byte `dst`
 * as bf16-rounded f32: `transposed` false gives [rowsPadded, hp], true gives [hp, rowsPadded];
 * padding is zero.
 */
function stage(a: Arena, x: HostArray, b: number, n: number, rows: number, rowsPadded: number, hp: number, dst: number, transposed: boolean): void {
  const [, R, NH, H] = x.shape;
  const f = a.f32;
  const u = a.u32;
  const d0 = dst >> 2;
  const rowStride = NH * H;
  const base = (b * R * NH + n) * H;
  const src = x.data;
  const isBf16 = x.dtype === 'bfloat16';
  for (let r = 0; r < rowsPadded; r++) {
    for (let h = 0; h < hp; h++) {
      const o = transposed ? d0 + h * rowsPadded + r : d0 + r * hp + h;
      if (r >= rows || h >= H) {
        f[o] = 0;
      } else if (isBf16) {
        u[o] = src[base + r * rowStride + h] << 16;
      } else {
        f[o] = src[base + r * rowStride + h];
        const bits = u[o];
        u[o] = (bits & 0x7fffffff) > 0x7f800000 ? bits : (bits + 0x7fff + ((bits >>> 16) & 1)) & 0xffff0000;
      }
    }
  }
}

/** Copies [rows, H] of a staged [*, hp] f32 block at byte `src` into item b, head n of a [B, rows, heads, H] output. */
function unstage(a: Arena, src: number, out: StorageArray, shape: readonly number[], b: number, n: number, hp: number, isBf16: boolean): void {
  const [, R, NH, H] = shape;
  const f = a.f32;
  const s0 = src >> 2;
  for (let r = 0; r < R; r++) {
    const o = ((b * R + r) * NH + n) * H;
    const s = s0 + r * hp;
    if (isBf16) for (let h = 0; h < H; h++) out[o + h] = bf16.fromFloat32(f[s + h]);
    else for (let h = 0; h < H; h++) out[o + h] = f[s + h];
  }
}

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
  const out = alloc(q.dtype, p.B * p.T * p.N * p.H);
  const lse = new Float32Array(p.B * p.N * p.T);
  void outAvals;
  if (out.length === 0 && lse.length === 0) return [out, lse];
  const a = (arena ??= new Arena());
  const { tp, hp, sp } = p;
  const [Q, KT, V, Sb, Pb, O, ML] = regions(a, [tp * hp, hp * sp, sp * hp, ROWS * sp, ROWS * sp, tp * hp, 2 * ROWS]);
  const kern = a.kernels(hp, sp, relaxed);
  const f = a.f32;
  const bf = p.bf16 ? 1 : 0;
  for (let b = 0; b < p.B; b++)
    for (let kh = 0; kh < p.K; kh++) {
      stage(a, k, b, kh, p.S, sp, hp, KT, true);
      stage(a, v, b, kh, p.S, sp, hp, V, false);
      for (let g = 0; g < p.G; g++) {
        const n = kh * p.G + g;
        stage(a, q, b, n, p.T, tp, hp, Q, false);
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
        unstage(a, O, out, q.shape, b, n, hp, p.bf16);
      }
    }
  return [out, lse];
}

/** The backward kernel: [dq, dk, dv] from (q, k, v, lse, dOut). */
export function attentionBwdSystolic(inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean): StorageArray[] {
  const [q, k, v, lseIn, dout] = inputs;
  const p = plan(q, k);
  const { scale, isCausal } = params;
  const [dq, dk, dv] = [alloc(q.dtype, q.data.length), alloc(q.dtype, k.data.length), alloc(q.dtype, v.data.length)];
  void outAvals;
  if (q.data.length === 0 || k.data.length === 0) return [dq, dk, dv];
  const a = (arena ??= new Arena());
  const { tp, hp, sp } = p;
  const [Q, DO, KT, Kr, VT, DQ, DK, DV, Sb, DP] = regions(a, [tp * hp, tp * hp, hp * sp, sp * hp, hp * sp, tp * hp, sp * hp, sp * hp, ROWS * sp, ROWS * sp]);
  const kern = a.kernels(hp, sp, relaxed);
  const lse = lseIn.data as Float32Array;
  const bf = p.bf16 ? 1 : 0;
  for (let b = 0; b < p.B; b++)
    for (let kh = 0; kh < p.K; kh++) {
      stage(a, k, b, kh, p.S, sp, hp, KT, true);
      stage(a, k, b, kh, p.S, sp, hp, Kr, false);
      stage(a, v, b, kh, p.S, sp, hp, VT, true);
      a.f32.fill(0, DK >> 2, (DV >> 2) + sp * hp);
      for (let g = 0; g < p.G; g++) {
        const n = kh * p.G + g;
        stage(a, q, b, n, p.T, tp, hp, Q, false);
        stage(a, dout, b, n, p.T, tp, hp, DO, false);
        for (let t0 = 0; t0 < tp; t0 += ROWS) {
          const cols = blockCols(p, isCausal, t0);
          kern.scores(Q + t0 * hp * 4, KT, Sb, cols >> 3);
          kern.scores(DO + t0 * hp * 4, VT, DP, cols >> 3);
          for (let r = 0; r < ROWS; r++) {
            const t = t0 + r;
            kern.gradRow(Sb + r * sp * 4, DP + r * sp * 4, visibleKeys(p, isCausal, t), cols, scale, t < p.T ? lse[(b * p.N + n) * p.T + t] : 0, bf);
          }
          kern.rowsTimes(DP, Kr, DQ + t0 * hp * 4, cols);
          kern.transAcc(DP, Q + t0 * hp * 4, DK, cols);
          kern.transAcc(Sb, DO + t0 * hp * 4, DV, cols);
        }
        unstage(a, DQ, dq, q.shape, b, n, hp, p.bf16);
      }
      unstage(a, DK, dk, k.shape, b, kh, hp, p.bf16);
      unstage(a, DV, dv, v.shape, b, kh, hp, p.bf16);
    }
  return [dq, dk, dv];
}

/** The systolic kernels of the fused attention primitives, by primitive name (backend.ts dispatches on it). */
export const systolicAttentionKernels: Record<string, (inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean) => StorageArray[]> = {
  dot_product_attention_fwd: attentionFwdSystolic,
  dot_product_attention_bwd: attentionBwdSystolic,
};
