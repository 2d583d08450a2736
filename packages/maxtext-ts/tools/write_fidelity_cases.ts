/**
 * Writes what check_maxtext.py compares against a JAX implementation of the same decoder
 * (FIDELITY.md at the repo root, "maxtext-ts"):
 *
 *     npx tsx packages/maxtext-ts/tools/write_fidelity_cases.ts OUT_DIR
 *
 * For each case of fidelityCases.ts (a shipped config plus overrides) OUT_DIR/<case>/ holds:
 * - `ckpt/`: the trainer's checkpoint layout (orbax-ts CheckpointManager, item `items` =
 *   {params, optState, step}): step 0 = the fresh init, step 1 = after one jitted train step on
 *   the fixed batch (also the decode check's parameters, DECODE_STEP). The Python side restores
 *   them with Orbax.
 * - `out.npz`: the batch (`tokens`, `segment_ids`, `positions`: [B, L+1]), tpukit's `logits`
 *   [B, L, V] and `loss` (mean) at step 0, `grad.<path>` (gradient of the mean loss, keys of the
 *   parameter path joined by '.'), the train step's metrics (`step_loss`, `step_raw_grad_norm`,
 *   `step_lr`), greedy decode prompts (`decode_prompts` [P, prefill] right-padded,
 *   `decode_lengths`) and tokens (`decode_tokens` [P, n]).
 * - `case.json`: the config keys the model and step read, and the MFU FLOP counts.
 * OUT_DIR/flops.json: the FLOP count of each shipped config.
 */
import { type Array } from '@tpukit/core';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { args, CheckpointManager } from '@tpukit/orbax-ts';
import { type NpyArray, writeNpz } from '../../mesh/tools/npz';
import { calculateTflopsTrainingPerDevice, loadConfig } from '../src/index';
import { CASES, DECODE_PROMPTS, DECODE_STEP, type FidelityCase, runCase } from './fidelityCases';

const npy = (a: Array): NpyArray => ({ shape: a.shape, dtype: a.dtype, data: a.dataSync() as Float32Array });

async function writeCase(root: string, c: FidelityCase): Promise<void> {
  const dir = path.join(root, c.name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const r = runCase(c);
  const { config, batch, metrics } = r;
  const arrays: Record<string, NpyArray> = {
    tokens: npy(batch.tokens),
    segment_ids: npy(batch.segmentIds),
    positions: npy(batch.positions),
    logits: npy(r.logits),
    loss: npy(r.loss),
  };
  for (const [k, g] of r.grads) arrays[`grad.${k}`] = npy(g);
  arrays.step_loss = npy(metrics.loss);
  arrays.step_raw_grad_norm = npy(metrics.rawGradNorm);
  arrays.step_lr = npy(metrics.learningRate);
  const P = config.max_prefill_predict_length;
  const n = r.decodeTokens[0].length;
  arrays.decode_prompts = { shape: [DECODE_PROMPTS.length, P], dtype: 'int32', data: Int32Array.from(DECODE_PROMPTS.flatMap((p) => [...p, ...new globalThis.Array<number>(P - p.length).fill(0)])) };
  arrays.decode_lengths = { shape: [DECODE_PROMPTS.length], dtype: 'int32', data: Int32Array.from(DECODE_PROMPTS, (p) => p.length) };
  arrays.decode_tokens = { shape: [DECODE_PROMPTS.length, n], dtype: 'int32', data: Int32Array.from(r.decodeTokens.flat()) };
  writeNpz(path.join(dir, 'out.npz'), arrays);

  // The trainer's checkpoint layout: step 0 (init), 1 (one step; the decode check's parameters).
  const mgr = new CheckpointManager(path.join(dir, 'ckpt'), { enableAsyncCheckpointing: false });
  if (DECODE_STEP !== 1) throw new Error(`write_fidelity_cases: DECODE_STEP = ${DECODE_STEP}, but only steps 0 and 1 are checkpointed`);
  for (const [step, state] of [[0, r.state0], [1, r.state1]] as const) {
    await mgr.save(step, args.Composite({ items: args.StandardSave(state) }), { force: true });
  }
  await mgr.waitUntilFinished();
  await mgr.close();

  const keys = ['decoder_block', 'emb_dim', 'num_query_heads', 'num_kv_heads', 'head_dim', 'mlp_dim', 'num_decoder_layers', 'vocab_size', 'mlp_activations', 'normalization_layer_epsilon', 'logits_via_embedding', 'rope_max_timescale', 'dtype', 'weight_dtype', 'matmul_precision', 'scan_layers', 'remat_policy', 'attention', 'per_device_batch_size', 'max_target_length', 'max_prefill_predict_length', 'gradient_accumulation_steps', 'opt_type', 'adam_b1', 'adam_b2', 'adam_eps', 'adam_eps_root', 'adam_weight_decay', 'gradient_clipping_threshold', 'learning_rate', 'lr_schedule_type'] as const;
  const info = {
    name: c.name,
    source: `${c.config} ${c.overrides.join(' ')}`,
    default_matmul_precision: c.precision ?? 'default',
    config: Object.fromEntries(keys.map((k) => [k, config[k]])),
    tflops: calculateTflopsTrainingPerDevice(config),
  };
  writeFileSync(path.join(dir, 'case.json'), `${JSON.stringify(info, null, 1)}\n`);
  console.log(`${c.name}: loss ${(r.loss.item() as number).toFixed(6)}, step loss ${(metrics.loss.item() as number).toFixed(6)}, decode ${JSON.stringify(r.decodeTokens)}`);
}

async function main(): Promise<void> {
  const out = process.argv[2];
  if (!out) throw new Error('usage: write_fidelity_cases.ts OUT_DIR [case ...]');
  const only = process.argv.slice(3);
  mkdirSync(out, { recursive: true });
  // The FLOP count of every shipped config (and of a 4-step accumulation), for MaxText's formula.
  const flopKeys = ['per_device_batch_size', 'max_target_length', 'emb_dim', 'num_query_heads', 'num_kv_heads', 'head_dim', 'num_decoder_layers', 'vocab_size', 'mlp_dim', 'mlp_activations', 'gradient_accumulation_steps'] as const;
  const flops: Record<string, unknown> = {};
  for (const [name, over] of [['tiny', []], ['small', []], ['llama2-7b', []], ['gpt3-6b', []], ['llama2-7b', ['gradient_accumulation_steps=4', 'per_device_batch_size=2']]] as const) {
    const cfg = loadConfig(name, over);
    flops[[name, ...over].join(' ')] = { config: Object.fromEntries(flopKeys.map((k) => [k, cfg[k]])), tflops: calculateTflopsTrainingPerDevice(cfg) };
  }
  writeFileSync(path.join(out, 'flops.json'), `${JSON.stringify(flops, null, 1)}\n`);
  for (const c of CASES) if (only.length === 0 || only.includes(c.name)) await writeCase(out, c);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
