/**
 * Sampling from a trained model (MaxText's decode.py, without its KV cache): the prompt is
 * encoded with the byte tokenizer and each new token comes from a full forward pass over the
 * last `max_target_length` tokens, chosen by `decode_sampling_strategy` (greedy, weighted with
 * `decode_sampling_temperature`, or topk with `decode_sampling_top_k`), seeded by
 * `init_weights_seed` for the random strategies.
 */
import { np, random } from '@tpukit/core';
import { ByteTokenizer } from '@tpukit/grain-ts';
import type { Config } from './config';
import { forward, type ModelConfig, modelConfig, type Params } from './model';

export function decode(params: Params, c: Config, opts: { prompt?: string; maxNewTokens?: number } = {}): string {
  const m: ModelConfig = modelConfig(c);
  const tok = new ByteTokenizer();
  const ids = [...tok.encode(opts.prompt ?? c.prompt)];
  const n = opts.maxNewTokens ?? c.max_prefill_predict_length;
  let key = random.key(c.init_weights_seed);
  for (let i = 0; i < n; i++) {
    const window = ids.slice(-c.max_target_length);
    const tokens = np.array([window], 'int32');
    const positions = np.array([window.map((_, j) => j)], 'int32');
    const logits = forward(params, tokens, np.onesLike(tokens), positions, m).get(0, -1);
    let next: number;
    if (c.decode_sampling_strategy === 'greedy') {
      next = np.argmax(logits).item() as number;
    } else {
      let scaled = np.divide(logits, c.decode_sampling_temperature);
      if (c.decode_sampling_strategy === 'topk' && c.decode_sampling_top_k > 0) {
        const kth = np.sort(scaled).get(-Math.min(c.decode_sampling_top_k, m.vocabSize));
        scaled = np.where(np.less(scaled, kth), -Infinity, scaled);
      }
      const [k1, k2] = [random.split(key).get(0), random.split(key).get(1)];
      key = k1;
      next = random.categorical(k2, scaled).item() as number;
    }
    ids.push(next);
  }
  return tok.decode(ids);
}
