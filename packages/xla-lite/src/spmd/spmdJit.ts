/**
 * jit with shardings (GSPMD): `jit(f, { inShardings, outShardings })`, or arguments that are
 * already sharded, compile `f` once per abstract signature into one program per device.
 * `SpmdLowered` is the traced module with every value's propagated sharding
 * (`asText()` prints `sharding={...}`; `asStableHlo()` carries `mhlo.sharding`);
 * `SpmdCompiled` is the partitioned module (shard shapes and collectives, `asText()`) and runs
 * it over the devices with a `CollectiveRuntime` (in this thread by default). Results are
 * sharded Arrays whose sharding is the requested out sharding, or a `GSPMDSharding` of the
 * propagated one.
 *
 * Shardings are read through core's abstract `Sharding` interface only, so any implementation
 * (mesh's NamedSharding, a test grid) plugs in. All shardings of one call must span the same
 * devices (else an error naming both). Arguments under an outer transformation (tracers) do
 * not take this path: core's jit puts the shardings into its `pjit` parameters, its jvp /
 * partial-eval / transpose rules derive the shardings of the programs `grad(jit(f))` runs, and
 * xla-lite's compiler partitions each of them here (`compileSpmd` from `spmdSpecFor`).
 */
import { Array, ClosedJaxpr, type Device, makeArrayFromCallback, makeJaxpr, type Sharding, systolic, tree } from '@tpukit/core';
import { Jaxpr } from '@tpukit/core/internal';
import { Compiled, Lowered } from '../compiled';
import type { DonationPlan } from '../donation';
import type { ExecutableStats } from '../executable';
import { bytesOf as avalBytes, type HloInstruction, type HloModule } from '../hlo';
import { lowerJaxpr } from '../lower';
import { cacheKey, getCacheDir, loadModule, storeModule } from '../diskCache';
import { dce } from '../passes/dce';
import { toStableHlo } from '../stablehlo';
import { type CollectiveRuntime, getCollectiveRuntime, type ReduceOp, sliceBox } from './collectives';
import { deviceImage, type ModuleImage } from './deviceProgram';
import { buildSpmdExecutable } from './executor';
import { fromCoreSharding, GSPMDSharding, HloSharding } from './hloSharding';
import { partitionModule } from './partition';
import { propagateShardings } from './propagation';

/** A partitioned program as its devices receive it (see `deviceProgram.ts`). */
export interface SpmdProgram {
  /** Unique in this process: a device thread compiles each program once. */
  readonly id: number;
  readonly name: string;
  readonly image: ModuleImage;
  /** The largest collective operand (bytes), for the collective board's slots. */
  readonly maxCollectiveBytes: number;
  /** Flat input positions the call donates. */
  readonly donated: readonly number[];
  /** Per output, every device's local (shard) shape. */
  readonly outShapes: readonly { readonly shape: readonly number[]; readonly dtype: Array['dtype'] }[];
}

/**
 * Runs partitioned programs on devices that have threads of their own (@tpukit/mesh's CPU
 * devices install one): each device compiles the program and runs it on its shards, the
 * collectives meeting through shared memory. `run` returns every device's outputs (by device
 * position), or null when these devices cannot run programs (the in-thread executor runs it).
 */
export interface SpmdDeviceRunner {
  /** `own[k][j]`: whether `args[k][j]` is the argument's own shard for device k (else a slice or a replicated value made for it). */
  run(program: SpmdProgram, devices: readonly Device[], args: readonly (readonly Array[])[], own: readonly (readonly boolean[])[], what: string): Array[][] | null;
}

let deviceRunner: SpmdDeviceRunner | null = null;

/** Installs (or, with null, removes) the runner of partitioned programs on device threads. */
export function setSpmdDeviceRunner(r: SpmdDeviceRunner | null): void {
  deviceRunner = r;
}

let nextProgramId = 0;

/** What the partitioner needs to know about one program's devices and boundary shardings. */
export interface SpmdSpec {
  readonly devices: readonly Device[];
  /** Per flat input (closed-over constants first). */
  readonly inShardings: readonly HloSharding[];
  /** Per flat output: the requested sharding (null: propagation chooses). */
  readonly outShardings: readonly (HloSharding | null)[];
  /** Per flat output: the core Sharding results carry (null: a GSPMDSharding). */
  readonly outCore: readonly (Sharding | null)[];
}

/** Sharding constraints in the entry computation, as HloShardings over the program's devices. */
function constraintsOf(mod: HloModule, devices: readonly Device[]): Map<HloInstruction, HloSharding> {
  const out = new Map<HloInstruction, HloSharding>();
  for (const i of mod.entry.instructions) {
    if (i.prim?.name !== 'sharding_constraint') continue;
    const s = (i.params as { sharding?: Sharding }).sharding;
    if (!s || typeof s.devicesIndicesMap !== 'function') throw new Error(`xla-lite spmd ${mod.name}: sharding_constraint ${i.id} has no core Sharding in its 'sharding' parameter`);
    out.set(i, fromCoreSharding(s, i.shape.shape, devices, `sharding constraint on ${i.shape.dtype}[${i.shape.shape.join(',')}]`));
  }
  return out;
}

const annotate = (mod: HloModule, spec: SpmdSpec): Map<HloInstruction, HloSharding> =>
  propagateShardings(mod.entry, spec.inShardings, spec.outShardings, spec.devices.length, constraintsOf(mod, spec.devices));

export class SpmdLowered extends Lowered {
  constructor(
    jaxpr: ClosedJaxpr,
    name: string,
    donateArgnums: readonly number[],
    donateLabels: readonly string[],
    readonly spec: SpmdSpec,
    /** The closed-over constants hoisted into the leading parameters: the export embeds them. */
    consts: readonly Array[] = [],
  ) {
    super(jaxpr, name, donateArgnums, donateLabels);
    this.exportConsts = consts;
    for (const [i, s] of annotate(this.module, spec)) i.params.sharding = String(s);
  }

  /** StableHLO with `mhlo.sharding` on the arguments and results (GSPMD style, as JAX emits without Shardy). */
  override asStableHlo(): string {
    const outs = this.module.entry.outputs.map((o, k) => String(this.spec.outShardings[k] ?? o.params.sharding));
    // The hoisted constants become module constants, so the arguments (and their shardings) are the caller's alone.
    const args = this.spec.inShardings.slice(this.exportConsts.length).map(String);
    return toStableHlo(this.module, { numPartitions: this.spec.devices.length, args, results: outs }, this.exportConsts);
  }

  override compile(): Compiled {
    return new SpmdCompiled(this.jaxpr, this.name, this.donateArgnums, this.donateLabels, this.spec);
  }
}

const NO_STATS: ExecutableStats = { fusedKernels: 0, multiOpFusions: 0, fusedOps: 0, primitiveOps: 0, outputFusions: 0, rowFusions: 0, wasmKernels: 0, arenaBytes: 0, arenaInBackend: false, asyncGroups: 0, asyncWindowSteps: 0 };

export class SpmdCompiled extends Compiled {
  declare readonly spec: SpmdSpec;
  /** The sharding of each output as produced. */
  declare readonly outShardings: readonly HloSharding[];
  /** Runs the collectives: the runtime installed when this was compiled (`setCollectiveRuntime`), replaceable per program. */
  runtime: CollectiveRuntime = getCollectiveRuntime();
  declare private readonly spmdRun: ReturnType<typeof buildSpmdExecutable>;
  #program: SpmdProgram | null = null;
  /** Why this program runs in this thread although its devices have threads (a parameter no thread can receive); null otherwise. */
  deviceFallback: string | null = null;

  /** `partitioned`: a module partitioned earlier for the same jaxpr and spec (from the persistent cache). */
  constructor(jaxpr: ClosedJaxpr, name: string, donateArgnums: readonly number[], donateLabels: readonly string[], spec: SpmdSpec, partitioned: HloModule | null = null) {
    const n = spec.devices.length;
    let part: { module: HloModule; outShardings: HloSharding[] };
    if (partitioned) {
      const outs = partitioned.entry.outputs.map((o) => HloSharding.parse(String(o.params.sharding), o.shape.shape.length, n));
      part = { module: partitioned, outShardings: outs };
    } else {
      const mod = lowerJaxpr(jaxpr, `jit_${name}`);
      part = partitionModule(mod, annotate(mod, spec), spec.inShardings, spec.outShardings, n);
      dce(part.module.entry);
    }
    const spmdRun = buildSpmdExecutable(part.module, n, name);
    const build = (_m: HloModule, nm: string, _d?: DonationPlan | null) => ({
      run: (): never => {
        throw new Error(`xla-lite spmd ${nm}: run through SpmdCompiled.run`);
      },
      stats: NO_STATS,
      donor: null,
    });
    super(part.module, name, donateArgnums, {}, true, donateLabels, build);
    Object.defineProperty(this, 'spec', { value: spec });
    Object.defineProperty(this, 'jaxpr', { value: jaxpr });
    Object.defineProperty(this, 'outShardings', { value: part.outShardings });
    Object.defineProperty(this, 'spmdRun', { value: spmdRun });
  }

  /** The output shardings as core Shardings. */
  outputShardings(): Sharding[] {
    return this.outShardings.map((s, k) => this.spec.outCore[k] ?? new GSPMDSharding(this.spec.devices, s));
  }

  /**
   * Runs on global Arrays (sharded or not); returns sharded Arrays. Under a systolic cost
   * ledger the devices' compute is costed per chip, every collective by the ledger's
   * interconnect model, and placing / assembling shards not at all (host-side movement).
   */
  override run(args: Array[]): Array[] {
    const { devices, inShardings } = this.spec;
    const place = () => args.map((a, k) => localShards(a, inShardings[k], devices, `compiled ${this.name} input ${k}`));
    const shardings = this.outputShardings();
    const avals = this.jaxpr.outAvals;
    const gather = (outs: Array[][]) => outs.map((perDev, k) => assemble(perDev, avals[k].shape, avals[k].dtype, shardings[k], devices));
    if (!systolic.costing()) {
      // On the devices' own threads when they have them, else in this thread.
      const placed = place();
      const arrays = placed.map((l) => l.arrays);
      return gather(this.#onDevices(arrays, placed.map((l) => l.own)) ?? this.spmdRun(arrays, this.runtime));
    }
    // Costing runs in this thread, where the ledger is.
    const locals = systolic.uncosted(place).map((l) => l.arrays);
    const outs = systolic.perChip(devices.length, () => this.spmdRun(locals, new CostedCollectives(this.runtime)));
    return systolic.uncosted(() => gather(outs));
  }

  /** Every output's per-device values from the device threads, or null (no runner, or the program cannot go there). */
  #onDevices(locals: Array[][], own: boolean[][]): Array[][] | null {
    if (deviceRunner === null || this.deviceFallback !== null) return null;
    if (this.#program === null) {
      try {
        const { image, maxCollectiveBytes } = deviceImage(this.module, `xla-lite spmd ${this.name}`);
        const outShapes = this.module.entry.outputs.map((o) => ({ shape: [...o.shape.shape], dtype: o.shape.dtype }));
        this.#program = { id: nextProgramId++, name: this.name, image, maxCollectiveBytes, outShapes, donated: this.donateArgnums };
      } catch (e) {
        this.deviceFallback = e instanceof Error ? e.message : String(e);
        // Once per program: it runs, but on one thread.
        console.warn(`xla-lite spmd ${this.name}: runs in this thread instead of on its devices' threads: ${this.deviceFallback}`);
        return null;
      }
    }
    const { devices } = this.spec;
    const perDevice = devices.map((_, d) => locals.map((l) => l[d]));
    const ownPerDevice = devices.map((_, d) => own.map((o) => o[d]));
    const outs = deviceRunner.run(this.#program, devices, perDevice, ownPerDevice, `jit(${this.name})`);
    return outs && this.#program.outShapes.map((_, k) => outs.map((o) => o[k]));
  }

  /** As `run`, then deletes the donated inputs (JAX semantics; the shards are not reused in place). */
  override call(args: Array[]): Array[] {
    const outs = this.run(args);
    this.donateArgnums.forEach((j, k) => {
      if (!outs.includes(args[j])) args[j]._markDeleted(`it was donated to compiled ${this.name} as ${this.donateLabels[k] ?? `input ${j}`}`, false);
    });
    return outs;
  }

  declare readonly jaxpr: ClosedJaxpr;
}

const bytesOf = (a: Array): number => avalBytes(a.aval);

/**
 * A `CollectiveRuntime` that reports each collective to the systolic cost ledgers (kind, full
 * buffer bytes per device, replica groups) and runs it on `inner` uncosted.
 */
class CostedCollectives implements CollectiveRuntime {
  constructor(private readonly inner: CollectiveRuntime) {}
  private static first(values: readonly Array[], groups: readonly (readonly number[])[]): Array {
    return values[groups[0]?.[0] ?? 0];
  }
  allReduce(values: readonly Array[], groups: readonly (readonly number[])[], op: ReduceOp): Array[] {
    const bytes = bytesOf(CostedCollectives.first(values, groups));
    return systolic.collective({ kind: 'all-reduce', bytes, groups }, () => this.inner.allReduce(values, groups, op));
  }
  allGather(values: readonly Array[], groups: readonly (readonly number[])[], dim: number): Array[] {
    const bytes = bytesOf(CostedCollectives.first(values, groups)) * (groups[0]?.length ?? 1);
    return systolic.collective({ kind: 'all-gather', bytes, groups }, () => this.inner.allGather(values, groups, dim));
  }
  reduceScatter(values: readonly Array[], groups: readonly (readonly number[])[], dim: number, op: ReduceOp): Array[] {
    const bytes = bytesOf(CostedCollectives.first(values, groups));
    return systolic.collective({ kind: 'reduce-scatter', bytes, groups }, () => this.inner.reduceScatter(values, groups, dim, op));
  }
  allToAll(values: readonly Array[], groups: readonly (readonly number[])[], splitDim: number, concatDim: number): Array[] {
    const bytes = bytesOf(CostedCollectives.first(values, groups));
    return systolic.collective({ kind: 'all-to-all', bytes, groups }, () => this.inner.allToAll(values, groups, splitDim, concatDim));
  }
  collectivePermute(values: readonly Array[], pairs: readonly (readonly [number, number])[]): Array[] {
    const moving = pairs.filter(([s, t]) => s !== t);
    const bytes = bytesOf(values[moving[0]?.[0] ?? 0]);
    return systolic.collective({ kind: 'collective-permute', bytes, groups: [], pairs: moving }, () => this.inner.collectivePermute(values, pairs));
  }
}

const devPos = (devices: readonly Device[], d: Device): number => {
  const i = devices.indexOf(d);
  return i >= 0 ? i : devices.findIndex((x) => x.id === d.id);
};

/** Each device's shard of `a` under `hs`: the Array's own shards when they match (`own`), else slices of its value. */
function localShards(a: Array, hs: HloSharding, devices: readonly Device[], what: string): { arrays: Array[]; own: boolean[] } {
  const lay = hs.layout(a.shape, what);
  const out: (Array | undefined)[] = new globalThis.Array(devices.length);
  if (a._shards) {
    for (const s of a._shards) {
      const p = devPos(devices, s.device);
      if (p >= 0 && lay[p].every(([b, e], j) => s.index[j][0] === b && s.index[j][1] === e)) out[p] = s.data;
    }
  }
  return { arrays: lay.map((box, d) => out[d] ?? sliceBox(a, box)), own: lay.map((_, d) => out[d] !== undefined) };
}

function assemble(perDev: Array[], shape: readonly number[], dtype: Array['dtype'], sharding: Sharding, devices: readonly Device[]): Array {
  const order = [...sharding.devicesIndicesMap(shape).keys()];
  let j = 0;
  return makeArrayFromCallback(shape, dtype, sharding, () => {
    return perDev[devPos(devices, order[j++])];
  });
}

// ---- the jit side ----

export interface ShardingOptions {
  /** Per positional argument (or one for all): the sharding of every leaf of that argument; null keeps the argument's own. */
  inShardings?: Sharding | readonly (Sharding | null)[] | null;
  /** Per flat output leaf (or one for all): the sharding results get; null lets propagation choose. */
  outShardings?: Sharding | readonly (Sharding | null)[] | null;
}

const isTracerLike = (x: unknown): boolean => x instanceof Array && x.constructor !== Array;
const nonDefault = (s: Sharding): boolean => s.deviceSet.length > 1;

/** Array leaves (tracers included): one options object, no closure per call. */
const ARRAY_LEAVES: tree.FlattenOptions = { isLeaf: (x) => x instanceof Array };

/** Whether `inShardings` / `outShardings` as given asks for a sharding (a Sharding, or a list with one). A loop: see `active`. */
function given(o: unknown): boolean {
  if (!globalThis.Array.isArray(o)) return o != null;
  for (const s of o) if (s !== null) return true;
  return false;
}

/**
 * The sharded path of xla-lite's jit: `active(args)` says whether this call takes it;
 * `lower(args)` traces and annotates; compiled programs are cached by the caller's signature key.
 */

export function shardedJit(f: (...a: any[]) => unknown, opts: ShardingOptions & { staticArgnums?: number | readonly number[]; donateArgnums?: number | readonly number[] }, fname: string, names: readonly string[]) {
  const list = <T>(x: T | readonly T[] | undefined): T[] => (x === undefined ? [] : globalThis.Array.isArray(x) ? [...(x as T[])] : [x as T]);
  const staticNums = list(opts.staticArgnums);
  const donate = list(opts.donateArgnums);
  const inOpt = opts.inShardings;
  const outOpt = opts.outShardings;
  // (Fixed when the jit is made: not asked per call.)
  const asksShardings = given(inOpt) || given(outOpt);
  const cache = new Map<string, { compiled: SpmdCompiled; outTree: tree.TreeDef; consts: Array[] }>();
  const argName = (i: number) => `argument ${i}${names[i] ? ` (${names[i]})` : ''}`;

  // Asked on every call of the jitted function: plain loops, no closures made per call (they
  // lose their optimised code at every major GC; see core's tree.ts).
  const active = (args: unknown[]): boolean => {
    // Static arguments are not leaves (core's jit checks they are hashable, cyclic ones included).
    const dyn: unknown[] = [];
    for (let i = 0; i < args.length; i++) if (!staticNums.includes(i)) dyn.push(args[i]);
    const leaves = tree.flatten(dyn, ARRAY_LEAVES)[0];
    let sharded = false;
    for (let k = 0; k < leaves.length; k++) {
      const l = leaves[k];
      if (isTracerLike(l)) return false;
      if (!sharded && l instanceof Array && nonDefault(l.sharding)) sharded = true;
    }
    return sharded || asksShardings;
  };

  const trace = (args: unknown[]) => {
    if (globalThis.Array.isArray(inOpt) && inOpt.length !== args.length) {
      throw new Error(`jit(${fname}): inShardings has ${inOpt.length} entries but the call passes ${args.length} positional arguments (give one per argument, null to keep an argument's own)`);
    }
    const dyn = args.map((a, i) => (staticNums.includes(i) ? null : a));
    const g = (...d: unknown[]) => f(...args.map((a, i) => (staticNums.includes(i) ? a : d[i])));
    Object.defineProperty(g, 'name', { value: fname });
    const traced = makeJaxpr(g)(...dyn);
    // Per flat input: the requested sharding, or the leaf's own.
    const inCore: { s: Sharding | null; what: string; leaf: Array }[] = [];
    dyn.forEach((a, i) => {
      if (staticNums.includes(i)) return;
      const want = inOpt === undefined ? null : globalThis.Array.isArray(inOpt) ? ((inOpt as (Sharding | null)[])[i] ?? null) : (inOpt as Sharding);
      if (want !== null && typeof (want as Partial<Sharding>).devicesIndicesMap !== 'function') {
        throw new TypeError(`jit(${fname}): inShardings[${i}] is ${describe(want)}, not a Sharding or null (one Sharding per positional argument applies to all its leaves; pytrees of shardings are not supported)`);
      }
      const leaves = tree.flatten(a, { isLeaf: (x) => x instanceof Array })[0] as Array[];
      leaves.forEach((l, k) => inCore.push({ s: want ?? (nonDefault(l.sharding) ? l.sharding : null), what: `jit(${fname}): ${argName(i)}${leaves.length > 1 ? ` leaf ${k}` : ''}`, leaf: l }));
    });
    const nOut = traced.outAvals.length;
    const outCore: (Sharding | null)[] = globalThis.Array.isArray(outOpt) ? [...(outOpt as (Sharding | null)[])] : new globalThis.Array(nOut).fill(outOpt ?? null);
    if (outCore.length !== nOut) throw new Error(`jit(${fname}): outShardings has ${outCore.length} entries but the function returns ${nOut} arrays`);
    const nConst = traced.jaxpr.constvars.length;
    const inputs = [
      ...traced.jaxpr.constvars.map((v, k) => ({ sharding: null, shape: v.aval.shape, what: `jit(${fname}): constant ${k}` })),
      ...inCore.map((x) => ({ sharding: x.s, shape: x.leaf.shape, what: x.what })),
    ];
    const spec = spmdSpecFor(`jit(${fname})`, inputs, outCore, traced.outAvals);
    if (spec === null) throw new Error(`jit(${fname}): no sharding spans more than one device; nothing to partition`);
    // Constants become leading parameters so they travel like arguments.
    const hoisted = hoist(traced);
    const donated: number[] = [];
    const labels: string[] = [];
    let pos = nConst;
    dyn.forEach((a, i) => {
      if (staticNums.includes(i)) return;
      const nl = tree.flatten(a, { isLeaf: (x) => x instanceof Array })[0].length;
      if (donate.includes(i)) for (let k = 0; k < nl; k++) {
        donated.push(pos + k);
        labels.push(`${argName(i)}${nl > 1 ? ` leaf ${k}` : ''}`);
      }
      pos += nl;
    });
    return { lowered: new SpmdLowered(hoisted.jaxpr, fname, donated, labels, spec, hoisted.consts), outTree: traced.outTree, consts: hoisted.consts, dyn };
  };

  const flatArgs = (dyn: unknown[]): Array[] => tree.flatten(dyn.filter((_, i) => !staticNums.includes(i)), ARRAY_LEAVES)[0] as Array[];

  let traces = 0;
  return {
    active,
    /** How many times the sharded path traced `f`. */
    get traceCount(): number {
      return traces;
    },
    lower: (args: unknown[]): SpmdLowered => trace(args).lowered,
    /** Runs the call; `key` is the abstract signature; `onCompile` gets each compile's milliseconds. */
    call(args: unknown[], key: string, onCompile: (ms: number) => void): unknown {
      let hit = cache.get(key);
      if (!hit) {
        const t0 = performance.now();
        traces++;
        const { lowered, outTree, consts } = trace(args);
        hit = { compiled: compileSpmd(lowered.jaxpr, lowered.name, lowered.donateArgnums, lowered.donateLabels, lowered.spec), outTree, consts };
        cache.set(key, hit);
        onCompile(performance.now() - t0);
      }
      const outs = hit.compiled.call([...hit.consts, ...flatArgs(args.map((a, i) => (staticNums.includes(i) ? null : a)))]);
      return tree.unflatten(hit.outTree, outs);
    },
    clear: () => cache.clear(),
  };
}

const describe = (x: unknown): string => (typeof x === 'object' && x !== null ? `a ${x.constructor?.name ?? 'object'} {${Object.keys(x).join(', ')}}` : String(x));

const multi = (s: Sharding | null): s is Sharding => s !== null && s.deviceSet.length > 1;

/**
 * The partitioning spec of a program from the shardings of its flat inputs (single-device and
 * null ones are replicated) and its requested out shardings, or null when nothing spans more
 * than one device. All multi-device shardings must span the same devices (else an error
 * naming both, prefixed by `where`).
 */
export function spmdSpecFor(
  where: string,
  inputs: readonly { sharding: Sharding | null; shape: readonly number[]; what: string }[],
  outCore: readonly (Sharding | null)[],
  outAvals: readonly { shape: readonly number[] }[],
): SpmdSpec | null {
  let devices: Device[] | null = null;
  let from = '';
  const check = (s: Sharding | null, what: string): void => {
    if (!multi(s)) return;
    const ds = [...s.deviceSet].sort((a, b) => a.id - b.id);
    if (devices === null) {
      devices = ds;
      from = what;
    } else if (ds.map((d) => d.id).join() !== devices.map((d) => d.id).join()) {
      throw new Error(`${where}: mismatched meshes: ${from} is sharded over devices [${devices.map((d) => d.id).join(',')}] but ${what} over [${ds.map((d) => d.id).join(',')}]`);
    }
  };
  inputs.forEach((x) => check(x.sharding, x.what));
  outCore.forEach((s, k) => check(s, `outShardings[${k}]`));
  if (devices === null) return null;
  const devs: Device[] = devices;
  const inShardings = inputs.map((x) => (multi(x.sharding) ? fromCoreSharding(x.sharding, x.shape, devs, x.what) : HloSharding.replicated(x.shape.length, devs.length)));
  const outShardings = outAvals.map((a, k) => (outCore[k] ? fromCoreSharding(outCore[k]!, a.shape, devs, `${where}: outShardings[${k}]`) : null));
  return { devices: devs, inShardings, outShardings, outCore };
}

/** Partitions (or loads from the persistent cache, keyed on the shardings too) the program for `spec`. */
export function compileSpmd(jaxpr: ClosedJaxpr, name: string, donateArgnums: readonly number[], donateLabels: readonly string[], spec: SpmdSpec): SpmdCompiled {
  const diskKey = getCacheDir() === null ? null : cacheKey(jaxpr, { spmd: { devices: spec.devices.map((d) => d.id), in: spec.inShardings.map(String), out: spec.outShardings.map((s) => (s ? String(s) : null)) }, donateArgnums });
  const stored = diskKey === null ? null : loadModule(diskKey);
  const compiled = new SpmdCompiled(jaxpr, name, donateArgnums, donateLabels, spec, stored);
  if (diskKey !== null && stored === null) storeModule(diskKey, compiled.module);
  return compiled;
}

/** The closed jaxpr with its constants as leading inputs (and those constants). */
function hoist(c: ClosedJaxpr): { jaxpr: ClosedJaxpr; consts: Array[] } {
  const j = c.jaxpr;
  return { jaxpr: new ClosedJaxpr(new Jaxpr([], [...j.constvars, ...j.invars], j.eqns, j.outs), []), consts: [...c.consts] };
}
