/**
 * The planner: the memory formula against hand-computed bytes, its laws over meshes (fast-check),
 * bad inputs, the "does not fit" path, costs, the published MaxText results (computed by the
 * planner, held to a stated factor) and the `maxtext plan` command.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { memoryPerChip, meshCandidates, parameterCounts, parseTpu, plan, PlanError } from '../src/plan';
import { PUBLISHED_RESULTS, predictPublished } from '../src/planPublished';

const tiny = loadConfig('base', [
  'base_emb_dim=16', 'base_num_query_heads=2', 'base_num_kv_heads=1', 'head_dim=8', 'base_mlp_dim=32', 'base_num_decoder_layers=1',
  'vocab_size=256', 'max_target_length=16', 'per_device_batch_size=2', 'remat_policy=full', 'weight_dtype=float32', 'dtype=bfloat16',
]);

describe('plan: memory formula', () => {
  it('counts parameters by hand', () => {
    // attention 16*(16+2*8) + 16*16 = 768, SwiGLU 16*32*3 = 1536, two RMSNorms 32; embedding + unembedding 2*256*16, final norm 16.
    expect(parameterCounts(tiny)).toEqual({ perLayer: 2336, embedding: 8208, total: 10544 });
    expect(parameterCounts(loadConfig('llama2-7b')).total).toBe(6_738_415_616); // LLaMA-2-7B's published count
  });

  it('per-chip bytes by hand (fsdp=2, full remat)', () => {
    const m = memoryPerChip(tiny, { data: 1, fsdp: 2, tensor: 1 });
    expect(m.params).toBe((10544 * 4) / 2);
    expect(m.grads).toBe(m.params);
    expect(m.optimizer).toBe(2 * m.params);
    // 32 tokens: saved layer input 16*32*2 = 1024; one layer's recompute set (16 + 32 + 16 + 16 + 64 + 16 = 160 per token) 160*32*2 = 10240;
    // float32 logits and their gradient 2*32*256*4 = 65536.
    expect(m.activations).toBe(1024 + 10240 + 65536);
    expect(m.total).toBe(21088 * 2 + 42176 + 76800);
  });

  it('remat none > minimal > full and sgd has no optimizer state', () => {
    const mesh = { data: 1, fsdp: 1, tensor: 1 };
    const act = (remat_policy: 'full' | 'minimal' | 'none'): number => memoryPerChip({ ...tiny, remat_policy }, mesh).activations;
    expect(act('none')).toBeGreaterThan(act('minimal'));
    expect(act('minimal')).toBeGreaterThan(act('full'));
    expect(memoryPerChip({ ...tiny, opt_type: 'sgd' }, mesh).optimizer).toBe(0);
    expect(memoryPerChip({ ...tiny, weight_dtype: 'bfloat16' }, mesh).params).toBe(10544 * 2);
  });

  it('law: state bytes x (fsdp x tensor) is the whole model, for every mesh of every slice size', () => {
    const c = loadConfig('llama2-7b');
    const whole = parameterCounts(c).total * 4 * 4; // params + grads + 2 Adam moments, float32
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 8 }), fc.nat(), (log2, pick) => {
        const meshes = meshCandidates(c, 2 ** log2);
        const mesh = meshes[pick % meshes.length];
        const m = memoryPerChip(c, mesh);
        expect(mesh.data * mesh.fsdp * mesh.tensor).toBe(2 ** log2);
        expect((m.params + m.grads + m.optimizer) * mesh.fsdp * mesh.tensor).toBeCloseTo(whole, -2);
      }),
    );
  });
});

describe('plan: a slice', () => {
  it('reads accelerator types as TensorCores', () => {
    expect(parseTpu('v5p-128').chips).toBe(64);
    expect(parseTpu('v4-64').chips).toBe(32);
    expect(parseTpu('v5e-256').chips).toBe(256);
    expect(parseTpu('v6e-8').topology.dims).toEqual([2, 4]);
  });

  it('bad inputs are clear errors', () => {
    const c = loadConfig('llama2-7b');
    expect(() => plan(c, { tpu: 'v7-8' })).toThrow(/tpu "v7-8" is not an accelerator type; expected <generation>-<cores> with generation one of v4, v5e, v5p, v6e/);
    expect(() => plan(c, { tpu: 'v5e-3' })).toThrow(/tpu v5e-3 \(3 chips\) is not a valid slice: .*known sizes/);
    expect(() => plan(c, { tpu: 'v5p-127' })).toThrow(/127 TensorCores is not a whole number of v5p chips \(2 cores each\)/);
    expect(() => plan(c, { tpu: 'v5e-8', tokens: -1 })).toThrow(/tokens must be a positive number; got -1/);
    expect(() => plan(c, { tpu: 'v5e-8', mesh: { data: 2, fsdp: 2, tensor: 1 } })).toThrow(/mesh data=2 fsdp=2 tensor=1 must be .* product is the 8 chips of v5e-8/);
    expect(() => plan(c, { tpu: 'v5e-8', overlap: 2 })).toThrow(/overlap must be in \[0, 1\]; got 2/);
    expect(() => plan(c, { tpu: 'v7-8' })).toThrow(PlanError);
  });

  it('"does not fit" names the need and the HBM', () => {
    const p = plan(loadConfig('llama2-7b'), { tpu: 'v5e-4' });
    expect(p.best).toBeNull();
    expect(p.doesNotFit).toMatch(/^does not fit: needs \d+\.\d GiB per chip \(best mesh data=\d+ fsdp=\d+ tensor=\d+\), has 14\.9$/);
    expect(p.costs).toEqual([]);
  });

  it('recommends the fastest fitting mesh; time and cost follow from tokens/s and the price table', () => {
    const c = loadConfig('llama2-7b');
    const p = plan(c, { tpu: 'v5p-128', tokens: 1e9 });
    const best = p.best!;
    expect(best.fits).toBe(true);
    for (const e of p.candidates) if (e.fits) expect(e.stepSeconds).toBeGreaterThanOrEqual(best.stepSeconds);
    expect(best.mfu).toBeGreaterThan(0.2);
    expect(best.mfu).toBeLessThan(1);
    expect(p.runSeconds).toBeCloseTo(1e9 / best.tokensPerSecond, 6);
    const onDemand = p.costs.find((r) => r.tier === 'onDemand')!;
    expect(onDemand.perChipHour).toBe(4.2);
    expect(onDemand.perRun).toBeCloseTo((4.2 * 64 * p.runSeconds!) / 3600, 6);
    expect(onDemand.per1MTokens).toBeCloseTo(onDemand.perRun / 1000, 6);
    const custom = plan(c, { tpu: 'v5p-128', tokens: 1e9, pricing: { source: 'test', date: '2026-01-01', note: '', generations: { v5p: { perChipHour: { spot: 1 } } } } });
    expect(custom.costs.map((r) => r.tier)).toEqual(['spot']);
  });

  it('more chips: more tokens/s; per chip about the same (weak scaling; 16x16 wraps around, 8x8 does not); never faster than compute', () => {
    const c = loadConfig('llama2-7b', ['per_device_batch_size=4']);
    const a = plan(c, { tpu: 'v5e-64' }).best!;
    const b = plan(c, { tpu: 'v5e-256' }).best!;
    expect(b.tokensPerSecond).toBeGreaterThan(a.tokensPerSecond);
    expect(b.tokensPerSecond / 256 / (a.tokensPerSecond / 64)).toBeGreaterThan(0.8);
    expect(b.tokensPerSecond / 256 / (a.tokensPerSecond / 64)).toBeLessThan(1.25);
    for (const e of [a, b]) expect(e.stepSeconds).toBeGreaterThanOrEqual(e.computeSeconds);
  });
});

describe('plan vs published MaxText results', () => {
  // The stated factor: the planner's MFU is within 1.25x of the published MFU either way.
  it.each(PUBLISHED_RESULTS.map((r) => [`${r.name} on ${r.tpu}`, r] as const))('%s: planner MFU within 1.25x', (_, r) => {
    const e = predictPublished(r).candidates[0];
    const ratio = e.mfu / r.mfu;
    expect(ratio).toBeGreaterThan(1 / 1.25);
    expect(ratio).toBeLessThan(1.25);
  });
});

describe('maxtext plan', () => {
  const bin = join(__dirname, '..', 'dist', 'cli.js');
  it('prints the table', () => {
    const r = spawnSync(process.execPath, [bin, 'plan', 'llama2-7b', '--tpu', 'v5p-128', '--tokens', '1e9'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('v5p-128: 64 v5p chips (4x4x4)');
    expect(r.stdout).toMatch(/recommended mesh: data=\d+ fsdp=\d+ tensor=\d+/);
    expect(r.stdout).toContain('| onDemand | 4.20 |');
  });
  it('a bad TPU exits 2 with the message; a model that does not fit exits 4', () => {
    const r = spawnSync(process.execPath, [bin, 'plan', 'llama2-7b', '--tpu', 'v9-8'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('plan: tpu "v9-8" is not an accelerator type');
    const r2 = spawnSync(process.execPath, [bin, 'plan', 'llama2-7b', '--tpu', 'v5e-4'], { encoding: 'utf8' });
    expect(r2.status).toBe(4);
    expect(r2.stdout).toMatch(/does not fit: needs .* GiB per chip/);
  });
});
