import { type Array, np, random, tree, valueAndGrad } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { applyRope, type Batch, initParams, loss, modelConfig, type Params } from './model';

const f32 = (a: Array): number[] => globalThis.Array.from(a.dataSync() as Float32Array);

function batchOf(vocab: number, b: number, l: number, seed: number): Batch {
  const tokens = random.randint(random.key(seed), [b, l + 1], 0, vocab);
  // two packed segments per row: positions restart at the boundary
  const seg = np.array(globalThis.Array.from({ length: b }, () => globalThis.Array.from({ length: l + 1 }, (_, i) => (i < 5 ? 1 : 2))), 'int32');
  const pos = np.array(globalThis.Array.from({ length: b }, () => globalThis.Array.from({ length: l + 1 }, (_, i) => (i < 5 ? i : i - 5))), 'int32');
  return { tokens, segmentIds: seg, positions: pos };
}

const tinyish = ['base_emb_dim=16', 'base_num_query_heads=4', 'base_num_kv_heads=2', 'head_dim=4', 'base_mlp_dim=32', 'max_target_length=12', 'dtype=float32'];

describe('model', () => {
  it('starts near ln(vocab) and its loss is finite for every block / MLP / embedding variant', () => {
    for (const extra of [[], ['decoder_block=gpt3', 'mlp_activations=[gelu]'], ['logits_via_embedding=false'], ['dtype=bfloat16']]) {
      const m = modelConfig(loadConfig('tiny', [...tinyish, ...extra]));
      const p = initParams(m, random.key(0));
      const v = loss(p, batchOf(256, 2, 12, 1), m).item() as number;
      expect(Number.isFinite(v)).toBe(true);
      expect(Math.abs(v - Math.log(256))).toBeLessThan(1.5);
    }
  });

  it('scan_layers=true equals the unrolled loop, and remat policies leave loss and gradients unchanged', () => {
    const mScan = modelConfig(loadConfig('tiny', tinyish));
    const mLoop = modelConfig(loadConfig('tiny', [...tinyish, 'scan_layers=false']));
    const p = initParams(mScan, random.key(3));
    const dec = p.decoder as Params;
    const layers = dec.layers as Params;
    const unstack = (i: number): Params => tree.map((x: Array) => x.get(i), layers) as Params;
    const pLoop: Params = { ...p, decoder: { decoder_norm: dec.decoder_norm, layers_0: unstack(0), layers_1: unstack(1) } };
    const b = batchOf(256, 2, 12, 2);
    const [l1, g1] = valueAndGrad((q: Params) => loss(q, b, mScan))(p) as [Array, Params];
    const [l2] = valueAndGrad((q: Params) => loss(q, b, mLoop))(pLoop) as [Array, Params];
    expect(l1.item()).toBeCloseTo(l2.item() as number, 5);
    for (const remat of ['full', 'minimal']) {
      const mr = modelConfig(loadConfig('tiny', [...tinyish, `remat_policy=${remat}`]));
      const [lr, gr] = jit(valueAndGrad((q: Params) => loss(q, b, mr)))(p) as [Array, Params];
      expect(lr.item()).toBeCloseTo(l1.item() as number, 5);
      const a = tree.leaves<Array>(g1);
      tree.leaves<Array>(gr).forEach((x, i) => f32(x).forEach((v, k) => expect(v).toBeCloseTo(f32(a[i])[k], 4)));
    }
  });

  it('remat_policy lowers the compiled step\'s peak memory with unrolled layers (the recomputation is not merged back)', () => {
    const wide = ['base_emb_dim=32', 'base_num_query_heads=4', 'base_num_kv_heads=4', 'head_dim=8', 'base_mlp_dim=512', 'max_target_length=64', 'dtype=float32', 'scan_layers=false', 'base_num_decoder_layers=4'];
    const b = batchOf(256, 8, 64, 7);
    const peak = (remat: string): number => {
      const m = modelConfig(loadConfig('tiny', [...wide, `remat_policy=${remat}`]));
      const p = initParams(m, random.key(8));
      return jit(valueAndGrad((q: Params) => loss(q, b, m))).lower(p).compile().memoryAnalysis().peakBytes;
    };
    const [none, full, minimal] = [peak('none'), peak('full'), peak('minimal')];
    expect(full).toBeLessThan(0.8 * none);
    expect(minimal).toBeLessThan(none);
  });

  it('attention does not cross a packed segment boundary', () => {
    const m = modelConfig(loadConfig('tiny', tinyish));
    const p = initParams(m, random.key(5));
    const b = batchOf(256, 1, 12, 6);
    const changed = { ...b, tokens: np.where(np.less(np.arange(13), 3).reshape([1, 13]), np.clip(np.add(b.tokens, 1), 0, 255), b.tokens) };
    expect(loss(p, changed, m).item()).not.toBe(loss(p, b, m).item()); // segment 1's own loss changes ...
    const onlySeg2 = (bb: Batch): Batch => ({ ...bb, segmentIds: np.where(np.less(bb.segmentIds, 2), 0, bb.segmentIds) });
    expect(loss(p, onlySeg2(changed), m).item()).toBe(loss(p, onlySeg2(b), m).item()); // ... segment 2's does not
  });

  it('RoPE rotates pairs (i, i + H/2) by position / timescale and keeps norms', () => {
    const x = np.array([[[[1, 0, 0, 1]]]], 'float32'); // [1, 1, 1, 4]
    const y = f32(applyRope(x, np.array([[2]], 'int32'), 10000));
    // timescales: 10000^(0/4) = 1, 10000^(2/4) = 100
    expect(y[0]).toBeCloseTo(Math.cos(2), 6);
    expect(y[2]).toBeCloseTo(Math.sin(2), 6);
    expect(y[1]).toBeCloseTo(-Math.sin(0.02), 6);
    expect(y[3]).toBeCloseTo(Math.cos(0.02), 6);
  });
});
