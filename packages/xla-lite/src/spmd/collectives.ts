/**
 * The collectives a partitioned program needs, behind a small interface the SPMD executor
 * calls once per collective with every device's buffer (indexed by device position).
 * `InThreadCollectives` exchanges the buffers in this thread; @tpukit/mesh can back the same
 * interface with its worker-thread devices. Semantics follow XLA's: replica groups list device
 * positions; within a group, member order is the order of the gathered / scattered chunks.
 * Reductions combine the group's buffers in group order (member 0 first), so the result is
 * identical on every member and deterministic. `collectiveFor` is that arithmetic for one device;
 * `BoardCollectives` runs it on a device's own thread, meeting the other devices' threads through
 * a `CollectiveBoard` (shared memory + Atomics), which is how compiled device programs exchange
 * data (see `deviceProgram.ts`).
 */
import { type Array, fromStorage, np, type StorageArray, toStorage } from '@tpukit/core';
import { evalPrimitive, getPrimitive } from '@tpukit/core/internal';

export type ReduceOp = 'add' | 'max' | 'min' | 'mul' | 'and' | 'or';

export interface CollectiveRuntime {
  /** Every member of a group gets the reduction of the group's buffers. */
  allReduce(values: readonly Array[], groups: readonly (readonly number[])[], op: ReduceOp): Array[];
  /** Every member gets the group's buffers concatenated along `dim`, in group order. */
  allGather(values: readonly Array[], groups: readonly (readonly number[])[], dim: number): Array[];
  /** The group's reduction, split along `dim` into one chunk per member (member k gets chunk k). */
  reduceScatter(values: readonly Array[], groups: readonly (readonly number[])[], dim: number, op: ReduceOp): Array[];
  /** Member j splits its buffer along `splitDim` into |group| chunks and sends chunk k to member k; each concatenates what it received along `concatDim` in group order. */
  allToAll(values: readonly Array[], groups: readonly (readonly number[])[], splitDim: number, concatDim: number): Array[];
  /** `out[target] = values[source]` for each pair; a device no pair targets gets zeros. */
  collectivePermute(values: readonly Array[], pairs: readonly (readonly [number, number])[]): Array[];
}

const prim = (name: string) => getPrimitive(name);
const run1 = (name: string, args: Array[], params: unknown): Array => evalPrimitive(prim(name), args, params)[0];

export function concat(parts: readonly Array[], dim: number): Array {
  return parts.length === 1 ? parts[0] : run1('concatenate', [...parts], { dimension: dim });
}

/** `x[..., start:stop, ...]` along `dim`. */
export function sliceDim(x: Array, dim: number, start: number, stop: number): Array {
  if (start === 0 && stop === x.shape[dim]) return x;
  return sliceBox(x, x.shape.map((n, d): [number, number] => (d === dim ? [start, stop] : [0, n])));
}

/** The sub-box `[start, stop)` per dimension of `x`. */
export function sliceBox(x: Array, box: ReadonlyArray<readonly [number, number]>): Array {
  if (box.every(([s, e], d) => s === 0 && e === x.shape[d])) return x;
  return run1('slice', [x], { startIndices: box.map(([s]) => s), limitIndices: box.map(([, e]) => e), strides: null });
}

function reduceAll(parts: readonly Array[], op: ReduceOp): Array {
  let acc = parts[0];
  for (let k = 1; k < parts.length; k++) acc = run1(op, [acc, parts[k]], {});
  return acc;
}

function checkGroups(what: string, n: number, groups: readonly (readonly number[])[]): void {
  const seen = new Set<number>();
  for (const g of groups) for (const d of g) {
    if (!Number.isInteger(d) || d < 0 || d >= n || seen.has(d)) throw new Error(`${what}: replica groups ${JSON.stringify(groups)} must list each of the ${n} device positions at most once`);
    seen.add(d);
  }
}

/** The parameters of a collective instruction (XLA's attributes). */
export interface CollectiveParams {
  readonly replicaGroups?: readonly (readonly number[])[];
  readonly toApply?: ReduceOp;
  readonly dimensions?: readonly number[];
  readonly splitDimension?: number;
  readonly concatDimension?: number;
  readonly sourceTargetPairs?: readonly (readonly [number, number])[];
}

/** The collective opcodes a partitioned program holds. */
export type CollectiveOpcode = 'all-reduce' | 'all-gather' | 'reduce-scatter' | 'all-to-all' | 'collective-permute';

/**
 * What device `p` gets from collective `opcode` given every device's operand (`values`, by
 * device position): the one definition both runtimes use, so the in-thread and the
 * worker-thread devices compute bit-identical results.
 */
export function collectiveFor(opcode: CollectiveOpcode, values: readonly Array[], p: number, params: CollectiveParams): Array {
  if (opcode === 'collective-permute') {
    const pairs = params.sourceTargetPairs ?? [];
    const from = pairs.filter(([, t]) => t === p);
    if (from.length > 1) throw new Error(`collective-permute: device ${p} is the target of two pairs in ${JSON.stringify(pairs)}`);
    return from.length ? values[from[0][0]] : np.zerosLike(values[p]);
  }
  const groups = params.replicaGroups ?? [];
  checkGroups(opcode, values.length, groups);
  const g = groups.find((m) => m.includes(p));
  if (!g) return values[p];
  const k = g.indexOf(p);
  switch (opcode) {
    case 'all-reduce':
      return reduceAll(g.map((d) => values[d]), params.toApply ?? 'add');
    case 'all-gather':
      return concat(g.map((d) => values[d]), params.dimensions![0]);
    case 'reduce-scatter': {
      const dim = params.dimensions![0];
      const r = reduceAll(g.map((d) => values[d]), params.toApply ?? 'add');
      const w = r.shape[dim] / g.length;
      return sliceDim(r, dim, k * w, (k + 1) * w);
    }
    case 'all-to-all': {
      const split = params.splitDimension!;
      const w = values[g[0]].shape[split] / g.length;
      return concat(g.map((s) => sliceDim(values[s], split, k * w, (k + 1) * w)), params.concatDimension!);
    }
    default:
      throw new Error(`xla-lite spmd: ${String(opcode satisfies never)} is not a collective`);
  }
}

/**
 * Runs the collectives in this thread, every device's result from every device's buffer.
 * Results shared by a group (an all-reduce, an all-gather) are computed once per group.
 */
export class InThreadCollectives implements CollectiveRuntime {
  #run(opcode: CollectiveOpcode, values: readonly Array[], params: CollectiveParams, shared: boolean): Array[] {
    const memo = new Map<readonly number[], Array>();
    return values.map((_, p) => {
      const g = shared ? params.replicaGroups?.find((m) => m.includes(p)) : undefined;
      if (!g) return collectiveFor(opcode, values, p, params);
      let r = memo.get(g);
      if (!r) memo.set(g, (r = collectiveFor(opcode, values, p, params)));
      return r;
    });
  }

  allReduce(values: readonly Array[], groups: readonly (readonly number[])[], op: ReduceOp): Array[] {
    return this.#run('all-reduce', values, { replicaGroups: groups, toApply: op }, true);
  }

  allGather(values: readonly Array[], groups: readonly (readonly number[])[], dim: number): Array[] {
    return this.#run('all-gather', values, { replicaGroups: groups, dimensions: [dim] }, true);
  }

  reduceScatter(values: readonly Array[], groups: readonly (readonly number[])[], dim: number, op: ReduceOp): Array[] {
    return this.#run('reduce-scatter', values, { replicaGroups: groups, dimensions: [dim], toApply: op }, false);
  }

  allToAll(values: readonly Array[], groups: readonly (readonly number[])[], splitDim: number, concatDim: number): Array[] {
    return this.#run('all-to-all', values, { replicaGroups: groups, splitDimension: splitDim, concatDimension: concatDim }, false);
  }

  collectivePermute(values: readonly Array[], pairs: readonly (readonly [number, number])[]): Array[] {
    for (const t of new Set(pairs.map(([, t]) => t))) {
      if (pairs.filter(([, u]) => u === t).length > 1) throw new Error(`collective-permute: device ${t} is the target of two pairs in ${JSON.stringify(pairs)}`);
    }
    return this.#run('collective-permute', values, { sourceTargetPairs: pairs }, false);
  }
}

// ---- worker-to-worker collectives through shared memory ----

/** Int32 words at the start of a board: arrivals at the barrier, its generation, the abort flag (1 + the failed device's position). */
const COUNT = 0;
const GEN = 1;
const ABORT = 2;
/** Then one Int32 tag per device (what collective it is at), then the slots. */
const headerBytes = (devices: number): number => 16 + Math.ceil(devices / 2) * 8;

/**
 * The shared memory through which the devices of one program meet: a barrier and one slot per
 * device, large enough for the largest collective operand of the program. Allocated by the host,
 * shared by every device's thread.
 */
export class CollectiveBoard {
  readonly ctrl: Int32Array;
  /** Per device: a hash of the collective it waits at (devices at different collectives are an error). */
  readonly tags: Int32Array;

  constructor(
    readonly buffer: SharedArrayBuffer,
    readonly devices: number,
    readonly slotBytes: number,
  ) {
    if (buffer.byteLength < headerBytes(devices) + devices * slotBytes) throw new RangeError(`CollectiveBoard: ${buffer.byteLength} bytes cannot hold ${devices} slots of ${slotBytes} bytes`);
    this.ctrl = new Int32Array(buffer, 0, 4);
    this.tags = new Int32Array(buffer, 16, devices);
  }

  /** A board for `devices` devices whose collective operands take at most `maxBytes` bytes. */
  static create(devices: number, maxBytes: number): CollectiveBoard {
    const slot = Math.ceil(maxBytes / 8) * 8;
    return new CollectiveBoard(new SharedArrayBuffer(headerBytes(devices) + devices * slot), devices, slot);
  }

  /** Clears the barrier and the abort flag (the host, before a call, while no device runs). */
  reset(): void {
    Atomics.store(this.ctrl, COUNT, 0);
    Atomics.store(this.ctrl, ABORT, 0);
  }

  /** Tells every device waiting at the barrier that device `position` failed. */
  abort(position: number): void {
    Atomics.compareExchange(this.ctrl, ABORT, 0, position + 1);
    Atomics.add(this.ctrl, GEN, 1);
    Atomics.notify(this.ctrl, GEN);
  }

  /** Waits until every device arrived (throws if one failed meanwhile). */
  barrier(what: string): void {
    const gen = Atomics.load(this.ctrl, GEN);
    this.#checkAbort(what);
    if (Atomics.add(this.ctrl, COUNT, 1) === this.devices - 1) {
      Atomics.store(this.ctrl, COUNT, 0);
      Atomics.add(this.ctrl, GEN, 1);
      Atomics.notify(this.ctrl, GEN);
      return;
    }
    while (Atomics.load(this.ctrl, GEN) === gen) Atomics.wait(this.ctrl, GEN, gen, 200);
    this.#checkAbort(what);
  }

  #checkAbort(what: string): void {
    const a = Atomics.load(this.ctrl, ABORT);
    if (a !== 0) throw new Error(`${what}: abandoned because device position ${a - 1} of the program failed`);
  }

  /** Device `position`'s slot, as `bytes` bytes. */
  slot(position: number, bytes: number): Uint8Array {
    if (bytes > this.slotBytes) throw new RangeError(`CollectiveBoard: an operand of ${bytes} bytes exceeds the slot of ${this.slotBytes} bytes`);
    return new Uint8Array(this.buffer, headerBytes(this.devices) + position * this.slotBytes, bytes);
  }
}

/** A 32-bit FNV-1a hash of `s`. */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h | 0;
}

type StorageCtor = new (b: ArrayBufferLike, off: number, len: number) => StorageArray;

/**
 * One device's side of the collectives on worker threads: the device writes its operand into its
 * slot of the board, waits for the others at the barrier, computes its own result from the
 * group's slots (`collectiveFor`, the same arithmetic as `InThreadCollectives`), and waits again
 * so that no slot is overwritten before every device has read it. No host thread takes part.
 */
export class BoardCollectives {
  constructor(
    readonly board: CollectiveBoard,
    readonly position: number,
  ) {}

  run(opcode: CollectiveOpcode, x: Array, params: CollectiveParams): Array {
    return this.exchange(x, `${opcode} on device position ${this.position}`, (values) => collectiveFor(opcode, values, this.position, params));
  }

  /**
   * The rendezvous itself: every device's `x` (same shape and dtype on all devices) is visible to
   * all, and `compute` makes this device's result from them (by device position).
   */
  exchange(x: Array, what: string, compute: (values: Array[]) => Array): Array {
    const data = toStorage(x);
    const bytes = data.byteLength;
    const { tags } = this.board;
    const tag = hash(`${what.replace(/ on device position \d+$/, '')} ${x.dtype}[${x.shape.join(',')}]`);
    this.board.slot(this.position, bytes).set(new Uint8Array(data.buffer, data.byteOffset, bytes));
    Atomics.store(tags, this.position, tag);
    this.board.barrier(what);
    for (let d = 0; d < tags.length; d++) {
      if (Atomics.load(tags, d) !== tag) {
        this.board.abort(this.position);
        throw new Error(`${what}: the devices reached different collectives (device position ${d} is at another one than this ${x.dtype}[${x.shape.join(',')}] exchange)`);
      }
    }
    const ctor = data.constructor as StorageCtor;
    const values = globalThis.Array.from({ length: this.board.devices }, (_, d) => {
      const s = this.board.slot(d, bytes);
      return fromStorage(new ctor(s.buffer, s.byteOffset, data.length), x.shape, x.dtype);
    });
    let r: Array;
    try {
      r = compute(values);
    } catch (e) {
      this.board.abort(this.position);
      throw e;
    }
    const out = toStorage(r);
    // A result that is a slot itself (a permute, a one-member group) is copied out before the slots are reused.
    if (out.buffer === this.board.buffer) r = fromStorage(out.slice(), r.shape, r.dtype);
    this.board.barrier(what);
    return r;
  }
}

let current: CollectiveRuntime = new InThreadCollectives();

/**
 * The runtime sharded programs compiled from now on use for their collectives (null: back to
 * `InThreadCollectives`). @tpukit/mesh installs its worker-thread devices' runtime here.
 */
export function setCollectiveRuntime(rt: CollectiveRuntime | null): void {
  current = rt ?? new InThreadCollectives();
}

export function getCollectiveRuntime(): CollectiveRuntime {
  return current;
}
