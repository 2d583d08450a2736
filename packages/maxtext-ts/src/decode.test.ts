import { type Array, np, random } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { decode, decodeBatch, makeDecoder, type Sampling, sampleLogits } from './decode';
import { forward, initParams, type ModelConfig, modelConfig, type Params } from './model';

const small = ['base_emb_dim=16', 'head_dim=4', 'base_mlp_dim=32', 'base_num_decoder_layers=2', 'max_target_length=16', 'max_prefill_predict_length=8'];
const greedy: Sampling = { strategy: 'greedy', temperature: 1, topK: 0, topP: 1 };

/** The reference: one full forward pass per new token over the whole sequence, argmax of the last logits. */
function greedyByFullForward(params: Params, m: ModelConfig, prompt: number[], n: number): number[] {
  const ids = [...prompt];
  for (let i = 0; i < n; i++) {
    const tokens = np.array([ids], 'int32');
    const logits = forward(params, tokens, np.onesLike(tokens), np.array([ids.map((_, j) => j)], 'int32'), m);
    ids.push(np.argmax(logits.get(0, -1)).item() as number);
  }
  return ids.slice(prompt.length);
}

describe('decode with a KV cache', () => {
  for (const [name, extra] of [
    ['llama2, scanned layers, bf16 activations', []],
    ['gpt3, unrolled layers, float32', ['decoder_block=gpt3', 'scan_layers=false', 'dtype=float32', 'mlp_activations=[gelu]']],
  ] as const) {
    it(`greedy slots of different lengths equal the full forward pass token by token (${name})`, () => {
      const c = loadConfig('tiny', [...small, ...extra]);
      const m = modelConfig(c);
      const params = initParams(m, random.key(3));
      const prompts = [[5, 17, 200], [9], [1, 2, 3, 4, 5, 6, 7, 8], [77, 78, 79, 80, 81]];
      const dec = makeDecoder(m, { prefillLength: 8, sampling: greedy });
      const r = dec.generate(params, prompts, { maxNewTokens: 8 });
      prompts.forEach((p, b) => expect(r.tokens[b], `slot ${b}`).toEqual(greedyByFullForward(params, m, p, 8)));
      // A second batch of the same size reuses both compiled steps.
      dec.generate(params, prompts.map((p) => p.map((t) => (t + 1) % 256)), { maxNewTokens: 8 });
      expect(dec.prefill.compileStats().misses).toBe(1);
      expect(dec.step.compileStats().misses).toBe(1);
      expect(r.tokensPerSecond).toBeGreaterThan(0);
    });
  }

  const c = loadConfig('tiny', small);
  const m = modelConfig(c);
  const params = initParams(m, random.key(1));
  const prompts = [[10, 20, 30], [40]];
  const run = (s: Sampling, key: Array) => makeDecoder(m, { prefillLength: 8, sampling: s }).generate(params, prompts, { maxNewTokens: 8, key }).tokens;

  it('sampling is a function of the key: same key, same tokens; other keys differ', () => {
    for (const s of [
      { strategy: 'weighted', temperature: 2, topK: 0, topP: 1 },
      { strategy: 'topk', temperature: 2, topK: 20, topP: 1 },
      { strategy: 'nucleus', temperature: 2, topK: 0, topP: 0.9 },
    ] satisfies Sampling[]) {
      const a = run(s, random.key(7));
      expect(run(s, random.key(7)), s.strategy).toEqual(a);
      const others = [8, 9, 10].map((k) => run(s, random.key(k)));
      expect(others.some((o) => JSON.stringify(o) !== JSON.stringify(a)), s.strategy).toBe(true);
    }
  });

  it('top-k with k = 1 and nucleus with a tiny p are greedy', () => {
    const g = run(greedy, random.key(0));
    expect(run({ strategy: 'topk', temperature: 3, topK: 1, topP: 1 }, random.key(5))).toEqual(g);
    expect(run({ strategy: 'nucleus', temperature: 3, topK: 0, topP: 1e-6 }, random.key(5))).toEqual(g);
  });

  it('top-k and nucleus only ever pick tokens inside their set', () => {
    // Logits 0..V-1: top-3 is {V-1, V-2, V-3}; at temperature 1 the top token alone has p ~ 0.63.
    const V = 256;
    const logits = np.broadcastTo(np.arange(V, undefined, undefined, 'float32'), [64, V]);
    const draw = (s: Sampling): number[] => [...(sampleLogits(logits, random.key(11), s).dataSync() as Int32Array)];
    expect(new Set(draw({ strategy: 'topk', temperature: 1, topK: 3, topP: 1 }))).toEqual(new Set([V - 1, V - 2, V - 3]));
    expect(new Set(draw({ strategy: 'nucleus', temperature: 1, topK: 0, topP: 0.6 }))).toEqual(new Set([V - 1]));
    expect(new Set(draw({ strategy: 'nucleus', temperature: 1, topK: 0, topP: 0.9 }))).toEqual(new Set([V - 1, V - 2, V - 3]));
  });

  it('bad inputs name the operation, the argument and the value', () => {
    const dec = makeDecoder(m, { prefillLength: 8, sampling: greedy });
    expect(() => dec.generate(params, [[1], []])).toThrow('generate: prompt 1 is empty');
    expect(() => dec.generate(params, [])).toThrow('generate: prompts must be a non-empty array');
    expect(() => dec.generate(params, [[1, 2, 3, 4, 5, 6, 7, 8, 9]])).toThrow('prompt 0 has 9 tokens, more than max_prefill_predict_length = 8 (max_target_length = 16)');
    expect(() => dec.generate(params, [[1, 2, 3]], { maxNewTokens: 14 })).toThrow('prompt 0 (3 tokens) + maxNewTokens (14) = 17 exceeds max_target_length = 16');
    expect(() => dec.generate(params, [[1, 300]])).toThrow('token 1 = 300 is outside [0, vocab_size = 256)');
    expect(() => makeDecoder(m, { prefillLength: 8, sampling: { ...greedy, strategy: 'nucleus', topP: 1.5 } })).toThrow('makeDecoder: sampling.topP must be a number in (0, 1] for nucleus; got 1.5');
    expect(() => makeDecoder(m, { prefillLength: 8, sampling: { ...greedy, strategy: 'nucleus', topP: 0 } })).toThrow('got 0');
    expect(() => makeDecoder(m, { prefillLength: 8, sampling: { ...greedy, strategy: 'topk', topK: 0 } })).toThrow('sampling.topK must be an integer in [1, vocab_size = 256] for topk; got 0');
    expect(() => makeDecoder(m, { prefillLength: 8, sampling: { ...greedy, temperature: 0 } })).toThrow('sampling.temperature must be a finite number > 0; got 0');
    expect(() => makeDecoder(m, { prefillLength: 16, sampling: greedy })).toThrow('prefillLength (max_prefill_predict_length) must be an integer in [1, max_target_length = 16); got 16');
    expect(() => loadConfig('tiny', ['decode_sampling_nucleus_p=1.5'])).toThrow('decode_sampling_nucleus_p');
  });

  it('decode / decodeBatch: text in, prompt + continuation out, config sampling', () => {
    const texts = decodeBatch(params, c, ['hello', 'a']).texts;
    expect(texts[0].startsWith('hello')).toBe(true);
    expect(texts[1].startsWith('a')).toBe(true);
    expect(decode(params, c, { prompt: 'hello' })).toBe(texts[0]);
    expect(() => decode(params, c, { prompt: '' })).toThrow('generate: prompt 0 is empty');
    expect(() => decode(params, c, { prompt: 'a prompt longer than eight bytes' })).toThrow('more than max_prefill_predict_length = 8');
  });
});
