/**
 * The decoder-only transformer, in one place (MaxText's `Transformer` with its `llama2` and
 * `gpt3` decoder blocks): token embedding, N blocks of pre-norm grouped-query self-attention and
 * an MLP, a final norm, and logits through the embedding (tied) or an output kernel.
 *
 * - llama2: RMSNorm, rotary position embeddings (MaxText's RotaryEmbedding: halves rotated).
 * - gpt3: LayerNorm with bias, learned position embeddings.
 * - MLP from `mlp_activations`: `[silu, linear]` is SwiGLU (act(x wi_0) * (x wi_1)), one entry is
 *   act(x wi).
 * - Packed rows: attention stays within a segment (segment ids) and is causal; positions restart
 *   per segment.
 * - `scan_layers`: layer parameters are stacked on a leading axis and the blocks run under
 *   `lax.scan` (one traced block); otherwise a JS loop over `layers_<i>`.
 * - `remat_policy`: each block is wrapped in core's `checkpoint` (full = nothing saveable,
 *   minimal = matmul outputs saveable; `preventCse` off under `scan_layers`, as MaxText);
 *   `none` keeps every activation.
 * - `dtype` activations (bf16 by default) with `weight_dtype` parameters (f32): weights are cast
 *   at use, norms and the softmax run in f32, logits and the loss are f32.
 *
 * Parameter names follow MaxText's tree (token_embedder/embedding, decoder/layers/self_attention/
 * query/kernel, ...), with 2-D kernels ([emb, heads*head_dim]) instead of MaxText's 3-D ones.
 */
import { type Array, checkpoint, type DType, lax, nn, np, random } from '@tpukit/core';
import type { Config } from './config';

export interface ModelConfig {
  vocabSize: number;
  embDim: number;
  numQueryHeads: number;
  numKvHeads: number;
  headDim: number;
  mlpDim: number;
  numLayers: number;
  mlpActivations: readonly string[];
  decoderBlock: 'llama2' | 'gpt3';
  epsilon: number;
  tiedEmbedding: boolean;
  ropeMaxTimescale: number;
  maxTargetLength: number;
  dtype: DType;
  weightDtype: DType;
  scanLayers: boolean;
  remat: 'full' | 'minimal' | 'none';
  /** `attention`: nn.dotProductAttention's implementation (undefined: core picks, the fused kernels on the systolic backend). */
  attention: nn.AttentionImplementation | undefined;
  /** `matmul_precision` for the weight matmuls (default: one bf16 pass on the MXU). */
  precision: 'default' | 'high' | 'highest';
}

export function modelConfig(c: Config): ModelConfig {
  return {
    vocabSize: c.vocab_size,
    embDim: c.emb_dim,
    numQueryHeads: c.num_query_heads,
    numKvHeads: c.num_kv_heads,
    headDim: c.head_dim,
    mlpDim: c.mlp_dim,
    numLayers: c.num_decoder_layers,
    mlpActivations: c.mlp_activations,
    decoderBlock: c.decoder_block,
    epsilon: c.normalization_layer_epsilon,
    tiedEmbedding: c.logits_via_embedding,
    ropeMaxTimescale: c.rope_max_timescale,
    maxTargetLength: c.max_target_length,
    dtype: c.dtype,
    weightDtype: c.weight_dtype,
    scanLayers: c.scan_layers,
    remat: c.remat_policy,
    attention: c.attention === 'dot_product' ? 'xla' : c.attention === 'flash' ? 'fused' : undefined,
    precision: c.matmul_precision,
  };
}

type Tree = { [k: string]: Array | Tree };
export type Params = Tree;

/** Initialises parameters (normal(0, 1/sqrt(fan_in)) kernels, unit norm scales, zero biases). */
export function initParams(m: ModelConfig, key: Array): Params {
  const keys = random.split(key, 4 + m.numLayers);
  const wd = m.weightDtype;
  const D = m.embDim;
  const kernel = (k: Array, shape: number[]): Tree => ({ kernel: np.astype(np.multiply(random.normal(k, shape), 1 / Math.sqrt(shape[0])), wd) });
  const norm = (): Tree => (m.decoderBlock === 'gpt3' ? { scale: np.ones([D], wd), bias: np.zeros([D], wd) } : { scale: np.ones([D], wd) });
  const block = (k: Array): Tree => {
    const ks = random.split(k, 7);
    const mlpKernels: Tree =
      m.mlpActivations.length === 2
        ? { wi_0: kernel(ks.get(4), [D, m.mlpDim]), wi_1: kernel(ks.get(5), [D, m.mlpDim]), wo: kernel(ks.get(6), [m.mlpDim, D]) }
        : { wi: kernel(ks.get(4), [D, m.mlpDim]), wo: kernel(ks.get(6), [m.mlpDim, D]) };
    return {
      pre_self_attention_layer_norm: norm(),
      self_attention: {
        query: kernel(ks.get(0), [D, m.numQueryHeads * m.headDim]),
        key: kernel(ks.get(1), [D, m.numKvHeads * m.headDim]),
        value: kernel(ks.get(2), [D, m.numKvHeads * m.headDim]),
        out: kernel(ks.get(3), [m.numQueryHeads * m.headDim, D]),
      },
      post_self_attention_layer_norm: norm(),
      mlp: mlpKernels,
    };
  };
  const blocks = globalThis.Array.from({ length: m.numLayers }, (_, l) => block(keys.get(4 + l)));
  const decoder: Tree = { decoder_norm: norm() };
  if (m.scanLayers) decoder.layers = stackTrees(blocks);
  else blocks.forEach((b, l) => (decoder[`layers_${l}`] = b));
  if (!m.tiedEmbedding) decoder.logits_dense = kernel(keys.get(1), [D, m.vocabSize]);
  const params: Tree = {
    token_embedder: { embedding: np.astype(random.normal(keys.get(0), [m.vocabSize, m.embDim]), wd) },
    decoder,
  };
  if (m.decoderBlock === 'gpt3') params.position_embedder = { embedding: np.astype(np.multiply(random.normal(keys.get(2), [m.maxTargetLength, D]), 0.02), wd) };
  return params;
}

/** Stacks same-structured trees leaf by leaf on a new leading axis (scan_layers' layout). */
export function stackTrees(trees: Tree[]): Tree {
  const out: Tree = {};
  for (const k of Object.keys(trees[0])) {
    const first = trees[0][k];
    out[k] = first instanceof Object && !('shape' in first) ? stackTrees(trees.map((t) => t[k] as Tree)) : np.stack(trees.map((t) => t[k] as Array));
  }
  return out;
}

const leaf = (t: Tree | Array, ...path: string[]): Array => path.reduce((x, p) => (x as Tree)[p], t) as Array;

function norm(x: Array, p: Tree, m: ModelConfig): Array {
  if (m.decoderBlock === 'llama2') return nn.rmsNorm(x, { scale: np.astype(leaf(p, 'scale'), m.dtype), epsilon: m.epsilon });
  const f = np.astype(x, 'float32');
  const mean = np.mean(f, { axis: -1, keepdims: true });
  const c = np.subtract(f, mean);
  const y = np.multiply(c, lax.rsqrt(np.add(np.mean(np.square(c), { axis: -1, keepdims: true }), m.epsilon)));
  return np.astype(np.add(np.multiply(y, leaf(p, 'scale')), leaf(p, 'bias')), m.dtype);
}

const dense = (x: Array, kernel: Array, m: ModelConfig): Array => np.matmul(x, np.astype(kernel, m.dtype), { precision: m.precision === 'default' ? null : m.precision });

/** MaxText's RotaryEmbedding on [B, L, N, H] with positions [B, L]. */
export function applyRope(x: Array, positions: Array, maxTimescale: number): Array {
  const h = x.shape[3];
  const half = h / 2;
  const fraction = np.divide(np.multiply(np.arange(half, undefined, undefined, 'float32'), 2), h);
  const timescale = np.power(maxTimescale, fraction); // [H/2]
  const sinusoid = np.divide(np.expandDims(np.astype(positions, 'float32'), [2, 3]), timescale); // [B, L, 1, H/2]
  const sin = np.sin(sinusoid);
  const cos = np.cos(sinusoid);
  const f = np.astype(x, 'float32');
  const first = f.get('...', `:${half}`);
  const second = f.get('...', `${half}:`);
  const out = np.concatenate([np.subtract(np.multiply(first, cos), np.multiply(second, sin)), np.add(np.multiply(second, cos), np.multiply(first, sin))], -1);
  return np.astype(out, x.dtype);
}

function mlp(x: Array, p: Tree, m: ModelConfig): Array {
  const act = (name: string, v: Array): Array => (name === 'silu' ? nn.silu(v) : name === 'gelu' ? nn.gelu(v) : name === 'relu' ? nn.relu(v) : v);
  const h =
    m.mlpActivations.length === 2
      ? np.multiply(act(m.mlpActivations[0], dense(x, leaf(p, 'wi_0', 'kernel'), m)), act(m.mlpActivations[1], dense(x, leaf(p, 'wi_1', 'kernel'), m)))
      : act(m.mlpActivations[0], dense(x, leaf(p, 'wi', 'kernel'), m));
  return dense(h, leaf(p, 'wo', 'kernel'), m);
}

/**
 * Self-attention for one block: query [B, T, N, H], key and value [B, T, K, H] (after RoPE) to
 * [B, T, N, H]. The training forward attends within the sequence; decode attends to a KV cache.
 */
export type Attend = (q: Array, k: Array, v: Array) => Array;

/** One decoder block on [B, L, D] with positions [B, L]; `attend` does the attention itself. */
export function block(x: Array, p: Tree, positions: Array, m: ModelConfig, attend: Attend): Array {
  const [b, l] = x.shape;
  const a = p.self_attention as Tree;
  const h = norm(x, p.pre_self_attention_layer_norm as Tree, m);
  let q = np.reshape(dense(h, leaf(a, 'query', 'kernel'), m), [b, l, m.numQueryHeads, m.headDim]);
  let k = np.reshape(dense(h, leaf(a, 'key', 'kernel'), m), [b, l, m.numKvHeads, m.headDim]);
  const v = np.reshape(dense(h, leaf(a, 'value', 'kernel'), m), [b, l, m.numKvHeads, m.headDim]);
  if (m.decoderBlock === 'llama2') {
    q = applyRope(q, positions, m.ropeMaxTimescale);
    k = applyRope(k, positions, m.ropeMaxTimescale);
  }
  const att = attend(q, k, v);
  const y = np.add(x, dense(np.reshape(att, [b, l, m.numQueryHeads * m.headDim]), leaf(a, 'out', 'kernel'), m));
  return np.add(y, mlp(norm(y, p.post_self_attention_layer_norm as Tree, m), p.mlp as Tree, m));
}

/** Token (and, for gpt3, position) embeddings of tokens [B, L] in the activation dtype. */
export function embed(params: Params, tokens: Array, positions: Array, m: ModelConfig): Array {
  const x = np.astype(np.take(leaf(params, 'token_embedder', 'embedding'), tokens, { axis: 0 }), m.dtype);
  return m.decoderBlock === 'gpt3' ? np.add(x, np.astype(np.take(leaf(params, 'position_embedder', 'embedding'), positions, { axis: 0 }), m.dtype)) : x;
}

/** The final norm and the logits (float32) of activations [B, L, D]. */
export function logitsOf(params: Params, x: Array, m: ModelConfig): Array {
  const dec = params.decoder as Tree;
  const y = norm(x, dec.decoder_norm as Tree, m);
  // Tied logits are scaled by 1/sqrt(emb_dim), as MaxText's normalize_embedding_logits does.
  const out = m.tiedEmbedding
    ? np.multiply(dense(y, np.transpose(leaf(params, 'token_embedder', 'embedding')), m), 1 / Math.sqrt(m.embDim))
    : dense(y, leaf(dec, 'logits_dense', 'kernel'), m);
  return np.astype(out, 'float32');
}

/** The parameters of block `l` (a slice of the stacked tree under scan_layers). */
export function layerParams(params: Params, m: ModelConfig, l: number): Tree {
  const dec = params.decoder as Tree;
  if (!m.scanLayers) return dec[`layers_${l}`] as Tree;
  const slice = (t: Tree): Tree => Object.fromEntries(Object.entries(t).map(([k, v]) => [k, 'shape' in v ? (v as Array).get(l) : slice(v as Tree)]));
  return slice(dec.layers as Tree);
}

/** Attention stays within a packed segment: [B, 1, L, L] bool (padding, segment 0, sees nothing but itself). */
export function segmentMask(segmentIds: Array): Array {
  const same = np.equal(np.expandDims(segmentIds, 2), np.expandDims(segmentIds, 1));
  return np.expandDims(same, 1);
}

/** Logits [B, L, vocab] in float32 for tokens, segment ids and positions [B, L]. */
export function forward(params: Params, tokens: Array, segmentIds: Array, positions: Array, m: ModelConfig): Array {
  let x = embed(params, tokens, positions, m);
  const mask = segmentMask(segmentIds);
  const attend: Attend = (q, k, v) => nn.dotProductAttention(q, k, v, { mask, isCausal: true, implementation: m.attention });
  const run = (h: Array, p: Tree): Array => block(h, p, positions, m, attend);
  // As MaxText: prevent_cse only outside scan (a scanned body cannot be merged with the forward pass).
  const step = m.remat === 'none' ? run : checkpoint(run, { policy: m.remat === 'full' ? 'nothing_saveable' : 'dots_saveable', preventCse: !m.scanLayers });
  const dec = params.decoder as Tree;
  if (m.scanLayers) {
    [x] = lax.scan((h: Array, p: Tree) => [step(h, p), null], x, dec.layers);
  } else {
    for (let l = 0; l < m.numLayers; l++) x = step(x, dec[`layers_${l}`] as Tree);
  }
  return logitsOf(params, x, m);
}

/** A packed batch of `max_target_length + 1` tokens: inputs are [:, :-1], targets [:, 1:]. */
export interface Batch {
  tokens: Array;
  segmentIds: Array;
  positions: Array;
}

/**
 * Sum of next-token cross-entropies over targets in the same (non-padding) segment as their
 * input, and the number of such targets (MaxText's total_weights). The mean loss is their ratio.
 */
export function lossSum(params: Params, batch: Batch, m: ModelConfig): [Array, Array] {
  const l = batch.tokens.shape[1] - 1;
  const inputs = batch.tokens.get(':', `:${l}`);
  const targets = batch.tokens.get(':', '1:');
  const segIn = batch.segmentIds.get(':', `:${l}`);
  const segOut = batch.segmentIds.get(':', '1:');
  const weights = np.astype(np.logicalAnd(np.equal(segIn, segOut), np.notEqual(segOut, 0)), 'float32');
  const logp = nn.logSoftmax(forward(params, inputs, segIn, batch.positions.get(':', `:${l}`), m));
  const tokenLogp = np.sum(np.multiply(logp, nn.oneHot(targets, m.vocabSize)), { axis: -1 });
  return [np.negative(np.sum(np.multiply(tokenLogp, weights))), np.sum(weights)];
}

/** Mean next-token cross-entropy (see lossSum). */
export function loss(params: Params, batch: Batch, m: ModelConfig): Array {
  const [s, w] = lossSum(params, batch, m);
  return np.divide(s, np.maximum(w, 1));
}

/** Number of parameters. */
export function countParams(params: Params): number {
  let n = 0;
  const walk = (t: Tree | Array): void => {
    if ('shape' in t && typeof (t as Array).size === 'number') n += (t as Array).size;
    else for (const v of Object.values(t as Tree)) walk(v);
  };
  walk(params);
  return n;
}
