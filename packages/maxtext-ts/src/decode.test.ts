import { random } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { decode } from './decode';
import { initParams, modelConfig } from './model';

describe('decode', () => {
  const c = loadConfig('tiny', ['base_emb_dim=16', 'head_dim=4', 'base_mlp_dim=32', 'base_num_decoder_layers=1', 'max_target_length=8']);
  const params = initParams(modelConfig(c), random.key(0));

  it('greedy is deterministic, keeps the prompt, and slides a max_target_length window', () => {
    const a = decode(params, c, { prompt: 'hello', maxNewTokens: 12 });
    expect(a.startsWith('hello')).toBe(true);
    expect(a.length).toBeGreaterThan(5); // 12 new bytes (invalid UTF-8 runs decode to fewer characters)
    expect(decode(params, c, { prompt: 'hello', maxNewTokens: 12 })).toBe(a);
  });

  it('topk with k = 1 is greedy; weighted sampling is seeded', () => {
    const greedy = decode(params, c, { prompt: 'ab', maxNewTokens: 6 });
    const top1 = loadConfig('tiny', ['base_emb_dim=16', 'head_dim=4', 'base_mlp_dim=32', 'base_num_decoder_layers=1', 'max_target_length=8', 'decode_sampling_strategy=topk', 'decode_sampling_top_k=1']);
    expect(decode(params, top1, { prompt: 'ab', maxNewTokens: 6 })).toBe(greedy);
    const w = loadConfig('tiny', ['base_emb_dim=16', 'head_dim=4', 'base_mlp_dim=32', 'base_num_decoder_layers=1', 'max_target_length=8', 'decode_sampling_strategy=weighted']);
    expect(decode(params, w, { prompt: 'ab', maxNewTokens: 6 })).toBe(decode(params, w, { prompt: 'ab', maxNewTokens: 6 }));
  });
});
