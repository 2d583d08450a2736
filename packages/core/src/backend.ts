/**
 * The Backend interface: where array data lives and how primitives run on it. The reference
 * backend (plain TypeScript, the correctness oracle) is always registered; faster backends
 * (the systolic WebAssembly backend, the tfjs bridge) register themselves under their own
 * names. Arrays remember the backend that holds their data and move when an op runs elsewhere.
 */
import type { StorageArray } from './dtype';
import type { ShapedArray } from './aval';
import type { KernelPrimitive } from './kernel';
import { showValue } from './describe';
import type { WasmMemory } from './wasm/webassemblyTypes';

/**
 * Receives elements [e0, e1) of a result as soon as they are final (see `Backend.executeInto`
 * and `evalPrimitiveInto`): e.g. to run an elementwise epilogue over a product's finished rows
 * while they are still in cache.
 */
export type ResultBands = (e0: number, e1: number) => void;

export interface Backend {
  readonly name: string;
  /** True when buffers hold memory the garbage collector cannot see (wasm heap, GPU): such
   * buffers are released through `dispose` when their Array is collected. */
  readonly manualMemory: boolean;
  /** Copies storage-format host data into a new buffer of this backend. */
  fromHost(data: StorageArray, aval: ShapedArray): unknown;
  /** Returns the buffer's contents in storage format. Callers must not mutate the result. */
  toHost(buffer: unknown, aval: ShapedArray): StorageArray;
  /** Releases a buffer. Called at most once per buffer. */
  dispose(buffer: unknown): void;
  /** Runs one primitive; returns one new buffer per output aval. */
  execute(prim: KernelPrimitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAvals: ShapedArray[]): unknown[];
  /**
   * Capability: whether host kernels that compute exactly what the primitives' reference
   * kernels compute may stand in, right now, for a chain of primitives run one by one (the fused
   * random samplers use it). Returns null when not (a backend that computes differently, or
   * must see every op, e.g. to cost it); else how its float32 -> bfloat16 conversion treats
   * subnormals. Absent: never.
   */
  hostKernels?(): HostKernelCapability | null;
  /**
   * Capability: runs single-output primitive `prim` writing its result into `out`, host storage
   * of the output's dtype and element count that the caller owns (a compiler's reused buffer or
   * a region of its arena), instead of allocating a buffer. Returns false when this backend does
   * not do that for this primitive and these types (the caller then uses `execute`). Absent:
   * never. `bands` (optional): the backend may hand over elements [e0, e1) of `out` as soon as
   * they are final, before it returns (a dot_general's finished rows): in increasing order,
   * the first from 0, each from where the previous one ended, on the calling thread; it need
   * not reach the end (core's `evalPrimitiveInto` hands over the rest). It must not call
   * `bands` when it returns false.
   */
  executeInto?(prim: KernelPrimitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAval: ShapedArray, out: StorageArray, bands?: ResultBands): boolean;
  /**
   * Capability: a group of independent dot_generals run together (core's `evalDotsInto`):
   * `beginDotGroup` returns true when the backend may defer the `executeInto` dots that follow
   * until `endDotGroup(true)` runs them (as one thread-pool job); `endDotGroup(false)` drops
   * them (after a failure). Absent or false: the dots run one by one.
   */
  beginDotGroup?(): boolean;
  endDotGroup?(run: boolean): void;
  /**
   * Capability: ends the group of `beginDotGroup` by starting its deferred dots on the pool's
   * workers and returning at once (true; then `joinDotGroup` must follow, which computes what the
   * workers left and waits for them) or by running them (false: nothing to join). Between the two
   * the caller may run only work that uses neither this backend nor a thread pool (the backend
   * throws for any primitive it is asked for). Absent: `endDotGroup(true)` is used.
   */
  startDotGroup?(): boolean;
  joinDotGroup?(): void;
  /**
   * Capability: `executeInto` for a primitive with several results (such as the fused
   * attention's out and logsumexp): every result into its own caller storage in `outs` (dtype
   * and element count of `outAvals[i]`). Returns false when this backend does not do that for
   * this primitive and these types (the caller then uses `execute`). Absent: never.
   */
  executeIntoAll?(prim: KernelPrimitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAvals: ShapedArray[], outs: StorageArray[]): boolean;
  /**
   * Capability: whether `nn.dotProductAttention` should pick the fused attention primitives
   * (one kernel per direction) by default on this backend because it runs them as fused
   * kernels with the MXU's one-pass bf16 numerics (the composite's numerics at the default
   * matmul precision). Absent: never (the default stays the composite).
   */
  fusedAttention?(): boolean;
  /**
   * Capability: the shared WebAssembly memory this backend's kernels work in, where a compiler
   * may reserve its arena, so that operands which are views of that arena are read in place
   * (no copy into the backend's memory) and results written into it land there directly.
   * Null when not available right now (e.g. no shared memory on this runtime). Absent: never.
   */
  arenaHost?(): ArenaHost | null;
}

/** A shared WebAssembly memory in which callers reserve fixed regions (see `Backend.arenaHost`). */
export interface ArenaHost {
  /** The memory (shared; it grows, up to `maxPages`, but never moves or invalidates a region). */
  readonly memory: WasmMemory;
  /** Its page limit (a module importing it declares this maximum). */
  readonly maxPages: number;
  /** Reserves `bytes`; returns the region's byte address (64-aligned), or -1 when the memory cannot hold it. */
  reserve(bytes: number): number;
  /** Releases a region `reserve` returned. */
  release(addr: number): void;
  /** The memory's current buffer; views made over it are what the backend reads in place. */
  buffer(): ArrayBufferLike;
  /** Whether `v` is a view (through `buffer()`) inside a reserved region: its byte offset is its address there, for kernels that read or write it in place. */
  holds?(v: ArrayBufferView): boolean;
}

/** The current backend's arena memory (see `Backend.arenaHost`), or null. */
export function arenaHost(): ArenaHost | null {
  return getBackend().arenaHost?.() ?? null;
}

/** What a backend vouches for when host kernels may replace its op-by-op execution. */
export interface HostKernelCapability {
  /** float32 -> bfloat16 conversions flush subnormal inputs to zero (a TPU option). */
  readonly flushSubnormals: boolean;
}

const BACKENDS = new Map<string, Backend>();
let current: Backend | null = null;

export function registerBackend(backend: Backend, { makeDefault = false } = {}): void {
  BACKENDS.set(backend.name, backend);
  if (makeDefault || current === null) current = backend;
}

/** Makes `name` the backend new arrays and ops run on. */
export function setBackend(name: string): void {
  const b = BACKENDS.get(name);
  if (!b) {
    throw new Error(`setBackend: no backend named ${showValue(name)}; registered: ${[...BACKENDS.keys()].join(', ')}`);
  }
  current = b;
}

export function getBackend(name?: string): Backend {
  if (name !== undefined) {
    const b = BACKENDS.get(name);
    if (!b) throw new Error(`getBackend: no backend named ${showValue(name)}; registered: ${[...BACKENDS.keys()].join(', ')}`);
    return b;
  }
  if (!current) throw new Error('getBackend: no backend is registered');
  return current;
}

export function listBackends(): string[] {
  return [...BACKENDS.keys()];
}

/** Runs `fn` with `name` as the current backend, restoring the previous one afterwards. */
export function withBackend<T>(name: string, fn: () => T): T {
  const prev = getBackend();
  setBackend(name);
  try {
    return fn();
  } finally {
    current = prev;
  }
}
