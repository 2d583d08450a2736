/**
 * xla-lite's `jit` is core's `jit` (one signature, one cache, one trace per abstract signature,
 * `compileStats()` and recompile explanations; see core's transforms/jit.ts), with `lower()`
 * returning a `Lowered` (HLO text, StableHLO, `compile()`) instead of the jaxpr. Importing
 * @tpukit/xla-lite registers its compiler behind that one `jit`.
 */
import { type JitOptions, type Jitted, jit as coreJit } from '@tpukit/core';
import { Lowered } from './compiled';
import type { ShardingOptions, SpmdLowered } from './spmd/spmdJit';

/** Core's `JitOptions` plus GSPMD's `inShardings` / `outShardings` (typed with core's `Sharding`). */
export type XlaJitOptions = JitOptions & ShardingOptions;

export interface XlaJitted<F extends (...args: any[]) => any> extends Omit<Jitted<F>, 'lower'> {
  (...args: Parameters<F>): ReturnType<F>;
  /** The `Lowered` program for these arguments (traces if needed; lowering happens on first use). */
  lower(...args: Parameters<F>): Lowered;
}

/** `jax.jit` with xla-lite's ahead-of-time view: core's `jit(f, opts)` whose `lower()` gives a `Lowered`. */
export function jit<F extends (...args: any[]) => any>(f: F, opts: XlaJitOptions = {}): XlaJitted<F> {
  const jitted = coreJit(f, opts as JitOptions) as unknown as XlaJitted<F> & Jitted<F>;
  (jitted as XlaJitted<F>).lower = (...args: Parameters<F>) => {
    const sharded = jitted.lowerPartitioned(...args) as SpmdLowered | null;
    if (sharded !== null) return sharded;
    const t = jitted.trace(...args);
    const lowered = new Lowered(t.jaxpr, t.name, t.donateArgnums, t.donateLabels);
    lowered.exportConsts = t.consts;
    return lowered;
  };
  return jitted;
}

/** `lower(f, opts)(...args)`: the `Lowered` of `f` for these arguments (same as `jit(f).lower(...)`). */
export function lower<F extends (...args: any[]) => any>(f: F, opts: XlaJitOptions = {}): (...args: Parameters<F>) => Lowered {
  return (...args) => jit(f, opts).lower(...args);
}
