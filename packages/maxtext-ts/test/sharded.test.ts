/**
 * Sharded training: the same tiny model trains on 1 device and on 2 (data parallel, FSDP) with
 * the same loss curve, one compilation each; the mesh and the parameter shardings follow the
 * ici_* keys and logical_axis_rules.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { devices, NamedSharding, P, setCpuDeviceCount } from '@tpukit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchSharding, logicalToSpec, loadConfig, makeTrainMesh, makeTrainStep, paramShardings, train } from '../src/index';

const root = mkdtempSync(join(tmpdir(), 'maxtext-sharded-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
beforeAll(() => setCpuDeviceCount(2));

// Global batch 4 rows of 16 tokens in every run: 4 per device on 1 device, 2 per device on 2.
const small = [
  'base_emb_dim=16', 'base_num_query_heads=2', 'base_num_kv_heads=2', 'head_dim=8', 'base_mlp_dim=32', 'base_num_decoder_layers=2',
  'max_target_length=16', 'steps=6', 'log_period=1', 'measure_mfu=false', 'enable_checkpointing=false', 'dtype=float32',
  'learning_rate=1e-2', `base_output_directory=${root}`,
];
const quiet = { log: () => {}, progress: false, handleSignals: false } as const;
const config = (name: string, n: number, ...extra: string[]) => loadConfig('tiny', [...small, `run_name=${name}`, `per_device_batch_size=${4 / n}`, ...extra], { numDevices: n });
const run = (name: string, n: number, ...extra: string[]) => train(config(name, n, ...extra), quiet);

/**
 * Loss curves agree to this relative tolerance (float32 sums reassociated across devices; data
 * parallel and FSDP also pass at 1e-6, tensor parallel within 1.1e-4 over 6 steps).
 */
const RTOL = 1e-5;
const RTOL_TENSOR = 1e-3;
const expectCurve = (got: number[], want: number[], rtol: number): void => {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++) expect(Math.abs(got[i] - want[i]), `step ${i}: ${got[i]} vs ${want[i]}`).toBeLessThanOrEqual(rtol * Math.abs(want[i]));
};

describe('sharded training', () => {
  let single: Awaited<ReturnType<typeof run>>;
  beforeAll(async () => {
    single = await run('one', 1);
  }, 120_000);

  it('trains data parallel on 2 devices with the 1-device loss curve and one compilation', async () => {
    const dp = await run('dp', 2, 'ici_data_parallelism=2', 'ici_fsdp_parallelism=1');
    expectCurve(dp.losses, single.losses, RTOL);
    expect(dp.losses[5]).toBeLessThan(dp.losses[0]);
    expect(dp.compileStats.misses).toBe(1);
    expect(dp.compileStats.recompiles).toBe(0);
    // The final state stays laid out over both devices.
    const emb = (dp.state.params.token_embedder as unknown as { embedding: { addressableShards: unknown[] } }).embedding;
    expect(emb.addressableShards.length).toBe(2);
  }, 240_000);

  it('the simulated-TPU step of a sharded run adds the interconnect time of its compiled program\'s collectives', async () => {
    const lines: string[] = [];
    const r = await train(config('mfu', 2, 'measure_mfu=true', 'steps=1', 'tpu_generation=v5e'), { ...quiet, log: (l: string) => lines.push(l) });
    const m = /simulated v5e step ([\d.]+) us \(([\d.]+) us communication\)/.exec(lines.join('\n'));
    expect(m, lines.join('\n')).not.toBeNull();
    // FSDP over 2 chips: parameter all-gathers and gradient reduce-scatters cost interconnect time.
    expect(Number(m![2])).toBeGreaterThan(0);
    expect(r.simulatedStepSeconds! * 1e6).toBeCloseTo(Number(m![1]), 0);
    expect(Number(m![1])).toBeGreaterThan(Number(m![2]));
  }, 240_000);

  it('trains FSDP on 2 devices (parameters split on embed) with the 1-device loss curve', async () => {
    const fsdp = await run('fsdp', 2); // base.yml: ici_fsdp_parallelism=-1 fills in 2
    expectCurve(fsdp.losses, single.losses, RTOL);
    expect(fsdp.compileStats.recompiles).toBe(0);
    const emb = (fsdp.state.params.token_embedder as unknown as { embedding: { addressableShards: { data: { shape: number[] } }[] } }).embedding;
    expect(emb.addressableShards.map((s) => s.data.shape)).toEqual([[256, 8], [256, 8]]);
  }, 240_000);

  it('trains tensor parallel on 2 devices (heads and mlp split) with the 1-device loss curve', async () => {
    const tp = await run('tp', 2, 'ici_tensor_parallelism=2', 'ici_fsdp_parallelism=1');
    expectCurve(tp.losses, single.losses, RTOL_TENSOR);
    expect(tp.compileStats.recompiles).toBe(0);
    const wo = ((tp.state.params.decoder as Record<string, unknown>).layers as Record<string, Record<string, Record<string, { addressableShards: { data: { shape: number[] } }[] }>>>).mlp.wo.kernel;
    expect(wo.addressableShards.map((s) => s.data.shape)).toEqual([[2, 16, 16], [2, 16, 16]]);
  }, 240_000);

  it('resumes a sharded run from its checkpoint onto the same curve', async () => {
    const c = config('resume', 2, 'enable_checkpointing=true', 'checkpoint_period=3');
    const first = await train(c, { ...quiet, stopAfterSteps: 4 });
    const second = await train(c, quiet);
    expect(second.restoredFrom).toBe('checkpoint');
    expect(second.startStep).toBe(4);
    expectCurve([...first.losses, ...second.losses], single.losses, RTOL);
    expect(second.compileStats.recompiles).toBe(0);
  }, 240_000);
});

describe('mesh and shardings from the config', () => {
  it('builds the data x fsdp x tensor mesh and rejects a product that is not the device count', () => {
    const c = loadConfig('tiny', ['ici_data_parallelism=2', 'ici_fsdp_parallelism=1'], { numDevices: 2 });
    expect(makeTrainMesh(c, devices()).shape).toEqual({ data: 2, fsdp: 1, tensor: 1 });
    expect(() => makeTrainMesh(c, devices().slice(0, 1))).toThrow(/ici_data_parallelism=2, ici_fsdp_parallelism=1, ici_tensor_parallelism=1 must equal the device count 1/);
    expect(() => loadConfig('tiny', ['ici_data_parallelism=3'], { numDevices: 2 })).toThrow(/must equal the device count \(2\)/);
    expect(() => loadConfig('tiny', [], { numDevices: 0 })).toThrow('config: numDevices = 0 must be an integer >= 1');
  });

  it('takes the device count from TPUKIT_CPU_DEVICES when not given', () => {
    const saved = process.env.TPUKIT_CPU_DEVICES;
    try {
      process.env.TPUKIT_CPU_DEVICES = '2';
      expect(loadConfig('tiny').num_devices).toBe(2);
      expect(loadConfig('tiny').global_batch_size_to_train_on).toBe(16);
      process.env.TPUKIT_CPU_DEVICES = 'two';
      expect(() => loadConfig('tiny')).toThrow('config: TPUKIT_CPU_DEVICES=two must be an integer >= 1');
    } finally {
      if (saved === undefined) delete process.env.TPUKIT_CPU_DEVICES;
      else process.env.TPUKIT_CPU_DEVICES = saved;
    }
    expect(loadConfig('tiny').num_devices).toBe(1);
  });

  it('maps logical axes to mesh axes as flax does (first unused rule wins)', () => {
    const rules = [['embed', ['fsdp']], ['vocab', ['tensor']], ['layers', []], ['embed', ['data']]] as [string, ('data' | 'fsdp' | 'tensor')[]][];
    expect(logicalToSpec(['vocab', 'embed'], rules)).toEqual(['tensor', 'fsdp']);
    expect(logicalToSpec(['layers', 'embed', 'embed'], rules)).toEqual([null, 'fsdp', 'data']);
    expect(logicalToSpec(['norm', null], rules)).toEqual([null, null]);
  });

  it('gives every parameter a sharding and the batch rows data x fsdp', () => {
    const c = loadConfig('tiny', [...small, 'ici_tensor_parallelism=2', 'ici_fsdp_parallelism=1'], { numDevices: 2 });
    const mesh = makeTrainMesh(c, devices());
    const ts = makeTrainStep(c, { mesh });
    const s = paramShardings(ts.init().params, c, mesh) as Record<string, any>;
    // query kernel [layers, embed, heads]: layers -> [], embed -> fsdp, heads -> tensor.
    expect(String(s.decoder.layers.self_attention.query.kernel.spec)).toBe(String(P(null, 'fsdp', 'tensor')));
    expect(String(s.decoder.decoder_norm.scale.spec)).toBe(String(P(null)));
    expect(String(s.token_embedder.embedding.spec)).toBe(String(P('tensor', 'fsdp')));
    expect(s.token_embedder.embedding).toBeInstanceOf(NamedSharding);
    expect(String(batchSharding(c, mesh).spec)).toBe(String(P(['data', 'fsdp'], null)));
  });

  it('names the parameter whose dimension does not divide', () => {
    const c = loadConfig('tiny', [...small, 'base_emb_dim=15'], { numDevices: 2 }); // embed -> fsdp = 2
    expect(() => makeTrainStep(c, { mesh: makeTrainMesh(c, devices()) })).toThrow(/parameter decoder\/layers\/mlp\/wi_0\/kernel.*15/);
  });
});
