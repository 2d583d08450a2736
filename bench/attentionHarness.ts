/**
 * What the fused-attention benches share (attention:phases, attention:threads): their
 * environment (ATTN_BENCH_SHAPE, ATTN_BENCH_CAUSAL, ATTN_BENCH_RUNS, ATTN_CORE_SRC), the core
 * sources they load, operand descriptors, one call's CPU and wall time, the header's load and
 * time, and a training step's layers of attention calls with operands and results in arena memory.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ArenaHost } from '../packages/core/src/backend';

type SystolicAttention = typeof import('../packages/core/src/backends/systolic/attention');

/** The attention call's sizes: query [B, T, N, H], keys and values [B, S = T, N, H]. */
export interface AttentionShape {
  readonly B: number;
  readonly T: number;
  readonly N: number;
  readonly H: number;
  readonly S: number;
  readonly causal: boolean;
  readonly shape: number[];
  readonly scale: number;
}

/** ATTN_BENCH_SHAPE (B,T,N,H; default the GPT's 16,128,4,32) and ATTN_BENCH_CAUSAL (default 1); a bad shape throws naming `bench`. */
export function attentionShape(bench: string): AttentionShape {
  const [B, T, N, H] = (process.env.ATTN_BENCH_SHAPE ?? '16,128,4,32').split(',').map(Number);
  if (![B, T, N, H].every((x) => Number.isInteger(x) && x > 0)) throw new Error(`bench:${bench}: ATTN_BENCH_SHAPE must be four positive integers B,T,N,H; got ${JSON.stringify(process.env.ATTN_BENCH_SHAPE)}`);
  return { B, T, N, H, S: T, causal: (process.env.ATTN_BENCH_CAUSAL ?? '1') !== '0', shape: [B, T, N, H], scale: 1 / Math.sqrt(H) };
}

/** The positive integer in env `name` (default `fallback`); anything else throws naming `bench`, the variable and the value. */
export function positiveEnv(bench: string, name: string, fallback: number): number {
  const n = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(n) || n < 1) throw new Error(`bench:${bench}: ${name} must be a positive integer; got ${JSON.stringify(process.env[name])}`);
  return n;
}

/** The core sources to load (ATTN_CORE_SRC, default this checkout's; e.g. /work/main/packages/core/src for main's kernels in an A/B). */
export const coreSrc = resolve(process.env.ATTN_CORE_SRC ?? resolve(import.meta.dirname, '../packages/core/src'));

/** Imports `rel` (a path under the core sources, e.g. 'backends/systolic/attention.ts'). */
export const loadCore = async <T>(rel: string): Promise<T> => (await import(pathToFileURL(resolve(coreSrc, rel)).href)) as T;

/** A host array (what the systolic kernels take) over `data`. */
export const hostArray = (data: Float32Array | Uint8Array, shape: number[], dtype = 'float32') => ({ data, shape, dtype }) as never;

/** An abstract value (a result's shape and dtype). */
export const aval = (shape: number[], dtype = 'float32') => ({ shape, dtype }) as never;


/** One layer's fused-attention calls, see `layerCalls`. */
export interface LayerCalls {
  /** The forward: out and lse into `fo[0]`, `fo[1]`; with `keep` (`saveProbs`) P into `fo[2]` too. */
  fwd(keep: boolean): void;
  /** The backward into `bo` (dq, dk, dv), reading lse from `fo[1]` and, with `keep`, P from `fo[2]` instead of recomputing it. */
  bwd(keep: boolean): void;
}

/**
 * One layer's forward and backward calls on the systolic kernels `attn`: operands `ins` (q, k,
 * v, dO: B*T*N*H floats each), forward results `fo` (out, lse [B, N, T], P [B, N, T, S]) and
 * backward results `bo` (dq, dk, dv), all in regions of `arena`, as xla-lite hands them over in a
 * compiled step.
 */
export function layerCalls(o: { attn: SystolicAttention; shape: AttentionShape; relaxed: boolean; arena: ArenaHost; ins: Float32Array[]; fo: Float32Array[]; bo: Float32Array[] }): LayerCalls {
  const { attn, relaxed, arena, ins, fo, bo } = o;
  const { B, T, N, S, causal, scale, shape } = o.shape;
  const plain = { isCausal: causal, scale } as never;
  // (as the jvp binds it: its probs need hold P only where the backward reads it; sources before attn16 ignore probsVisibleOnly)
  const kept = { isCausal: causal, scale, saveProbs: true, probsVisibleOnly: true } as never;
  const [q, k, v, d] = ins.map((x) => hostArray(x, shape));
  const lse = hostArray(fo[1], [B, N, T]);
  const probs = hostArray(fo[2], [B, N, T, S]);
  return {
    fwd(keep) {
      const outAvals = [aval(shape), aval([B, N, T]), ...(keep ? [aval([B, N, T, S])] : [])];
      attn.attentionFwdSystolic([q, k, v], keep ? kept : plain, outAvals, relaxed, (keep ? fo : fo.slice(0, 2)) as never, arena);
    },
    bwd(keep) {
      attn.attentionBwdSystolic([q, k, v, lse, d, ...(keep ? [probs] : [])], keep ? kept : plain, [aval(shape), aval(shape), aval(shape)], relaxed, bo as never, arena);
    },
  };
}

/** A step's attention calls, see `stepLayers`. */
export interface StepLayers {
  readonly L: number;
  /**
   * One step: the L layers' forward calls, then their backward calls in reverse, P kept
   * (`saveProbs`) or recomputed; before each call an 8 MiB region of other memory is written
   * (the step's other ops between calls), then `time(dir, call)` runs the call.
   */
  step(kept: boolean, time: (dir: 'fwd' | 'bwd', call: () => void) => void): void;
}

/**
 * `L` layers of fused-attention calls as a training step makes them, on the systolic kernels
 * `attn`: each layer's operands (`operand(i)`, i = 0..3 for q, k, v, dO: B*T*N*H floats in
 * the arena), results and P in regions of the arena (`region(n)`: n floats), as xla-lite hands
 * them over in a compiled step.
 */
export function stepLayers(o: { attn: SystolicAttention; shape: AttentionShape; relaxed: boolean; arena: ArenaHost; region: (n: number) => Float32Array; operand: (i: number) => Float32Array; L?: number }): StepLayers {
  const { attn, relaxed, arena, region } = o;
  const { B, T, N, H, S, causal, scale, shape } = o.shape;
  const L = o.L ?? 4;
  const n = B * T * N * H;
  const layers = Array.from({ length: L }, () =>
    layerCalls({ attn, shape: o.shape, relaxed, arena, ins: [0, 1, 2, 3].map((i) => o.operand(i)), fo: [region(n), region(B * N * T), region(B * N * T * S)], bo: [0, 1, 2].map(() => region(n)) }),
  );
  const other = region(2 << 20);
  return {
    L,
    step(keep, time) {
      for (let l = 0; l < L; l++) {
        other.fill(l);
        time('fwd', () => layers[l].fwd(keep));
      }
      for (let l = L - 1; l >= 0; l--) {
        other.fill(l);
        time('bwd', () => layers[l].bwd(keep));
      }
    },
  };
}
