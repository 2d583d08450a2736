/**
 * The 'systolic' backend: what a TPU would compute, and what it would cost. dot_general on
 * floating operands runs on the WebAssembly MXU GEMM (bf16 operands, exact products, f32
 * accumulation, multi-pass precision; see mxuDot.ts). Every other primitive runs its reference
 * kernel over host typed arrays (bf16 stays 2 bytes per element; bf16 elementwise math computes
 * in f32 and rounds once, as the TPU's vector unit does). Integer dots stay exact (reference
 * kernel). With `flushSubnormals`, conversions to bf16 flush subnormals to zero as the TPU does.
 * Every executed op is costed on the selected preset and added to the active ledgers, and the
 * collectives of partitioned programs are costed by the ledgers' interconnect model.
 */
import * as bf16 from '../../bf16';
import type { ArenaHost, Backend, HostKernelCapability, ResultBands } from '../../backend';
import type { StorageArray } from '../../dtype';
import type { DotGeneralParams } from '../../lax/dot';
import type { Primitive, ShapedArray } from '../../primitive';
import { wasmFeatures } from '../../wasm/features';
import { GemmEngine } from './gemmEngine';
import { GEMM_SHAPE_4X8, GEMM_SHAPE_5X8 } from './gemmModule';
import { type Ledger, addCollective, addToLedger, newLedger, opCost } from './ledger';
import { type CollectiveCall, collectiveCost, getInterconnect, type InterconnectModel } from './interconnect';
import { mxuDotGeneral } from './mxuDot';
import type { AttentionParams } from '../../lax/attention';
import { attentionStorageFits, systolicAttentionKernels } from './attention';
import { type TpuPreset, checkPreset, presets } from './presets';
import { applyThreads } from './threads';
import { hostArrays, hostExecuteInto, hostMemory } from '../reference';
import { showValue } from '../../describe';

export interface SystolicOptions {
  /** Flush subnormal inputs of bf16 conversions to zero (the TPU's conversion). Default false. */
  flushSubnormals?: boolean;
  /** Use relaxed SIMD (FMA) when the runtime has it. Default true. */
  relaxedSimd?: boolean;
  /** The TPU the cost model describes: a preset name or a record. Default 'v5e'. */
  preset?: keyof typeof presets | TpuPreset;
  /**
   * The GEMM micro-kernel: '4x8' or '5x8' forces one, 'auto' (the default) takes
   * `TPUKIT_GEMM_KERNEL` or else the one this CPU runs faster (measured once per process). Every
   * kernel gives the same bits; only speed differs.
   */
  gemmKernel?: 'auto' | '4x8' | '5x8';
}

const FLOAT = new Set(['float32', 'bfloat16', 'float16']);

export class SystolicBackend implements Backend {
  readonly name: string;
  // Buffers are host typed arrays, held as the reference backend holds them.
  readonly manualMemory = hostMemory.manualMemory;
  readonly fromHost = hostMemory.fromHost;
  readonly toHost = hostMemory.toHost;
  readonly dispose = hostMemory.dispose;
  flushSubnormals = false;
  preset: TpuPreset = presets.v5e;
  private relaxed = true;
  private kernel: 'auto' | '4x8' | '5x8' = 'auto';
  private engineCache: GemmEngine | null = null;
  /** Ledgers currently collecting (nested `withLedger` calls each get every op). */
  readonly activeLedgers: Ledger[] = [];
  /** The share of its cost each executed op adds (1 / devices inside `perChip`). */
  private share = 1;
  /** > 0 while ops run that are not compute (`uncosted`, a collective's emulation). */
  private suspended = 0;

  /** Host kernels may stand in for op-by-op execution unless ops are being costed into a ledger. */
  hostKernels(): HostKernelCapability | null {
    return this.activeLedgers.length === 0 ? { flushSubnormals: this.flushSubnormals } : null;
  }

  constructor(name = 'systolic', opts: SystolicOptions = {}) {
    this.name = name;
    this.configure(opts);
  }

  configure(opts: SystolicOptions): void {
    if (opts.flushSubnormals !== undefined) this.flushSubnormals = opts.flushSubnormals;
    if (opts.relaxedSimd !== undefined && opts.relaxedSimd !== this.relaxed) {
      this.relaxed = opts.relaxedSimd;
      this.engineCache = null;
    }
    if (opts.gemmKernel !== undefined) {
      const k = opts.gemmKernel;
      if (k !== 'auto' && k !== '4x8' && k !== '5x8') throw new Error(`systolic.configure: gemmKernel must be 'auto', '4x8' or '5x8'; got ${showValue(k)}`);
      if (k !== this.kernel) {
        this.kernel = k;
        this.engineCache = null;
      }
    }
    if (opts.preset !== undefined) {
      if (typeof opts.preset === 'string') {
        const p = presets[opts.preset];
        if (!p) throw new Error(`systolic.configure: unknown preset ${showValue(opts.preset)}; known: ${Object.keys(presets).join(', ')}`);
        this.preset = p;
      } else this.preset = checkPreset(opts.preset, 'systolic.configure');
    }
  }

  /** The GEMM engine (compiled on first use). */
  get engine(): GemmEngine {
    if (!this.engineCache) {
      const shape = this.kernel === 'auto' ? undefined : this.kernel === '5x8' ? GEMM_SHAPE_5X8 : GEMM_SHAPE_4X8;
      this.engineCache = new GemmEngine({ relaxed: this.relaxed && wasmFeatures().relaxedSimd, shape });
    }
    applyThreads(this.engineCache);
    return this.engineCache;
  }

  /**
   * The GEMM engine's memory as an arena host (see `Backend.arenaHost`): a compiler's arena
   * reserved there is read in place by the products. Null without shared memory.
   */
  arenaHost(): ArenaHost | null {
    const e = this.engine;
    return e.shared ? e : null;
  }

  /** Whether products use relaxed-SIMD FMA. */
  get usesRelaxedSimd(): boolean {
    return this.engine.relaxed;
  }

  execute(prim: Primitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAvals: ShapedArray[]): unknown[] {
    if (this.engineCache?.groupStarted) this.engineCache.refuseWhileStarted(prim.name);
    const host = hostArrays(inputs, inAvals);
    let outs: StorageArray[];
    if (prim.name === 'dot_general' && FLOAT.has(inAvals[0].dtype) && FLOAT.has(outAvals[0].dtype)) {
      outs = [mxuDotGeneral(this.engine, host[0], host[1], params as DotGeneralParams, outAvals[0], { flushSubnormals: this.flushSubnormals })];
    } else if (this.flushSubnormals && prim.name === 'convert_element_type' && inAvals[0].dtype === 'float32' && outAvals[0].dtype === 'bfloat16') {
      outs = [bf16.encode(host[0].data as Float32Array, { flushSubnormals: true })];
    } else if (Object.hasOwn(systolicAttentionKernels, prim.name)) {
      outs = systolicAttentionKernels[prim.name](host, params as AttentionParams, outAvals, this.relaxed && wasmFeatures().relaxedSimd, undefined, this.arenaHost());
    } else {
      outs = prim.impl(host, params, outAvals);
    }
    this.charge(prim, inAvals, params, outAvals);
    return outs;
  }

  /**
   * dot_general on floating operands with a float32 result (on the MXU), or a primitive with a
   * reference kernel into caller storage (`implInto`), written into the caller's `out` (see
   * `Backend.executeInto`). A dot on the thread pool hands its finished rows to `bands` (see `mxuDotGeneral`).
   */
  executeInto(prim: Primitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAval: ShapedArray, out: StorageArray, bands?: ResultBands): boolean {
    if (this.engineCache?.groupStarted) this.engineCache.refuseWhileStarted(prim.name);
    if (prim.name === 'dot_general') {
      if (!FLOAT.has(inAvals[0].dtype) || outAval.dtype !== 'float32' || !(out instanceof Float32Array)) return false;
      const host = hostArrays(inputs, inAvals);
      mxuDotGeneral(this.engine, host[0], host[1], params as DotGeneralParams, outAval, { flushSubnormals: this.flushSubnormals }, out, bands);
    } else if (!hostExecuteInto(prim, inputs, inAvals, params, outAval, out)) return false;
    this.charge(prim, inAvals, params, [outAval]);
    return true;
  }

  /** A group of independent dots (see `Backend.beginDotGroup`): deferred by the GEMM engine, run as one pool job. */
  beginDotGroup(): boolean {
    return this.engine.beginGroup();
  }
  endDotGroup(run: boolean): void {
    this.engineCache?.endGroup(run);
  }
  /** Starts the group's deferred products on the workers (see `Backend.startDotGroup`, `GemmEngine.startGroup`). */
  startDotGroup(): boolean {
    return this.engineCache?.startGroup() ?? false;
  }
  joinDotGroup(): void {
    this.engineCache?.joinGroup();
  }

  /** The fused attention primitives into caller storage (see `Backend.executeIntoAll`). */
  executeIntoAll(prim: Primitive, inputs: unknown[], inAvals: ShapedArray[], params: unknown, outAvals: ShapedArray[], outs: StorageArray[]): boolean {
    if (this.engineCache?.groupStarted) this.engineCache.refuseWhileStarted(prim.name);
    if (!Object.hasOwn(systolicAttentionKernels, prim.name) || !attentionStorageFits(outAvals, outs)) return false;
    systolicAttentionKernels[prim.name](hostArrays(inputs, inAvals), params as AttentionParams, outAvals, this.relaxed && wasmFeatures().relaxedSimd, outs, this.arenaHost());
    this.charge(prim, inAvals, params, outAvals);
    return true;
  }

  /** The fused attention kernels are this backend's (see `Backend.fusedAttention`). */
  fusedAttention(): boolean {
    return true;
  }

  /** Adds an executed op's cost (this thread's share of it) to every active ledger, unless costing is suspended. */
  private charge(prim: Primitive, inAvals: ShapedArray[], params: unknown, outAvals: ShapedArray[]): void {
    if (this.activeLedgers.length === 0 || this.suspended !== 0) return;
    for (const l of this.activeLedgers) addToLedger(l, opCost(prim, inAvals, params, outAvals, l.preset), this.share);
  }

  /** Whether some ledger is collecting. */
  get costing(): boolean {
    return this.activeLedgers.length > 0;
  }

  /** Runs `fn`, the execution of a program partitioned over `devices` devices in this thread: each op counts 1/devices (a chip's share). */
  perChip<T>(devices: number, fn: () => T): T {
    if (!Number.isInteger(devices) || devices < 1) throw new RangeError(`systolic.perChip: devices must be a positive integer; got ${devices}`);
    const prev = this.share;
    this.share = prev / devices;
    for (const l of this.activeLedgers) l.devices = Math.max(l.devices, devices);
    try {
      return fn();
    } finally {
      this.share = prev;
    }
  }

  /** Runs `fn` without costing its ops (host-side data movement, not device compute). */
  uncosted<T>(fn: () => T): T {
    this.suspended++;
    try {
      return fn();
    } finally {
      this.suspended--;
    }
  }

  /** Records `call` in every active ledger (timed by its interconnect model), then runs `move` (its emulation) uncosted. */
  collective<T>(call: CollectiveCall, move: () => T): T {
    for (const l of this.activeLedgers) addCollective(l, collectiveCost(call, l.interconnect));
    return this.uncosted(move);
  }

  /** Runs `fn`, collecting the cost of every op it executes on this backend (collectives timed by `interconnect`, else the installed one). */
  withLedger<T>(fn: () => T, preset?: TpuPreset, keepEntries = true, interconnect?: InterconnectModel | null): { result: T; ledger: Ledger } {
    const ledger = newLedger(preset ?? this.preset, keepEntries, interconnect === undefined ? getInterconnect() : interconnect);
    this.activeLedgers.push(ledger);
    try {
      const result = fn();
      return { result, ledger };
    } finally {
      this.activeLedgers.splice(this.activeLedgers.indexOf(ledger), 1);
    }
  }
}
