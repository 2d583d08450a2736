/**
 * The worker pool behind the systolic GEMM (a pool of job kind 'gemm' over core's worker crew,
 * `wasm/workerPool.ts`, which starts, wakes and waits for the workers that also run the fused
 * attention's and xla-lite's jobs; this file is the GEMM job protocol): `setNumThreads(n)`
 * (default: the core count). Every
 * worker instantiates the engine's compiled GEMM module over its shared WebAssembly.Memory, so
 * the operands staged by the calling thread are visible to all. One product is one job, started
 * with a single wake-up: the calling thread first copies the host operands into wasm memory (only
 * it can read them) chunk by chunk, publishing how far it got, while the workers take chunks of
 * both operands' packing kernels from a shared counter and pack each as soon as its source is
 * staged (see packPlan.ts); then the calling thread packs too, waits for the last chunk, packs the
 * edges, and opens a gate; then every thread takes C tiles (MC rows x a column range)
 * from a second counter until none are left. Taking work from counters instead of a fixed split
 * keeps both threads busy to the end when one of them is slowed (a busy machine, the calling
 * thread's own serial work). Workers join a job only while it is open (core's join protocol,
 * `joinSource`): the calling thread closes it once every tile (or item) is taken and waits only
 * for the workers inside, so a worker woken while its core was held (V8's garbage collection
 * threads, other processes) never holds up a product the calling thread finished alone. Each
 * output element sees the same K order and f32 stores whatever the tiling (one thread computes
 * it, or, in a K-blocked job, one thread per K block in block order), so results do not depend
 * on the thread count.
 *
 * The worker is a few lines of plain JavaScript with no imports (the kernels arrive as a
 * compiled WebAssembly.Module), started from a string (`eval: true`), so the same code works
 * from the TypeScript sources under vitest and from the built package, and needs no separate
 * worker file. Node only for now: browsers would need a Blob-URL worker and a non-blocking wait.
 */
import { envSwitch } from '../../env';
import { getNumThreads, nodeModule } from '../../threads';
import { WA, type WasmModule } from '../../wasm/webassemblyTypes';
import { endPool, joinSource, workerKind, WorkerPool } from '../../wasm/workerPool';
import { type BatchJob, batchedStats, runItem, sourceEnd } from './batched';
import type { GemmEngine, KBlockJob, ParallelJob } from './gemmEngine';
import type { GemmExports } from './gemmModule';
import { PACK_ROWS, packFunctionName } from './packKernels';
import { type PackJob, chunkCall } from './packPlan';
import { gemmPhases, phaseClock } from './phases';

type PackFn = (src: number, rs: number, ks: number, panels: number, k: number, kp: number, dst: number) => void;

/**
 * What a thread's part of a K-blocked, row-block or group job calls (its instance's exports, and
 * `zero`: `zeroPanelRows` over its own view of the memory): the worker builds one over its
 * instance, the calling thread one per pool over the engine's.
 */
interface PoolKit {
  micro: GemmExports['micro'];
  edge: GemmExports['micro_edge'];
  packs: PackFn[];
  touch: GemmExports['touch_rows'];
  gemm: GemmExports['gemm'];
  zero: (dst: number, R: number, rows: number, k: number) => void;
}

/** Every packing kernel, in a fixed order the workers index into. */
const PACK_NAMES: string[] = [];
for (const layout of ['rc', 'kc'] as const) for (const R of PACK_ROWS) for (const b of [false, true]) for (const f of [false, true]) PACK_NAMES.push(packFunctionName(layout, R, b, f));

// The control block (Int32 slots). Counters first, then the job, then two packing descriptors.
const GEN = 0; // the pool's job generation: bumped to announce a job
const INSIDE = 1; // workers inside the current job (core's join protocol, workerPool.ts joinSource)
const ERR = 2; // set by a worker that failed
const PACK_NEXT = 3; // next packing chunk to take
const PACK_DONE = 4; // packing chunks finished
const TILE_NEXT = 5; // next C tile to take
const GATE = 6; // 1 once the packed operands are complete (edges included)
const STAGED = 7; // byte address below which the operands are staged (see packPlan.ts)
// The job (from JOB): ap bp cp mp np kp tileRows tileCols colTiles tiles activeWorkers; a batch
// job (MODE 1): pk pkStride bOff cp cStride mp np kp items table activeWorkers, then at JOB+13/14
// the staged addresses of its two operands, and per operand (PACKS): fn rs ks panels k sourceSpan.
// OPEN (JOB+12): the generation of the job workers may still join, 0 once the calling thread closed it.
const JOB = 8;
const OPEN = JOB + 12;
const MODE = JOB + 11; // 0: one product split into tiles; 1: a batch of products split by item (batched.ts); 2: one product split into row blocks, each thread packing the A rows it multiplies; 3: one product by K blocks (K_BLOCK_SOURCE); 4: a group of independent products (GROUP_SOURCE)
const SWEPT = JOB + 15; // in-place sources the workers swept (touch_rows calls) in the current job (GemmEngine.traffic.sweptChunks)
const PACKS = 24; // per operand: fn src rs ks panels k kp dst R esz chunks perChunk axis touch
const PACK_SLOTS = 14;
const CUR = PACKS + 2 * PACK_SLOTS; // per worker: a lower bound of the tiles it may still compute
const MAX_WORKERS = 255;
const NONE = 0x7fffffff; // CUR of a worker with no tile left
// A K-blocked job (MODE 3): per K block pc, four counters from KB + 4 * pc (see K_BLOCK_SOURCE).
/** The most K blocks a K-blocked job may have (its counters' slots); a longer product runs by tiles. */
export const MAX_K_BLOCKS = 64;
const KB = CUR + MAX_WORKERS;
/** The most C tiles per K block of a K-blocked job (its per-tile counters). */
const MAX_K_BLOCK_TILES = 64;
const KTILE = KB + 4 * MAX_K_BLOCKS; // per tile of a K-blocked job: K blocks done
const KWAIT = KTILE + MAX_K_BLOCK_TILES; // threads asleep in kBlockWait
const KSLOTS = KWAIT + 1; // end of one product's control slots
/** A group job's counter of products claimed whole (`groupRun`; region 0's tile counter, which a group job does not use). */
const GROUP_NEXT = TILE_NEXT;
/**
 * The most products of one group job (MODE 4, `GroupRunner`): product p of a group is described
 * in its own copy of the slots above (its region, from (p + 1) * KSLOTS), read by the same
 * functions with that base.
 */
const MAX_GROUP = 6;
/**
 * The phase timer's slots (`gemmPhases.enabled`), after every product region and 16 slots (64
 * bytes, a cache line) away from the last, so that their counting never shares a line with
 * KWAIT, which `kBlockDone` reads after every unit: TIMED (1 while the timer is on: set by
 * `runGroup` / `runKBlocks`; with it 0 `kBlockWait` counts nothing and reads no clock), then
 * kBlockWait calls that found their count not yet reached, those that slept, and the
 * microseconds they slept.
 */
const TIMED = KSLOTS * (MAX_GROUP + 1) + 16;
const KWAITED = TIMED + 1;
const KSLEPT = TIMED + 2;
const KSLEPT_US = TIMED + 3;
/** The control block's length in slots. */
const CONTROL_SLOTS = TIMED + 4;
/** Added to every K-block counter when a job fails (more than any unit count: 4 * 64 blocks, 64 tiles). */
const K_FAILED = 1 << 29;

/** Spins this many polls on a control slot before sleeping on it (a wake-up costs far more). */
const SPIN = 4000;

/**
 * A K-blocked job (MODE 3, `ParallelJob.kBlocks`): the product of two 'rc' operands read in place
 * (the weight gradients, K = 2048), packed and multiplied one K block at a time as the one-thread
 * path does (`GemmEngine.kBlocks`), so that the packed blocks stay in the caches instead of whole
 * packed operands of several MiB going out to memory and back (on two threads the tiled path's
 * weight gradients took 11-19% more CPU than the one-thread product, 7-14% of it on one core;
 * BENCHMARKS.md, gemm7). Per K block pc, in two alternating packed areas (A's block at `ap`, B's
 * at `bp`, the second one a block further): stage P(pc), chunks of k rows of A's and B's blocks,
 * and stage T(pc), C tiles multiplied over the block (accumulating from block 1 on). Every thread
 * (the calling one and each worker that joined) walks the stages in order, taking units of each
 * from its counter (KB + 4 * pc: P taken, P done, T taken, T done) until none are left. P(pc)
 * first waits until T(pc - 2), which read the same area, is all done; T(pc) until P(pc) is all
 * packed, and each of its tiles until the same tile of T(pc - 1) is done (KTILE + t counts the K
 * blocks done per tile: C accumulates in K order, and a thread slowed in one tile holds up only
 * that tile's successor). Every thread waits only for units already taken (it passed their stage
 * itself), so the calling thread finishes alone when no worker joins. Each element of C sees the
 * same K order and f32 stores between blocks as in `gemm`: the same bits on any number of threads.
 *
 * M need not be a multiple of MR: A's last row panel is then packed whole by the SIMD kernel, which
 * reads past A's last row (the engine takes this job only where `GemmEngine.simdPanels` allows
 * that read), its missing rows are zeroed with the chunk that packed them, and the tiles' rows in
 * it are multiplied by `micro_edge`, which stores only those rows.
 *
 * JavaScript source shared by the workers and the calling thread (compiled once there): defines
 * `kBlockStages(c, x, base)` (`x`: the thread's `PoolKit`; returns the tiles this thread computed,
 * -1 when another thread failed) and `kBlockFail(c)` (marks the job failed and wakes every waiting
 * thread).
 */
const K_BLOCK_SOURCE = `
function kBlockWait(c, i, n) {
  let v = Atomics.load(c, i);
  // (counting and clock reads only while the phase timer is on: c[TIMED])
  if (v < n && c[${TIMED}] !== 0) Atomics.add(c, ${KWAITED}, 1);
  for (let s = 0; s < ${SPIN} && v < n; s++) v = Atomics.load(c, i);
  while (v < n) {
    if (Atomics.load(c, ${ERR}) !== 0) return false;
    const timed = c[${TIMED}] !== 0, t0 = timed ? performance.now() : 0;
    Atomics.add(c, ${KWAIT}, 1);
    Atomics.wait(c, i, v);
    Atomics.sub(c, ${KWAIT}, 1);
    if (timed) {
      Atomics.add(c, ${KSLEPT}, 1);
      Atomics.add(c, ${KSLEPT_US}, Math.round((performance.now() - t0) * 1000));
    }
    v = Atomics.load(c, i);
  }
  return Atomics.load(c, ${ERR}) === 0;
}
function kBlockDone(c, i) {
  Atomics.add(c, i, 1);
  if (Atomics.load(c, ${KWAIT}) !== 0) Atomics.notify(c, i);
}
function kBlockFail(c) {
  Atomics.store(c, ${ERR}, 1);
  // Each counter moves past any count waited for before it is notified: a thread that read ERR
  // as 0 just before and is about to sleep on the counter's old value returns at once. (Every
  // product region of a group job too, with its chunk and row-block counters.)
  for (let g = 0; g <= ${MAX_GROUP}; g++) {
    const b = g * ${KSLOTS};
    for (let q = b + ${KB}; q < b + ${KWAIT}; q++) { Atomics.add(c, q, ${K_FAILED}); Atomics.notify(c, q); }
    if (g > 0) { Atomics.add(c, b + ${PACK_DONE}, ${K_FAILED}); Atomics.notify(c, b + ${PACK_DONE}); }
  }
}
function kBlockStages(c, x, base) {
  const A = base + ${PACKS}, B = base + ${PACKS + PACK_SLOTS}, J = base + ${JOB}, KBb = base + ${KB}, KT = base + ${KTILE};
  const ap = c[J], bp = c[J + 1], cp = c[J + 2], M = c[J + 3], np = c[J + 4], kp = c[J + 5];
  const tr = c[J + 6], tc = c[J + 7], cols = c[J + 8], tiles = c[J + 9], KC = c[J + 13], nb = c[J + 14];
  const mr = c[A + 8], nr = c[B + 8], packs = x.packs, micro = x.micro;
  // A's panels (c[A + 4]) may end in a partial one (M not a multiple of MR): the packing kernel
  // packs it whole, reading past A's last row (GemmEngine.simdPanels), and its missing rows are
  // zeroed here; its rows of C are stored by micro_edge.
  const aPanels = c[A + 4], aFull = (M / mr) | 0, aPart = M - aFull * mr;
  let mine = 0;
  for (let pc = 0; pc < nb; pc++) {
    const k0 = pc * KC, kc = Math.min(KC, kp - k0), q = KBb + 4 * pc;
    const aBlk = ap + (pc & 1) * aPanels * mr * KC * 4, bBlk = bp + (pc & 1) * np * KC * 4;
    const ca = Math.ceil(kc / c[A + 11]), chunks = ca + Math.ceil(kc / c[B + 11]);
    // P(pc) overwrites the packed blocks of pc - 2: its tiles must all be done.
    if (Atomics.load(c, q) < chunks && (pc < 2 || kBlockWait(c, q - 5, tiles))) {
      for (let i = Atomics.add(c, q, 1); i < chunks; i = Atomics.add(c, q, 1)) {
        const o = i < ca ? A : B, per = c[o + 11], u = (i < ca ? i : i - ca) * per, k = Math.min(per, kc - u);
        const esz = c[o + 9], src = c[o + 1] + (k0 + u) * c[o + 3] * esz, dst = (o === A ? aBlk : bBlk) + u * c[o + 8] * 4;
        if (c[o + 13] !== 0) { x.touch(src, c[o + 4] * c[o + 8] * esz, c[o + 3] * esz, k); Atomics.add(c, ${SWEPT}, 1); }
        packs[c[o]](src, 1, c[o + 3], c[o + 4], k, kc, dst);
        if (o === A && aPart > 0) x.zero(dst + aFull * mr * kc * 4, mr, aPart, k);
        kBlockDone(c, q + 1);
      }
    }
    if (Atomics.load(c, q + 2) >= tiles) continue;
    if (!kBlockWait(c, q + 1, chunks)) return -1;
    for (let t = Atomics.add(c, q + 2, 1); t < tiles; t = Atomics.add(c, q + 2, 1)) {
      // (tile t accumulates onto its own result of K block pc - 1)
      if (pc > 0 && !kBlockWait(c, KT + t, pc)) return -1;
      const r = (t / cols) | 0, i0 = r * tr, i1 = Math.min(M, i0 + tr), j0 = (t - r * cols) * tc, j1 = Math.min(np, j0 + tc);
      const full = ((i1 - i0) / mr) | 0, part = i1 - i0 - full * mr, acc = pc > 0 ? 1 : 0;
      const aRow = aBlk + i0 * kc * 4, cRow = cp + i0 * np * 4;
      if (full > 0) for (let j = j0; j < j1; j += nr) micro(aRow, bBlk + j * kc * 4, cRow + j * 4, kc, np * 4, acc, full, kc * mr * 4);
      if (part > 0) for (let j = j0; j < j1; j += nr) x.edge(aRow + full * mr * kc * 4, bBlk + j * kc * 4, cRow + (full * mr * np + j) * 4, kc, np * 4, acc, part);
      mine++;
      kBlockDone(c, KT + t);
      kBlockDone(c, q + 3);
    }
  }
  return mine;
}
`;

/**
 * A group job (MODE 4, `Pool.runGroup`): n independent products, product p described in its
 * region (base (p + 1) * KSLOTS) as a K-blocked product (its MODE slot 3, run by `kBlockStages`
 * with that base) or a row-block product (MODE slot 2: B's packing chunks, then row blocks of A
 * each packed by the thread that multiplies it, `rowBlockLoop`). Each thread claims whole
 * products first, the next one nobody has started (`runGroup` describes them largest first),
 * then walks the others, taking whatever units of each are left (so a product is split between
 * threads only once none is left unstarted, and a worker that comes late finds the products done
 * and costs nothing). With `groupJobSettings.claim` off, thread t (the calling thread 0, worker
 * id + 1) starts on product t mod n and then walks the others in order. A thread waits only for units
 * another thread already took (B's chunks before the row blocks; a K block's tile of the block
 * before): the calling thread finishes alone when no worker joins.
 *
 * Defines `rowBlockLoop(c, b, tid, x)` (also the row-block job's, MODE 2, at base 0; returns the
 * blocks it computed), `groupRun(c, tid, x)` (the units, row blocks and K-block tiles, this thread
 * computed; -1 when another thread failed; `x`: the thread's `PoolKit`) and `zeroPanelRows`.
 */
const GROUP_SOURCE = `
function rowBlockLoop(c, b, tid, x) {
  const o = b + ${PACKS + PACK_SLOTS}, J = b + ${JOB};
  const fa = x.packs[c[o]], rs = c[o + 2], ks = c[o + 3], k = c[o + 5], R = c[o + 8], esz = c[o + 9];
  const mp = c[J + 3], np = c[J + 4], kp = c[J + 5], mc = c[J + 6], blocks = c[J + 9];
  const area = c[J] + tid * mc * kp * 4;
  let mine = 0;
  for (let r = Atomics.add(c, b + ${TILE_NEXT}, 1); r < blocks; r = Atomics.add(c, b + ${TILE_NEXT}, 1), mine++) {
    const i0 = r * mc, i1 = Math.min(mp, i0 + mc), src = c[o + 1] + i0 * rs * esz;
    // (the last block may end in a partial panel: packed whole, reading past A's last row as
    // GemmEngine.simdPanels allows, its missing rows zeroed; the gemm export stores only its rows)
    const full = ((i1 - i0) / R) | 0, part = i1 - i0 - full * R;
    if (c[o + 13] !== 0) { x.touch(src, k * esz, rs * esz, i1 - i0); Atomics.add(c, ${SWEPT}, 1); }
    fa(src, rs, ks, part > 0 ? full + 1 : full, k, kp, area);
    if (part > 0) x.zero(area + full * R * kp * 4, R, part, kp);
    x.gemm(area - i0 * kp * 4, c[J + 1], c[J + 2], mp, np, kp, i0, i1, 0, np);
  }
  return mine;
}
function groupRows(c, b, tid, x) {
  const chunks = c[b + ${PACKS} + 10];
  for (let i = Atomics.add(c, b + ${PACK_NEXT}, 1); i < chunks; i = Atomics.add(c, b + ${PACK_NEXT}, 1)) {
    chunkPack(c, b + ${PACKS}, i, x.packs, x.touch, null);
    kBlockDone(c, b + ${PACK_DONE});
  }
  if (Atomics.load(c, b + ${TILE_NEXT}) >= c[b + ${JOB} + 9]) return 0;
  if (!kBlockWait(c, b + ${PACK_DONE}, chunks)) return -1;
  return rowBlockLoop(c, b, tid, x);
}
function groupUnits(c, b, tid, x) {
  return c[b + ${MODE}] === 3 ? kBlockStages(c, x, b) : groupRows(c, b, tid, x);
}
function groupRun(c, tid, x) {
  const n = c[${JOB}], claim = c[${JOB} + 1] !== 0;
  let mine = 0;
  // Whole products first: each thread claims the next one nobody has started (runGroup describes
  // them largest first), so that two threads share a product only once none is left unstarted.
  if (claim) {
    for (let s = Atomics.add(c, ${GROUP_NEXT}, 1); s < n; s = Atomics.add(c, ${GROUP_NEXT}, 1)) {
      const u = groupUnits(c, (1 + s) * ${KSLOTS}, tid, x);
      if (u < 0) return -1;
      mine += u;
    }
  }
  // Then what is left of the products other threads claimed (the last claimed first).
  for (let s = 0; s < n; s++) {
    const b = (1 + (claim ? n - 1 - s : (tid + s) % n)) * ${KSLOTS};
    const u = groupUnits(c, b, tid, x);
    if (u < 0) return -1;
    mine += u;
  }
  return mine;
}
// Zeroes rows [rows, R) of each of the k row groups (R floats each) of a packed panel at byte
// address dst, in u32, a view of the whole wasm memory: the missing rows of a partial panel.
function zeroPanelRows(u32, dst, R, rows, k) {
  for (let q = dst >> 2, end = q + k * R; q < end; q += R) for (let r = rows; r < R; r++) u32[q + r] = 0;
}
// Packing chunk i of the descriptor at slot o (packPlan.ts chunkCall): packs it once wait(need),
// when given, says its source (up to byte address need) is staged.
function chunkPack(c, o, i, packs, touch, wait) {
  const rs = c[o + 2], ks = c[o + 3], kp = c[o + 6], R = c[o + 8], esz = c[o + 9], u0 = i * c[o + 11];
  let src = c[o + 1], panels = c[o + 4], k = c[o + 5], dst = c[o + 7];
  if (c[o + 12] === 0) { panels = Math.min(panels - u0, c[o + 11]); src += u0 * R * rs * esz; dst += u0 * R * kp * 4; }
  else { k = Math.min(k - u0, c[o + 11]); src += u0 * ks * esz; dst += u0 * R * 4; }
  if (wait !== null && !wait(src + ((panels * R - 1) * rs + (k - 1) * ks + 1) * esz)) return;
  // (touchArgs in packKernels.ts: an in-place source is swept before it is packed)
  if (c[o + 13] !== 0) { if (rs === 1) touch(src, panels * R * esz, ks * esz, k); else touch(src, k * esz, rs * esz, panels * R); Atomics.add(c, ${SWEPT}, 1); }
  packs[c[o]](src, rs, ks, panels, k, kp, dst);
}
`;

/** The calling thread's copy of the K-blocked and group jobs' functions (K_BLOCK_SOURCE, GROUP_SOURCE). */
const kBlockFns = new Function(`${K_BLOCK_SOURCE}; ${GROUP_SOURCE}; return { stages: kBlockStages, fail: kBlockFail, group: groupRun, zeroRows: zeroPanelRows };`)() as {
  stages: (c: Int32Array, x: PoolKit, base: number) => number;
  fail: (c: Int32Array) => void;
  group: (c: Int32Array, tid: number, x: PoolKit) => number;
  zeroRows: (u32: Uint32Array, dst: number, R: number, rows: number, k: number) => void;
};

/** A worker's part of a job it joined (see WORKER_SOURCE): a batch job, or packing then tiles (or row blocks). */
const JOB_SOURCE = `
  if (c[${MODE}] === 4) {
    try {
      groupRun(c, id + 1, kit);
    } catch (e) {
      kBlockFail(c); // the calling thread sees it once this worker has left the job
    }
  } else if (c[${MODE}] === 3) {
    try {
      kBlockStages(c, kit, 0);
    } catch (e) {
      kBlockFail(c); // the calling thread sees it once this worker has left the job
    }
  } else if (c[${MODE}] === 1) {
    try {
      batchItems();
    } catch (e) {
      Atomics.store(c, ${ERR}, 1); // the calling thread sees it once this worker has left the job
    }
  } else {
    try {
      const chunks = c[${PACKS} + 10] + c[${PACKS + PACK_SLOTS} + 10];
      for (let i = Atomics.add(c, ${PACK_NEXT}, 1); i < chunks; i = Atomics.add(c, ${PACK_NEXT}, 1)) {
        packChunk(i);
        Atomics.add(c, ${PACK_DONE}, 1);
        Atomics.notify(c, ${PACK_DONE});
      }
      for (let s = 0; s < ${SPIN} && Atomics.load(c, ${GATE}) === 0; s++);
      while (Atomics.load(c, ${GATE}) === 0) Atomics.wait(c, ${GATE}, 0);
      if (c[${MODE}] === 2) rowBlockLoop(c, 0, id + 1, kit);
      const tiles = c[${MODE}] === 2 ? 0 : c[${JOB} + 9], cols = c[${JOB} + 8];
      // CUR stays at or below any tile this worker may still compute: raised only past finished tiles.
      for (;;) {
        Atomics.store(c, ${CUR} + id, Atomics.load(c, ${TILE_NEXT}));
        const t = Atomics.add(c, ${TILE_NEXT}, 1);
        if (t >= tiles) break;
        Atomics.store(c, ${CUR} + id, t);
        const r = (t / cols) | 0;
        const i0 = r * c[${JOB} + 6], j0 = (t - r * cols) * c[${JOB} + 7];
        gemm(c[${JOB}], c[${JOB} + 1], c[${JOB} + 2], c[${JOB} + 3], c[${JOB} + 4], c[${JOB} + 5], i0, Math.min(c[${JOB} + 3], i0 + c[${JOB} + 6]), j0, Math.min(c[${JOB} + 4], j0 + c[${JOB} + 7]));
      }
    } catch (e) {
      Atomics.store(c, ${ERR}, 1); // reported by the calling thread; never leave it waiting
      // (PACK_DONE moves past the chunk count first: a calling thread that read ERR as 0 just
      // before and is about to sleep on PACK_DONE's old value returns at once.)
      Atomics.add(c, ${PACK_DONE}, ${K_FAILED});
      Atomics.notify(c, ${PACK_DONE});
    }
  }
  Atomics.store(c, ${CUR} + id, ${NONE});
`;

/**
 * The GEMM pools' job kind (core's worker crew, workerPool.ts): per engine's pool in each worker,
 * an instance of the engine's GEMM module over its memory (`data`), and the job function.
 */
const GEMM_KIND = workerKind('gemm', `
const { module, memory, packNames } = data;
const inst = new WebAssembly.Instance(module, { env: { mem: memory } });
const gemm = inst.exports.gemm;
const micro = inst.exports.micro;
const packs = packNames.map((n) => inst.exports[n]);
const touch = inst.exports.touch_rows;
// (a view of the memory for zeroPanelRows, taken again once the memory has grown)
let u32 = new Uint32Array(memory.buffer);
const kit = { micro, edge: inst.exports.micro_edge, packs, touch, gemm, zero(dst, R, rows, k) {
  if (u32.byteLength < memory.buffer.byteLength) u32 = new Uint32Array(memory.buffer);
  zeroPanelRows(u32, dst, R, rows, k);
} };
// Chunk i of the packing kernels (packPlan.ts chunkCall): waits until the calling thread has
// staged its source, then packs it. Skipped once the job has failed.
function staged(need) {
  let v = Atomics.load(c, ${STAGED});
  for (let s = 0; s < ${SPIN} && v < need; s++) v = Atomics.load(c, ${STAGED});
  while (v < need && Atomics.load(c, ${ERR}) === 0) { Atomics.wait(c, ${STAGED}, v); v = Atomics.load(c, ${STAGED}); }
  return Atomics.load(c, ${ERR}) === 0;
}
function packChunk(i) {
  let o = ${PACKS};
  if (i >= c[o + 10]) { i -= c[o + 10]; o += ${PACK_SLOTS}; }
  chunkPack(c, o, i, packs, touch, staged);
}
// A batch job (batched.ts): items [0, items) taken from TILE_NEXT, each packed into this
// worker's own pack area and multiplied into the item's accumulator, then flagged done.
// Item i may start once the calling thread has staged both its sources: STAGED is bumped (and
// notified) whenever the staged addresses of the two operands (JOB+13, JOB+14) grow.
function batchItems() {
  const items = c[${JOB} + 8], mp = c[${JOB} + 5], np = c[${JOB} + 6], kp = c[${JOB} + 7];
  const t = new Int32Array(memory.buffer, c[${JOB} + 9], 3 * items);
  const a = ${PACKS}, b = ${PACKS + PACK_SLOTS};
  const fa = packs[c[a]], fb = packs[c[b]];
  const ap = c[${JOB}] + (id + 1) * c[${JOB} + 1], bp = ap + c[${JOB} + 2];
  for (let i = Atomics.add(c, ${TILE_NEXT}, 1); i < items; i = Atomics.add(c, ${TILE_NEXT}, 1)) {
    const na = t[2 * i] + c[a + 5], nb = t[2 * i + 1] + c[b + 5];
    for (let s = 0; ; s++) {
      const seq = Atomics.load(c, ${STAGED});
      if (Atomics.load(c, ${JOB} + 13) >= na && Atomics.load(c, ${JOB} + 14) >= nb) break;
      if (Atomics.load(c, ${ERR}) !== 0) return;
      if (s >= ${SPIN}) Atomics.wait(c, ${STAGED}, seq);
    }
    fa(t[2 * i], c[a + 1], c[a + 2], c[a + 3], c[a + 4], kp, ap);
    fb(t[2 * i + 1], c[b + 1], c[b + 2], c[b + 3], c[b + 4], kp, bp);
    gemm(ap, bp, c[${JOB} + 3] + i * c[${JOB} + 4], mp, np, kp, 0, mp, 0, np);
    Atomics.store(t, 2 * items + i, 1);
  }
}
${K_BLOCK_SOURCE}
${GROUP_SOURCE}
return function job(seen) {
  ${joinSource(OPEN, INSIDE, `id < c[${JOB} + 10]`, JOB_SOURCE)}
};
`);

/**
 * Threads of a group job claim whole products, largest first, before they share one (`groupRun`):
 * the GPT's weight-gradient group (dW qkv x2, dW up, dW down: 1 : 1 : 4 : 4 in work) then runs
 * dW up on one thread and dW down on the other, then a dW qkv each, and only the last product's
 * end is shared; before, thread t started on product t and every thread then walked the products
 * in order, so both threads shared each K-blocked product after the first (its tiles wait for the
 * same tile of the K block before: the threads waited on each other). `TPUKIT_GROUP_CLAIM=0`
 * restores that (A/B runs; `claim` may be changed at run time, between group jobs).
 */
export const groupJobSettings = { claim: envSwitch('TPUKIT_GROUP_CLAIM', true) };

/**
 * Whether group product `x` goes before `y` when threads claim products: more multiply-adds
 * first; at equal work a K-blocked product before a row-block one, so that the product two
 * threads share at the end is one whose units wait for nothing but B's packing.
 */
export function groupsBefore(x: ParallelJob, y: ParallelJob): boolean {
  const wx = x.args.mp * x.args.np * x.args.kp;
  const wy = y.args.mp * y.args.np * y.args.kp;
  return wx > wy || (wx === wy && x.kBlocks !== undefined && y.kBlocks === undefined);
}

/** Whether worker threads can run here (Node worker_threads and a shared memory). */
export function threadsAvailable(engine: GemmEngine): boolean {
  return engine.shared && nodeModule('node:worker_threads') !== null;
}

const WORKER_FAILED = 'dot_general: a systolic worker thread failed while computing its part of the product (setNumThreads(1) runs without workers)';

/** Source bytes of one packing chunk of a K-blocked job (k rows of all panels). */
const K_BLOCK_CHUNK_BYTES = 64 * 1024;

/** Width of a C tile in columns (with the MC rows of the GEMM's A block: 128 x 128 tiles). */
const TILE_COLS = 128;
/** Tiles per thread below which tiles are narrowed (so every thread has several to take). */
const MIN_TILES_PER_THREAD = 4;
/**
 * Multiply-adds of one tile at most (2^21: about 0.08 ms on one core): a long-K product's tiles
 * are cut smaller, so that the last tile, which one thread computes while the others may have
 * none left, is short. (The weight gradients of bench:gpt, [128,512] with K = 2048, made 8 tiles
 * of 0.7 ms each: a 5-3 split between two threads costs a whole tile.) At 2^22 with 8 tiles per
 * thread, the GPT's [2048,512] x [512,128] products and its K = 2048 weight gradients ran 8-16
 * tiles of 0.16-0.33 ms on two threads, and scaled worst of its plain products (1.54x, 1.61x);
 * the finer split cost no measurable CPU on one core (BENCHMARKS.md "par6"). Env
 * `TPUKIT_GEMM_FINE_TILES=0` restores 2^22 and 8 (A/B runs).
 */
const FINE_TILES = envSwitch('TPUKIT_GEMM_FINE_TILES', true);
const MAX_TILE_WORK = FINE_TILES ? 1 << 21 : 1 << 22;
/** Tiles per thread from which a tile's work no longer matters (a one-tile imbalance is small). */
const MANY_TILES_PER_THREAD = FINE_TILES ? 16 : 8;
/** The split's limits, for tests. */
export const TILE_SPLIT = { maxTileWork: MAX_TILE_WORK, manyTilesPerThread: MANY_TILES_PER_THREAD } as const;
/**
 * Rows of A a thread packs and multiplies as one unit of a row-block job (`ParallelJob.rowBlockA`):
 * MC, halved (to a multiple of MR) when such a block is more than MAX_TILE_WORK multiply-adds, so
 * that the block one thread computes last while the others may have none left is short (the GPT's
 * [2048,512] x [512,128] products: 32 blocks of 64 rows instead of 16 of 128, the same CPU,
 * BENCHMARKS.md, gemm7).
 */
export function poolRowBlockRows(shape: { mr: number; mc: number }, np: number, kp: number): number {
  const { mr, mc } = shape;
  return mc * np * kp > MAX_TILE_WORK && mc >= 4 * mr ? Math.ceil(mc / 2 / mr) * mr : mc;
}

/** The least tile height and width (in rows and columns) the narrowing goes down to. */
const MIN_TILE_SIDE = 16;

/**
 * The C tiles a product of padded size mp x np (kp deep) is split into for `threads` threads:
 * MC rows (the GEMM's A block) by 128 columns, then the longer side halved (in whole row or
 * column panels, down to MIN_TILE_SIDE) while there are fewer than MIN_TILES_PER_THREAD tiles
 * per thread, or fewer than MANY_TILES_PER_THREAD of more than MAX_TILE_WORK multiply-adds
 * each. Each tile re-reads its rows
 * of A and its columns of B from the caches, a few percent of the product at most; every
 * output element is still computed by one thread over the whole K in the same order.
 */
export function planTiles(mp: number, np: number, kp: number, mr: number, nr: number, mc: number, threads: number): { tileRows: number; tileCols: number; rowTiles: number; colTiles: number } {
  let rowPanels = Math.ceil(Math.min(mp, mc) / mr);
  let colPanels = Math.min(np, TILE_COLS) / nr;
  const minRowPanels = Math.max(1, Math.ceil(MIN_TILE_SIDE / mr));
  const minColPanels = Math.max(1, Math.ceil(MIN_TILE_SIDE / nr));
  const tiles = (): number => Math.ceil(mp / (rowPanels * mr)) * Math.ceil(np / (colPanels * nr));
  const tooBig = (): boolean => rowPanels * mr * colPanels * nr * kp > MAX_TILE_WORK && tiles() < MANY_TILES_PER_THREAD * threads;
  while (tiles() < MIN_TILES_PER_THREAD * threads || tooBig()) {
    const canRows = rowPanels > minRowPanels;
    const canCols = colPanels > minColPanels;
    if (canCols && (!canRows || colPanels * nr >= rowPanels * mr)) colPanels = Math.ceil(colPanels / 2);
    else if (canRows) rowPanels = Math.ceil(rowPanels / 2);
    else break;
  }
  const tileRows = rowPanels * mr;
  const tileCols = colPanels * nr;
  return { tileRows, tileCols, rowTiles: Math.ceil(mp / tileRows), colTiles: Math.ceil(np / tileCols) };
}

/**
 * Tests only: with `callerComputes` false, the calling thread of a product job (tiles, row blocks,
 * K blocks) computes none of its units and waits until the workers have taken them all, so that a
 * test checks the workers' code path (a product the calling thread could finish alone otherwise
 * rarely reaches a worker). Needs workers that run: it waits for them. With `breakWorkers`, the
 * workers of a K-blocked job find a packing kernel that does not exist (they throw: the job's
 * failure path). `groupEnd`, when set, is called at the end of every group job (`runGroup`,
 * every thread out of it) with what its control block says about the claims (`GroupClaims`).
 */
export const poolTestHooks: { callerComputes: boolean; breakWorkers: boolean; groupEnd: ((claims: GroupClaims) => void) | null } = { callerComputes: true, breakWorkers: false, groupEnd: null };

/** A group job's claims as its control block holds them after the job (`poolTestHooks.groupEnd`). */
export interface GroupClaims {
  /** Products in the job. */
  products: number;
  /** The claim switch the threads read (`groupJobSettings.claim` when the job started). */
  claim: boolean;
  /** The claim counter: every thread in the job adds 1 per product it claimed and 1 that found none left (0 with the claims off). */
  claimed: number;
  /** mp * np * kp of the product in each region, in the order threads claim them. */
  work: number[];
}

/**
 * `poolTestHooks.callerComputes` false: waits until counter slot `next` has handed out `units`
 * (1 ms sleeps); after 20 s it fails the job and throws (a test of a broken worker then fails
 * rather than hangs).
 */
function leaveUnitsToWorkers(c: Int32Array, next: number, units: number): void {
  const until = performance.now() + 20000;
  for (let v = Atomics.load(c, next); v < units && Atomics.load(c, ERR) === 0; v = Atomics.load(c, next)) {
    if (performance.now() > until) {
      kBlockFns.fail(c); // (the workers leave the job)
      throw new Error('systolic threads (poolTestHooks): the workers left units of the job untaken for 20 s');
    }
    Atomics.wait(c, next, v, 1);
  }
}

/**
 * Before a K-blocked or group job: no thread asleep in `kBlockWait`, its phase counters zeroed,
 * and TIMED set from `gemmPhases.enabled` (with it off, `kBlockWait` counts nothing and reads
 * no clock).
 */
function resetUnitCounters(c: Int32Array): void {
  c[KWAIT] = 0;
  c[TIMED] = gemmPhases.enabled ? 1 : 0;
  c[KWAITED] = 0;
  c[KSLEPT] = 0;
  c[KSLEPT_US] = 0;
}

/**
 * After a K-blocked or group job of `products` products and `units` units (`mine` of them, or
 * -1, computed by the calling thread), woken at `t0`, the calling thread out of units at
 * `tMine`: adds it to `gemmPhases.pool` (timer on only).
 */
function addUnitJobPhases(c: Int32Array, products: number, units: number, mine: number, t0: number, tMine: number): void {
  const p = gemmPhases.pool;
  p.products += products;
  p.tiles += units;
  p.callerTiles += Math.max(0, mine);
  p.unitJobs++;
  p.callerUnitsDone += tMine - t0;
  p.unitJobMs += phaseClock() - t0;
  p.waited += Atomics.load(c, KWAITED);
  p.slept += Atomics.load(c, KSLEPT);
  p.sleptMs += Atomics.load(c, KSLEPT_US) / 1000;
}

/** Writes a product job's arguments and tile split into the control block (JOB .. JOB + 10). */
function describeTiles(c: Int32Array, args: ParallelJob['args'], tileRows: number, tileCols: number, tiles: number, colTiles: number, threads: number, base = 0): void {
  const j = base + JOB;
  c[j] = args.ap; c[j + 1] = args.bp; c[j + 2] = args.cp; c[j + 3] = args.mp; c[j + 4] = args.np; c[j + 5] = args.kp;
  c[j + 6] = tileRows; c[j + 7] = tileCols; c[j + 8] = colTiles; c[j + 9] = tiles;
  c[j + 10] = threads - 1;
}

/**
 * Checks that A's packing call `p` of a job that packs A itself (by K blocks or row blocks) covers
 * all `rows` rows of C: a partial last panel must be among its panels (packed whole by the SIMD
 * kernel, its missing rows zeroed by the job); the engine makes no such job otherwise.
 */
function coversRows(p: PackJob, rows: number, kind: string): void {
  if (p.args[3] * p.R < rows) throw new Error(`systolic threads: a ${kind} job's A packing covers ${p.args[3]} panels of ${p.R} rows, fewer than its ${rows} rows`);
}

/** The workers' index of packing kernel `fn` (`PACK_NAMES`). */
function packIndex(fn: string): number {
  const index = PACK_NAMES.indexOf(fn);
  if (index < 0) throw new Error(`systolic threads: unknown packing kernel ${fn}`);
  return index;
}

/** Writes packing job `p` into the descriptor at slot `d` (PACKS layout) with `chunks` chunks of `per` units along `axis`. */
function describePack(c: Int32Array, d: number, p: PackJob, chunks: number, per: number, axis: number): void {
  c[d] = packIndex(p.fn);
  for (let i = 0; i < 7; i++) c[d + 1 + i] = p.args[i];
  c[d + 8] = p.R; c[d + 9] = p.esz; c[d + 10] = chunks; c[d + 11] = per; c[d + 12] = axis; c[d + 13] = p.touch ? 1 : 0;
}

class Pool {
  readonly control = new Int32Array(new SharedArrayBuffer(4 * CONTROL_SLOTS));
  /** The workers (core's shared worker-thread machinery). */
  readonly pool: WorkerPool;
  private module: WasmModule;
  /** Kernel arguments of one packing chunk (reused). */
  private readonly call: number[] = [0, 0, 0, 0, 0, 0, 0];
  /** The packing kernels of the calling thread's instance, in PACK_NAMES order. */
  private readonly packs: PackFn[];
  /** The calling thread's kit for the K-blocked, row-block and group jobs (`PoolKit`). */
  private readonly kit: PoolKit;
  /** A group job's products in the order its regions describe them (`runGroup`). */
  private readonly groupOrder = new Int32Array(MAX_GROUP);

  constructor(private readonly engine: GemmEngine) {
    this.module = new WA.Module(engine.bytes);
    const ex = engine.exports as unknown as Record<string, PackFn>;
    this.packs = PACK_NAMES.map((n) => ex[n]);
    const x = engine.exports;
    this.kit = { micro: x.micro, edge: x.micro_edge, packs: this.packs, touch: x.touch_rows, gemm: x.gemm, zero: (dst, R, rows, k) => kBlockFns.zeroRows(engine.u32, dst, R, rows, k) };
    this.pool = new WorkerPool(GEMM_KIND, this.control, GEN, SPIN, () => ({ module: this.module, memory: this.engine.memory, packNames: PACK_NAMES }), 'gemm');
  }

  /** Starts workers until there are `n`; throws when they cannot start. */
  resize(n: number): void {
    if (!this.pool.ensure(n)) throw new Error('systolic threads: worker threads cannot start here');
  }

  /**
   * Runs `job` on this thread and `threads - 1` workers. With `job.rows`, this thread hands over
   * each band of output rows as soon as all its tiles are computed (between its own tiles and
   * while it waits for the workers' last ones), so copying the output overlaps the product.
   */
  run(job: ParallelJob, threads: number): void {
    if (this.startedN !== 0) throw new Error('dot_general: a product job asked for while a started group of products runs on this pool (joinGroup first)');
    if (job.kBlocks && this.kBlocksFit(job, job.kBlocks)) {
      this.runKBlocks(job, job.kBlocks, threads);
      return;
    }
    const { mr, mc } = this.engine.shape;
    const nr = this.engine.nr;
    const { ap, bp, cp, mp, np, kp } = job.args;
    const c = this.control;
    // Small tiles keep both threads busy to the end (see planTiles); with A packed by row
    // blocks (job.rowBlockA), a tile is a row block (poolRowBlockRows) over all columns.
    const blockA = job.rowBlockA ?? null;
    const rb = blockA ? poolRowBlockRows(this.engine.shape, np, kp) : mc;
    const { tileRows, tileCols, rowTiles, colTiles } = blockA ? { tileRows: rb, tileCols: np, rowTiles: Math.ceil(mp / rb), colTiles: 1 } : planTiles(mp, np, kp, mr, nr, mc, threads);
    describeTiles(c, job.args, tileRows, tileCols, rowTiles * colTiles, colTiles, threads);
    c[MODE] = blockA ? 2 : 0;
    let chunks = 0;
    const jobs: Array<PackJob | null> = [null, null];
    for (let o = 0; o < 2; o++) {
      const d = PACKS + o * PACK_SLOTS;
      const p = (job.packs[o] as PackJob | undefined) ?? null;
      if (!p || p.chunks === 0) {
        c[d + 10] = 0;
        continue;
      }
      jobs[o] = p;
      describePack(c, d, p, p.chunks, p.per, p.axis);
      chunks += p.chunks;
    }
    if (blockA) {
      coversRows(blockA, mp, 'row-block');
      // A's descriptor in the second packing slots, with no chunks (its blocks come with the tiles).
      const d = PACKS + PACK_SLOTS;
      if (c[d + 10] !== 0) throw new Error('systolic threads: a row-block job packs only B in chunks');
      describePack(c, d, blockA, 0, blockA.per, blockA.axis);
    }
    const stager = job.stager;
    Atomics.store(c, ERR, 0);
    Atomics.store(c, PACK_NEXT, 0);
    Atomics.store(c, PACK_DONE, 0);
    Atomics.store(c, TILE_NEXT, 0);
    Atomics.store(c, GATE, 0);
    Atomics.store(c, STAGED, stager.staged);
    Atomics.store(c, SWEPT, 0);
    // A worker that has not reached the tiles yet bounds nothing: every tile it will take is at
    // or past TILE_NEXT as read after its CUR (it stores CUR before it takes a tile), so bands
    // of the tiles this thread finished meanwhile are handed over without waiting for it.
    for (let w = 0; w < this.pool.size; w++) Atomics.store(c, CUR + w, NONE);
    const t0 = phaseClock();
    this.pool.openJob(OPEN);
    this.pool.wake();

    const e = this.engine;
    const call = this.call;
    let failed: unknown = null;
    let tStaged = t0;
    let tGate = t0;
    let tMine = t0;
    let mine = 0;
    try {
      // Stage first (only this thread can read the host arrays): the workers pack each chunk
      // as soon as its source is in place.
      while (stager.staged < stager.end) {
        Atomics.store(c, STAGED, stager.next());
        Atomics.notify(c, STAGED);
      }
      tStaged = phaseClock();
      job.hostPack();
      const first = c[PACKS + 10];
      for (let i = Atomics.add(c, PACK_NEXT, 1); i < chunks; i = Atomics.add(c, PACK_NEXT, 1)) {
        const p = i < first ? jobs[0]! : jobs[1]!;
        chunkCall(p, i < first ? i : i - first, call);
        if (p.touch) e.touchChunk(call, p.R, p.esz);
        e.runPackKernel(p.fn, call[0], call[1], call[2], call[3], call[4], call[5], call[6]);
        Atomics.add(c, PACK_DONE, 1);
      }
      for (;;) {
        const done = this.pool.poll(PACK_DONE, chunks);
        if (done >= chunks || Atomics.load(c, ERR) !== 0) break;
        Atomics.wait(c, PACK_DONE, done);
      }
      if (Atomics.load(c, ERR) === 0) job.edges();
    } catch (err) {
      failed = err;
      // Release workers waiting for staging; they skip the rest of the job. (STAGED moves past
      // every address first: a worker that read ERR as 0 just before and is about to sleep on
      // STAGED's old value returns at once.)
      Atomics.store(c, ERR, 1);
      Atomics.store(c, STAGED, NONE);
      Atomics.notify(c, STAGED);
    }
    tGate = phaseClock();
    // Open the gate whatever happened, so that no worker is left waiting.
    Atomics.store(c, GATE, 1);
    Atomics.notify(c, GATE);
    const all = this.pool.size;
    const tiles = c[JOB + 9];
    // Output rows handed to job.rows so far (in whole tile rows).
    let bands = 0;
    const bandsDone = (): number => {
      // (TILE_NEXT read before the workers' CUR: see where CUR is reset above)
      let below = Atomics.load(c, TILE_NEXT);
      for (let w = 0; w < all; w++) below = Math.min(below, Atomics.load(c, CUR + w));
      return Math.floor(Math.min(below, tiles) / colTiles);
    };
    if (!failed && Atomics.load(c, ERR) === 0) {
      try {
        job.overlap?.();
        if (poolTestHooks.callerComputes === false) leaveUnitsToWorkers(c, TILE_NEXT, tiles);
        if (blockA) {
          for (let t = Atomics.add(c, TILE_NEXT, 1); t < tiles; t = Atomics.add(c, TILE_NEXT, 1)) {
            e.rowBlock(blockA, ap, bp, cp, mp, np, kp, t * rb, Math.min(mp, (t + 1) * rb));
            mine++;
          }
        }
        for (let t = blockA ? tiles : Atomics.add(c, TILE_NEXT, 1); t < tiles; t = Atomics.add(c, TILE_NEXT, 1)) {
          const r = Math.floor(t / colTiles);
          const i0 = r * tileRows;
          const j0 = (t - r * colTiles) * tileCols;
          e.exports.gemm(ap, bp, cp, mp, np, kp, i0, Math.min(mp, i0 + tileRows), j0, Math.min(np, j0 + tileCols));
          mine++;
          if (job.rows) {
            const done = bandsDone();
            if (done > bands) job.rows(bands * tileRows, (bands = done) * tileRows);
          }
        }
        // Every tile is taken: close the job, so that a worker that has not joined it yet (no
        // core when it was woken) leaves it alone instead of being waited for.
        Atomics.store(c, OPEN, 0);
        // Hand out the rows the workers inside finish while this thread waits for them (polling;
        // after the pool's spin (`TPUKIT_POOL_SPIN`) polls without progress it sleeps until they have all left).
        if (job.rows) {
          for (let idle = 0, spin = this.pool.spin; bands < rowTiles && idle < spin && Atomics.load(c, INSIDE) > 0 && Atomics.load(c, ERR) === 0; idle++) {
            const done = bandsDone();
            if (done > bands) {
              job.rows(bands * tileRows, (bands = done) * tileRows);
              idle = 0;
            }
          }
        }
      } catch (err) {
        failed = err;
      }
    }
    tMine = phaseClock();
    this.pool.closeJob(OPEN, INSIDE);
    this.pool.finished();
    e.traffic.sweptChunks += Atomics.load(c, SWEPT);
    if (blockA) e.traffic.poolRowBlockJobs++;
    if (gemmPhases.enabled) {
      const p = gemmPhases.pool;
      p.products++;
      p.staged += tStaged - t0;
      p.gate += tGate - t0;
      p.callerTilesDone += tMine - t0;
      p.tiles += tiles;
      p.callerTiles += mine;
    }
    if (job.rows && !failed && Atomics.load(c, ERR) === 0 && bands < rowTiles) {
      try {
        job.rows(bands * tileRows, rowTiles * tileRows);
      } catch (err) {
        failed = err;
      }
    }
    if (failed) throw failed;
    if (Atomics.load(c, ERR) !== 0) throw new Error(WORKER_FAILED);
  }
  /**
   * Runs a K-blocked job (K_BLOCK_SOURCE) on this thread and `threads - 1` workers: one wake-up,
   * then every thread walks the K blocks' packing and tile stages; this thread closes the job once
   * the last block's tiles are all taken. Output rows are handed to `job.rows` at the end (every
   * row is final only after the last K block).
   */
  /**
   * Describes K-blocked product `job` in the control slots from `base` (0, or a group product's
   * region) and resets its counters; returns its K blocks and tiles per block.
   */
  private describeKBlocks(job: ParallelJob, kb: KBlockJob, threads: number, base: number): { nb: number; tiles: number } {
    const e = this.engine;
    const { mc } = e.shape;
    const nr = e.nr;
    const { mp, np, kp } = job.args;
    const c = this.control;
    const nb = Math.ceil(kp / kb.kc);
    coversRows(kb.a, mp, 'K-blocked');
    // Tiles of a K block: MC rows (or all of them) by whole column panels, at least 4 per thread.
    const tileRows = Math.min(mc, mp);
    const rowTiles = Math.ceil(mp / tileRows);
    const colPanels = np / nr;
    const tileCols = nr * Math.ceil(colPanels / Math.min(colPanels, Math.max(1, Math.floor(MAX_K_BLOCK_TILES / rowTiles)), Math.ceil((MIN_TILES_PER_THREAD * threads) / rowTiles)));
    const colTiles = Math.ceil(np / tileCols);
    describeTiles(c, job.args, tileRows, tileCols, rowTiles * colTiles, colTiles, threads, base);
    c[base + MODE] = 3;
    c[base + JOB + 13] = kb.kc;
    c[base + JOB + 14] = nb;
    for (const [o, p] of [[PACKS, kb.a], [PACKS + PACK_SLOTS, kb.b]] as const) {
      // k rows per packing chunk: about K_BLOCK_CHUNK_BYTES of source
      const rowBytes = p.args[3] * p.R * p.esz;
      describePack(c, base + o, p, 0, Math.max(1, Math.min(kb.kc, Math.floor(K_BLOCK_CHUNK_BYTES / rowBytes))), 1);
    }
    if (poolTestHooks.breakWorkers) c[base + PACKS] = -1;
    for (let i = base + KB; i < base + KB + 4 * nb; i++) Atomics.store(c, i, 0);
    for (let i = base + KTILE; i < base + KTILE + rowTiles * colTiles; i++) Atomics.store(c, i, 0);
    return { nb, tiles: rowTiles * colTiles };
  }

  /** Whether a K-blocked job's blocks and tiles fit the control block's slots. */
  private kBlocksFit(job: ParallelJob, kb: NonNullable<ParallelJob['kBlocks']>): boolean {
    return Math.ceil(job.args.kp / kb.kc) <= MAX_K_BLOCKS && Math.ceil(job.args.mp / this.engine.shape.mc) <= MAX_K_BLOCK_TILES;
  }

  /** Whether a group job (`runGroup`) can run `job`: a K-blocked product within the slots' limits, or a row-block product laid out for `threads`. */
  groupable(job: ParallelJob, threads: number): boolean {
    const { mc } = this.engine.shape;
    if (job.kBlocks) return this.kBlocksFit(job, job.kBlocks);
    return job.rowBlockA !== undefined && threads * mc <= (job.aRows ?? 0) && job.packs.length === 1;
  }

  /**
   * Runs independent products as one job (GROUP_SOURCE) on this thread and `threads - 1`
   * workers: one wake-up; each thread claims whole products, largest first (`groupsBefore`:
   * region 1 holds the largest), then shares what is left of the others (`groupRun`; with
   * `groupJobSettings.claim` off, thread t starts on product t mod n and walks the others in
   * order). Each product is described in its own region, as a K-blocked job or a row-block job
   * (`groupable`); none stages, packs in TypeScript or has edges (the engine defers only such
   * products, see `GemmEngine.beginGroup`). Same bits as the products one by one.
   */
  runGroup(jobs: readonly ParallelJob[], threads: number, alone: boolean): void {
    this.startGroup(jobs, threads, alone);
    this.joinGroup();
  }

  // The group job `startGroup` announced and `joinGroup` has not finished (`startedN` 0: none):
  // its products, units, per product the counter slot of its last units and their count, whether
  // the calling thread runs it alone, and when it started (fields, not an object per group).
  private startedN = 0;
  private startedUnits = 0;
  private startedLast: Array<[number, number]> = [];
  private startedAlone = false;
  private startedT0 = 0;

  /** Whether a group job was started (`startGroup`) and not yet joined. */
  get groupStarted(): boolean {
    return this.startedN !== 0;
  }

  /**
   * The first half of `runGroup`: describes the products and wakes the workers, who start
   * claiming them at once; returns without computing any. The calling thread may then do work of
   * its own that uses no pool and no GEMM scratch, and must call `joinGroup` (it computes what
   * the workers have not taken, then waits for them). With `alone`, nothing starts: `joinGroup`
   * computes every product.
   */
  startGroup(jobs: readonly ParallelJob[], threads: number, alone: boolean): void {
    if (this.startedN !== 0) throw new Error('dot_general group: a group job is already started on this pool (joinGroup first)');
    const e = this.engine;
    const c = this.control;
    const n = jobs.length;
    if (n < 1 || n > MAX_GROUP) throw new RangeError(`dot_general group: a group job runs 1 to ${MAX_GROUP} products; got ${n}`);
    const last: Array<[number, number]> = []; // per product: the counter slot of its last units, and their count
    let units = 0; // row blocks and K-block tiles of all the products
    // Region i + 1 describes product order[i]: largest first when threads claim whole products.
    const order = this.groupOrder;
    const claim = groupJobSettings.claim;
    for (let p = 0; p < n; p++) {
      let i = p;
      if (claim) for (; i > 0 && groupsBefore(jobs[p], jobs[order[i - 1]]); i--) order[i] = order[i - 1];
      order[i] = p;
    }
    for (let r = 0; r < n; r++) {
      const p = order[r];
      const job = jobs[p];
      const base = (r + 1) * KSLOTS;
      if (!this.groupable(job, threads)) throw new Error(`dot_general group: product ${p} (${job.args.mp}x${job.args.kp}x${job.args.np}) is neither K-blocked nor a row-block product for ${threads} threads`);
      if (job.kBlocks) {
        const { nb, tiles } = this.describeKBlocks(job, job.kBlocks, threads, base);
        last.push([base + KB + 4 * (nb - 1) + 2, tiles]);
        units += nb * tiles;
        continue;
      }
      const { np, kp, mp } = job.args;
      const rb = poolRowBlockRows(e.shape, np, kp);
      const blocks = Math.ceil(mp / rb);
      describeTiles(c, job.args, rb, np, blocks, 1, threads, base);
      c[base + MODE] = 2;
      const b = job.packs[0];
      describePack(c, base + PACKS, b, b.chunks, b.per, b.axis);
      coversRows(job.rowBlockA!, mp, 'row-block');
      describePack(c, base + PACKS + PACK_SLOTS, job.rowBlockA!, 0, job.rowBlockA!.per, job.rowBlockA!.axis);
      if (poolTestHooks.breakWorkers) c[base + PACKS] = -1;
      for (const slot of [PACK_NEXT, PACK_DONE, TILE_NEXT]) Atomics.store(c, base + slot, 0);
      last.push([base + TILE_NEXT, blocks]);
      units += blocks;
    }
    c[MODE] = 4;
    c[JOB] = n;
    c[JOB + 1] = claim ? 1 : 0;
    c[JOB + 10] = alone ? 0 : threads - 1;
    Atomics.store(c, GROUP_NEXT, 0);
    resetUnitCounters(c);
    Atomics.store(c, ERR, 0);
    Atomics.store(c, SWEPT, 0);
    this.startedN = n;
    this.startedUnits = units;
    this.startedLast = last;
    this.startedAlone = alone;
    this.startedT0 = phaseClock();
    if (!alone) {
      // (a failed announcement leaves no started group behind: the pool takes later groups)
      let opened = false;
      try {
        this.pool.openJob(OPEN);
        opened = true;
        this.pool.wake();
      } catch (err) {
        if (opened) this.pool.closeJob(OPEN, INSIDE);
        this.startedN = 0;
        this.startedLast = [];
        throw err;
      }
    }
  }

  /** The second half of `runGroup` (see `startGroup`): computes the units left, waits for the workers inside the job, then reports a failure. */
  joinGroup(): void {
    const n = this.startedN;
    if (n === 0) throw new Error('dot_general group: joinGroup without a started group job (startGroup first)');
    this.startedN = 0;
    const e = this.engine;
    const c = this.control;
    const units = this.startedUnits;
    const last = this.startedLast;
    const alone = this.startedAlone;
    const t0 = this.startedT0;
    let failed: unknown = null;
    let mine = 0;
    try {
      if (!alone && poolTestHooks.callerComputes === false) for (const [slot, count] of last) leaveUnitsToWorkers(c, slot, count);
      else mine = kBlockFns.group(c, 0, this.kit);
    } catch (err) {
      failed = err;
      kBlockFns.fail(c);
    }
    const tMine = phaseClock();
    if (!alone) {
      this.pool.closeJob(OPEN, INSIDE);
      this.pool.finished();
    }
    e.traffic.sweptChunks += Atomics.load(c, SWEPT);
    e.traffic.groupJobs++;
    e.traffic.groupProducts += n;
    if (gemmPhases.enabled) addUnitJobPhases(c, n, units, mine, t0, tMine);
    if (poolTestHooks.groupEnd) {
      const work: number[] = [];
      for (let r = 0; r < n; r++) work.push(c[(r + 1) * KSLOTS + JOB + 3] * c[(r + 1) * KSLOTS + JOB + 4] * c[(r + 1) * KSLOTS + JOB + 5]);
      poolTestHooks.groupEnd({ products: c[JOB], claim: c[JOB + 1] !== 0, claimed: Atomics.load(c, GROUP_NEXT), work });
    }
    if (failed) throw failed;
    if (Atomics.load(c, ERR) !== 0) throw new Error(WORKER_FAILED);
  }

  private runKBlocks(job: ParallelJob, kb: KBlockJob, threads: number): void {
    const e = this.engine;
    const { mp } = job.args;
    const c = this.control;
    const { nb, tiles } = this.describeKBlocks(job, kb, threads, 0);
    resetUnitCounters(c);
    Atomics.store(c, ERR, 0);
    Atomics.store(c, SWEPT, 0);
    const t0 = phaseClock();
    this.pool.openJob(OPEN);
    this.pool.wake();
    let failed: unknown = null;
    let mine = 0;
    try {
      job.overlap?.();
      if (poolTestHooks.callerComputes === false) leaveUnitsToWorkers(c, KB + 4 * (nb - 1) + 2, tiles);
      else mine = kBlockFns.stages(c, this.kit, 0);
    } catch (err) {
      failed = err;
      kBlockFns.fail(c);
    }
    const tMine = phaseClock();
    this.pool.closeJob(OPEN, INSIDE);
    this.pool.finished();
    e.traffic.sweptChunks += Atomics.load(c, SWEPT);
    e.traffic.kBlockedPoolJobs++;
    if (gemmPhases.enabled) addUnitJobPhases(c, 1, nb * tiles, mine, t0, tMine);
    if (failed) throw failed;
    if (Atomics.load(c, ERR) !== 0) throw new Error(WORKER_FAILED);
    job.rows?.(0, mp);
  }

  /**
   * Runs a batch job (batched.ts) on this thread and `threads - 1` workers: one wake-up, then
   * every thread takes items from one counter; this thread stages the operands first (only it
   * can read the host arrays), and hands each finished item to the sink in item order, between
   * its own items and while it waits for the workers' last ones.
   */
  runBatch(job: BatchJob, threads: number): void {
    if (this.startedN !== 0) throw new Error('dot_general: a batch job asked for while a started group of products runs on this pool (joinGroup first)');
    const c = this.control;
    const e = this.engine;
    const { stagers, items } = job;
    const [pa, pb] = job.packs;
    c[JOB] = job.pk; c[JOB + 1] = job.pkStride; c[JOB + 2] = job.bOff; c[JOB + 3] = job.cp; c[JOB + 4] = job.cStride;
    c[JOB + 5] = job.mp; c[JOB + 6] = job.np; c[JOB + 7] = job.kp; c[JOB + 8] = items; c[JOB + 9] = job.table;
    c[JOB + 10] = threads - 1;
    c[MODE] = 1;
    for (const [o, p] of [[PACKS, pa], [PACKS + PACK_SLOTS, pb]] as const) {
      c[o] = packIndex(p.fn); c[o + 1] = p.rs; c[o + 2] = p.ks; c[o + 3] = p.panels; c[o + 4] = p.k; c[o + 5] = sourceEnd(job, o === PACKS ? 0 : 1, 0);
    }
    const [sa, sb] = stagers;
    // Staging progress: the staged address of each operand, and a sequence bumped on each change.
    const publish = (): void => {
      Atomics.store(c, JOB + 13, sa.staged);
      Atomics.store(c, JOB + 14, sb.staged);
      Atomics.add(c, STAGED, 1);
      Atomics.notify(c, STAGED);
    };
    Atomics.store(c, ERR, 0);
    Atomics.store(c, TILE_NEXT, 0);
    Atomics.store(c, STAGED, 0);
    Atomics.store(c, JOB + 13, sa.staged);
    Atomics.store(c, JOB + 14, sb.staged);
    for (let w = 0; w < this.pool.size; w++) Atomics.store(c, CUR + w, NONE);
    const tab = new Int32Array(e.memory.buffer, job.table, 3 * items); // (before the job opens: nothing may throw between wake and the try)
    this.pool.openJob(OPEN);
    this.pool.wake();
    let failed: unknown = null;
    try {
      // Stage in item order, each operand as far as the next item reads: the workers start on
      // the first items while the later ones are still being copied.
      for (let i = 0; i < items; i++) {
        const ra = sa.staged;
        const rb = sb.staged;
        sa.to(tab[2 * i] + c[PACKS + 5]);
        sb.to(tab[2 * i + 1] + c[PACKS + PACK_SLOTS + 5]);
        if (sa.staged !== ra || sb.staged !== rb) publish();
      }
    } catch (err) {
      failed = err;
      Atomics.store(c, ERR, 1);
      publish();
    }
    const flags = 2 * items;
    let s = 0; // items handed to the sink
    let mine = 0; // items this thread computed
    if (!failed) {
      try {
        for (let i = Atomics.add(c, TILE_NEXT, 1); i < items; i = Atomics.add(c, TILE_NEXT, 1)) {
          mine++;
          runItem(e, job, i, 0, tab, job.cp + i * job.cStride);
          Atomics.store(tab, flags + i, 1);
          for (; s < items && Atomics.load(tab, flags + s) === 1; s++) job.sink(s, job.cp + s * job.cStride);
        }
        // Every item is taken: close the job (a worker that has not joined yet leaves it alone),
        // then hand out the items of the workers inside as they finish (polling; after the pool's spin polls
        // without progress, sleep until those workers have left).
        Atomics.store(c, OPEN, 0);
        for (let idle = 0; s < items && Atomics.load(c, ERR) === 0; ) {
          if (Atomics.load(tab, flags + s) === 1) {
            job.sink(s, job.cp + s * job.cStride);
            s++;
            idle = 0;
          } else if (++idle > this.pool.spin) {
            this.pool.waitForZero(INSIDE);
            if (Atomics.load(tab, flags + s) !== 1) break;
          }
        }
      } catch (err) {
        failed = err;
      }
    }
    this.pool.closeJob(OPEN, INSIDE);
    this.pool.finished();
    batchedStats.workerItems += items - mine;
    if (failed) throw failed;
    if (Atomics.load(c, ERR) !== 0 || s < items) throw new Error('dot_general: a systolic worker thread failed while computing its part of a batched product (setNumThreads(1) runs without workers)');
  }
}

const pools = new WeakMap<GemmEngine, Pool>();
/**
 * Makes the crew's workers drop the pool of an engine that was dropped (a backend made a new
 * engine, e.g. on a relaxed-SIMD switch): their instance of its module would otherwise keep its
 * memory alive. The held value is the pool's id alone, which must not reference the engine.
 */
const droppedEngines = new FinalizationRegistry<number>(endPool);
/** The thread count each engine's runners were last installed for (the backend asks on every product). */
const installed = new WeakMap<GemmEngine, number>();

/** Installs (or removes, for 1 thread) the parallel runner on an engine, per the thread setting. */
export function applyThreads(engine: GemmEngine): void {
  const n = getNumThreads();
  if (installed.get(engine) === n) return;
  installed.set(engine, n);
  if (n <= 1 || !threadsAvailable(engine)) {
    engine.parallel = null;
    engine.parallelBatch = null;
    engine.parallelGroup = null;
    return;
  }
  let pool = pools.get(engine);
  if (!pool) {
    pool = new Pool(engine);
    pools.set(engine, pool);
    droppedEngines.register(engine, pool.pool.id);
  }
  const p = pool;
  // Workers that cannot start here (sandbox, resource limits): run on the calling thread, and
  // install again at the next product (a limit may have passed by then).
  const started = (): boolean => {
    try {
      p.resize(Math.min(n, 256) - 1);
      return true;
    } catch {
      engine.parallel = null;
      engine.parallelBatch = null;
      engine.parallelGroup = null;
      installed.delete(engine);
      return false;
    }
  };
  engine.parallel = (job) => {
    // (a row-block job needs a packing area per thread: laid out for this many threads)
    if (job.rowBlockA && n * engine.shape.mc > (job.aRows ?? 0)) return false;
    if (!started()) return false;
    p.run(job, n);
    return true;
  };
  engine.parallelBatch = (job) => {
    if (!started()) return false;
    p.runBatch(job, n);
    return true;
  };
  engine.parallelGroup = {
    max: MAX_GROUP,
    accepts: (job) => p.groupable(job, n),
    // (workers that cannot start: the calling thread runs the group job alone)
    run: (jobs) => p.runGroup(jobs, n, !started()),
    start: (jobs) => p.startGroup(jobs, n, !started()),
    join: () => p.joinGroup(),
  };
}
