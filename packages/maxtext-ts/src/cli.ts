#!/usr/bin/env node
/**
 * The `maxtext` command: `maxtext train <config.yml|name> key=value ...` (MaxText's
 * `python -m maxtext.train config key=value`), and `maxtext flops <config> key=value ...`
 * (calculate_tflops_training_per_device of a config without training it).
 */
import { Command } from 'commander';
import { ConfigError, loadConfig, SHIPPED_CONFIGS } from './config';
import { calculateTflopsTrainingPerDevice, tokensPerDevicePerStep } from './flops';
import { random, setBackend } from '@tpukit/core';
import { checkpointDirOf, restoreParams, runDirOf } from './checkpoints';
import { decodeBatch } from './decode';
import { initParams, modelConfig } from './model';
import { train } from './train';

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

program
  .command('decode')
  .description("sample from a run's latest checkpoint (or load_parameters_path) with a KV cache: prompt (up to max_prefill_predict_length bytes), max_target_length - max_prefill_predict_length new tokens")
  .argument('<config>', 'a YAML file or a shipped config name')
  .argument('[overrides...]', 'key=value pairs')
  .action(async (config: string, overrides: string[]) => {
    const c = loadConfig(config, overrides);
    setBackend(c.backend);
    const template = initParams(modelConfig(c), random.key(c.init_weights_seed));
    const dir = c.load_parameters_path !== '' ? c.load_parameters_path : checkpointDirOf(runDirOf(c));
    const params = await restoreParams(c, dir, template, c.load_parameters_path !== '' ? 'load_parameters_path' : 'the run\'s checkpoint directory');
    const r = decodeBatch(params, c, [c.prompt]);
    console.log(r.texts[0]);
    console.error(`prefill ${r.prefillTokensPerSecond.toFixed(1)} tokens/s, generate ${r.tokensPerSecond.toFixed(1)} tokens/s (${r.tokens[0].length} new tokens, ${c.decode_sampling_strategy})`);
  });

program.parseAsync(process.argv).catch((e: unknown) => {
  console.error(e instanceof ConfigError ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exit(e instanceof ConfigError ? 2 : 1);
});
