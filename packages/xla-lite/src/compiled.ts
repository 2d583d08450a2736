/**
 * JAX's ahead-of-time objects. `Lowered` wraps the jaxpr for one signature and its HLO module
 * (`asText()`, `asStableHlo()`); `compile()` runs the pass pipeline and code generation and
 * returns a `Compiled`: the optimised module (`asText()`), `costAnalysis()` on a systolic
 * preset, `memoryAnalysis()` from buffer assignment, the pass statistics, and `call(...)` to
 * run it on flat arguments.
 */
import { type Array, type ClosedJaxpr, systolic } from '@tpukit/core';
import { type CostAnalysis, computationCost, type MemoryAnalysis, memoryAnalysis } from './analysis';
import { buildExecutable, type ExecutableStats } from './executable';
import type { HloModule } from './hlo';
import { lowerJaxpr } from './lower';
import { emptyPassStats, optimize, type PassStats, type PipelineOptions } from './pipeline';
import { toStableHlo } from './stablehlo';
import { moduleText } from './text';

export interface CompileOptions extends PipelineOptions {
  /** Flat argument positions whose buffers may be reused for outputs. */
  donateArgnums?: readonly number[];
}

export class Compiled {
  /** Wall-clock milliseconds the pipeline and code generation took. */
  readonly compileMs: number;
  readonly passStats: PassStats;
  readonly stats: ExecutableStats;
  private readonly exec: (args: Array[]) => Array[];

  constructor(
    readonly module: HloModule,
    readonly name: string,
    readonly donateArgnums: readonly number[],
    opts: PipelineOptions,
    /** True when `module` is already optimised (loaded from the persistent cache). */
    preoptimized = false,
  ) {
    const t0 = performance.now();
    this.passStats = preoptimized ? emptyPassStats() : optimize(module, opts);
    const exe = buildExecutable(module, name);
    this.exec = exe.run;
    this.stats = exe.stats;
    this.compileMs = performance.now() - t0;
  }

  /** Runs the compiled program on flat arguments (the jaxpr's inputs, in order). */
  call(args: Array[]): Array[] {
    return this.exec(args);
  }

  asText(): string {
    return moduleText(this.module);
  }

  /** The optimised module as StableHLO MLIR text (fusion bodies inline, layout copies dropped). */
  asStableHlo(): string {
    return toStableHlo(this.module);
  }

  /** FLOPs, transcendentals, bytes accessed and modelled seconds on a systolic preset (default v5e). */
  costAnalysis(preset: systolic.TpuPreset = systolic.presets.v5e): CostAnalysis {
    return computationCost(this.module.entry, preset);
  }

  memoryAnalysis(): MemoryAnalysis {
    return memoryAnalysis(this.module.entry, this.donateArgnums);
  }
}

export class Lowered {
  readonly module: HloModule;

  constructor(
    readonly jaxpr: ClosedJaxpr,
    readonly name: string,
    readonly donateArgnums: readonly number[] = [],
  ) {
    this.module = lowerJaxpr(jaxpr, `jit_${name}`);
  }

  /** The unoptimised module as HLO text. */
  asText(): string {
    return moduleText(this.module);
  }

  /** The unoptimised module as StableHLO MLIR text. */
  asStableHlo(): string {
    return toStableHlo(this.module);
  }

  /** Cost of the unoptimised program (what `compile()` is measured against). */
  costAnalysis(preset: systolic.TpuPreset = systolic.presets.v5e): CostAnalysis {
    return computationCost(this.module.entry, preset);
  }

  compile(opts: CompileOptions = {}): Compiled {
    return new Compiled(lowerJaxpr(this.jaxpr, `jit_${this.name}`), this.name, opts.donateArgnums ?? this.donateArgnums, opts);
  }
}
