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
 * Items (batch x key/value head) are independent: the wasm item drivers (`fwdItem`, `bwdItem`)
 * run them from a shared counter on the calling thread and, with `setNumThreads(n > 1)`, on n - 1
 * worker threads over the same shared memory (a pool of this file's own, started on first use;
 * workers compile the module from its bytes, which the job leaves in memory). Each item is
 * computed by one thread in a fixed order, so results do not depend on the thread count.
 *
 * Numerics are the MXU's, as the composite's on this backend: q, k, v, dO, P and dS are rounded
 * to bf16 as matmul operands, products accumulate in f32, softmax is f32. The operands are copied
 * into wasm memory once per call (as f32), then staged per item by wasm kernels (rounded, padded
 * to a head dim and a key count of multiples of 8, key and value also transposed); the kernels
 * are attentionModule.ts's. Results are written back strided in wasm memory and copied out once,
 * into fresh arrays or into the caller's storage (`Backend.executeIntoAll`: a compiler's reused
 * buffers). With bfloat16 operands the logits and dP are rounded to bf16 first, as the
 * composite's bf16 matmul results are.
 *
 * A mask operand (bool [B|1, N|1, T, S]) is copied in as bytes once per call, with one flag byte
 * per (mask item, row) computed here: set where the row sees no key (causality applied). The row
 * kernels replace the logits of hidden keys by the composite's -0.7 * float32 max; a flagged row
 * instead reads a row of zero bytes with 0 as the replacement (uniform P over all S keys) and,
 * backward, a dS scale of 0 (the composite's `where` passes no gradient to hidden logits); a
 * block of 4 rows with a flagged row covers every key.
 */
import * as bf16 from '../../bf16';
import type { StorageArray } from '../../dtype';
import type { HostArray, ShapedArray } from '../../primitive';
import { type AttentionParams, attentionDims } from '../../lax/attention';
import { sizeOf } from '../../shape';
import { getNumThreads } from '../../threads';
import { wasmFeatures } from '../../wasm/features';
import { WA, type WasmMemory } from '../../wasm/webassemblyTypes';
import { WorkerPool } from '../../wasm/workerPool';
import { type AttentionKernels, type AttentionModule, DESC, MAX_PAGES, QB, ROWS, SCRATCH, attentionModule, compiledAttentionModules } from './attentionModule';

const ceil = (x: number, m: number): number => Math.ceil(x / m) * m;

// Control slots of the pool (Int32 in a SharedArrayBuffer).
const GEN = 0; // job generation (bumped to wake the workers; -1 ends them)
const DONE = 1; // workers finished with the current job
const ERR = 2; // set by a worker that failed
const NEXT = 3; // next item to take
const ITEMS = 4;
const MODE = 5; // 0 forward, 1 backward
const MOD_ID = 6; // the job's module: id, byte length, byte address of its bytes in memory
const MOD_LEN = 7;
const MOD_AT = 8;
const ACTIVE = 9; // workers that take items in this job
const WORKER_ITEMS = 10; // items the workers computed, all jobs
const SPIN = 4000;

const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const { control, id, start, memory } = workerData;
const c = new Int32Array(control);
let inst = null, modId = -1, seen = start;
for (;;) {
  Atomics.wait(c, ${GEN}, seen);
  seen = Atomics.load(c, ${GEN});
  if (seen < 0) break;
  if (id < c[${ACTIVE}]) {
    try {
      if (c[${MOD_ID}] !== modId) {
        const bytes = new Uint8Array(memory.buffer, c[${MOD_AT}], c[${MOD_LEN}]).slice();
        inst = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { mem: memory } });
        modId = c[${MOD_ID}];
      }
      const run = c[${MODE}] === 0 ? inst.exports.fwdItem : inst.exports.bwdItem;
      const items = c[${ITEMS}];
      let done = 0;
      for (let i = Atomics.add(c, ${NEXT}, 1); i < items; i = Atomics.add(c, ${NEXT}, 1)) {
        run(i, id + 1);
        done++;
      }
      Atomics.add(c, ${WORKER_ITEMS}, done);
    } catch (e) {
      Atomics.store(c, ${ERR}, 1);
    }
  }
  Atomics.add(c, ${DONE}, 1);
  Atomics.notify(c, ${DONE});
}
`;

/** Where the job's module bytes are left for the workers (after the descriptor). */
const MOD_BYTES_AT = 256;

/** One wasm memory for every attention module (shared when threads can run; grown as needed), its views, the instances over it and the pool. */
class Arena {
  readonly shared = wasmFeatures().threads && WorkerPool.available();
  memory: WasmMemory = new WA.Memory(this.shared ? { initial: 1, maximum: MAX_PAGES, shared: true } : { initial: 1 });
  f32 = new Float32Array(this.memory.buffer);
  i32 = new Int32Array(this.memory.buffer);
  u8 = new Uint8Array(this.memory.buffer);
  private readonly instances = new Map<number, AttentionKernels>();
  private pool: WorkerPool | null = null;
  readonly control = this.shared ? new Int32Array(new SharedArrayBuffer(64)) : new Int32Array(64);

  kernels(mod: AttentionModule): AttentionKernels {
    let k = this.instances.get(mod.id);
    if (!k) {
      k = new WA.Instance(mod.module, { env: { mem: this.memory } }).exports as unknown as AttentionKernels;
      this.instances.set(mod.id, k);
    }
    return k;
  }

  /** Makes the memory at least `bytes` long. */
  reserve(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes <= have) return;
    if (bytes > MAX_PAGES * 65536) throw new RangeError(`dot_product_attention (systolic): needs ${bytes} bytes of wasm memory; the most is ${MAX_PAGES * 65536}`);
    this.memory.grow(Math.ceil((bytes - have) / 65536));
    this.f32 = new Float32Array(this.memory.buffer);
    this.i32 = new Int32Array(this.memory.buffer);
    this.u8 = new Uint8Array(this.memory.buffer);
  }

  /** Runs items [0, items) of the job in the descriptor on `threads` threads (the calling one included). */
  run(mod: AttentionModule, k: AttentionKernels, backward: boolean, items: number, threads: number): void {
    const run = backward ? k.bwdItem : k.fwdItem;
    const workers = Math.min(threads, items) - 1;
    stats.jobs++;
    if (workers < 1 || !this.startPool(workers)) {
      for (let i = 0; i < items; i++) run(i, 0);
      return;
    }
    const c = this.control;
    const pool = this.pool!;
    // (every job: a single-threaded job may have laid its operands over an earlier module's bytes)
    new Uint8Array(this.memory.buffer, MOD_BYTES_AT, mod.bytes.length).set(mod.bytes);
    c[MOD_ID] = mod.id;
    c[MOD_LEN] = mod.bytes.length;
    c[MOD_AT] = MOD_BYTES_AT;
    c[MODE] = backward ? 1 : 0;
    c[ITEMS] = items;
    c[ACTIVE] = workers;
    Atomics.store(c, NEXT, 0);
    Atomics.store(c, DONE, 0);
    Atomics.store(c, ERR, 0);
    pool.wake();
    stats.pooled++;
    let failure: unknown = null;
    try {
      if (attentionTesting.callerTakesItems) for (let i = Atomics.add(c, NEXT, 1); i < items; i = Atomics.add(c, NEXT, 1)) run(i, 0);
    } catch (e) {
      failure = e;
    }
    pool.waitFor(DONE, pool.workers.length);
    if (failure !== null) throw failure;
    if (Atomics.load(c, ERR) !== 0) throw new Error('dot_product_attention (systolic): a worker thread failed');
  }

  /** Starts the pool with at least `n` workers; false when workers cannot run here. */
  private startPool(n: number): boolean {
    if (!this.shared) return false;
    this.pool ??= new WorkerPool(WORKER_SOURCE, this.control, GEN, SPIN, () => ({ memory: this.memory }));
    return this.pool.ensure(n);
  }
}

let arena: Arena | null = null;

/** Counters of the fused attention's jobs: all, those run on the pool, the items worker threads computed, and the kernel modules compiled. */
export function attentionStats(): { jobs: number; pooled: number; workerItems: number; modules: number } {
  return { ...stats, workerItems: arena ? Atomics.load(arena.control, WORKER_ITEMS) : 0, modules: compiledAttentionModules() };
}
const stats = { jobs: 0, pooled: 0 };

/**
 * For tests: with `callerTakesItems` false, the calling thread of a pooled job takes no items and
 * only waits, so that every item is computed by a worker (which of the threads takes an item is
 * otherwise up to the scheduler: a test cannot count on the worker getting any).
 */
export const attentionTesting = { callerTakesItems: true };

/** Sizes and padded sizes of one call. */
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
}

function plan(q: HostArray, k: HostArray): Plan {
  const d = attentionDims(q.shape, k.shape);
  return { B: d.b, T: d.t, N: d.n, H: d.h, S: d.s, K: d.k, G: d.g, tp: ceil(Math.max(d.t, 1), ROWS), hp: ceil(Math.max(d.h, 1), 8), sp: ceil(Math.max(d.s, 1), 8) };
}

/** The mask regions' sizes in f32 units: mask bytes, flags (a padded row count per mask item) and a zero row, each with slack for the kernels' 4-byte reads past a row's end. */
function maskRegions(p: Plan, mask: HostArray | undefined): number[] {
  if (mask === undefined) return [];
  const items = mask.shape[0] * mask.shape[1];
  return [Math.ceil(mask.data.length / 4) + 16, Math.ceil((items * p.tp) / 4) + 16, p.sp / 4 + 16];
}

/**
 * Copies the mask into its region and writes the flag of every (mask item, row): 1 where the row
 * sees no key (no mask byte set among its keys, causality applied), 0 otherwise and for padding
 * rows; zeros the zero row.
 */
function stageMask(a: Arena, p: Plan, causal: boolean, mask: HostArray, [mr, fr, zr]: number[]): void {
  const { T, S, tp } = p;
  const m = mask.data as Uint8Array;
  const u8 = a.u8;
  u8.set(m, mr);
  const items = mask.shape[0] * mask.shape[1];
  u8.fill(0, fr, fr + items * tp);
  u8.fill(0, zr, zr + p.sp);
  for (let it = 0; it < items; it++)
    for (let t = 0; t < T; t++) {
      const row = (it * T + t) * S;
      const end = row + (causal ? Math.min(S, t + 1) : S);
      let j = row;
      while (j < end && m[j] === 0) j++;
      u8[fr + it * tp + t] = j === end ? 1 : 0;
    }
  const d = a.i32;
  const [bm, nm] = mask.shape;
  d[DESC.MR] = mr;
  d[DESC.FR] = fr;
  d[DESC.ZR] = zr;
  d[DESC.MB] = bm === 1 ? 0 : nm * T * S;
  d[DESC.MN] = nm === 1 ? 0 : T * S;
  d[DESC.FB] = bm === 1 ? 0 : nm * tp;
  d[DESC.FN] = nm === 1 ? 0 : tp;
}

/**
 * One thread's scratch regions in f32 elements, by `SCRATCH` name, for padded query count `tp`,
 * head dim `hp` and key count `sp`: O((tp + sp) hp) in all; the backward's alone (dO, K by rows,
 * dK, dV and the chunks of the transposes of dS and P, [sp, QB] each) are empty in the forward,
 * the forward's alone (the rows' (max, sum) pairs, [tp, 2]) in the backward.
 */
function scratchSizes(tp: number, hp: number, sp: number, backward: boolean): Record<(typeof SCRATCH)[number], number> {
  const bw = backward ? 1 : 0;
  return { q: tp * hp, do: bw * tp * hp, kt: hp * sp, kb: bw * sp * hp, v: sp * hp, o: tp * hp, dk: bw * sp * hp, dv: bw * sp * hp, s: ROWS * sp, p: ROWS * sp, ml: (1 - bw) * 2 * tp, dsT: bw * sp * QB, pT: bw * sp * QB };
}

/** One thread's scratch: the regions' byte offsets (in `SCRATCH` order, 64-byte aligned) and its byte size. */
function scratchLayout(tp: number, hp: number, sp: number, backward: boolean): { offs: number[]; bytes: number } {
  const sizes = scratchSizes(tp, hp, sp, backward);
  const offs: number[] = [];
  let bytes = 0;
  for (const k of SCRATCH) {
    offs.push(bytes);
    bytes += ceil(sizes[k], 16) * 4;
  }
  return { offs, bytes };
}

/** Bytes of wasm memory one thread's scratch takes in a fused attention call with T queries, S keys and head dim H (forward or backward). */
export function attentionScratchBytes(T: number, S: number, H: number, backward: boolean): number {
  return scratchLayout(ceil(Math.max(T, 1), ROWS), ceil(Math.max(H, 1), 8), ceil(Math.max(S, 1), 8), backward).bytes;
}

/**
 * Lays out the job in memory and writes the descriptor: the raw operand/result regions (f32
 * element counts, in DESC order from QR), the mask's regions when there is one (staged, see
 * `stageMask`), then one scratch area per thread. Returns the raw regions' byte addresses.
 */
function layout(a: Arena, p: Plan, params: AttentionParams, bf: boolean, backward: boolean, raw: number[], threads: number, modBytes: number, mask?: HostArray): number[] {
  const { tp } = p;
  const { offs, bytes: scratch } = scratchLayout(tp, p.hp, p.sp, backward);
  let at = ceil(MOD_BYTES_AT + modBytes, 64);
  const place = (n: number): number => {
    const r = at;
    at += ceil(n, 16) * 4; // 64-byte aligned regions
    return r;
  };
  const rawAt = raw.map(place);
  const maskAt = maskRegions(p, mask).map(place);
  a.reserve(at + scratch * threads);
  const d = a.i32;
  const set = (slot: number, v: number): void => {
    d[slot] = v;
  };
  set(DESC.T, p.T);
  set(DESC.N, p.N);
  set(DESC.S, p.S);
  set(DESC.K, p.K);
  set(DESC.G, p.G);
  set(DESC.TP, tp);
  set(DESC.CAUSAL, params.isCausal ? 1 : 0);
  set(DESC.BF16, bf ? 1 : 0);
  a.f32[DESC.SCALE] = params.scale;
  rawAt.forEach((r, i) => set(DESC.QR + i, r));
  set(DESC.QSTRIDE, p.N * p.H * 4);
  set(DESC.KSTRIDE, p.K * p.H * 4);
  set(DESC.SCRATCH, at);
  set(DESC.SCRATCH_BYTES, scratch);
  offs.forEach((o, i) => set(DESC.OFF + i, o));
  if (mask === undefined) set(DESC.MR, 0);
  else stageMask(a, p, params.isCausal, mask, maskAt);
  return rawAt;
}

/** Copies a host operand into wasm memory at byte `dst` as f32 (bf16 storage is widened). */
function copyIn(a: Arena, x: StorageArray, bf: boolean, dst: number): void {
  const view = a.f32.subarray(dst >> 2, (dst >> 2) + x.length);
  if (bf) bf16.decode(x as Uint16Array, view);
  else view.set(x as Float32Array);
}

/** Copies `out.length` f32 results at byte `src` into host storage `out` (rounded when bf16). */
function copyOut(a: Arena, src: number, out: StorageArray): void {
  const view = a.f32.subarray(src >> 2, (src >> 2) + out.length);
  if (out instanceof Uint16Array) bf16.encode(view, undefined, out);
  else (out as Float32Array).set(view);
}

/** Storage for a result of dtype `dtype` (fresh), or `into` when given (the caller's, reused: stale contents). */
const storage = (dtype: string, n: number, into: StorageArray | undefined): StorageArray => into ?? (dtype === 'bfloat16' ? new Uint16Array(n) : new Float32Array(n));

/** The module, its instance and the thread count for a call. */
function setup(p: Plan, relaxed: boolean, masked: boolean): { a: Arena; mod: AttentionModule; threads: number } {
  const a = (arena ??= new Arena());
  return { a, mod: attentionModule(p.H, p.sp, relaxed, a.shared, masked), threads: Math.max(1, Math.min(getNumThreads(), p.B * p.K)) };
}

/** The forward pass into `out` and, unless null (the inference primitive), the per-row logsumexp into `lse`. */
function forward(inputs: HostArray[], params: AttentionParams, relaxed: boolean, out: StorageArray, lse: Float32Array | null): void {
  const [q, k, v, mask] = inputs;
  const p = plan(q, k);
  if (q.data.length === 0 || k.data.length === 0) {
    out.fill(0);
    lse?.fill(-Infinity);
    return;
  }
  const bf = q.dtype === 'bfloat16';
  const { a, mod, threads } = setup(p, relaxed, mask !== undefined);
  const rows = p.B * p.N * p.T;
  const [Qr, Kr, Vr, Or, ML] = layout(a, p, params, bf, false, [q.data.length, k.data.length, v.data.length, q.data.length, rows], threads, mod.bytes.length, mask);
  copyIn(a, q.data, bf, Qr);
  copyIn(a, k.data, bf, Kr);
  copyIn(a, v.data, bf, Vr);
  a.run(mod, a.kernels(mod), false, p.B * p.K, threads);
  copyOut(a, Or, out);
  if (lse !== null) copyOut(a, ML, lse);
}

/** The forward kernel: [out, lse] (into `outs` when given). */
export function attentionFwdSystolic(inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean, outs?: StorageArray[]): StorageArray[] {
  const q = inputs[0];
  const out = storage(outAvals[0].dtype, q.data.length, outs?.[0]);
  const lse = storage('float32', q.shape[0] * q.shape[2] * q.shape[1], outs?.[1]) as Float32Array;
  forward(inputs, params, relaxed, out, lse);
  return [out, lse];
}

/** The backward kernel: [dq, dk, dv] from (q, k, v, lse, dOut) (into `outs` when given). */
export function attentionBwdSystolic(inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean, outs?: StorageArray[]): StorageArray[] {
  const [q, k, v, lse, dout, mask] = inputs;
  const p = plan(q, k);
  const [dq, dk, dv] = outAvals.map((o, i) => storage(o.dtype, inputs[i].data.length, outs?.[i]));
  if (q.data.length === 0 || k.data.length === 0) return [dq.fill(0), dk.fill(0), dv.fill(0)];
  const bf = q.dtype === 'bfloat16';
  const { a, mod, threads } = setup(p, relaxed, mask !== undefined);
  const [nq, nk] = [q.data.length, k.data.length];
  const [Qr, Kr, Vr, DOr, L, DQr, DKr, DVr] = layout(a, p, params, bf, true, [nq, nk, nk, nq, lse.data.length, nq, nk, nk], threads, mod.bytes.length, mask);
  copyIn(a, q.data, bf, Qr);
  copyIn(a, k.data, bf, Kr);
  copyIn(a, v.data, bf, Vr);
  copyIn(a, dout.data, bf, DOr);
  copyIn(a, lse.data, false, L);
  a.run(mod, a.kernels(mod), true, p.B * p.K, threads);
  copyOut(a, DQr, dq);
  copyOut(a, DKr, dk);
  copyOut(a, DVr, dv);
  return [dq, dk, dv];
}

/**
 * A kernel of the fused attention primitives: the results, written into `outs` when given
 * (caller storage of each result's dtype and element count: `Backend.executeIntoAll`), else
 * into fresh storage.
 */
export type SystolicAttentionKernel = (inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean, outs?: StorageArray[]) => StorageArray[];

/** The systolic kernels of the fused attention primitives, by primitive name (backend.ts dispatches on it). */
export const systolicAttentionKernels: Record<string, SystolicAttentionKernel> = {
  // (the inference primitive has no use for the logsumexp: not formed)
  dot_product_attention: (inputs, params, outAvals, relaxed, outs) => {
    const out = storage(outAvals[0].dtype, inputs[0].data.length, outs?.[0]);
    forward(inputs, params, relaxed, out, null);
    return [out];
  },
  dot_product_attention_fwd: attentionFwdSystolic,
  dot_product_attention_bwd: attentionBwdSystolic,
};

/** Whether `outs` fit the results `outAvals` of a fused attention kernel: Float32Array for float32, Uint16Array for bfloat16, each holding exactly its result's element count. */
export function attentionStorageFits(outAvals: readonly ShapedArray[], outs: readonly StorageArray[]): boolean {
  return (
    outs.length === outAvals.length &&
    outAvals.every((o, i) => (o.dtype === 'bfloat16' ? outs[i] instanceof Uint16Array : o.dtype === 'float32' && outs[i] instanceof Float32Array) && outs[i].length === sizeOf(o.shape))
  );
}
