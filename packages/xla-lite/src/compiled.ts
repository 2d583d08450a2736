/**
 * JAX's ahead-of-time objects. `Lowered` wraps the jaxpr for one signature and its HLO module
 * (`asText()`, `asStableHlo()`); `compile()` runs the pass pipeline and code generation and
 * returns a `Compiled`: the optimised module (`asText()`), `costAnalysis()` on a systolic
 * preset, `memoryAnalysis()` from buffer assignment, the pass statistics, and `call(...)` to
 * run it on flat arguments. With donated arguments, `donation` is the plan (which output lands
 * in which donated argument, which donations are unusable; see `donation.ts`) and `call`
 * deletes the donated inputs it reused, as a jitted call does.
 */
import { type Array, type ClosedJaxpr, systolic } from '@tpukit/core';
import { type CostAnalysis, computationCost, type MemoryAnalysis, memoryAnalysis } from './analysis';
import { type DonationPlan, type DonationRuntime, planDonation } from './donation';
import { buildExecutable, type ExecutableStats } from './executable';
import type { HloModule } from './hlo';
import { lowerJaxpr } from './lower';
import { emptyPassStats, optimize, type PassStats, type PipelineOptions } from './pipeline';
import { toStableHlo } from './stablehlo';
import { moduleText } from './text';
import { envSwitch } from '@tpukit/core/internal';

/**
 * Pipeline defaults the environment sets, read at each compile (for A/B runs): TPUKIT_ONEHOT=0
 * turns the one-hot pass off, TPUKIT_FUSION_REMAT=0 loop-fusion rematerialisation,
 * TPUKIT_SIBLING_FUSION=0 sibling multi-output fusion of column reductions, TPUKIT_HORIZONTAL_SUMS=0
 * its horizontal merges (column sums of one multi-output instruction's outputs), TPUKIT_HORIZONTAL_LOOPS=0
 * horizontal loop fusion (passes/horizontalLoops.ts), TPUKIT_CENTERED_OUTPUTS=0 centered outputs
 * recomputed by their readers (passes/centeredOutputs.ts), TPUKIT_DOT_GROUPS=0
 * dot groups (passes/dotGroups.ts), TPUKIT_ASYNC_GROUPS=0 their windows (started groups). They are
 * options, so the compile caches' keys see them (any value but 0, 1 or empty throws naming the
 * variable, so an A/B run never compares a build with itself); options passed explicitly
 * (`compile({ oneHot: true })`, `setPipelineOptions`) win.
 */
export const envDefaults = (): PipelineOptions => ({
  ...(envSwitch('TPUKIT_ONEHOT', true) ? {} : { oneHot: false }),
  ...(envSwitch('TPUKIT_FUSION_REMAT', true) ? {} : { rematerialize: false }),
  ...(envSwitch('TPUKIT_SIBLING_FUSION', true) ? {} : { siblingFusion: false }),
  ...(envSwitch('TPUKIT_HORIZONTAL_SUMS', true) ? {} : { horizontalSums: false }),
  ...(envSwitch('TPUKIT_HORIZONTAL_LOOPS', true) ? {} : { horizontalLoops: false }),
  ...(envSwitch('TPUKIT_CENTERED_OUTPUTS', true) ? {} : { centeredOutputs: false }),
  ...(envSwitch('TPUKIT_DOT_GROUPS', true) ? {} : { dotGroups: false }),
  ...(envSwitch('TPUKIT_ASYNC_GROUPS', true) ? {} : { asyncDotGroups: false }),
});

export interface CompileOptions extends PipelineOptions {
  /** Flat argument positions whose buffers may be reused for outputs. */
  donateArgnums?: readonly number[];
  /** What each donated argument is to the user, for messages (e.g. `argument 0 (params)`). */
  donateLabels?: readonly string[];
}

/**
 * What both stages show of their module: `Lowered` the unoptimised one (what `compile()` is
 * measured against), `Compiled` the optimised one (fusion bodies inline and layout copies
 * dropped in StableHLO).
 */
abstract class Stage {
  abstract get module(): HloModule;

  /**
   * Closed-over constants that `jit` hoisted to the program's leading inputs. The StableHLO
   * export writes them as `stablehlo.constant`s (as JAX does), so the module's arguments are the
   * function's own; `call` / `run` still take them first.
   */
  exportConsts: readonly Array[] = [];

  /** The module as HLO text. */
  asText(): string {
    return moduleText(this.module);
  }

  /** The module as StableHLO MLIR text. */
  asStableHlo(): string {
    return toStableHlo(this.module, null, this.exportConsts);
  }

  /**
   * FLOPs, transcendentals, bytes accessed and modelled seconds on a systolic preset (default
   * v5e). One-hot dots run as gathers / segment sums count the FLOPs of the dot they replaced.
   */
  costAnalysis(preset: systolic.TpuPreset = systolic.presets.v5e): CostAnalysis {
    return computationCost(this.module.entry, preset);
  }
}

export class Compiled extends Stage {
  /** Wall-clock milliseconds the pipeline and code generation took. */
  readonly compileMs: number;
  readonly passStats: PassStats;
  readonly stats: ExecutableStats;
  /** Which outputs land in which donated arguments (empty without donation). */
  readonly donation: DonationPlan;
  private readonly exec: (args: Array[]) => Array[];
  private readonly donor: DonationRuntime | null;

  constructor(
    readonly module: HloModule,
    readonly name: string,
    readonly donateArgnums: readonly number[],
    opts: PipelineOptions,
    /** True when `module` is already optimised (loaded from the persistent cache). */
    preoptimized = false,
    readonly donateLabels: readonly string[] = [],
    /** Builds the executable (the SPMD partitioner's `SpmdCompiled` brings its own). */
    build: typeof buildExecutable = buildExecutable,
  ) {
    super();
    const t0 = performance.now();
    this.passStats = preoptimized ? emptyPassStats() : optimize(module, opts);
    const planned = planDonation(module.entry, donateArgnums, name, donateLabels);
    const exe = build(module, name, planned);
    // (The executable's plan: tuple outputs written in place only where a wasm kernel runs the fusion.)
    this.donation = exe.donor?.plan ?? planned;
    this.exec = exe.run;
    this.donor = exe.donor;
    this.stats = exe.stats;
    this.compileMs = performance.now() - t0;
  }

  /** Runs the program without touching the inputs' lifetimes (jit's `pjit` deletes donated inputs itself). */
  run(args: Array[]): Array[] {
    return this.exec(args);
  }

  /**
   * Runs the compiled program on flat arguments (the jaxpr's inputs, in order). Donated inputs
   * whose storage now holds an output are deleted afterwards, as JAX deletes donated arrays.
   */
  call(args: Array[]): Array[] {
    this.donor?.checkArgs(args);
    const outs = this.exec(args);
    for (const j of new Set(this.donation.outputToParam.values())) {
      const a = args[j];
      if (outs.includes(a)) continue;
      a._markDeleted(`it was donated to compiled ${this.name} as ${this.donateLabels[this.donateArgnums.indexOf(j)] ?? `input ${j}`} and its buffer reused`, !outs.some((o) => o._buf === a._buf));
    }
    return outs;
  }

  /** Over all calls so far: outputs a fusion wrote straight into donated storage, and outputs copied into it. */
  donationStats(): { inPlaceWrites: number; copies: number } {
    return { ...(this.donor?.counts ?? { inPlaceWrites: 0, copies: 0 }) };
  }

  memoryAnalysis(): MemoryAnalysis {
    return memoryAnalysis(this.module.entry, this.donateArgnums);
  }
}

export class Lowered extends Stage {
  private lowered: HloModule | null = null;
  private shown = false;

  constructor(
    readonly jaxpr: ClosedJaxpr,
    readonly name: string,
    readonly donateArgnums: readonly number[] = [],
    readonly donateLabels: readonly string[] = [],
  ) {
    super();
  }

  /** The unoptimised HLO module, lowered from the jaxpr on first use. */
  get module(): HloModule {
    this.shown = true;
    return (this.lowered ??= lowerJaxpr(this.jaxpr, `jit_${this.name}`));
  }

  /**
   * Optimises and generates code. The module is lowered once: `compile()` takes it over (the
   * passes rewrite it in place), except when this `Lowered` was already looked at (`asText()`,
   * `module`, ...), when it lowers a copy so that what was shown stays unoptimised.
   */
  compile(opts: CompileOptions = {}): Compiled {
    const module = this.shown ? lowerJaxpr(this.jaxpr, `jit_${this.name}`) : (this.lowered ?? lowerJaxpr(this.jaxpr, `jit_${this.name}`));
    this.lowered = null;
    const compiled = new Compiled(module, this.name, opts.donateArgnums ?? this.donateArgnums, { ...envDefaults(), ...opts }, false, opts.donateLabels ?? this.donateLabels);
    compiled.exportConsts = this.exportConsts;
    return compiled;
  }
}
