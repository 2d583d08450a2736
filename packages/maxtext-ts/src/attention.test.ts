// MaxText's attention (packed segments: mask + isCausal) on the systolic backend's fused kernels:
// the trainer's compiled step holds the fused primitives, `attention=dot_product` keeps the
// composite, and one training step gives the same loss and parameters either way (bf16 tolerance).
import { type Array, getBackend, tree } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { makeDataIterator } from './data';
import { makeTrainStep } from './trainStep';

const small = ['base_emb_dim=32', 'base_num_query_heads=4', 'base_num_kv_heads=2', 'head_dim=8', 'base_mlp_dim=64', 'base_num_decoder_layers=2', 'max_target_length=24', 'per_device_batch_size=2', 'measure_mfu=false'];

describe('maxtext attention on the fused kernels', () => {
  it('the compiled training step runs the fused attention by default (flash too), the composite with attention=dot_product; same step', () => {
    expect(getBackend().name).toBe('systolic');
    const run = (attention: string) => {
      const c = loadConfig('tiny', [...small, `attention=${attention}`]);
      const ts = makeTrainStep(c);
      const batch = makeDataIterator(c).next();
      const state = ts.init();
      const text = ts.jitted.lower(state, batch).compile().asText();
      const [next, metrics] = ts.jitted(state, batch);
      return { text, loss: metrics.loss.item() as number, params: tree.leaves<Array>(next.params).map((x) => Float32Array.from(x.dataSync() as Float32Array)) };
    };
    const auto = run('autoselected');
    const flash = run('flash');
    const xla = run('dot_product');
    for (const r of [auto, flash]) {
      expect(r.text).toContain('dot_product_attention_fwd');
      expect(r.text).toContain('dot_product_attention_bwd');
    }
    expect(xla.text).not.toContain('dot_product_attention');
    expect(auto.loss).toBe(flash.loss);
    expect(Math.abs(auto.loss - xla.loss)).toBeLessThan(1e-2 * Math.abs(xla.loss));
    auto.params.forEach((p, i) => p.forEach((x, j) => expect(Math.abs(x - xla.params[i][j])).toBeLessThan(1e-3 + 1e-2 * Math.abs(xla.params[i][j]))));
  });

  it('a bad attention value is a clear config error', () => {
    expect(() => loadConfig('tiny', ['attention=cudnn'])).toThrow('attention = "cudnn" is not allowed: expected one of autoselected, dot_product, flash');
  });
});
