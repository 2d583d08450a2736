/**
 * Reading parameters out of a trainer checkpoint directory (item `items`, leaf `params`), for
 * `load_parameters_path` and for decode: the latest step, restored partially into `template`; a
 * path ending in `.safetensors` is one file written by saveParams (or any file with its names).
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { args, CheckpointManager } from '@tpukit/orbax-ts';
import { type Config, ConfigError } from './config';
import { modelConfig, type Params } from './model';
import { loadParams } from './safetensors';

export async function restoreParams(c: Config, dir: string, template: Params, key = 'load_parameters_path'): Promise<Params> {
  const path = resolve(dir);
  if (!existsSync(path)) throw new ConfigError(`config ${c.source}: ${key} ${dir} does not exist`);
  if (path.endsWith('.safetensors')) return loadParams(path, modelConfig(c), template);
  const src = new CheckpointManager(path, { readOnly: true }); // another run's directory: never take its writer lock
  try {
    const step = src.latestStep();
    if (step === null) throw new ConfigError(`config ${c.source}: ${key} ${dir} holds no checkpoint`);
    const r = (await src.restore(step, args.Composite({ items: args.StandardRestore({ params: template }, { partial: true }) }))) as { items: { params: Params } };
    return r.items.params;
  } finally {
    await src.close();
  }
}

/** The run directory of a config (`base_output_directory/run_name`). */
export function runDirOf(c: Config, now = new Date()): string {
  const name = c.run_name === '' ? `run_${now.toISOString().replace(/[:.]/g, '-')}` : c.run_name;
  return resolve(c.base_output_directory === '' ? 'maxtext_output' : c.base_output_directory, name);
}

export const checkpointDirOf = (runDir: string): string => join(runDir, 'checkpoints');
