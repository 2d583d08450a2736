/**
 * The main job end to end on a smaller model: the loss falls, a run resumed from a checkpoint
 * copy replays the uninterrupted run's losses exactly, nothing recompiles, and decode samples.
 */
import { describe, expect, it } from 'vitest';
import { mainJob } from './mainJob';

describe('train-transformer main job', () => {
  it('trains tiny through maxtext-ts, resumes exactly, and samples', async () => {
    const lines: string[] = [];
    const r = await mainJob(
      ['steps=12', 'checkpoint_period=4', 'log_period=4', 'base_emb_dim=16', 'base_num_query_heads=2', 'base_num_kv_heads=1', 'head_dim=8', 'base_mlp_dim=32', 'base_num_decoder_layers=1', 'max_target_length=16', 'per_device_batch_size=2', 'learning_rate=1e-2', 'measure_mfu=false'],
      (l) => lines.push(l),
    );
    expect(r.losses).toHaveLength(12);
    expect(r.losses[0]).toBeGreaterThan(5); // about ln(256) at initialisation
    expect(Math.min(...r.losses.slice(-3))).toBeLessThan(r.losses[0] - 0.3);
    expect(r.resumedFrom).toBe(8);
    expect(r.resumeMaxDiff).toBe(0);
    expect(r.recompiles).toBe(0);
    expect(lines.filter((l) => /^completed step: \d+, seconds: [\d.]+, TFLOP\/s\/device: [\d.]+, Tokens\/s\/device: [\d.]+, total_weights: \d+, loss: [\d.]+, MFU\(cpu\): n\/a, MFU\(v5e simulated\): n\/a/.test(l))).toHaveLength(4);
    expect(r.sample.startsWith('A checkpoint ')).toBe(true);
    expect(r.sample.length).toBeGreaterThan('A checkpoint '.length);
  });

  it('rejects a bad override with the key, the value and what is allowed', async () => {
    await expect(mainJob(['steps=0'])).rejects.toThrow('config overrides: steps = 0 is not allowed: expected an integer >= 1');
  });
});
