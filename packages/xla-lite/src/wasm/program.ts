/**
 * The WebAssembly program of one compiled executable: every fusion the wasm emitter covers
 * (`emitKernel.ts`) becomes a function `k<i>` of ONE module, instantiated over one
 * `WebAssembly.Memory` (shared when threads are available, so the pool's workers run the same
 * kernels on the same data; see `pool.ts`). The memory is the executable's arena:
 *
 *   [ temporaries (buffer assignment) | fixed regions: parameters, constants, staged
 *     tuple elements, float64 scratch of column reductions | padding ]
 *
 * Temporaries are laid out by buffer assignment (`passes/bufferAssignment.ts`) over the entry
 * computation, restricted to the values kept in the arena: outputs of wasm fusions, and outputs
 * of other instructions (core primitives, JS-kernel fusions) that a wasm fusion reads. A value
 * is live there from its definition to its last read by a wasm kernel (a result needed
 * elsewhere is copied out as soon as it is computed), so temporaries share memory, and a loop
 * fusion may write over an operand whose last wasm read it is. Values read by wasm fusions
 * that the plan does not produce in the arena (parameters, primitive
 * results, aliases of those) are copied in once per call, just before the first fusion that
 * reads them; non-scalar constants are copied in at compile time; scalar constants become
 * immediates in the code. A fusion result that anything else needs (a core primitive, a JS
 * kernel, the caller) is copied out into a fresh array, a buffer reused call after call (see
 * `poolResults`) or a donated argument's storage. A dot under a wasm epilogue (kOutput) writes
 * its float32 result straight into the epilogue's buffer (`view`; core's `evalPrimitiveInto`).
 * Arrays handed out never alias the arena, which the next call overwrites. Every buffer is
 * 16-byte aligned and padded to a whole
 * vector, and the arena ends with padding, so the kernels' partial-vector reads stay in memory.
 *
 * Zero-copy dots: when the current backend offers its kernels' memory as an arena host (core's
 * `arenaHost()`: the systolic backend's GEMM memory, shared) the arena is a region reserved in
 * THAT memory instead of a memory of its own, and every address is offset by the region's
 * base. A float32 fusion result that only dots, other fusions, the fused attention and
 * storage-sharing reshapes read (`view`) is then not copied out: it is handed on as a view of
 * the arena, which the GEMM packs in place (no copy out of the arena, no staging into the GEMM's
 * memory), and a dot writing into the arena writes into the same memory. Such a value stays
 * live in the arena until its last reader of any kind (buffer assignment counts those reads
 * too), and no view reaches anything that outlives its step (outputs, other primitives). The
 * fused attention's results that wasm kernels read are written by the backend into regions of
 * the arena of their own (`resultRegions`), so they are not copied in either. The region is
 * released when the program is garbage-collected. The memory is shared, so its growth never
 * moves or invalidates the region or views of it. `setZeroCopyDots(false)` (or the environment
 * variable `TPUKIT_ZERO_COPY=0`) keeps the arena in a memory of its own, with the copies.
 */
import { type Array, Array as ArrayClass, fromStorage, getBackend, lax, toStorage } from '@tpukit/core';
import { type ArenaHost, arenaHost, doubleCounters, envSwitch, frozenShape, wasm } from '@tpukit/core/internal';
import type { DonationPlan } from '../donation';
import { type HloComputation, type HloInstruction, bytesOf, isScalarConstant, numel } from '../hlo';
import { isOneHotPrimitive, oneHotInArenaEnabled } from '../js/oneHotKernels';
import { assignBuffers } from '../passes/bufferAssignment';
import { splitOutputFusion } from '../passes/outputFusion';
import { CHUNK, emitKernel, planEpilogueColumnSum, planFusion, planRowColumnSum, planRowFusion } from './emitKernel';
import { type FusionPlan, getParallelWork, type KernelAddresses, minPoolChunk, outputAddr, type ParamSource, poolChunk, type RowColumnSum, runsOnThreads } from './fusionPlan';
import { getKernelThreads, kernelThreadsAvailable, type PoolProgram, runParallel, trackProgram } from './pool';
import { residentViews } from './residentViews';

let enabled = true;

/** Turns WebAssembly kernels on (default) or off (every fusion then runs its JavaScript kernel); applies to executables built afterwards. */
export function setWasmKernels(on: boolean): void {
  enabled = on;
}

export function wasmKernelsEnabled(): boolean {
  return enabled && wasm.wasmFeatures().simd;
}

let zeroCopy = envSwitch('TPUKIT_ZERO_COPY', true);

/**
 * Turns zero-copy dots on (default; off when the environment variable `TPUKIT_ZERO_COPY` is
 * `0`) or off: executables built afterwards place their arena in the backend's kernel memory
 * when it offers one (see the file comment). Results are bit-identical either way.
 */
export function setZeroCopyDots(on: boolean): void {
  if (typeof on !== 'boolean') throw new TypeError(`setZeroCopyDots: on must be a boolean; got ${String(on)}`);
  zeroCopy = on;
}

export function zeroCopyDotsEnabled(): boolean {
  return zeroCopy;
}

let epilogueBands = envSwitch('TPUKIT_EPILOGUE_BANDS', false);

/**
 * Turns banded dot epilogues on or off (default off; on when the environment variable
 * `TPUKIT_EPILOGUE_BANDS` is `1`), for executables built afterwards: a dot that writes its
 * result straight into its wasm epilogue's arena buffer hands over each finished band of rows
 * (core's `evalPrimitiveInto` bands; the systolic GEMM on its thread pool), and the calling
 * thread runs the epilogue over it between its GEMM tiles, instead of as a second pass (a
 * second pool job) after the product. Off by default: its two-thread effect on the GPT step
 * could not be shown on the shared 2-vCPU machine (BENCHMARKS.md, epiband). Results are
 * bit-identical either way.
 */
export function setEpilogueBands(on: boolean): void {
  if (typeof on !== 'boolean') throw new TypeError(`setEpilogueBands: on must be a boolean; got ${String(on)}`);
  epilogueBands = on;
}

export function epilogueBandsEnabled(): boolean {
  return epilogueBands;
}

let epilogueSums = envSwitch('TPUKIT_EPILOGUE_COLSUM', true);

/**
 * Turns kernels with their column sum on (default; off when the environment variable
 * `TPUKIT_EPILOGUE_COLSUM` is `0`) or off, for executables built afterwards: a column
 * reduction (kInput) that sums a wasm dot epilogue's result over its leading axes, and nothing
 * else (bias gradients: the GPT's MLP up projection's over GELU'), or that sums elementwise
 * values of a row fusion's (kRow) full outputs and operands over its rows (those over a layer
 * norm's input gradient; the layer norms' gamma/beta gradients, `setRowOperandSums`), is computed by that
 * kernel as it writes the result (a second kernel of it, `planEpilogueColumnSum`,
 * `planRowColumnSum`) when it runs on one thread, instead of by a second pass over the result;
 * the reduction's step then only hands on its output. On threads the producer runs its own
 * kernel (split by rows) and the reduction its own, as without (but a row fusion whose sums are
 * a large part of its work runs its kernel with them on one thread, `setRowSumsOneThread`):
 * split by columns the fused epilogue measured slower than the two on two threads
 * (BENCHMARKS.md, "fuse13"). Results are bit-identical either way (the same float64 additions
 * in row order, one rounding).
 */
export function setEpilogueColumnSums(on: boolean): void {
  if (typeof on !== 'boolean') throw new TypeError(`setEpilogueColumnSums: on must be a boolean; got ${String(on)}`);
  epilogueSums = on;
}

export function epilogueColumnSumsEnabled(): boolean {
  return epilogueSums;
}

let operandSums = envSwitch('TPUKIT_ROW_OPERAND_SUMS', true);

/**
 * With kernels with their column sum on (`setEpilogueColumnSums`): lets a row fusion's kernel
 * also compute column sums of values of its operands, not only of its outputs (default; off when
 * the environment variable `TPUKIT_ROW_OPERAND_SUMS` is `0`), for executables built afterwards:
 * the GPT's layer-norm gamma/beta gradients, sum(dy * xc * inv) and sum(dy) over the rows, where
 * dy, xc and inv are operands of the layer-norm backward row fusion or its outputs. The same
 * bits either way (`planRowColumnSum`).
 */
export function setRowOperandSums(on: boolean): void {
  if (typeof on !== 'boolean') throw new TypeError(`setRowOperandSums: on must be a boolean; got ${String(on)}`);
  operandSums = on;
}

export function rowOperandSumsEnabled(): boolean {
  return operandSums;
}

let rowSumsOneThread = envSwitch('TPUKIT_ROW_SUMS_1T', true);
/**
 * The largest row kernel (its `plan.work`, in multiples of the parallel-work threshold) that
 * `setRowSumsOneThread` runs serial with its sums: a layer-norm backward (the test's) of the GPT's
 * size (2048 rows of 128) has 12 (one of 256 rows 1.5); at 32 (~2.7x the GPT's) and above, the threads' fixed
 * costs are small against the row kernel and it is expected to gain on threads more than the
 * fused sums save, so it runs on threads with its sums after it.
 */
export const ROW_SUMS_ONE_THREAD_MAX = 32;

/**
 * Runs a row fusion's kernel with its column sums on one thread at any kernel thread count
 * (default; off when the environment variable `TPUKIT_ROW_SUMS_1T` is `0`), for executables
 * built afterwards, when the sums are at least a quarter of the row kernel's work (`plan.work`)
 * and that work is below `ROW_SUMS_ONE_THREAD_MAX` times the parallel-work threshold: instead of
 * the row kernel on threads and then the sums' own kernels, serial (column sums are serial,
 * `setColumnParallelWork`). The case for it is arithmetic per call of the GPT's layer-norm
 * backward (BENCHMARKS.md, "rows14"): split, ~0.37 ms row kernel on two threads + ~0.26 ms
 * gamma/beta sums after it; fused on one thread, ~0.49 ms + ~0.08 ms for the sums. Those 2t
 * numbers were taken with about one core free; the integrator's quiet 2t A/B of the GPT step
 * (BENCHMARKS.md, "twelfth session") measured ~-1.5 ms per step with it on.
 * Their sums' work is 1/3 to 2/3 of theirs.
 */
export function setRowSumsOneThread(on: boolean): void {
  if (typeof on !== 'boolean') throw new TypeError(`setRowSumsOneThread: on must be a boolean; got ${String(on)}`);
  rowSumsOneThread = on;
}

export function rowSumsOneThreadEnabled(): boolean {
  return rowSumsOneThread;
}

/**
 * Whether `i` is a reshape that can share its operand's storage instead of copying it (core's
 * reshape copies, as an eager op must hand out a fresh array): arrays are immutable, and both
 * stay inside this call: the operand is an intermediate (not an argument, which donation may
 * overwrite, nor a constant), neither is an output (the caller may donate an output later), and
 * the operand has the default row-major layout.
 */
export function isStorageAlias(i: HloInstruction, outputs: readonly HloInstruction[]): boolean {
  if (i.prim?.name !== 'reshape' || i.isTuple || i.shape.weakType) return false;
  const x = i.operands[0];
  return x.opcode !== 'parameter' && x.opcode !== 'constant' && !x.isTuple && x.layout === null && !outputs.includes(x) && !outputs.includes(i) && x.shape.dtype === i.shape.dtype;
}

/**
 * Whether `i` (with `q`: `i` or element `q` of its tuple, read through get-tuple-element) is an
 * output of `c`. The caller keeps an output, so it gets fresh storage instead of a buffer
 * reused call after call (which would have to be copied again at the end of the call).
 */
export function isOutputValue(c: HloComputation, i: HloInstruction, q?: number): boolean {
  return c.outputs.some((o) => o === i || (q !== undefined && o.opcode === 'get-tuple-element' && o.operands[0] === i && (o.params as { index: number }).index === q));
}

/**
 * The fused attention's primitives: their kernels read their operands only while they run and
 * keep nothing of them after the call (core's systolic kernels read q, k, v, dO, ... in place
 * when they lie in the backend's memory, else copy them in), and write their float32 results
 * into caller storage (`Backend.executeIntoAll`). With
 * zero-copy dots they are handed views of the arena and write into regions of it.
 */
const FUSED_ATTENTION: ReadonlySet<string> = new Set(['dot_product_attention', 'dot_product_attention_fwd', 'dot_product_attention_bwd']);

// (doubles from the start: these pass 2^31 within a training run, see core's doubleCounters)
const traffic = doubleCounters({ copiedInBytes: 0, copiedOutBytes: 0, viewBytes: 0, outputCopiedBytes: 0, residentBytes: 0, evacuatedBytes: 0 });

/**
 * Bytes copied into arenas (arguments and results of core primitives that wasm kernels read),
 * bytes of wasm fusion results copied out of arenas (for readers outside wasm kernels, or into
 * donated storage), bytes handed on as views instead (zero-copy dots) and bytes of outputs
 * copied at the end of a call out of buffers an executable reuses call after call (an output
 * computed into such a buffer; outputs normally get fresh ones), summed over every executable
 * since the process started (benchmarks and tests take differences). `residentBytes`: donated
 * outputs handed out where they lie in the arena (`Resident`: neither copied out nor, when
 * donated back, in); `evacuatedBytes`: such outputs the caller kept, copied out of the arena
 * before a call overwrote them.
 */
export function arenaTraffic(): { copiedInBytes: number; copiedOutBytes: number; viewBytes: number; outputCopiedBytes: number; residentBytes: number; evacuatedBytes: number } {
  return { ...traffic };
}

/** Counts `bytes` of an output copied out of a reused buffer at the end of a call (see `arenaTraffic`). */
export function countOutputCopy(bytes: number): void {
  traffic.outputCopiedBytes += bytes;
}

/** Regions reserved in a backend's memory, released when their owner (a program, an executable's step) is collected. */
const reservations = new FinalizationRegistry<{ host: ArenaHost; addr: number }>(({ host, addr }) => host.release(addr));

/** The backend memory that compilers reserve their buffers in: core's `arenaHost()` while zero-copy dots are on, else null. */
export function zeroCopyHost(): ArenaHost | null {
  return zeroCopy ? arenaHost() : null;
}

/**
 * Reserves `n` float32 elements in `host` for `owner`, released when `owner` is garbage-collected:
 * a view the backend's kernels read (and write) in place, valid for the owner's life (the memory
 * is shared, so its growth never moves it). Null when the memory cannot hold it.
 */
export function reserveFloats(host: ArenaHost, owner: object, n: number): Float32Array | null {
  const addr = host.reserve(Math.max(4 * n, 4));
  if (addr < 0) return null;
  reservations.register(owner, { host, addr });
  return new Float32Array(host.buffer(), addr, n);
}

/**
 * Donated state kept in the arena between calls. With zero-copy dots (the arena in the
 * backend's shared memory, which never moves), a float32 output that a wasm loop fusion writes
 * in place over a donated argument (the donation plan's `inPlace` / `inPlaceTuple`: the
 * argument's last read is at or before that fusion, elementwise) and that nothing else in the
 * program reads is written into the argument's own arena region and handed out as an Array
 * viewing it (`last`): no copy out of the arena. When the next call is given that Array back
 * as the donated argument (Adam's state, a training step's parameters), it is already in place:
 * no copy in, and the call overwrites it (the argument is then deleted, as JAX deletes donated
 * buffers; using it raises an error naming the function and argument). When the caller kept
 * it instead and passes something else, it is copied out of the arena first (`begin`:
 * the Array is rebound to a fresh copy of its values), so a kept output never changes. Dots and
 * other programs read it in place meanwhile. The view keeps its program (and so its arena
 * region) alive (`residentViews`).
 */
interface Resident {
  /** The donated flat argument whose region holds the output. */
  readonly param: number;
  readonly view: Float32Array;
  /** The argument's shape, frozen once (every Array handed out shares it: nothing copied per call). */
  readonly shape: readonly number[];
  /** The Array handed out by the last call (null once deleted, evacuated or never made). */
  last: Array | null;
}

let residentOn = envSwitch('TPUKIT_RESIDENT_DONATION', true);

/**
 * Turns donated state resident in the arena (`Resident`) on (default; off when the environment
 * variable `TPUKIT_RESIDENT_DONATION` is `0`) or off, for programs built afterwards (A/B runs:
 * off, donated outputs are copied out of the arena into the donated storage as before).
 */
export function setResidentDonation(on: boolean): void {
  if (typeof on !== 'boolean') throw new TypeError(`setResidentDonation: on must be a boolean; got ${String(on)}`);
  residentOn = on;
}


interface Staged {
  /** Index in the executable's value table. */
  val: number;
  /** Stamp index: one per arena location's defining value, so it is copied once per call. */
  key: number;
  addr: number;
  n: number;
  bool: boolean;
  /** Set when the region is a resident output's (`Resident`): an argument already there is not copied. */
  res: Resident | null;
}

export interface WasmStep {
  readonly fn: number;
  readonly kernel: (lo: number, hi: number, thread?: number) => void;
  readonly items: number;
  /** A dot epilogue's (or row fusion's) kernel that also computes a column sum of its result, run instead of `kernel` on one thread (see `setEpilogueColumnSums`); else null. */
  readonly withSum: EpilogueSum | null;
  /** A column sum that `withSum` of its operand's producer may have computed in this call (then this step only hands on its output); else null. */
  readonly sumBy: EpilogueSum | null;
  /** Items run after all of [0, items) are done, on the calling thread (a column reduction's combination of its row blocks; usually 0). */
  readonly finalItems: number;
  readonly parallel: boolean;
  readonly inputs: readonly Staged[];
  readonly out: { addr: number; n: number; bool: boolean; inst: HloInstruction; copyOut: boolean; view: boolean; res: Resident | null };
  /** For a dot epilogue: where the dot's result lies in the arena (written there by the dot, or copied in; else -1). */
  readonly acc: number;
  /** For a dot epilogue (a loop kernel): its items' element layout, rows of `L` elements in `perRow` chunks of CHUNK (see `runEpilogueBand`); else null. */
  readonly band: { readonly L: number; readonly perRow: number } | null;
  /** Most threads the kernel may use (row kernels: one scratch row set per thread). */
  readonly maxThreads: number;
  /** A row kernel's scratch: its byte address in the memory and each thread's bytes from there (thread t at `addr + t * rowBytes`); null for other kernels. */
  readonly scratch: { readonly addr: number; readonly rowBytes: number } | null;
  /** Fewest items a thread takes at a time (`poolChunk`). */
  readonly minChunk: number;
  /** A multi-output fusion's outputs (float32), each copied out when read outside wasm kernels; the step's value is then the list (null where not copied). */
  readonly outputs: readonly { addr: number; n: number; shape: HloInstruction['shape']; copyOut: boolean; view: boolean; res: Resident | null }[] | null;
  /** Result buffers reused call after call when the program pools its copies (one per output; see `poolResults`). */
  readonly pool: (Float32Array | Uint8Array | null)[];
  /**
   * Per output: whether it is an output of the executable. Such a result is copied out of the
   * arena into a fresh array even when the program pools its copies: the caller keeps it, so a
   * reused buffer would have to be copied again at the end of the call.
   */
  readonly fresh: readonly boolean[];
  /**
   * Per output: the Array handed on as a view of the arena (zero-copy), made on the first call
   * and handed on again by later ones (the region and the view never move; only transient steps
   * of one call read it, so no caller sees its contents change).
   */
  readonly views: (Array | null)[];
}

/** A kernel that also computes the column sum of its result (`planEpilogueColumnSum`, `planRowColumnSum`): all its items in one call, on the calling thread. */
interface EpilogueSum {
  readonly kernel: (lo: number, hi: number, thread: number) => void;
  readonly items: number;
  /** Run on one thread whatever the kernel threads (a row fusion's kernel with sums of a quarter of its work or more, `setRowSumsOneThread`). */
  readonly always: boolean;
  /** The call (`WasmProgram`'s generation) in which it last ran; -1 before its first run (generation 0 is never a call's). */
  ran: number;
}

let nextId = 1;
const MAX_PAGES = 32768;
const ALIGN = 16;
const align = (n: number): number => Math.ceil(n / ALIGN) * ALIGN;

export class WasmProgram implements PoolProgram {
  readonly id = nextId++;
  sentTo = 0;
  readonly steps = new Map<HloInstruction, WasmStep>();
  /**
   * Dots (and, with zero-copy dots, transposes) whose result the executable writes straight
   * into the arena (into `view`, made once: the arena never moves), then marks staged (`markStaged(key)`; key -1: no wasm
   * kernel reads it).
   */
  readonly directDots = new Map<HloInstruction, { key: number; view: Float32Array }>();
  /**
   * Multi-output core primitives (the fused attention) whose results the executable has the
   * backend write into these arena regions (one per result, never reused within a call; see
   * `build`): wasm kernels read them there, dots in place. Every call must write them.
   */
  readonly resultRegions = new Map<HloInstruction, Float32Array[]>();
  /** Kernels of dot epilogues, by their kOutput fusion (run through `runEpilogue`). */
  readonly epilogues = new Map<HloInstruction, WasmStep>();
  /** Donated outputs kept in the arena between calls (see `Resident`). */
  readonly residents: Resident[] = [];
  private gen = 0;
  /**
   * Whether results copied out of the arena go into buffers kept from the previous call (set by
   * the executable when no value can outlive a call except its outputs, which it checks with
   * `isPooled` and copies). Fresh multi-megabyte arrays each call cost page faults and, above
   * all, V8's "external memory pressure" garbage collections.
   */
  private pooling = false;
  private readonly pooled = new Set<ArrayBufferLike>();
  private readonly stamps: Int32Array;
  private readonly f32: Float32Array;
  private readonly u8: Uint8Array;

  private constructor(
    readonly name: string,
    readonly module: wasm.WasmModule,
    readonly memory: wasm.WasmMemory,
    readonly arenaBytes: number,
    keys: number,
    /** Byte address of the arena in `memory` (0 in a memory of its own). */
    readonly base: number,
    /** The backend memory the arena is reserved in (zero-copy dots), or null. */
    readonly host: ArenaHost | null,
  ) {
    this.stamps = new Int32Array(keys);
    // Views over the host's buffer are what its kernels recognise as in place.
    const buf = host ? host.buffer() : memory.buffer;
    this.f32 = new Float32Array(buf);
    this.u8 = new Uint8Array(buf);
    trackProgram(this, this.id);
    if (host) reservations.register(this, { host, addr: base });
  }

  /** Builds the program for the wasm-covered fusions of `c` (null when none, or wasm kernels are off). */
  static build(c: HloComputation, name: string, donation: DonationPlan | null = null): WasmProgram | null {
    if (!wasmKernelsEnabled()) return null;
    const plans = new Map<HloInstruction, FusionPlan>();
    for (const i of c.instructions) {
      // Only the fusion kinds whose semantics the loop emitter implements; others (e.g. new
      // kinds from later fusion passes) keep their JavaScript kernel.
      const kind = (i.params as { kind?: string }).kind;
      if (i.opcode !== 'fusion' || (kind !== 'kLoop' && kind !== 'kInput' && kind !== 'kRow')) continue;
      const p = kind === 'kRow' ? planRowFusion(i.called[0]) : planFusion(i.called[0]);
      if (p) plans.set(i, p);
    }
    // Dot epilogues (kOutput): the dot runs as its core primitive and writes its float32 result
    // straight into the fusion's arena buffer (zero-copy dots; else it is copied in, `acc`);
    // the epilogue runs there in place, after the product or per finished band of rows
    // (`runEpilogueBand`, opt-in); wasm kernels reading the fusion read its arena buffer.
    const epilogues = new Map<HloInstruction, { plan: FusionPlan; operands: HloInstruction[] }>();
    for (const i of c.instructions) {
      if (i.opcode !== 'fusion' || (i.params as { kind?: string }).kind !== 'kOutput') continue;
      const parts = splitOutputFusion(i.called[0]);
      const p = planFusion(parts.epilogue);
      if (p && p.kind === 'loop') epilogues.set(i, { plan: p, operands: parts.epilogueOperands.map((k) => i.operands[k]) });
    }
    if (plans.size === 0 && epilogues.size === 0) return null;
    // Column sums of an epilogue's result that the epilogue may compute (see
    // `setEpilogueColumnSums`): the sum's fusion -> its epilogue and their fused plan. The sum's
    // output lives in a region of its own (written when the epilogue runs, before the sum's
    // place in the program, or by the sum's own kernel).
    // A row fusion (kRow) pairs with the column sums of values of its full outputs and operands
    // (`planRowColumnSum`), several per row fusion, when it runs before them.
    const index = new Map(c.instructions.map((i, k) => [i, k]));
    const users = c.users();
    const summed = new Map<HloInstruction, { producer: HloInstruction; plan: FusionPlan }>();
    // (an epilogue computes at most one sum; a row fusion several, `rowSums`)
    const producers = new Set<HloInstruction>();
    const pair = (f: HloInstruction, producer: HloInstruction, plan: FusionPlan): void => {
      summed.set(f, { producer, plan });
      producers.add(producer);
    };
    const rowSums = new Map<HloInstruction, { sum: HloInstruction; plan: RowColumnSum }[]>();
    if (epilogueSums) {
      for (const [f, p] of plans) {
        if (p.kind !== 'col' || p.rowBlocks !== 1) continue;
        const e = f.operands.length === 1 && !f.isTuple ? epilogues.get(f.operands[0]) : undefined;
        if (e !== undefined) {
          const x = f.operands[0];
          const fused = producers.has(x) ? null : planEpilogueColumnSum(e.plan.body, f.called[0]);
          if (fused !== null && fused.rowBlocks === 1) pair(f, x, fused);
          continue;
        }
        // A row fusion (kRow) that runs before the sum and reads or writes every operand of it:
        // the producer of an operand, or a reader of one.
        const candidates = new Set<HloInstruction>();
        for (const o of f.operands) {
          candidates.add(o.opcode === 'get-tuple-element' ? o.operands[0] : o);
          for (const u of users.get(o) ?? []) if (u !== null) candidates.add(u);
        }
        for (const g of candidates) {
          const rp = plans.get(g);
          if (rp === undefined || rp.kind !== 'rows' || epilogues.has(g) || index.get(g)! >= index.get(f)!) continue;
          const outputOf = (o: HloInstruction): number => (o === g && !g.isTuple ? 0 : o.opcode === 'get-tuple-element' && o.operands[0] === g ? (o.params as { index: number }).index : -1);
          const fused = planRowColumnSum(rp, g.operands, outputOf, f.called[0], p, f.operands);
          if (fused === null || (!operandSums && fused.args.some((a) => 'param' in a))) continue;
          const list = rowSums.get(g) ?? [];
          list.push({ sum: f, plan: fused });
          rowSums.set(g, list);
          break;
        }
      }
      for (const [g, list] of rowSums) {
        // Outputs of g that only these sums read: its kernel with the sums need not write them.
        const mine = new Set(list.map((x) => x.sum));
        const onlySums = (o: HloInstruction): boolean => (users.get(o) ?? []).length > 0 && users.get(o)!.every((u) => u !== null && mine.has(u));
        const only = new Map<number, boolean>();
        let other = false;
        if (!g.isTuple) only.set(0, onlySums(g));
        else
          for (const u of users.get(g) ?? []) {
            if (u === null || u.opcode !== 'get-tuple-element') other = true;
            else {
              const q = (u.params as { index: number }).index;
              only.set(q, (only.get(q) ?? true) && onlySums(u));
            }
          }
        const sumOnlyOutputs = other ? [] : [...only].filter(([, y]) => y).map(([q]) => q);
        const plan: FusionPlan = { ...plans.get(g)!, sums: list.map((x) => x.plan), sumOnlyOutputs };
        for (const x of list) pair(x.sum, g, plan);
      }
    }
    const reads = (u: HloInstruction | null): boolean => u !== null && (plans.has(u) || epilogues.has(u));
    const root = (i: HloInstruction): HloInstruction => (i.opcode === 'reshape' ? root(i.operands[0]) : i);
    // Values the arena holds: wasm fusion outputs and the defining values of what they read.
    const staged = new Set<HloInstruction>();
    const readOperands = (f: HloInstruction): HloInstruction[] => epilogues.get(f)?.operands ?? f.operands;
    for (const f of [...plans.keys(), ...epilogues.keys()])
      for (const o of readOperands(f)) {
        const r = root(o);
        if (!plans.has(r) && !epilogues.has(r) && r.opcode !== 'parameter' && r.opcode !== 'constant' && r.opcode !== 'get-tuple-element' && !r.isTuple) staged.add(r);
      }
    // Only reads by wasm kernels keep a value in the arena: others read a copied-out array.
    // A multi-output (row) fusion writes its outputs into regions of their own (below), where
    // wasm kernels read them; outputs read elsewhere are copied out.
    const host = zeroCopyHost();
    // Steps that read an operand only while they run and keep nothing of it: fusions (wasm or
    // JavaScript kernels; a kOutput's dot included), dots, the fused attention (its kernels read
    // their operands only during the call, in place or copied, and return fresh or caller storage), and
    // storage-sharing reshapes whose own readers are such steps. With zero-copy dots these read
    // views of the arena, so their reads keep a value alive there too.
    const isDot = (u: HloInstruction): boolean => u.opcode !== 'fusion' && u.prim?.name === 'dot_general' && !u.isTuple;
    // (and, in the arena, the one-hot primitives: js/oneHotKernels.ts `setOneHotInArena`)
    const oneHot = (u: HloInstruction): boolean => oneHotInArenaEnabled() && isOneHotPrimitive(u.prim?.name) && !u.isTuple;
    const readsOnly = (u: HloInstruction): boolean => u.opcode === 'fusion' || isDot(u) || FUSED_ATTENTION.has(u.prim?.name ?? '') || oneHot(u);
    const transient = (u: HloInstruction | null): boolean => u !== null && (readsOnly(u) || (isStorageAlias(u, c.outputs) && users.get(u)!.every(transient)));
    const counts = (u: HloInstruction | null): boolean => reads(u) || (host !== null && u !== null && (readsOnly(u) || isStorageAlias(u, c.outputs)));
    // With zero-copy dots, float32 dots and transposes (primitives the backend runs into caller
    // storage) that only transient steps read write their results into the arena too, where
    // the dots reading them find them in place (so do the one-hot primitives in the arena).
    const resident = new Set<HloInstruction>();
    if (host !== null)
      for (const i of c.instructions)
        if ((isDot(i) || i.prim?.name === 'transpose' || oneHot(i)) && !i.isTuple && i.shape.dtype === 'float32' && !i.shape.weakType && users.get(i)!.every(transient)) resident.add(i);
    const ba = assignBuffers(c, [], { materialises: (i) => ((plans.has(i) && !i.isTuple && !summed.has(i)) || epilogues.has(i) || staged.has(i) || resident.has(i)), counts, alignment: ALIGN });
    let top = ba.tempBytes;
    const region = new Map<HloInstruction, number>();
    /** A region of its own for `i`, once: `line`-aligned start and end (16 bytes unless a row kernel's scratch asks for a cache line). */
    const place = (i: HloInstruction, bytes: number, line = ALIGN): number => {
      let a = region.get(i);
      if (a === undefined) {
        a = Math.ceil(top / line) * line;
        top = a + Math.ceil(bytes / line) * line;
        region.set(i, a);
      }
      return a;
    };
    const sumAt = new Map<HloInstruction, number>();
    for (const f of summed.keys()) {
      if (f.isTuple) continue; // (a multi-output sum's outputs have regions of their own, `tupleOut`)
      sumAt.set(f, top);
      top += align(bytesOf(f.shape));
    }
    const constants: { addr: number; lit: Array }[] = [];
    const keys = new Map<HloInstruction, number>();
    const keyOf = (i: HloInstruction): number => {
      let k = keys.get(i);
      if (k === undefined) keys.set(i, (k = keys.size));
      return k;
    };
    const layouts: { inst: HloInstruction; plan: FusionPlan; at: KernelAddresses; inputs: Staged[]; acc: number }[] = [];
    const kernels: [HloInstruction, FusionPlan][] = [...plans, ...[...epilogues].map(([f, e]): [HloInstruction, FusionPlan] => [f, e.plan])];
    // The readers of output q of a multi-output instruction (through its get-tuple-element).
    const tupleReaders = (f: HloInstruction, q: number): (HloInstruction | null)[] =>
      users.get(f)!.flatMap((g) => (g === null || g.opcode !== 'get-tuple-element' ? [g] : (g.params as { index: number }).index === q ? users.get(g)! : []));
    // Multi-output (row) fusions: each output in a region of its own, never reused, so wasm
    // kernels reading a get-tuple-element read it there (no staged copy). So do the fused
    // attention's results (zero-copy dots) when a wasm kernel reads one and only transient steps
    // read any: the backend writes them there (`resultRegions`), where the dots also read them
    // in place (they are no longer copied into the arena for the kernels, e.g. the bias
    // gradients' column sums over dq, dk, dv).
    const tupleOut = new Map<HloInstruction, number[]>();
    // Whether a wasm kernel reads `u`'s operand (directly or through reshapes, as `root` sees them).
    const kernelReads = (u: HloInstruction | null): boolean => u !== null && (reads(u) || (u.opcode === 'reshape' && users.get(u)!.some(kernelReads)));
    const intoRegions = (i: HloInstruction): boolean =>
      host !== null &&
      i.isTuple &&
      i.opcode !== 'fusion' &&
      FUSED_ATTENTION.has(i.prim?.name ?? '') &&
      i.shapes.every((sh, q) => sh.dtype === 'float32' && !sh.weakType && tupleReaders(i, q).every(transient)) &&
      i.shapes.some((_, q) => tupleReaders(i, q).some(kernelReads));
    for (const f of [...plans.keys(), ...c.instructions.filter(intoRegions)]) {
      if (!f.isTuple) continue;
      tupleOut.set(
        f,
        f.shapes.map((sh) => {
          const a = top;
          top += align(bytesOf(sh));
          return a;
        }),
      );
    }
    for (const [f, plan] of kernels) {
      const inputs: Staged[] = [];
      const epi = epilogues.get(f);
      // An epilogue's parameter 0 is the dot's result, copied into the fusion's own buffer,
      // which the epilogue overwrites in place.
      const acc = epi ? ba.slots.get(f)!.offset : -1;
      const sources = (o: HloInstruction): ParamSource => {
        const r = root(o);
        const n = numel(o.shape);
        const bool = o.shape.dtype === 'bool';
        if (isScalarConstant(r)) return { imm: toStorage(r.literal!)[0] as number };
        const moved = sumAt.get(r);
        if (moved !== undefined) return { addr: moved };
        if ((plans.has(r) && !r.isTuple) || epilogues.has(r)) return { addr: ba.slots.get(r)!.offset };
        if (r.opcode === 'get-tuple-element' && tupleOut.has(r.operands[0])) return { addr: tupleOut.get(r.operands[0])![(r.params as { index: number }).index] };
        if (r.opcode === 'constant') {
          const addr = place(r, bytesOf(r.shape));
          if (!constants.some((x) => x.addr === addr)) constants.push({ addr, lit: r.literal! });
          return { addr };
        }
        // Copied in per call: into the defining value's buffer, or a region of its own.
        const slot = ba.slots.get(r);
        const at = slot ? slot.offset : place(r.opcode === 'parameter' ? r : o, bytesOf(o.shape));
        inputs.push({ val: index.get(o)!, key: keyOf(slot || r.opcode === 'parameter' ? r : o), addr: at, n, bool, res: null });
        return { addr: at };
      };
      const params: ParamSource[] = epi ? [{ addr: acc }, ...epi.operands.map(sources)] : f.operands.map(sources);
      const scratch = plan.scratchBytes > 0 ? place(f, plan.scratchBytes, plan.scratchAlign) : 0; // (epilogues are loops: no scratch)
      const regions = tupleOut.get(f);
      const out = epi ? acc : regions ? regions[0] : (sumAt.get(f) ?? ba.slots.get(f)!.offset);
      const more = regions ? regions.slice(1) : [];
      layouts.push({ inst: f, plan, at: { params, out, scratch, more }, inputs, acc });
    }
    // The kernels with a column sum (kernels k<layouts.length + i>, one per producer): an
    // epilogue's reads its operands, writes the sum's output, has scratch of its own and stores
    // the result in the dot's buffer as the loop kernel does; a row fusion's is its kernel plus
    // the sums' float64 scratch and the sums' outputs (their regions: a region of its own for a
    // single output, `sumAt`, or a multi-output fusion's, never reused in a call).
    const byProducer = new Map<HloInstruction, { plan: FusionPlan; sums: HloInstruction[] }>();
    for (const [f, { producer, plan }] of summed) {
      const x = byProducer.get(producer);
      if (x) x.sums.push(f);
      else byProducer.set(producer, { plan, sums: [f] });
    }
    const sumKernels = [...byProducer].map(([producer, { plan, sums: fs }], i) => {
      const e = layouts.find((l) => l.inst === producer)!;
      const scratch = top;
      let at: KernelAddresses;
      if (plan.kind === 'rows') {
        const outs = fs.flatMap((f) => {
          const l = layouts.find((y) => y.inst === f)!;
          return f.shapes.map((_, q) => outputAddr(l.at, q));
        });
        top += align(outs.length * Math.ceil(plan.L / 4) * 32);
        at = { ...e.at, colSums: { scratch, outs } };
      } else {
        top += align(plan.scratchBytes);
        at = { params: e.at.params, out: sumAt.get(fs[0])!, scratch, more: [], side: e.acc };
      }
      return { sums: fs, producer, fn: layouts.length + i, plan, at, inputs: [] as Staged[], acc: -1 };
    });
    // Donated outputs that can stay in the arena (see `Resident`): written into their
    // argument's region (placed here if no kernel reads the argument) instead of their own.
    const residentAt: { l: (typeof layouts)[number]; q: number; j: number; addr: number }[] = [];
    if (host !== null && donation !== null && residentOn)
      for (const l of layouts) {
        if (l.acc >= 0 || l.plan.kind !== 'loop') continue;
        const k = index.get(l.inst)!;
        const single = donation.inPlace.get(k);
        const m = l.inst.isTuple ? donation.inPlaceTuple.get(k) : single === undefined ? undefined : new Map([[0, single]]);
        if (m === undefined) continue;
        for (const [q, j] of m) {
          const sh = l.inst.shapes[q];
          const readers = l.inst.isTuple ? tupleReaders(l.inst, q) : users.get(l.inst)!;
          if (sh.dtype === 'float32' && !sh.weakType && readers.every((u) => u === null)) residentAt.push({ l, q, j, addr: place(c.params[j], bytesOf(sh)) });
        }
      }
    const bytes = top + 64;
    let pages = Math.max(1, Math.ceil(bytes / 65536));
    // Addresses are i32 arithmetic: arenas of 2 GiB and more keep the JavaScript kernels.
    if (pages >= MAX_PAGES) return null;
    // The arena in the backend's memory (zero-copy dots) when it has room, else in a memory of its own.
    const base = host !== null ? host.reserve(bytes) : -1;
    const inHost = base >= 0;
    if (inHost) {
      for (const { l, q, addr } of residentAt) l.at = q === 0 ? { ...l.at, out: addr } : { ...l.at, more: l.at.more!.map((a, p) => (p === q - 1 ? addr : a)) };
      pages = Math.ceil((base + bytes) / 65536);
      shift([...layouts, ...sumKernels], constants, base);
    }
    const shared = kernelThreadsAvailable();
    const feats = wasm.wasmFeatures();
    const m = new wasm.ModuleBuilder();
    m.importMemory('env', 'mem', inHost ? { initial: pages, maximum: host!.maxPages, shared: true } : shared ? { initial: pages, maximum: pages, shared: true } : { initial: pages });
    const math = { sin: m.importFunction('env', 'sin', ['f64'], ['f64']), cos: m.importFunction('env', 'cos', ['f64'], ['f64']) };
    layouts.forEach((l, k) => emitKernel(m, k, l.plan, l.at, { relaxed: feats.relaxedSimd, host: math }));
    for (const x of sumKernels) emitKernel(m, x.fn, x.plan, x.at, { relaxed: feats.relaxedSimd, host: math });
    const module = new wasm.WA.Module(m.toBytes());
    const memory = inHost ? host!.memory : new wasm.WA.Memory(shared ? { initial: pages, maximum: pages, shared: true } : { initial: pages });
    const inst = new wasm.WA.Instance(module, { env: { mem: memory, sin: Math.sin, cos: Math.cos } });
    const prog = new WasmProgram(name, module, memory, bytes, keys.size, inHost ? base : 0, inHost ? host : null);
    const off = inHost ? base : 0;
    for (const { addr, lit } of constants) {
      const s = toStorage(lit);
      if (s instanceof Uint8Array) prog.u8.set(s, addr);
      else prog.f32.set(s as Float32Array, addr / 4);
    }
    const resAt = new Map<number, Resident>();
    if (inHost)
      for (const { j, addr } of residentAt) {
        const sh = c.params[j].shape;
        const r: Resident = { param: j, view: prog.view(base + addr, numel(sh)), shape: frozenShape(sh.shape), last: null };
        residentViews.set(r.view, prog); // (an Array viewing the arena keeps the region reserved)
        prog.residents.push(r);
        resAt.set(base + addr, r);
        for (const l of layouts) for (const x of l.inputs) if (x.addr === base + addr && !x.bool) x.res = r;
      }
    const resOf = (addr: number, sh: HloInstruction['shape']): Resident | null => (sh.dtype === 'float32' && !sh.weakType ? (resAt.get(addr) ?? null) : null);
    // An output of a multi-output fusion leaves the arena when anything but a wasm kernel reads it.
    const tupleCopied = (f: HloInstruction, q: number): boolean => tupleReaders(f, q).some((u) => u === null || !plans.has(u));
    // With the arena in the backend's memory, a float32 result that only transient steps read
    // is handed on as a view of the arena (a tuple output's region is never reused in a call).
    const viewable = (sh: HloInstruction['shape'], rs: readonly (HloInstruction | null)[]): boolean => inHost && sh.dtype === 'float32' && !sh.weakType && rs.every(transient);
    const sumOfProducer = new Map(sumKernels.map((x) => [x.producer, { kernel: inst.exports[`k${x.fn}`] as EpilogueSum['kernel'], items: x.plan.items, always: x.plan.kind === 'rows' && rowSumsOneThread && x.plan.work < ROW_SUMS_ONE_THREAD_MAX * getParallelWork() && 4 * x.sums.reduce((a, f) => a + plans.get(f)!.work, 0) >= x.plan.work, ran: -1 } satisfies EpilogueSum]));
    const sums = new Map(sumKernels.flatMap((x) => x.sums.map((f) => [f, sumOfProducer.get(x.producer)!] as const)));
    layouts.forEach((l, k) => {
      const out = l.at.out;
      const outBool = !l.inst.isTuple && l.inst.shape.dtype === 'bool';
      const outBytes = bytesOf(l.inst.shapes[0]);
      // In place over an operand of another element size: threads would race; run on one.
      const mixed = l.inputs.some((s) => s.addr === out && s.bool !== outBool) || l.at.params.some((p, j) => 'addr' in p && p.addr === out && l.plan.body.params[j].shape.dtype !== l.inst.shapes[0].dtype);
      (l.acc >= 0 ? prog.epilogues : prog.steps).set(l.inst, {
        fn: k,
        kernel: inst.exports[`k${k}`] as (lo: number, hi: number, thread?: number) => void,
        items: l.plan.items,
        withSum: sumOfProducer.get(l.inst) ?? null,
        sumBy: sums.get(l.inst) ?? null,
        finalItems: l.plan.finalItems,
        parallel: shared && !mixed && runsOnThreads(l.plan),
        maxThreads: l.plan.scratchThreads > 0 ? l.plan.scratchThreads : Infinity,
        scratch: l.plan.scratchThreads > 0 ? { addr: l.at.scratch, rowBytes: l.plan.scratchRowBytes } : null,
        minChunk: minPoolChunk(l.plan),
        outputs: l.inst.isTuple ? l.inst.shapes.map((sh, q) => ({ addr: outputAddr(l.at, q), n: numel(sh), shape: sh, copyOut: tupleCopied(l.inst, q), view: viewable(sh, tupleReaders(l.inst, q)), res: resOf(outputAddr(l.at, q), sh) })) : null,
        inputs: l.inputs,
        out: { addr: out, n: outBool ? outBytes : outBytes / 4, bool: outBool, inst: l.inst, copyOut: users.get(l.inst)!.some((u) => u === null || !plans.has(u)), view: !l.inst.isTuple && viewable(l.inst.shape, users.get(l.inst)!), res: l.inst.isTuple ? null : resOf(out, l.inst.shape) },
        acc: l.acc,
        band: l.acc >= 0 && l.plan.kind === 'loop' ? { L: l.plan.L, perRow: l.plan.chunksPerRow } : null,
        pool: new globalThis.Array(l.inst.shapes.length).fill(null),
        fresh: l.inst.shapes.map((_, q) => isOutputValue(c, l.inst, q)),
        views: new globalThis.Array(l.inst.shapes.length).fill(null),
      });
    });
    // A float32 dot that only wasm loop/row kernels read (not an output, not read through a
    // reshape) writes its result straight into its arena buffer instead of being staged there;
    // so does every resident dot or transpose (zero-copy dots).
    for (const r of new Set([...staged, ...resident])) {
      const key = keys.get(r) ?? -1;
      const slot = ba.slots.get(r);
      if (slot === undefined || r.shape.dtype !== 'float32' || r.shape.weakType) continue;
      if (resident.has(r) || (key >= 0 && r.prim?.name === 'dot_general' && users.get(r)!.every((u) => u !== null && plans.has(u)))) prog.directDots.set(r, { key, view: prog.view(off + slot.offset, numel(r.shape)) });
    }
    for (const [i, at] of tupleOut) if (!plans.has(i)) prog.resultRegions.set(i, i.shapes.map((sh, q) => prog.view(off + at[q], numel(sh))));
    return prog;
  }

  /** A float32 view of `n` elements of the arena from byte address `addr` (a view stays valid: the arena never moves, and a host memory is shared). */
  view(addr: number, n: number): Float32Array {
    return this.f32.subarray(addr / 4, addr / 4 + n);
  }

  /** Runs a dot epilogue over the dot's result `acc` (float32 storage), in place; returns the result Array (sharing `acc`). */
  runEpilogue(s: WasmStep, acc: Float32Array, vals: readonly (Array | Array[] | null)[]): Array {
    this.f32.set(acc, s.acc / 4);
    return this.run(s, vals, acc) as Array;
  }

  /**
   * Runs dot epilogue `s` (a loop kernel over the dot's result in its arena buffer) over
   * elements [e0, e1) of the dot's result, which the dot has just finished (core's
   * `evalPrimitiveInto` bands): the work items that end inside [0, e1) and not inside [0, e0),
   * so consecutive bands from 0 to the end run every item once, in order; an item that spans a
   * band's end runs with the next band. Its inputs must be staged first (`stage`). A band of
   * every item (a backend that hands over the whole result at once) runs on the kernel pool as
   * `run` would; smaller ones on this thread, between the product's row blocks. Once the last
   * band has run, `run(s, vals, null, null, true)` hands on the result.
   */
  runEpilogueBand(s: WasmStep, e0: number, e1: number): void {
    const b = s.band;
    if (b === null) throw new Error(`xla-lite ${this.name}: kernel k${s.fn} is not a dot epilogue loop`);
    const lo = itemsBelow(b, e0);
    const hi = itemsBelow(b, e1);
    if (lo === 0 && hi === s.items) this.items(s);
    else if (hi > lo) s.kernel(lo, hi, 0);
  }

  /** Copies results into buffers reused call after call (see `pooling`). */
  poolResults(): void {
    this.pooling = true;
  }

  /** Whether `data` is one of the reused result buffers (an output holding it must be copied). */
  isPooled(data: ArrayBufferView): boolean {
    return this.pooled.has(data.buffer);
  }

  /** A float32 value of the arena handed on in place (zero-copy): a view valid until its region is reused (see the file comment). */
  private viewOf(s: WasmStep, q: number, addr: number, n: number, sh: HloInstruction['shape']): Array {
    traffic.viewBytes += 4 * n;
    const v = s.views[q];
    // (Made again when the call runs under another backend than the one it was made under.)
    return v !== null && v._backend === getBackend() ? v : (s.views[q] = fromStorage(this.f32.subarray(addr / 4, addr / 4 + n), sh.shape, sh.dtype));
  }


  /** `n` elements from byte address `addr` of the arena: a fresh array, or the step's reused buffer. */
  private copyOut(s: WasmStep, q: number, addr: number, n: number, bool: boolean): Float32Array | Uint8Array {
    if (!this.pooling || s.fresh[q]) {
      traffic.copiedOutBytes += bool ? n : 4 * n;
      return bool ? this.u8.slice(addr, addr + n) : this.f32.slice(addr / 4, addr / 4 + n);
    }
    let buf = s.pool[q];
    if (buf === null) {
      buf = bool ? new Uint8Array(n) : new Float32Array(n);
      s.pool[q] = buf;
      this.pooled.add(buf.buffer);
    }
    return this.copyInto(buf, addr);
  }

  /** Copies `dest.length` elements (bool: bytes) from byte address `addr` of the arena into `dest` (a reused buffer, a donated argument's storage); returns `dest`. */
  private copyInto<T extends Float32Array | Uint8Array>(dest: T, addr: number): T {
    traffic.copiedOutBytes += dest.byteLength;
    if (dest instanceof Uint8Array) dest.set(this.u8.subarray(addr, addr + dest.length));
    else dest.set(this.f32.subarray(addr / 4, addr / 4 + dest.length));
    return dest;
  }

  /** A float32 output `q` of step `s` copied out of the arena. */
  private out(s: WasmStep, q: number, addr: number, n: number, sh: HloInstruction['shape']): Array {
    const r = fromStorage(this.copyOut(s, q, addr, n, false), sh.shape, sh.dtype);
    return sh.weakType ? lax.convertElementType(r, sh.dtype, true) : r;
  }

  /** Records that the value with stamp `key` is in the arena for this call (written there directly). */
  markStaged(key: number): void {
    if (key >= 0) this.stamps[key] = this.gen;
  }

  /**
   * Starts a call: values staged in earlier calls are stale. A resident output of the last call
   * (see `Resident`) that is not given back as its donated argument is copied out of the arena
   * first, if the caller still holds it, since this call overwrites its region.
   */
  begin(args: readonly Array[]): void {
    this.gen = (this.gen + 1) | 0 || 1;
    const rs = this.residents;
    for (let k = 0; k < rs.length; k++) {
      const r = rs[k];
      const a = r.last;
      if (a === null || a === args[r.param]) continue;
      r.last = null;
      if (a.isDeleted() || a._buf !== r.view) continue;
      traffic.evacuatedBytes += r.view.byteLength;
      a._buf = r.view.slice();
    }
  }

  /** The resident output `r` (see `Resident`): an Array viewing its region, which the arena keeps until the next call. */
  private resident(r: Resident): Array {
    traffic.residentBytes += 4 * r.view.length;
    // (float32 and not weak, the view's length and the shape checked when the program was built.)
    return (r.last = ArrayClass._fromStorage(r.view, r.shape, 'float32'));
  }

  /** Copies the inputs of step `s` that are not in the arena yet in this call (each value once per call). */
  stage(s: WasmStep, vals: readonly (Array | Array[] | null)[]): void {
    const inputs = s.inputs;
    for (let i = 0; i < inputs.length; i++) {
      const x = inputs[i];
      if (this.stamps[x.key] === this.gen) continue;
      this.stamps[x.key] = this.gen;
      const data = toStorage(vals[x.val] as Array);
      if (data === x.res?.view) continue; // (a resident output given back: already in place)
      traffic.copiedInBytes += data.byteLength;
      if (x.bool) this.u8.set(data as Uint8Array, x.addr);
      else this.f32.set(data as Float32Array, x.addr / 4);
    }
  }

  /**
   * Runs every work item of `s` (on the kernel pool when large). A dot epilogue or row fusion
   * that runs on one thread (or a row fusion with `always`) and has a kernel with its column
   * sums runs that one instead; the sums' steps then have nothing to compute in this call.
   */
  private items(s: WasmStep): void {
    if (s.items <= 0 || s.sumBy?.ran === this.gen) return;
    const threads = s.parallel ? Math.min(getKernelThreads(), s.items, s.maxThreads) : 1;
    if (s.withSum !== null && (threads <= 1 || s.withSum.always)) {
      s.withSum.kernel(0, s.withSum.items, 0);
      s.withSum.ran = this.gen;
      return;
    }
    if (threads <= 1 || !runParallel(this, s.fn, s.kernel, s.items, poolChunk(s.items, threads, s.minChunk), threads, this.name)) s.kernel(0, s.items, 0);
    if (s.finalItems > 0) s.kernel(s.items, s.items + s.finalItems, 0);
  }

  /**
   * Runs one fusion: stages its inputs, runs the kernel (on the pool when large), copies the
   * result out if needed, into `dest` when given (a donated argument's storage); a
   * multi-output fusion's output q into `dests[q]` when that is given. `computed`: the kernel
   * has already run over every item in this call (a dot epilogue run by bands): only the
   * result is handed on.
   */
  run(s: WasmStep, vals: readonly (Array | Array[] | null)[], dest: Float32Array | Uint8Array | null = null, dests: readonly (Float32Array | Uint8Array | null)[] | null = null, computed = false): Array | Array[] | null {
    if (!computed) {
      this.stage(s, vals);
      this.items(s);
    }
    const o = s.out;
    if (s.outputs !== null) {
      // A multi-output fusion: the outputs read outside wasm kernels leave the arena (read through get-tuple-element).
      const outs = new globalThis.Array<Array>(s.outputs.length);
      for (let q = 0; q < outs.length; q++) {
        const x = s.outputs[q];
        const d = dests !== null && q < dests.length ? dests[q] : null;
        outs[q] = x.res !== null ? this.resident(x.res) : d !== null && d instanceof Float32Array && d.length === x.n && !x.shape.weakType ? fromStorage(this.copyInto(d, x.addr), x.shape.shape, x.shape.dtype) : x.view ? this.viewOf(s, q, x.addr, x.n, x.shape) : x.copyOut ? this.out(s, q, x.addr, x.n, x.shape) : (null as unknown as Array);
      }
      return outs;
    }
    if (o.res !== null) return this.resident(o.res);
    if (dest === null && o.view) return this.viewOf(s, 0, o.addr, o.n, o.inst.shape);
    if (!o.copyOut && dest === null) return null;
    const sh = o.inst.shape;
    const data = dest !== null && dest.length === o.n && dest instanceof Uint8Array === o.bool ? this.copyInto(dest, o.addr) : this.copyOut(s, 0, o.addr, o.n, o.bool);
    const r = fromStorage(data, sh.shape, sh.dtype);
    return sh.weakType ? lax.convertElementType(r, sh.dtype, true) : r;
  }
}


/** How many of a loop kernel's items (rows of `L` elements, each in `perRow` chunks of CHUNK) end within its first `e` elements. */
const itemsBelow = (b: { L: number; perRow: number }, e: number): number => Math.floor(e / b.L) * b.perRow + Math.floor((e % b.L) / CHUNK);

/** Moves every arena address of the kernels' layouts and the constants by `base` (the arena's region in a host memory). */
function shift(layouts: { at: KernelAddresses; inputs: Staged[]; acc: number }[], constants: { addr: number }[], base: number): void {
  const p = (x: ParamSource): ParamSource => ('addr' in x ? { ...x, addr: x.addr + base } : x);
  for (const l of layouts) {
    const at = l.at;
    l.at = { params: at.params.map(p), out: at.out + base, scratch: at.scratch + base, more: at.more?.map((a) => a + base) ?? [], ...(at.side !== undefined ? { side: at.side + base } : {}), ...(at.colSums !== undefined ? { colSums: { scratch: at.colSums.scratch + base, outs: at.colSums.outs.map((a) => a + base) } } : {}) };
    for (const x of l.inputs) x.addr += base;
    if (l.acc >= 0) l.acc += base;
  }
  for (const x of constants) x.addr += base;
}
