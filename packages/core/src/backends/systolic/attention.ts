/**
 * The systolic backend's fused attention (the kernels of lax/attention.ts's primitives), in the
 * style of FlashAttention with two-pass row softmax: per batch item and key/value head, the
 * query rows go in blocks of 4; each block computes its logits only up to the last key its rows
 * may see (under `isCausal` the key blocks above the diagonal are skipped), the softmax in f32,
 * and P V. The backward pass recomputes P from q, k and the forward's logsumexp, or, when the
 * forward kept P (`saveProbs`: it wrote each block's f32 rows into probs [B, N, T, S], zeros at
 * hidden keys; with `probsVisibleOnly`: only up to each block's panel), reads it back (no Q K^T,
 * no exp, K^T not staged), and forms dS = P (dP - rowsum(P dP)) (the composite's softmax
 * gradient), dq = dS k, dk += dS^T q, dv += P^T dO, again only over visible keys; the G query
 * heads that share a key/value head (grouped-query attention) run in one item, so dk and dv
 * accumulate without races.
 *
 * Items (batch x key/value head) are independent: the wasm item drivers (`fwdItem`, `bwdItem`)
 * run them on the calling thread and, with `setNumThreads(n > 1)`, on n - 1 worker threads over
 * the same shared memory (a pool of job kind 'attention' per memory over core's worker crew,
 * whose workers also run the GEMM's and xla-lite's jobs; the workers compile the module from its
 * bytes, which the job leaves in memory), from one count of items taken: the calling thread
 * takes them from the front, the workers from the back, so each thread's next item is most likely
 * the one beside its last, whose rows the kernels touch while they compute (`nextItem`). Each
 * item is computed by one thread in a fixed order, so results do not depend on the thread count.
 *
 * Numerics are the MXU's, as the composite's on this backend: q, k, v, dO, P and dS are rounded
 * to bf16 as matmul operands, products accumulate in f32, softmax is f32. The kernels work in
 * the backend's arena memory (the GEMM engine's) when it has one (see `Arena`): f32 operands and
 * results that live in reserved regions there (a compiler's reused buffers) are read and written
 * in place; the others are copied in once per call (as f32) or out once (into fresh arrays or
 * the caller's storage: `Backend.executeIntoAll`). Operands are staged per item by wasm kernels
 * (rounded, padded to a head dim and a key count of multiples of 8, key and value also
 * transposed); the kernels are attentionModule.ts's. Results are written back strided (where the head dim is a multiple of 8, by the products that end them: `resultSettings`). With
 * bfloat16 operands the logits and dP are rounded to bf16 first, as the composite's bf16 matmul
 * results are.
 *
 * A mask operand (bool [B|1, N|1, T, S]) is copied in as bytes once per call, with one flag byte
 * per (mask item, row) computed here: set where the row sees no key (causality applied). The row
 * kernels replace the logits of hidden keys by the composite's -0.7 * float32 max; a flagged row
 * instead reads a row of zero bytes with 0 as the replacement (uniform P over all S keys) and,
 * backward, a dS scale of 0 (the composite's `where` passes no gradient to hidden logits); a
 * block of 4 rows with a flagged row covers every key.
 */
import * as bf16 from '../../bf16';
import { doubleCounters } from '../../counters';
import type { ArenaHost } from '../../backend';
import type { StorageArray } from '../../dtype';
import type { HostArray, ShapedArray } from '../../primitive';
import { type AttentionParams, attentionDims, splitBwd } from '../../lax/attention';
import { sizeOf } from '../../shape';
import { getNumThreads } from '../../threads';
import { wasmFeatures } from '../../wasm/features';
import { WA, type WasmMemory } from '../../wasm/webassemblyTypes';
import { joinSource, workerKind, WorkerPool } from '../../wasm/workerPool';
import { type AttentionKernels, type AttentionModule, DESC, MAX_PAGES, QB, ROWS, SCRATCH, attentionModule, compiledAttentionModules } from './attentionModule';

const ceil = (x: number, m: number): number => Math.ceil(x / m) * m;

// Control slots of the pool (Int32 in a SharedArrayBuffer).
const GEN = 0; // the pool's job generation (bumped to announce a job)
const DONE = 1; // items computed in the current job (by any thread)
const ERR = 2; // set by a worker that failed
const NEXT = 3; // items taken (the calling thread takes items from the front, 0 up; the workers from the back, see BACK)
const ITEMS = 4;
const MODE = 5; // 0 forward, 1 backward
const MOD_ID = 6; // the job's module: id, byte length, byte address of its bytes in memory
const MOD_LEN = 7;
const MOD_AT = 8;
const ACTIVE = 9; // workers that take items in this job
const WORKER_ITEMS = 10; // items the workers computed, all jobs
const DESC_AT = 11; // the job's descriptor (byte address)
const OPEN = 12; // the generation of the job workers may still join (0 once closed)
const INSIDE = 13; // workers between joining a job and leaving it
const BACK = 14; // items the workers took (from the back: item ITEMS - 1 - BACK)
const SPIN = 4000;

/** A worker's part of a job it joined: build the job's module when it changed, then take items until none are left. */
const ATTENTION_JOB = `
    let run = null;
    try {
      if (c[${MOD_ID}] !== modId) {
        const bytes = new Uint8Array(memory.buffer, c[${MOD_AT}], c[${MOD_LEN}]).slice();
        inst = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { mem: memory } });
        modId = c[${MOD_ID}];
      }
      run = c[${MODE}] === 0 ? inst.exports.fwdItem : inst.exports.bwdItem;
    } catch (e) {
      Atomics.store(c, ${ERR}, 1);
    }
    const items = c[${ITEMS}], desc = c[${DESC_AT}];
    let done = 0;
    // (an item taken counts as done even when it failed: the calling thread waits for the count,
    // then sees ERR. A worker whose module failed to build still takes items, each failing at
    // once: a caller that takes none waits for every item to be counted. Workers take items from
    // the back, the calling thread from the front: each thread's next item is most likely the one
    // beside its last, whose rows the kernels touch while they compute, see \`nextItem\`.)
    for (let taken = Atomics.add(c, ${NEXT}, 1); taken < items; taken = Atomics.add(c, ${NEXT}, 1)) {
      const i = items - 1 - Atomics.add(c, ${BACK}, 1);
      try {
        run(i, id + 1, desc, i - 1);
        done++;
      } catch (e) {
        Atomics.store(c, ${ERR}, 1);
      }
      Atomics.add(c, ${DONE}, 1);
      Atomics.notify(c, ${DONE});
    }
    Atomics.add(c, ${WORKER_ITEMS}, done);
`;

/** The attention pools' job kind (core's worker crew, workerPool.ts): per arena's pool in each worker, its memory (`data`), the instance of the last module built, and the job function. */
const ATTENTION_KIND = workerKind('attention', `
const { memory } = data;
let inst = null, modId = -1;
return function job(seen) {
  // (core's join protocol: a job already closed, its items all computed by the time this worker
  // woke, is left alone; a worker inside is waited for)
  ${joinSource(OPEN, INSIDE, `id < c[${ACTIVE}] && Atomics.load(c, ${NEXT}) < c[${ITEMS}]`, ATTENTION_JOB)}
};
`);

/** Where the job's module bytes are left for the workers: this many bytes after the descriptor. */
const MOD_BYTES_AT = 256;

/**
 * The memory the attention's kernels work in, its views, the instances over it and the pool:
 * the backend's arena host (the GEMM engine's shared memory, `Backend.arenaHost`) when there is
 * one, so that operands and results the caller keeps there are read and written in place, else
 * a memory of the attention's own (shared when threads can run; grown as needed). Each call
 * lays its job out in a region of it (`begin` / `end`): reserved in the host, byte 0 on in the
 * own memory. A job the host's memory cannot hold runs in the own memory instead (`runJob`).
 */
class Arena {
  readonly shared: boolean;
  readonly memory: WasmMemory;
  readonly maxPages: number;
  f32!: Float32Array;
  i32!: Int32Array;
  u8!: Uint8Array;
  private readonly instances = new Map<number, AttentionKernels>();
  /** Its pool over core's worker crew (set up in the workers on first use), kept apart from the host (see `arenaPools`). */
  readonly pool: WorkerPool;
  /** The current job's region: byte address and bytes (-1: none). */
  private base = -1;

  constructor(readonly host: ArenaHost | null) {
    this.shared = host !== null || (wasmFeatures().threads && WorkerPool.available());
    this.maxPages = host ? host.maxPages : MAX_PAGES;
    this.memory = host ? host.memory : new WA.Memory(this.shared ? { initial: 1, maximum: MAX_PAGES, shared: true } : { initial: 1 });
    // (the workers' data names the memory, not this arena: an arena's pool must not keep its host alive, see `arenaPools`)
    const memory = this.memory;
    this.pool = new WorkerPool(ATTENTION_KIND, this.shared ? new Int32Array(new SharedArrayBuffer(64)) : new Int32Array(64), GEN, SPIN, () => ({ memory }), 'attention');
    arenaPools.add(this.pool);
    this.views();
  }

  /** (Re)makes the views when the memory has grown. */
  private views(): void {
    const buf = this.host ? this.host.buffer() : this.memory.buffer;
    if (this.f32?.buffer === buf && this.f32.length * 4 === buf.byteLength) return;
    this.f32 = new Float32Array(buf);
    this.i32 = new Int32Array(buf);
    this.u8 = new Uint8Array(buf);
  }

  kernels(mod: AttentionModule): AttentionKernels {
    let k = this.instances.get(mod.id);
    if (!k) {
      k = new WA.Instance(mod.module, { env: { mem: this.memory } }).exports as unknown as AttentionKernels;
      this.instances.set(mod.id, k);
    }
    return k;
  }

  /** The byte address of `x` when the kernels may read or write it in place (f32 in a reserved region of the host's memory), else -1. */
  inPlace(x: StorageArray): number {
    return x instanceof Float32Array && this.host?.holds?.(x) === true ? x.byteOffset : -1;
  }

  /**
   * Starts a job: a region of `bytes` for its descriptor, staged operands and scratch; returns
   * its byte address, or -1 when the host's memory cannot hold it (its limit, or the room it
   * keeps for products: the caller runs the job in the own memory).
   */
  begin(bytes: number): number {
    if (this.base >= 0) throw new Error('dot_product_attention (systolic): a job is already running in this memory');
    const limit = this.maxPages * 65536;
    if (this.host) {
      const at = bytes <= limit ? this.host.reserve(bytes) : -1;
      if (at < 0) return -1;
      this.base = at;
    } else {
      const have = this.memory.buffer.byteLength;
      if (bytes > limit) throw new RangeError(`dot_product_attention (systolic): needs ${bytes} bytes of wasm memory; the most is ${limit}`);
      if (bytes > have) this.memory.grow(Math.ceil((bytes - have) / 65536));
      this.base = 0;
    }
    this.views();
    return this.base;
  }

  /** Ends the job `begin` started (releases its region). */
  end(): void {
    if (this.host && this.base >= 0) this.host.release(this.base);
    this.base = -1;
  }

  /** Runs items [0, items) of the job whose descriptor is at `desc` on `threads` threads (the calling one included). */
  run(mod: AttentionModule, k: AttentionKernels, backward: boolean, items: number, threads: number, desc: number): void {
    const run = backward ? k.bwdItem : k.fwdItem;
    const workers = Math.min(threads, items) - 1;
    stats.jobs++;
    if (workers < 1 || !this.startPool(workers)) {
      for (let i = 0; i < items; i++) run(i, 0, desc, nextItem(i + 1, items));
      return;
    }
    const pool = this.pool;
    const c = pool.control;
    // (every job: a single-threaded job may have laid its operands over an earlier module's bytes)
    new Uint8Array(this.memory.buffer, desc + MOD_BYTES_AT, mod.bytes.length).set(mod.bytes);
    // (`attentionTesting.breakModule`: an id no worker has built and no bytes, so building fails)
    c[MOD_ID] = attentionTesting.breakModule ? -2 : mod.id;
    c[MOD_LEN] = attentionTesting.breakModule ? 0 : mod.bytes.length;
    c[MOD_AT] = desc + MOD_BYTES_AT;
    c[DESC_AT] = desc;
    c[MODE] = backward ? 1 : 0;
    c[ITEMS] = items;
    c[ACTIVE] = workers;
    Atomics.store(c, NEXT, 0);
    Atomics.store(c, BACK, 0);
    Atomics.store(c, DONE, 0);
    Atomics.store(c, ERR, 0);
    pool.openJob(OPEN);
    pool.wake();
    stats.pooled++;
    let failure: unknown = null;
    if (attentionTesting.callerTakesItems) {
      // (items from the front: the workers take theirs from the back)
      for (let i = 0; Atomics.add(c, NEXT, 1) < items; i++) {
        try {
          run(i, 0, desc, nextItem(i + 1, items));
        } catch (e) {
          failure ??= e;
        }
        Atomics.add(c, DONE, 1);
      }
    }
    // Every item is taken: wait for those still being computed, then close the job, so that a
    // worker waking only now (its core busy elsewhere) leaves at once instead of being waited
    // for; wait for the workers inside to leave before the control block and the region are reused.
    pool.waitFor(DONE, items);
    pool.closeJob(OPEN, INSIDE);
    pool.finished();
    if (failure !== null) throw failure;
    if (Atomics.load(c, ERR) !== 0) throw new Error('dot_product_attention (systolic): a worker thread failed');
  }

  /** Starts the pool with at least `n` workers; false when workers cannot run here. */
  private startPool(n: number): boolean {
    if (!this.shared || !WorkerPool.available()) return false;
    return this.pool.ensure(n);
  }
}

/**
 * The item whose rows the kernels touch while they compute one (its operands and results: they
 * are then in the cache when it is staged and unstaged), `i` when it is an item, else -1 (none).
 * A hint: the thread need not compute it next (another may take it first).
 */
const nextItem = (i: number, items: number): number => (i < items ? i : -1);

/** Makes the workers drop an arena's pool and its memory (no longer in use); the items they computed go to `retiredWorkerItems`. */
function retire(pool: WorkerPool): void {
  retiredWorkerItems += Atomics.load(pool.control, WORKER_ITEMS);
  Atomics.store(pool.control, WORKER_ITEMS, 0);
  arenaPools.delete(pool);
  if (pool.size > 0) pool.end();
}

/** The arena of the attention's own memory. */
let ownArena: Arena | null = null;
/**
 * The arena over each arena host in use (several systolic backends or engines alternate without
 * restarting workers). When a host is dropped (the backend made a new engine, e.g. on a
 * relaxed-SIMD switch) its arena goes with it and `dropped` makes the workers drop its pool,
 * whose memory they would otherwise keep alive.
 */
const hostArenas = new WeakMap<ArenaHost, Arena>();
const dropped = new FinalizationRegistry<WorkerPool>(retire);
/** The pools of arenas in use (for `attentionStats`). */
const arenaPools = new Set<WorkerPool>();
/** Arenas made (for tests: one per host, not one per call). */
let arenasMade = 0;

/** Items that worker threads of arenas no longer in use computed. */
let retiredWorkerItems = 0;

function arenaFor(host: ArenaHost | null): Arena {
  if (host === null) return (ownArena ??= newArena(null));
  let a = hostArenas.get(host);
  if (a === undefined) {
    a = newArena(host);
    hostArenas.set(host, a);
    dropped.register(host, a.pool);
  }
  return a;
}

function newArena(host: ArenaHost | null): Arena {
  arenasMade++;
  return new Arena(host);
}

/**
 * Counters of the fused attention's jobs: all, those run on the pool, the items worker threads
 * computed, the kernel modules compiled, bytes in place and copied, jobs the backend's memory
 * could not hold (run in the own memory), and arenas made.
 */
export function attentionStats(): { jobs: number; pooled: number; workerItems: number; modules: number; inPlaceBytes: number; copiedBytes: number; ownMemoryFallbacks: number; arenas: number } {
  let workerItems = retiredWorkerItems;
  for (const c of arenaPools) workerItems += Atomics.load(c.control, WORKER_ITEMS);
  return { ...stats, workerItems, modules: compiledAttentionModules(), arenas: arenasMade };
}
/** Jobs, pooled jobs, bytes of operands and results read or written in place (in the backend's memory) or copied in or out, and jobs moved to the own memory. */
// (doubles from the start: the byte counts pass 2^31 within a training run, see doubleCounters)
const stats = doubleCounters({ jobs: 0, pooled: 0, inPlaceBytes: 0, copiedBytes: 0, ownMemoryFallbacks: 0 });

/**
 * For tests: with `callerTakesItems` false, the calling thread of a pooled job takes no items and
 * only waits, so that every item is computed by a worker (which of the threads takes an item is
 * otherwise up to the scheduler: a test cannot count on the worker getting any). With
 * `breakModule` true, workers fail to build the module of the next pooled jobs (the job then
 * fails). (A worker that wakes too late for its job: core's `holdWorkers`.)
 */
export const attentionTesting = { callerTakesItems: true, breakModule: false };

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
function stageMask(a: Arena, p: Plan, causal: boolean, mask: HostArray, [mr, fr, zr]: number[], o: number): void {
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
  d[o + DESC.MR] = mr;
  d[o + DESC.FR] = fr;
  d[o + DESC.ZR] = zr;
  d[o + DESC.MB] = bm === 1 ? 0 : nm * T * S;
  d[o + DESC.MN] = nm === 1 ? 0 : T * S;
  d[o + DESC.FB] = bm === 1 ? 0 : nm * tp;
  d[o + DESC.FN] = nm === 1 ? 0 : tp;
}

/**
 * One thread's scratch regions in f32 elements, by `SCRATCH` name, for padded query count `tp`,
 * head dim `hp` and key count `sp`: O((tp + sp) hp) in all; the backward's alone (dO, K by rows,
 * dK, dV and the chunks of rows of dS and P, [QB, sp] each) are empty in the forward, the
 * forward's alone (a block's rows of S and P, [4, sp] each, and the rows' (max, sum) pairs,
 * [tp, 2]) in the backward.
 */
function scratchSizes(tp: number, hp: number, sp: number, backward: boolean): Record<(typeof SCRATCH)[number], number> {
  const bw = backward ? 1 : 0;
  return { q: tp * hp, do: bw * tp * hp, kt: hp * sp, kb: bw * sp * hp, v: sp * hp, o: tp * hp, dk: bw * sp * hp, dv: bw * sp * hp, s: (1 - bw) * ROWS * sp, p: (1 - bw) * ROWS * sp, ml: (1 - bw) * 2 * tp, dsc: bw * QB * sp, pc: bw * QB * sp };
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
 * Lays out the job in a region of the arena's memory (`Arena.begin`; the caller ends it) and
 * writes the descriptor at its start: the raw operand/result regions (f32 element counts `raw`,
 * in DESC order from QR; where `fixed` has an address >= 0 the kernels use that one in place and
 * no region is placed), the mask's regions when there is one (staged, see `stageMask`), then one
 * scratch area per thread. Returns the descriptor's byte address and the raw regions' addresses,
 * or null when the arena's host cannot hold the job (nothing begun).
 */
function layout(a: Arena, p: Plan, params: AttentionParams, keep: boolean, bf: boolean, backward: boolean, raw: number[], fixed: number[], threads: number, modBytes: number, mask?: HostArray): { desc: number; at: number[] } | null {
  const { tp } = p;
  const { offs, bytes: scratch } = scratchLayout(tp, p.hp, p.sp, backward);
  let at = ceil(MOD_BYTES_AT + modBytes, 64);
  const place = (n: number): number => {
    const r = at;
    at += ceil(n, 16) * 4; // 64-byte aligned regions
    return r;
  };
  const rel = raw.map((n, i) => (fixed[i] >= 0 ? -1 : place(n)));
  const maskRel = maskRegions(p, mask).map(place);
  const desc = a.begin(at + scratch * threads);
  if (desc < 0) return null;
  const rawAt = rel.map((r, i) => (r < 0 ? fixed[i] : desc + r));
  const d = a.i32;
  const o = desc >> 2;
  const set = (slot: number, v: number): void => {
    d[o + slot] = v;
  };
  set(DESC.T, p.T);
  set(DESC.N, p.N);
  set(DESC.S, p.S);
  set(DESC.K, p.K);
  set(DESC.G, p.G);
  set(DESC.TP, tp);
  set(DESC.CAUSAL, params.isCausal ? 1 : 0);
  set(DESC.BF16, bf ? 1 : 0);
  set(DESC.PROBS, keep ? (params.probsVisibleOnly === true && !backward ? 2 : 1) : 0);
  a.f32[o + DESC.SCALE] = params.scale;
  rawAt.forEach((r, i) => set(DESC.QR + i, r));
  set(DESC.QSTRIDE, p.N * p.H * 4);
  set(DESC.KSTRIDE, p.K * p.H * 4);
  set(DESC.SCRATCH, desc + at);
  set(DESC.SCRATCH_BYTES, scratch);
  offs.forEach((off, i) => set(DESC.OFF + i, off));
  if (mask === undefined) set(DESC.MR, 0);
  else {
    const maskAt = maskRel.map((r) => desc + r);
    stageMask(a, p, params.isCausal, mask, maskAt, o);
  }
  return { desc, at: rawAt };
}

/**
 * Where the kernels find the operands `ins` and write the results `outs`: in place (their byte
 * addresses) where the arena may, else -1 (copied). A result that shares bytes with an operand
 * is not written in place: views of one buffer, or both in the arena's memory (growing a shared
 * memory hands out a new buffer object for the same bytes, so buffer identity alone would miss
 * an overlap between views taken before and after a grow).
 */
function placements(a: Arena, ins: StorageArray[], outs: StorageArray[]): number[] {
  const at = ins.map((x) => a.inPlace(x));
  for (const x of outs) {
    const ax = a.inPlace(x);
    let shared = false;
    for (let j = 0; ax >= 0 && !shared && j < ins.length; j++) {
      const y = ins[j];
      shared = (x.buffer === y.buffer || at[j] >= 0) && x.byteOffset < y.byteOffset + y.byteLength && y.byteOffset < x.byteOffset + x.byteLength;
    }
    at.push(ax >= 0 && !shared ? ax : -1);
  }
  return at;
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

/** The arena, the module and the thread count for a call. */
function setup(p: Plan, relaxed: boolean, masked: boolean, host: ArenaHost | null): { a: Arena; mod: AttentionModule; threads: number } {
  const a = arenaFor(host);
  return { a, mod: attentionModule(p.H, p.sp, relaxed, a.shared, masked, a.maxPages), threads: Math.max(1, Math.min(getNumThreads(), p.B * p.K)) };
}

/**
 * The forward pass into `out` and, unless null (the inference primitive), the per-row logsumexp
 * into `lse` and, when `probs` is given, P into it (`params.saveProbs`).
 */
function forward(inputs: HostArray[], params: AttentionParams, relaxed: boolean, out: StorageArray, lse: Float32Array | null, host: ArenaHost | null, probs: Float32Array | null = null): void {
  const [q, k, v, mask] = inputs;
  const p = plan(q, k);
  // Nothing to attend over: empty results, or (S = 0) rows over no key, whose logsumexp is log 0.
  // An empty head dimension alone (H = 0) is not: every score is 0, and the kernels (operands
  // zero-padded to hp) give each row the uniform softmax over its visible keys, as JAX does.
  if (p.B * p.N * p.T * p.S === 0) {
    out.fill(0);
    lse?.fill(-Infinity);
    probs?.fill(0);
    return;
  }
  const rows = p.B * p.N * p.T;
  const outs = lse === null ? [out] : probs === null ? [out, lse] : [out, lse, probs];
  const job: Job = { p, params, keep: probs !== null, relaxed, mask, bf: q.dtype === 'bfloat16', backward: false, ins: [q.data, k.data, v.data], bfIns: 3, outs };
  runJob(job, [q.data.length, k.data.length, v.data.length, q.data.length, rows, ...(probs === null ? [] : [probs.length])], host);
}

/** One call of a kernel: its sizes, parameters, operands (the first `bfIns` in bf16 storage when `bf`) and results. */
interface Job {
  p: Plan;
  params: AttentionParams;
  /** P goes through the probs slot: the forward writes it (an output is there for it), the backward reads it instead of recomputing it (`saveProbs`). */
  keep: boolean;
  relaxed: boolean;
  mask: HostArray | undefined;
  bf: boolean;
  backward: boolean;
  ins: StorageArray[];
  bfIns: number;
  outs: StorageArray[];
}

/**
 * Runs a job in the arena of `host` (f32 element counts of its raw regions `raw`, see `layout`):
 * operands and results in place where they may be, the others copied in and out. When the host's
 * memory cannot hold the job (full, or at its cap), it runs in the attention's own memory
 * instead, everything copied (as before the arena host existed), rather than failing.
 */
function runJob(job: Job, raw: number[], host: ArenaHost | null): void {
  const { p, ins, outs } = job;
  const { a, mod, threads } = setup(p, job.relaxed, job.mask !== undefined, host);
  const fixed = placements(a, ins, outs);
  let laid: { desc: number; at: number[] } | null = null;
  try {
    laid = layout(a, p, job.params, job.keep, job.bf, job.backward, raw, fixed, threads, mod.bytes.length, job.mask);
    if (laid !== null) {
      const { desc, at } = laid;
      for (let i = 0; i < fixed.length; i++) {
        const bytes = (i < ins.length ? ins[i] : outs[i - ins.length]).byteLength;
        if (fixed[i] >= 0) stats.inPlaceBytes += bytes;
        else stats.copiedBytes += bytes;
      }
      ins.forEach((x, i) => fixed[i] < 0 && copyIn(a, x, job.bf && i < job.bfIns, at[i]));
      a.run(mod, a.kernels(mod), job.backward, p.B * p.K, threads, desc);
      outs.forEach((x, i) => fixed[ins.length + i] < 0 && copyOut(a, at[ins.length + i], x));
    }
  } finally {
    a.end();
  }
  if (laid === null) {
    stats.ownMemoryFallbacks++;
    runJob(job, raw, null);
  }
}

/** The forward kernel: [out, lse], and probs with `saveProbs` (into `outs` when given). */
export function attentionFwdSystolic(inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean, outs?: StorageArray[], host: ArenaHost | null = null): StorageArray[] {
  const [q, k] = inputs;
  const out = storage(outAvals[0].dtype, q.data.length, outs?.[0]);
  const lse = storage('float32', q.shape[0] * q.shape[2] * q.shape[1], outs?.[1]) as Float32Array;
  const probs = params.saveProbs === true ? (storage('float32', q.shape[0] * q.shape[2] * q.shape[1] * k.shape[1], outs?.[2]) as Float32Array) : null;
  forward(inputs, params, relaxed, out, lse, host, probs);
  return probs ? [out, lse, probs] : [out, lse];
}

/** The backward kernel: [dq, dk, dv] from (q, k, v, lse, dOut[, mask][, probs]) (into `outs` when given): P read from probs when it is there (`saveProbs`), else recomputed from lse. */
export function attentionBwdSystolic(inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean, outs?: StorageArray[], host: ArenaHost | null = null): StorageArray[] {
  const { xs: [q, k, v, lseIn, dout], mask, probs } = splitBwd(inputs, params);
  // (the kernels read P's rows at the residual's slot when it is kept: lse is not needed then)
  const lse = probs ?? lseIn;
  const p = plan(q, k);
  const res = outAvals.map((o, i) => storage(o.dtype, inputs[i].data.length, outs?.[i]));
  if (q.data.length === 0 || k.data.length === 0) return res.map((x) => x.fill(0));
  const [nq, nk] = [q.data.length, k.data.length];
  const job: Job = { p, params, keep: probs !== undefined, relaxed, mask, bf: q.dtype === 'bfloat16', backward: true, ins: [q.data, k.data, v.data, dout.data, lse.data], bfIns: 4, outs: res };
  runJob(job, [nq, nk, nk, nq, lse.data.length, nq, nk, nk], host);
  return res;
}

/**
 * A kernel of the fused attention primitives: the results, written into `outs` when given
 * (caller storage of each result's dtype and element count: `Backend.executeIntoAll`), else
 * into fresh storage.
 */
export type SystolicAttentionKernel = (inputs: HostArray[], params: AttentionParams, outAvals: ShapedArray[], relaxed: boolean, outs?: StorageArray[], host?: ArenaHost | null) => StorageArray[];

/** The systolic kernels of the fused attention primitives, by primitive name (backend.ts dispatches on it). */
export const systolicAttentionKernels: Record<string, SystolicAttentionKernel> = {
  // (the inference primitive has no use for the logsumexp: not formed)
  dot_product_attention: (inputs, params, outAvals, relaxed, outs, host = null) => {
    const out = storage(outAvals[0].dtype, inputs[0].data.length, outs?.[0]);
    forward(inputs, params, relaxed, out, null, host);
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
