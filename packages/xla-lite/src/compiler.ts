/**
 * The `Compiler` xla-lite registers with core's `jit` (see core's transforms/jit.ts): core
 * traces once per abstract signature and asks for an executable per new jaxpr; this compiler
 * lowers, optimises and generates code for it and records compile statistics (count, time).
 * Importing @tpukit/xla-lite installs it; `useXla(false)` goes back to op-by-op execution.
 * The persistent cache key covers the jaxpr, the pipeline options, the donated inputs and the
 * inputs' shardings. Compile-time warnings (unusable donations) go to the `warn` core's `jit`
 * passes (the jitted function's `onWarning`), else console.warn. A program that comes with
 * shardings over several devices (`CompileRequest.shardings`: the jvp, partial-eval and
 * transpose programs of a sharded `grad(jit(f))`) is partitioned (GSPMD) instead.
 */
import { type Compiler, type Executable, getCompiler, registerCompiler } from '@tpukit/core/internal';
import { Compiled, envDefaults, Lowered } from './compiled';
import { cacheKey, getCacheDir, loadModule, storeModule } from './diskCache';
import type { PipelineOptions } from './pipeline';
import { compileSpmd, shardedJit, type SpmdCompiled, spmdSpecFor } from './spmd/spmdJit';

export interface CompileRecord {
  readonly name: string;
  readonly ms: number;
  readonly instructions: number;
  readonly fusedKernels: number;
  /** Loaded from the persistent cache (`setCacheDir`) instead of running the passes. */
  readonly fromDisk: boolean;
  /** Warnings raised while compiling (e.g. "Some donated buffers were not usable"). */
  readonly warnings: readonly string[];
  /** For a partitioned program: its device count, the shardings it was compiled for and the program itself (`asText()`, `costAnalysis()`). */
  readonly partitioned?: { readonly devices: number; readonly inShardings: readonly string[]; readonly program: SpmdCompiled };
}

const records: CompileRecord[] = [];
let pipeline: PipelineOptions = envDefaults();

/** Every compilation made by the registered compiler, in order. */
export function compileLog(): readonly CompileRecord[] {
  return records;
}

export function clearCompileLog(): void {
  records.length = 0;
}

/** Pipeline options used by `jit` from now on (e.g. `{ fuse: false }` to measure the unfused program). */
export function setPipelineOptions(opts: PipelineOptions): void {
  pipeline = { ...envDefaults(), ...opts };
}

export const xlaCompiler: Compiler = {
  name: 'xla-lite',
  compile(jaxpr, { name, donateArgnums, donateLabels = [], inShardings = [], shardings, warn }): Executable {
    const t0 = performance.now();
    if (shardings) {
      const inputs = jaxpr.inAvals.map((a, k) => ({ sharding: shardings.in[k] ?? null, shape: a.shape, what: `jit(${name}) input ${k}` }));
      const spec = spmdSpecFor(`jit(${name})`, inputs, shardings.out, jaxpr.outAvals);
      if (spec !== null) {
        const c = compileSpmd(jaxpr, name, donateArgnums, donateLabels, spec);
        records.push({ name, ms: performance.now() - t0, instructions: c.module.entry.instructions.length, fusedKernels: 0, fromDisk: false, warnings: [], partitioned: { devices: spec.devices.length, inShardings: spec.inShardings.map(String), program: c } });
        // Core's pjit deletes the donated inputs after the call (shards are not reused in place).
        return Object.assign((args: Parameters<Executable>[0]) => c.run(args), { unusableDonations: [] as number[] });
      }
    }
    const key = getCacheDir() === null ? null : cacheKey(jaxpr, { pipeline, donateArgnums, inShardings });
    const cached = key === null ? null : loadModule(key);
    let c: Compiled;
    if (cached) c = new Compiled(cached, name, donateArgnums, pipeline, true, donateLabels);
    else {
      c = new Lowered(jaxpr, name, donateArgnums, donateLabels).compile({ ...pipeline, donateArgnums, donateLabels });
      if (key !== null) storeModule(key, c.module);
    }
    const warnings = c.donation.warning === null ? [] : [c.donation.warning];
    records.push({ name, ms: performance.now() - t0, instructions: c.module.entry.instructions.length, fusedKernels: c.stats.fusedKernels, fromDisk: cached !== null, warnings });
    for (const w of warnings) (warn ?? console.warn)(w);
    // Core's pjit deletes the donated inputs after each call, except the unusable ones.
    return Object.assign((args: Parameters<Executable>[0]) => c.run(args), { unusableDonations: c.donation.unusable });
  },
  // GSPMD: calls with shardings over several devices are partitioned per device (spmd/).
  partitioned: (f, opts, name, names) => shardedJit(f, opts as Parameters<typeof shardedJit>[1], name, names),
};

/** Installs (default) or removes xla-lite as the compiler behind core's `jit`. */
export function useXla(on = true): void {
  if (on) registerCompiler(xlaCompiler);
  else if (getCompiler() === xlaCompiler) registerCompiler(null);
}
