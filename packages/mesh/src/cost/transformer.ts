/**
 * A decoder-only transformer's training step, per chip, under three shardings, as the
 * summaries `simulate` reads: data parallel (every chip holds the model; gradients are
 * all-reduced once per layer bucket), FSDP / ZeRO-3 (parameters sharded over all chips,
 * all-gathered before use in the forward and again in the backward pass, gradients
 * reduce-scattered), and Megatron tensor parallel inside groups of `tp` neighbouring chips
 * (two activation all-reduces per layer forward, two backward) with data parallel across
 * groups. Weak scaling: every chip processes the same number of tokens. FLOPs per token are
 * 6 * params + 12 * layers * dModel * seq (PaLM's count); compute time is FLOPs / (peak *
 * mxuEfficiency). Assumptions are listed in COST_MODEL.md.
 */
import type { CollectiveOp } from './collectiveTime';
import { simulate, type StepEstimate } from './simulate';
import { chipCount, type Topology } from '../topology';

export interface TransformerConfig {
  readonly layers: number;
  readonly dModel: number;
  readonly ffn: number;
  readonly vocab: number;
  readonly seq: number;
  readonly tokensPerChip: number;
  /** Achieved share of peak on the matmuls (an assumption). */
  readonly mxuEfficiency: number;
  /** Bytes per gradient / parameter element moved (4: float32). */
  readonly paramBytes: number;
  /** Bytes per activation element moved by tensor parallelism (2: bf16). */
  readonly activationBytes: number;
  /** Tensor-parallel group size for 'tensor'. */
  readonly tp: number;
}

/** A LLaMA-2-7B-shaped model, 4 sequences of 2048 tokens per chip. */
export const LLAMA_7B: TransformerConfig = { layers: 32, dModel: 4096, ffn: 11008, vocab: 32000, seq: 2048, tokensPerChip: 8192, mxuEfficiency: 0.75, paramBytes: 4, activationBytes: 2, tp: 8 };

export type Strategy = 'data' | 'fsdp' | 'tensor';

export const paramCount = (c: TransformerConfig): number => c.layers * (4 * c.dModel * c.dModel + 3 * c.dModel * c.ffn) + 2 * c.vocab * c.dModel;
export const flopsPerToken = (c: TransformerConfig): number => 6 * paramCount(c) + 12 * c.layers * c.dModel * c.seq;

const range = (start: number, count: number, stride = 1): number[] => Array.from({ length: count }, (_, k) => start + k * stride);

/** Per-chip bytes of float32 parameters, gradients and Adam moments (16 bytes per parameter) under a strategy. */
export function stateBytesPerChip(c: TransformerConfig, strategy: Strategy, chips: number): number {
  const whole = 16 * paramCount(c);
  return strategy === 'data' ? whole : strategy === 'fsdp' ? whole / chips : whole / Math.min(c.tp, chips);
}

export function transformerStep(c: TransformerConfig, strategy: Strategy, t: Topology): StepEstimate {
  const n = chipCount(t);
  const P = paramCount(c);
  const flops = flopsPerToken(c) * c.tokensPerChip;
  const computeSeconds = flops / (t.generation.peakBf16Flops * c.mxuEfficiency);
  const collectives: CollectiveOp[] = [];
  const all = range(0, n);
  const layerBytes = (P * c.paramBytes) / c.layers;
  if (strategy === 'data') {
    for (let l = 0; l < c.layers; l++) collectives.push({ kind: 'all-reduce', bytes: layerBytes, group: all });
  } else if (strategy === 'fsdp') {
    for (let l = 0; l < c.layers; l++) {
      collectives.push({ kind: 'all-gather', bytes: layerBytes, group: all }, { kind: 'all-gather', bytes: layerBytes, group: all }, { kind: 'reduce-scatter', bytes: layerBytes, group: all });
    }
  } else {
    const tp = Math.min(c.tp, n);
    if (n % tp !== 0) throw new Error(`transformerStep: ${n} chips do not split into tensor-parallel groups of ${tp}`);
    const act = c.tokensPerChip * tp * c.dModel * c.activationBytes;
    for (let l = 0; l < c.layers; l++) {
      for (let k = 0; k < 4; k++) collectives.push({ kind: 'all-reduce', bytes: act, group: range(0, tp) });
      if (n > tp) collectives.push({ kind: 'all-reduce', bytes: layerBytes / tp, group: range(0, n / tp, tp) });
    }
  }
  return simulate({ flops, computeSeconds, collectives, devices: n }, { topology: t });
}

/** The scaling table of COST_MODEL.md: step time, MFU, scaling efficiency and state per chip for each strategy. */
export function scalingTable(c: TransformerConfig, gen: Topology['generation'], chipCounts: readonly number[], slicer: (chips: number) => Topology): string {
  const strategies: Strategy[] = ['data', 'fsdp', 'tensor'];
  const lines = [
    `| chips | ${gen.name} slice | ${strategies.map((s) => `${s}: step, MFU, efficiency, state/chip`).join(' | ')} |`,
    `|---|---|${strategies.map(() => '---').join('|')}|`,
  ];
  for (const n of chipCounts) {
    const t = slicer(n);
    const cells = strategies.map((s) => {
      const e = transformerStep(c, s, t);
      const state = stateBytesPerChip(c, s, n);
      const fits = state <= gen.hbmBytes ? '' : ' (does not fit HBM)';
      return `${(e.stepSeconds * 1e3).toFixed(0)} ms, ${(e.mfu * 100).toFixed(1)}%, ${(e.scalingEfficiency * 100).toFixed(0)}%, ${(state / 1e9).toFixed(1)} GB${fits}`;
    });
    lines.push(`| ${n} | ${t.dims.join('x')} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}
