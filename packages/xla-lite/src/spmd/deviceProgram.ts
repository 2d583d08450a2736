/**
 * A partitioned program as one compiled executable per device. `deviceImage` turns the
 * partitioned module into a plain-data image a device thread can receive (structured clone):
 * every collective becomes an `spmd_collective` instruction, a per-device `dynamic-slice` an
 * `spmd_device_slice`, and control flow over partitioned bodies an `spmd_control` instruction
 * whose bodies are computations of the image. `buildDeviceProgram` (on the device's thread)
 * rebuilds the module, runs the normal pipeline (simplification, layout, fusion) and
 * `buildExecutable` (JS and wasm kernels, arena) on it and on every body, and returns the run
 * function. The device-specific parts read the thread's device context (`withSpmdDevice`): its
 * position, and the `BoardCollectives` through which the collectives meet the other devices'
 * threads. Every device compiles the same image, so all of them execute the same collectives in
 * the same order.
 */
import { type Array, type DType, fromStorage, type StorageArray, toStorage } from '@tpukit/core';
import { definePrimitive, type Primitive, type ShapedArray } from '@tpukit/core/internal';
import { buildExecutable } from '../executable';
import { bytesOf, type HloComputation, type HloInstruction, HloModule } from '../hlo';
import { type CompImage, imageComputations, rebuildComputations } from '../moduleImage';
import { optimize } from '../pipeline';
import { type BoardCollectives, type CollectiveOpcode, type CollectiveParams, sliceBox } from './collectives';
import { ONE_DEVICE, runControlFlow } from './executor';

const COLLECTIVE_OPCODES = new Set<string>(['all-reduce', 'all-gather', 'reduce-scatter', 'all-to-all', 'collective-permute']);

/** The device whose program runs in this thread now. */
interface DeviceContext {
  readonly position: number;
  readonly collectives: BoardCollectives;
}
let device: DeviceContext | null = null;

/** Runs `body` as device `ctx.position` of a partitioned program (the device thread's side of a call). */
export function withSpmdDevice<T>(ctx: DeviceContext, body: () => T): T {
  const prev = device;
  device = ctx;
  try {
    return body();
  } finally {
    device = prev;
  }
}

function current(what: string): DeviceContext {
  if (device === null) throw new Error(`${what}: runs only inside a partitioned program on its device (withSpmdDevice)`);
  return device;
}

const outside = (name: string) => (): never => {
  throw new Error(`${name}: has no backend kernel; it runs through its evaluation rule inside a device program`);
};

type CollectiveInstParams = CollectiveParams & { readonly opcode: CollectiveOpcode; readonly out: ShapedArray };
type SliceParams = { readonly offsets: readonly (readonly number[])[]; readonly sizes: readonly number[]; readonly out: ShapedArray };
/** The compiled bodies of an `spmd_control` instruction (a class, so the executable keeps pooling its results). */
class Bodies {
  constructor(readonly runs: ((args: Array[]) => Array[])[]) {}
}
type ControlParams = Record<string, unknown> & { readonly kind: string; readonly outs: ShapedArray[]; bodies?: Bodies };

let prims: { collective: Primitive<CollectiveInstParams>; slice: Primitive<SliceParams>; control: Primitive<ControlParams> } | null = null;

/** The device-program primitives (defined once per thread, on first use). */
function devicePrims() {
  if (prims) return prims;
  const collective = definePrimitive<CollectiveInstParams>({ name: 'spmd_collective', abstractEval: (_a, p) => [p.out], impl: outside('spmd_collective') });
  collective.rules.eval = ([x]: Array[], p: CollectiveInstParams) => [current(p.opcode).collectives.run(p.opcode, x, p)];
  const slice = definePrimitive<SliceParams>({ name: 'spmd_device_slice', abstractEval: (_a, p) => [p.out], impl: outside('spmd_device_slice') });
  slice.rules.eval = ([x]: Array[], p: SliceParams) => {
    const off = p.offsets[current('dynamic-slice').position];
    return [sliceBox(x, off.map((o, j) => [o, o + p.sizes[j]] as const))];
  };
  const control = definePrimitive<ControlParams>({ name: 'spmd_control', abstractEval: (_a, p) => p.outs, impl: outside('spmd_control') });
  control.rules.eval = (ins: Array[], p: ControlParams) => {
    if (!p.bodies) throw new Error(`spmd_control ${p.kind}: its bodies were not compiled`);
    return runControlFlow<Array>(p.kind, p, p.bodies.runs, ins, p.outs, ONE_DEVICE);
  };
  prims = { collective, slice, control };
  return prims;
}

// ---- the image ----

type SharedLiteral = { data: StorageArray; shape: number[]; dtype: DType };

/** A partitioned module as plain data (computations callees first, the entry last). */
export interface ModuleImage {
  readonly name: string;
  readonly computations: CompImage<SharedLiteral>[];
}

/** Plain data a thread can receive: numbers, strings, booleans, null, arrays and plain objects of them. */
function plain(v: unknown): boolean {
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') return true;
  if (globalThis.Array.isArray(v)) return v.every(plain);
  return typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype && Object.values(v as object).every(plain);
}

const CONTROL_KEYS: Record<string, readonly string[]> = { while: ['condNconsts', 'bodyNconsts'], scan: ['numConsts', 'numCarry', 'length', 'reverse'], cond: [] };

/** The device-program form of one instruction's primitive and parameters. */
function deviceForm(i: HloInstruction, what: string): { prim: string | null; params: Record<string, unknown> } {
  const { sharding: _s, spmd, ...params } = i.params;
  const shape = (): ShapedArray => ({ shape: [...i.shape.shape], dtype: i.shape.dtype, weakType: i.shape.weakType });
  if (COLLECTIVE_OPCODES.has(i.opcode)) return { prim: 'spmd_collective', params: { ...params, opcode: i.opcode, out: shape() } };
  if (i.opcode === 'dynamic-slice') return { prim: 'spmd_device_slice', params: { offsets: params.offsets, sizes: params.sizes, out: shape() } };
  if (spmd) {
    const kind = i.prim!.name;
    const keys = CONTROL_KEYS[kind];
    if (!keys) throw new Error(`${what}: control flow ${kind} has no device form`);
    return { prim: 'spmd_control', params: { kind, ...Object.fromEntries(keys.map((k) => [k, params[k]])), outs: i.shapes.map((s) => ({ shape: [...s.shape], dtype: s.dtype, weakType: s.weakType })) } };
  }
  for (const [k, v] of Object.entries(params)) {
    if (!plain(v)) throw new Error(`${what}: instruction ${i.opcode} parameter '${k}' is a ${typeof v === 'function' ? 'function' : ((v as object)?.constructor?.name ?? typeof v)}, which cannot be sent to a device thread`);
  }
  return { prim: i.prim?.name ?? null, params };
}

/**
 * The image of a partitioned module, and the largest collective operand in bytes (the size of
 * each device's slot on the collective board).
 */
export function deviceImage(mod: HloModule, what: string): { image: ModuleImage; maxCollectiveBytes: number } {
  let maxBytes = 0;
  const computations = imageComputations<SharedLiteral>(mod, (i, c) => {
    if (COLLECTIVE_OPCODES.has(i.opcode)) maxBytes = Math.max(maxBytes, bytesOf(i.operands[0].shape));
    if (i.opcode === 'fusion') throw new Error(`${what}: device images are made before fusion (found a fusion in ${c.name})`);
    const lit = i.literal;
    return { ...deviceForm(i, what), literal: lit ? { data: toStorage(lit).slice(), shape: [...lit.shape], dtype: lit.dtype } : null };
  })!;
  return { image: { name: mod.name, computations }, maxCollectiveBytes: maxBytes };
}

/** The computations of an image, rebuilt (callees first). */
function rebuild(image: ModuleImage): HloComputation[] {
  devicePrims();
  return rebuildComputations(image.computations, (l) => fromStorage(l.data, l.shape, l.dtype));
}

/** Optimises and compiles `c` as the entry of a module, its control-flow bodies first. */
function compileComputation(c: HloComputation, name: string): (args: Array[]) => Array[] {
  for (const i of c.instructions) {
    if (i.prim?.name === 'spmd_control') i.params.bodies = new Bodies(i.called.map((b, k) => compileComputation(b, `${name}/${(i.params as ControlParams).kind}.${k}`)));
  }
  const mod = new HloModule(name, c);
  mod.computations = mod.reachable();
  optimize(mod);
  return buildExecutable(mod, name).run;
}

/** This device's compiled program (run it inside `withSpmdDevice`). */
export function buildDeviceProgram(image: ModuleImage): (args: Array[]) => Array[] {
  const comps = rebuild(image);
  return compileComputation(comps[comps.length - 1], image.name);
}
