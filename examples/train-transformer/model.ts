/**
 * A small decoder-only transformer in plain @tpukit/core ops: token embedding (tied with the
 * output projection), pre-RMSNorm blocks of causal multi-head attention masked per packed
 * segment, and a SwiGLU MLP. Parameters are a pytree of bf16-friendly float32 arrays.
 */
import { type Array, nn, np, random } from '@tpukit/core';

export interface ModelConfig {
  vocab: number;
  dModel: number;
  heads: number;
  layers: number;
  mlp: number;
  context: number;
}

export interface LayerParams {
  attnNorm: Array;
  wq: Array;
  wk: Array;
  wv: Array;
  wo: Array;
  mlpNorm: Array;
  wGate: Array;
  wUp: Array;
  wDown: Array;
}

export interface Params {
  embed: Array;
  layers: LayerParams[];
  finalNorm: Array;
}

export function initParams(cfg: ModelConfig, key: Array): Params {
  const keys = random.split(key, 1 + cfg.layers * 7);
  let k = 0;
  const next = (): Array => keys.get(k++);
  const dense = (fanIn: number, fanOut: number): Array => np.multiply(random.normal(next(), [fanIn, fanOut]), 1 / Math.sqrt(fanIn));
  const embed = np.multiply(random.normal(next(), [cfg.vocab, cfg.dModel]), 0.02 * Math.sqrt(cfg.dModel));
  const layers: LayerParams[] = [];
  for (let l = 0; l < cfg.layers; l++) {
    layers.push({
      attnNorm: np.ones([cfg.dModel]),
      wq: dense(cfg.dModel, cfg.dModel),
      wk: dense(cfg.dModel, cfg.dModel),
      wv: dense(cfg.dModel, cfg.dModel),
      wo: dense(cfg.dModel, cfg.dModel),
      mlpNorm: np.ones([cfg.dModel]),
      wGate: dense(cfg.dModel, cfg.mlp),
      wUp: dense(cfg.dModel, cfg.mlp),
      wDown: dense(cfg.mlp, cfg.dModel),
    });
  }
  return { embed, layers, finalNorm: np.ones([cfg.dModel]) };
}

function rmsNorm(x: Array, w: Array): Array {
  const ms = np.mean(np.square(x), { axis: -1, keepdims: true });
  return np.multiply(np.multiply(x, np.reciprocal(np.sqrt(np.add(ms, 1e-6)))), w);
}

/** [B, L, D] -> [B, H, L, D/H] */
function splitHeads(x: Array, heads: number): Array {
  const [b, l, d] = x.shape;
  return np.transpose(np.reshape(x, [b, l, heads, d / heads]), [0, 2, 1, 3]);
}

function attention(x: Array, p: LayerParams, mask: Array, heads: number): Array {
  const [b, l, d] = x.shape;
  const q = splitHeads(np.matmul(x, p.wq), heads);
  const k = splitHeads(np.matmul(x, p.wk), heads);
  const v = splitHeads(np.matmul(x, p.wv), heads);
  const scores = np.multiply(np.matmul(q, np.swapaxes(k, -1, -2)), 1 / Math.sqrt(d / heads));
  const probs = nn.softmax(np.where(mask, scores, -1e9), { axis: -1 });
  const out = np.reshape(np.transpose(np.matmul(probs, v), [0, 2, 1, 3]), [b, l, d]);
  return np.matmul(out, p.wo);
}

function mlp(x: Array, p: LayerParams): Array {
  return np.matmul(np.multiply(nn.silu(np.matmul(x, p.wGate)), np.matmul(x, p.wUp)), p.wDown);
}

/** Causal attention that never crosses a packed segment boundary: [B, 1, L, L] bool. */
export function attentionMask(segmentIds: Array): Array {
  const l = segmentIds.shape[1];
  const same = np.equal(np.expandDims(segmentIds, 2), np.expandDims(segmentIds, 1));
  const causal = np.tri(l, l, 0, 'bool');
  return np.expandDims(np.logicalAnd(same, causal), 1);
}

/** Logits [B, L, vocab] for token ids [B, L]. */
export function forward(params: Params, tokens: Array, segmentIds: Array, cfg: ModelConfig): Array {
  const mask = attentionMask(segmentIds);
  let x = np.matmul(nn.oneHot(tokens, cfg.vocab), params.embed);
  for (const p of params.layers) {
    x = np.add(x, attention(rmsNorm(x, p.attnNorm), p, mask, cfg.heads));
    x = np.add(x, mlp(rmsNorm(x, p.mlpNorm), p));
  }
  return np.matmul(rmsNorm(x, params.finalNorm), np.transpose(params.embed));
}

/** Mean next-token cross-entropy over positions whose target is in the same segment. */
export function loss(params: Params, batch: { tokens: Array; segmentIds: Array }, cfg: ModelConfig): Array {
  const l = cfg.context;
  const inputs = batch.tokens.get(':', `:${l}`);
  const targets = batch.tokens.get(':', '1:');
  const segIn = batch.segmentIds.get(':', `:${l}`);
  const segOut = batch.segmentIds.get(':', '1:');
  const weights = np.astype(np.logicalAnd(np.equal(segIn, segOut), np.notEqual(segOut, 0)), 'float32');
  const logp = nn.logSoftmax(forward(params, inputs, segIn, cfg));
  const tokenLogp = np.sum(np.multiply(logp, nn.oneHot(targets, cfg.vocab)), { axis: -1 });
  return np.divide(np.negative(np.sum(np.multiply(tokenLogp, weights))), np.maximum(np.sum(weights), 1));
}
