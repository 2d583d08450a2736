/**
 * The maxtext-ts fidelity cases (FIDELITY.md, "maxtext-ts"): configs, a fixed packed batch, and
 * what tpukit computes on them. write_fidelity_cases.ts writes these results and the trainer's
 * checkpoints for check_maxtext.py (JAX); test/jaxReference.test.ts recomputes them and compares
 * with the JAX results committed from a device run.
 */
import { type Array, np, setDefaultMatmulPrecision, tree, valueAndGrad } from '@tpukit/core';
import { type Batch, type Config, forward, loadConfig, loss, makeDecoder, makeTrainStep, type ModelConfig, modelConfig, type Params, type StepMetrics, type TrainState } from '../src/index';

export interface FidelityCase {
  name: string;
  config: string;
  overrides: string[];
  /** Global default matmul precision while the case runs (attention's matmuls follow it). */
  precision?: 'highest';
}

/**
 * Checkpoint step whose parameters the decode check uses: step 1 (one jitted train step from the
 * init), which the CI test rebuilds exactly as the fixture's JAX run saw it, so the decode check
 * compares tpukit's KV-cache decoder with JAX on the same parameters (a longer training run would
 * pin tpukit's own bf16 training instead: its parameters drift from the ones JAX decoded with).
 */
export const DECODE_STEP = 1;
/** New tokens per prompt in the decode check. */
export const DECODE_NEW = 10;
/** Three prompts of different lengths (bytes of "A check", "The", "Hello, TPU! "). */
export const DECODE_PROMPTS = [[65, 32, 99, 104, 101, 99, 107], [84, 104, 101], [72, 101, 108, 108, 111, 44, 32, 84, 80, 85, 33, 32]];

const COMMON = ['per_device_batch_size=4', 'max_target_length=32', 'max_prefill_predict_length=12', 'lr_schedule_type=constant', 'learning_rate=0.01', 'enable_checkpointing=false', 'base_output_directory=/tmp/unused'];
const GPT3 = ['base_num_decoder_layers=2', 'base_emb_dim=64', 'head_dim=16', 'base_mlp_dim=256'];
export const CASES: FidelityCase[] = [
  // tiny: llama2 block, GQA 4/2, SwiGLU, RoPE, tied logits, bf16 activations, scanned layers, fused attention.
  { name: 'llama2_bf16', config: 'tiny', overrides: [...COMMON] },
  // the same with the composite attention (matmuls, mask, softmax).
  { name: 'llama2_bf16_xla', config: 'tiny', overrides: [...COMMON, 'attention=dot_product'] },
  // float32 throughout at HIGHEST precision (tight tolerances), unscanned layers, untied logits, full remat.
  { name: 'llama2_f32', config: 'tiny', overrides: [...COMMON, 'dtype=float32', 'matmul_precision=highest', 'scan_layers=false', 'logits_via_embedding=false', 'remat_policy=full'], precision: 'highest' },
  // small's gpt3 block (LayerNorm with bias, learned positions, GELU, tied), cut to 2 layers of d=64.
  { name: 'gpt3_bf16', config: 'small', overrides: [...COMMON, ...GPT3] },
  { name: 'gpt3_f32', config: 'small', overrides: [...COMMON, ...GPT3, 'dtype=float32', 'matmul_precision=highest', 'remat_policy=minimal'], precision: 'highest' },
];

/** A deterministic LCG (the batch only has to be fixed, not random in any strong sense). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s;
  };
}

/** A packed batch [B, L+1]: full rows, two segments, three segments and padding (segment 0). */
export function fixedBatch(b: number, l: number, vocab: number, seed = 12345): Batch {
  const next = lcg(seed);
  const n = l + 1;
  const tokens = new Int32Array(b * n);
  const seg = new Int32Array(b * n);
  const pos = new Int32Array(b * n);
  const layouts = [[n], [10, n - 10], [7, 9, 11], [5, n - 9]];
  for (let r = 0; r < b; r++) {
    let at = 0;
    layouts[r % layouts.length].forEach((len, s) => {
      for (let i = 0; i < len && at < n; i++, at++) {
        tokens[r * n + at] = 32 + (next() % Math.min(vocab - 32, 95));
        seg[r * n + at] = s + 1;
        pos[r * n + at] = i;
      }
    });
  }
  const arr = (a: Int32Array): Array => np.reshape(np.array(a), [b, n]);
  return { tokens: arr(tokens), segmentIds: arr(seg), positions: arr(pos) };
}

/** A parameter path as check_maxtext.py names it (keys joined by '.'). */
export const pathKey = (p: readonly unknown[]): string => p.map((k) => String((k as { key?: unknown }).key ?? (k as { idx?: unknown }).idx ?? k)).join('.');

export interface CaseResult {
  config: Config;
  model: ModelConfig;
  batch: Batch;
  /** Logits [B, L, V] of the fresh parameters (eager forward). */
  logits: Array;
  /** Mean loss and its gradient (eager), leaves by pathKey. */
  loss: Array;
  grads: Map<string, Array>;
  state0: TrainState;
  /** After one jitted train step on the batch, and its metrics. */
  state1: TrainState;
  metrics: StepMetrics;
  /** Greedy decode of DECODE_PROMPTS (DECODE_NEW tokens each) with state1's parameters (DECODE_STEP). */
  decodeTokens: number[][];
}

/** Runs one case (the global matmul precision is set for its duration and restored). */
export function runCase(c: FidelityCase): CaseResult {
  const prev = c.precision ? setDefaultMatmulPrecision(c.precision) : null;
  try {
    const config = loadConfig(c.config, c.overrides);
    const m = modelConfig(config);
    const ts = makeTrainStep(config);
    const state0 = ts.init();
    const B = config.global_batch_size_to_train_on;
    const L = config.max_target_length;
    const batch = fixedBatch(B, L, m.vocabSize);
    const logits = forward(state0.params, batch.tokens.get(':', `:${L}`), batch.segmentIds.get(':', `:${L}`), batch.positions.get(':', `:${L}`), m);
    const [lossV, g] = valueAndGrad((p: Params) => loss(p, batch, m))(state0.params) as [Array, Params];
    const grads = new Map(tree.flattenWithPath<Array>(g)[0].map(([p, x]) => [pathKey(p), x] as const));
    const [state1, metrics] = ts.jitted(ts.init(), batch); // a second init: the jitted step donates its state
    const dec = makeDecoder(m, { prefillLength: config.max_prefill_predict_length, sampling: { strategy: 'greedy', temperature: 1, topK: 0, topP: 1 } });
    const decodeTokens = dec.generate(state1.params, DECODE_PROMPTS, { maxNewTokens: DECODE_NEW }).tokens;
    return { config, model: m, batch, logits, loss: lossV, grads, state0, state1, metrics, decodeTokens };
  } finally {
    if (c.precision) setDefaultMatmulPrecision(prev);
  }
}
