/**
 * Batched decoding with a KV cache (MaxText's decode.py with its prefill / generate split):
 *
 * - The batch is a set of slots, one prompt each, of different lengths. Prompts are right-padded
 *   to `prefillLength` (`max_prefill_predict_length`) so prefill has one shape; the cache holds
 *   `max_target_length` positions per slot and layer.
 * - `prefill` runs the prompts through the model once, fills every layer's key / value cache and
 *   samples each slot's first new token from the logits at its own last prompt position.
 * - `step` feeds each slot's last token at its own position, writes its key / value into the
 *   cache there, attends to the cache up to that position and samples the next token.
 * - Both are jitted once per shape (batch size); `step` donates the cache.
 * - Sampling: greedy, weighted (temperature), top-k and nucleus (top-p), with a tpukit random
 *   key folded with the step index (step i of a run always uses foldIn(key, i)).
 */
import { type Array, lax, nn, np, random } from '@tpukit/core';
import { ByteTokenizer } from '@tpukit/grain-ts';
import { jit, type XlaJitted } from '@tpukit/xla-lite';
import type { Config } from './config';
import { type Attend, block, embed, layerParams, logitsOf, type ModelConfig, modelConfig, type Params } from './model';

export type SamplingStrategy = 'greedy' | 'weighted' | 'topk' | 'nucleus';

export interface Sampling {
  strategy: SamplingStrategy;
  /** Logits are divided by it before sampling (weighted, topk, nucleus). */
  temperature: number;
  /** topk: keep the k most likely tokens. */
  topK: number;
  /** nucleus: keep the smallest set of most likely tokens whose probability reaches topP. */
  topP: number;
}

const STRATEGIES: readonly SamplingStrategy[] = ['greedy', 'weighted', 'topk', 'nucleus'];

/** Validates sampling options against a vocabulary size (errors name `op`, the option and its value). */
export function checkSampling(op: string, s: Sampling, vocabSize: number): void {
  if (!STRATEGIES.includes(s.strategy)) throw new Error(`${op}: sampling.strategy must be one of ${STRATEGIES.join(', ')}; got ${String(s.strategy)}`);
  if (!(typeof s.temperature === 'number' && s.temperature > 0 && Number.isFinite(s.temperature))) throw new Error(`${op}: sampling.temperature must be a finite number > 0; got ${s.temperature}`);
  if (s.strategy === 'topk' && !(Number.isInteger(s.topK) && s.topK >= 1 && s.topK <= vocabSize)) {
    throw new Error(`${op}: sampling.topK must be an integer in [1, vocab_size = ${vocabSize}] for topk; got ${s.topK}`);
  }
  if (s.strategy === 'nucleus' && !(typeof s.topP === 'number' && s.topP > 0 && s.topP <= 1)) throw new Error(`${op}: sampling.topP must be a number in (0, 1] for nucleus; got ${s.topP}`);
}

/** The config's decode_sampling_* keys as Sampling. */
export function samplingOf(c: Config): Sampling {
  return { strategy: c.decode_sampling_strategy, temperature: c.decode_sampling_temperature, topK: c.decode_sampling_top_k, topP: c.decode_sampling_nucleus_p };
}

/** Next tokens [B] (int32) from logits [B, V] (float32). Traceable: it runs inside the jitted steps. */
export function sampleLogits(logits: Array, key: Array, s: Sampling): Array {
  if (s.strategy === 'greedy') return np.astype(np.argmax(logits, { axis: -1 }), 'int32');
  let scaled = np.divide(logits, s.temperature);
  if (s.strategy === 'topk') {
    const [top] = lax.topK(scaled, s.topK);
    scaled = np.where(np.less(scaled, top.get(':', `${s.topK - 1}:${s.topK}`)), -Infinity, scaled);
  } else if (s.strategy === 'nucleus') {
    const [sorted] = lax.topK(scaled, scaled.shape[1]); // descending
    const probs = nn.softmax(sorted, { axis: -1 });
    const before = np.subtract(np.cumsum(probs, { axis: -1 }), probs); // probability of the tokens ahead of each one
    // Keep a token while the ones ahead of it have not reached p (the most likely one always stays).
    const threshold = np.min(np.where(np.less(before, s.topP), sorted, Infinity), { axis: -1, keepdims: true });
    scaled = np.where(np.less(scaled, threshold), -Infinity, scaled);
  }
  return np.astype(random.categorical(key, scaled, { axis: -1 }), 'int32');
}

/** Each layer's keys and values, [B, max_target_length, num_kv_heads, head_dim] in the activation dtype. */
export interface KVCache {
  k: Array[];
  v: Array[];
}

export interface GenerateOptions {
  /** New tokens per slot (default: max_target_length - prefillLength). */
  maxNewTokens?: number;
  /** The random key of the run (ignored by greedy; default random.key(0)). */
  key?: Array;
}

export interface GenerateResult {
  /** The new tokens of each slot (prompt not included). */
  tokens: number[][];
  prefillSeconds: number;
  generateSeconds: number;
  /** Prompt tokens (unpadded) per second of prefill. */
  prefillTokensPerSecond: number;
  /** New tokens of all slots per second of generation (prefill excluded, its first token too). */
  tokensPerSecond: number;
}

type PrefillFn = (params: Params, tokens: Array, lengths: Array, key: Array) => [KVCache, Array];
type StepFn = (params: Params, cache: KVCache, tokens: Array, positions: Array, key: Array, step: Array) => [KVCache, Array, Array, Array];

export interface Decoder {
  readonly model: ModelConfig;
  readonly prefillLength: number;
  readonly sampling: Sampling;
  /** Prompts [B, prefillLength] (right-padded) with their lengths [B] -> the cache and the first new tokens [B]. */
  readonly prefill: XlaJitted<PrefillFn>;
  /** Last tokens [B] at positions [B] -> the cache, the next tokens, positions + 1 and step + 1. */
  readonly step: XlaJitted<StepFn>;
  /** Prefill then generate: the new tokens of every prompt (token ids). */
  generate(params: Params, prompts: readonly (readonly number[])[], opts?: GenerateOptions): GenerateResult;
}

/** Builds the jitted prefill and generate steps for a model, a padded prompt length and a sampling rule. */
export function makeDecoder(m: ModelConfig, opts: { prefillLength: number; sampling: Sampling }): Decoder {
  const op = 'makeDecoder';
  const S = m.maxTargetLength;
  const P = opts.prefillLength;
  if (!(Number.isInteger(P) && P >= 1 && P < S)) throw new Error(`${op}: prefillLength (max_prefill_predict_length) must be an integer in [1, max_target_length = ${S}); got ${P}`);
  const sampling = { ...opts.sampling };
  checkSampling(op, sampling, m.vocabSize);

  const prefillFn: PrefillFn = (params, tokens, lengths, key) => {
    const b = tokens.shape[0];
    const positions = np.broadcastTo(np.arange(P, undefined, undefined, 'int32'), [b, P]);
    const cache: KVCache = { k: [], v: [] };
    const attend: Attend = (q, k, v) => {
      const pad: [number, number][] = [[0, 0], [0, S - P], [0, 0], [0, 0]];
      cache.k.push(np.pad(k, pad));
      cache.v.push(np.pad(v, pad));
      return nn.dotProductAttention(q, k, v, { isCausal: true, implementation: m.attention });
    };
    let x = embed(params, tokens, positions, m);
    for (let l = 0; l < m.numLayers; l++) x = block(x, layerParams(params, m, l), positions, m, attend);
    // Each slot's last prompt position (one-hot rows pick it exactly).
    const last = np.astype(nn.oneHot(np.subtract(lengths, 1), P), m.dtype); // [B, P]
    const xLast = np.sum(np.multiply(x, np.expandDims(last, 2)), { axis: 1, keepdims: true });
    const logits = logitsOf(params, xLast, m).get(':', 0);
    return [cache, sampleLogits(logits, random.foldIn(key, 0), sampling)];
  };

  const stepFn: StepFn = (params, cache, tokens, positions, key, step) => {
    const cols = np.expandDims(np.arange(S, undefined, undefined, 'int32'), 0); // [1, S]
    const at = np.expandDims(positions, 1); // [B, 1]
    const write = np.expandDims(np.equal(cols, at), [2, 3]); // [B, S, 1, 1]
    const mask = np.expandDims(np.lessEqual(cols, at), [1, 2]); // [B, 1, 1, S]
    const out: KVCache = { k: [], v: [] };
    let l = 0;
    const attend: Attend = (q, k, v) => {
      const ck = np.where(write, k, cache.k[l]);
      const cv = np.where(write, v, cache.v[l]);
      out.k.push(ck);
      out.v.push(cv);
      l++;
      return nn.dotProductAttention(q, ck, cv, { mask, implementation: m.attention });
    };
    const pos = np.expandDims(positions, 1);
    let x = embed(params, np.expandDims(tokens, 1), pos, m);
    for (let i = 0; i < m.numLayers; i++) x = block(x, layerParams(params, m, i), pos, m, attend);
    const next = sampleLogits(logitsOf(params, x, m).get(':', 0), random.foldIn(key, step), sampling);
    return [out, next, np.add(positions, 1), np.add(step, 1)];
  };

  const prefill = jit(prefillFn, { warnAfterRecompiles: 4 });
  const stepJ = jit(stepFn, { donateArgnums: [1], warnAfterRecompiles: 4 });

  const generate = (params: Params, prompts: readonly (readonly number[])[], g: GenerateOptions = {}): GenerateResult => {
    const gop = 'generate';
    if (!globalThis.Array.isArray(prompts) || prompts.length === 0) throw new Error(`${gop}: prompts must be a non-empty array of token-id arrays; got ${globalThis.Array.isArray(prompts) ? 'an empty array' : typeof prompts}`);
    const n = g.maxNewTokens ?? S - P;
    if (!(Number.isInteger(n) && n >= 1)) throw new Error(`${gop}: maxNewTokens must be an integer >= 1; got ${n}`);
    prompts.forEach((p, b) => {
      if (p.length === 0) throw new Error(`${gop}: prompt ${b} is empty (a slot needs at least one token)`);
      if (p.length > P) throw new Error(`${gop}: prompt ${b} has ${p.length} tokens, more than max_prefill_predict_length = ${P} (max_target_length = ${S})`);
      if (p.length + n > S) throw new Error(`${gop}: prompt ${b} (${p.length} tokens) + maxNewTokens (${n}) = ${p.length + n} exceeds max_target_length = ${S}`);
      p.forEach((t: number, j: number) => {
        if (!(Number.isInteger(t) && t >= 0 && t < m.vocabSize)) throw new Error(`${gop}: prompt ${b} token ${j} = ${t} is outside [0, vocab_size = ${m.vocabSize})`);
      });
    });
    const B = prompts.length;
    const padded = new Int32Array(B * P);
    prompts.forEach((p, b) => padded.set(p, b * P));
    const lengths = Int32Array.from(prompts, (p) => p.length);
    const key = g.key ?? random.key(0);

    const t0 = performance.now();
    let [cache, next] = prefill(params, np.reshape(np.array(padded), [B, P]), np.array(lengths), key);
    const outs: Array[] = [next];
    next.dataSync(); // prefill finished
    const t1 = performance.now();
    let positions = np.array(lengths);
    let step = np.array(1, 'int32');
    for (let i = 1; i < n; i++) {
      [cache, next, positions, step] = stepJ(params, cache, next, positions, key, step);
      outs.push(next);
    }
    const cols = outs.map((o) => o.dataSync() as Int32Array);
    const t2 = performance.now();
    const tokens = prompts.map((_, b) => cols.map((c) => c[b]));
    const promptTokens = lengths.reduce((a, x) => a + x, 0);
    return {
      tokens,
      prefillSeconds: (t1 - t0) / 1000,
      generateSeconds: (t2 - t1) / 1000,
      prefillTokensPerSecond: promptTokens / Math.max((t1 - t0) / 1000, 1e-9),
      tokensPerSecond: (B * (n - 1)) / Math.max((t2 - t1) / 1000, 1e-9),
    };
  };

  return { model: m, prefillLength: P, sampling, prefill, step: stepJ, generate };
}

export interface DecodeResult extends GenerateResult {
  /** Prompt + continuation of each slot, as text (byte tokenizer). */
  texts: string[];
}

/**
 * `maxtext decode`'s library form: byte-tokenizes the prompts, generates
 * `max_target_length - max_prefill_predict_length` tokens (or `maxNewTokens`) per prompt with the
 * config's sampling keys, seeded by `init_weights_seed` (or `key`).
 */
export function decodeBatch(params: Params, c: Config, prompts: readonly string[], opts: GenerateOptions & { decoder?: Decoder } = {}): DecodeResult {
  const tok = new ByteTokenizer();
  const ids = prompts.map((p) => [...tok.encode(p)]);
  const dec = opts.decoder ?? makeDecoder(modelConfig(c), { prefillLength: c.max_prefill_predict_length, sampling: samplingOf(c) });
  const r = dec.generate(params, ids, { maxNewTokens: opts.maxNewTokens, key: opts.key ?? random.key(c.init_weights_seed) });
  return { ...r, texts: ids.map((p, b) => tok.decode([...p, ...r.tokens[b]])) };
}

/** One prompt (default: the config's `prompt`) -> prompt + continuation. */
export function decode(params: Params, c: Config, opts: GenerateOptions & { prompt?: string } = {}): string {
  return decodeBatch(params, c, [opts.prompt ?? c.prompt], opts).texts[0];
}
