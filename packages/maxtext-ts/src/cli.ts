#!/usr/bin/env node
/**
 * The `maxtext` command: `maxtext train <config.yml|name> key=value ...` (MaxText's
 * `python -m maxtext.train config key=value`), and `maxtext flops <config> key=value ...`
 * (calculate_tflops_training_per_device of a config without training it), `maxtext decode` (KV-cache
 * sampling) and `maxtext export <config> <out.safetensors|out.onnx>`.
 */
import { Command } from 'commander';
import { type Config, ConfigError, loadConfig, SHIPPED_CONFIGS } from './config';
import { calculateTflopsTrainingPerDevice, tokensPerDevicePerStep } from './flops';
import { random, setBackend } from '@tpukit/core';
import { checkpointDirOf, restoreParams, runDirOf } from './checkpoints';
import { decodeBatch } from './decode';
import { countParams, initParams, modelConfig, type Params } from './model';
import { exportOnnx } from './onnx';
import { saveParams, type SaveParamsOptions } from './safetensors';
import { train } from './train';
import { formatPlan, plan, PlanError } from './plan';

const program = new Command('maxtext').description('MaxText for TypeScript: config-driven decoder-only transformer training').showHelpAfterError();

program
  .command('train')
  .description(`train from a YAML config or a shipped one (${SHIPPED_CONFIGS.join(', ')}), with key=value overrides`)
  .argument('<config>', 'a YAML file or a shipped config name')
  .argument('[overrides...]', 'key=value pairs (YAML values)')
  .action(async (config: string, overrides: string[]) => {
    const r = await train(loadConfig(config, overrides));
    if (r.compileStats.recompiles > 0) process.exitCode = 3;
  });

program
  .command('flops')
  .description("TFLOPs per device per training step by MaxText's formula")
  .argument('<config>', 'a YAML file or a shipped config name')
  .argument('[overrides...]', 'key=value pairs')
  .action((config: string, overrides: string[]) => {
    const c = loadConfig(config, overrides);
    const t = calculateTflopsTrainingPerDevice(c);
    console.log(`${c.source}: ${t.total.toFixed(6)} TFLOPs/step/device (learnable weights ${t.learnableWeight.toFixed(6)}, attention ${t.attention.toFixed(6)}), ${tokensPerDevicePerStep(c)} tokens/step/device`);
  });

/** The parameters of a config's run (latest checkpoint) or of its load_parameters_path (checkpoint dir or .safetensors). */
async function paramsOf(c: Config): Promise<Params> {
  setBackend(c.backend);
  const template = initParams(modelConfig(c), random.key(c.init_weights_seed));
  const dir = c.load_parameters_path !== '' ? c.load_parameters_path : checkpointDirOf(runDirOf(c));
  return restoreParams(c, dir, template, c.load_parameters_path !== '' ? 'load_parameters_path' : "the run's checkpoint directory");
}

program
  .command('decode')
  .description("sample from a run's latest checkpoint (or load_parameters_path) with a KV cache: prompt (up to max_prefill_predict_length bytes), max_target_length - max_prefill_predict_length new tokens")
  .argument('<config>', 'a YAML file or a shipped config name')
  .argument('[overrides...]', 'key=value pairs')
  .action(async (config: string, overrides: string[]) => {
    const c = loadConfig(config, overrides);
    const r = decodeBatch(await paramsOf(c), c, [c.prompt]);
    console.log(r.texts[0]);
    console.error(`prefill ${r.prefillTokensPerSecond.toFixed(1)} tokens/s, generate ${r.tokensPerSecond.toFixed(1)} tokens/s (${r.tokens[0].length} new tokens, ${c.decode_sampling_strategy})`);
  });

program
  .command('export')
  .description("write a run's parameters (latest checkpoint or load_parameters_path) as <out>.safetensors, or its inference graph as <out>.onnx")
  .argument('<config>', 'a YAML file or a shipped config name')
  .argument('<out>', 'the file to write: *.safetensors or *.onnx')
  .argument('[overrides...]', 'key=value pairs')
  .option('--dtype <dtype>', 'safetensors: store float tensors as float32, bfloat16 or float16 (default: weight_dtype)')
  .option('--batch <n>', 'onnx: batch size of the graph', '1')
  .option('--length <n>', 'onnx: sequence length of the graph (default: max_target_length)')
  .action(async (config: string, out: string, overrides: string[], opts: { dtype?: SaveParamsOptions['dtype']; batch: string; length?: string }) => {
    const c = loadConfig(config, overrides);
    const m = modelConfig(c);
    if (!out.endsWith('.safetensors') && !out.endsWith('.onnx')) throw new ConfigError(`maxtext export: <out> must end in .safetensors or .onnx; got ${out}`);
    const params = await paramsOf(c);
    if (out.endsWith('.onnx')) exportOnnx(out, m, params, { batch: Number(opts.batch), length: opts.length === undefined ? c.max_target_length : Number(opts.length) });
    else saveParams(out, params, m, { dtype: opts.dtype });
    console.log(`wrote ${out} (${countParams(params)} parameters)`);
  });

program
  .command('plan')
  .description('plan a training run on a TPU slice: memory per chip, step time, MFU, tokens/s, time and cost to a token budget, recommended mesh')
  .argument('<config>', 'a YAML file or a shipped config name')
  .argument('[overrides...]', 'key=value pairs')
  .requiredOption('--tpu <type>', 'accelerator type: v5e-256, v5p-128, v4-64, v6e-8, ... (the number counts TensorCores)')
  .option('--tokens <n>', 'token budget of the run (default: 20 tokens per parameter)')
  .action((config: string, overrides: string[], opts: { tpu: string; tokens?: string }) => {
    const c = loadConfig(config, overrides);
    const tokens = opts.tokens === undefined ? undefined : Number(opts.tokens);
    const p = plan(c, { tpu: opts.tpu, tokens });
    console.log(formatPlan(p));
    if (!p.best) process.exitCode = 4;
  });

program.parseAsync(process.argv).catch((e: unknown) => {
  console.error(e instanceof ConfigError || e instanceof PlanError ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exit(e instanceof ConfigError || e instanceof PlanError ? 2 : 1);
});
