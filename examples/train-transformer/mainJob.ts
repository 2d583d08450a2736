/**
 * The README's main job on top of `maxtext train`: train the shipped `tiny` config (a 2-layer
 * llama-style model on the embedded corpus, grain-ts packing, one jitted step, orbax-ts
 * checkpoints, MaxText's metrics lines with MFU), then check resuming works: a second run is
 * started from a copy of the first run's last periodic checkpoint and must reproduce the first
 * run's remaining losses exactly. Ends with a greedy sample from the trained model.
 */
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkpointDirOf, decode, loadConfig, train } from '@tpukit/maxtext-ts';

export interface MainJobResult {
  losses: number[];
  /** The checkpoint the second run resumed from (null when the first run saved none before its end). */
  resumedFrom: number | null;
  /** Largest |loss difference| between the resumed run and the first run over the replayed steps. */
  resumeMaxDiff: number;
  recompiles: number;
  sample: string;
}

export async function mainJob(overrides: readonly string[] = [], log?: (line: string) => void): Promise<MainJobResult> {
  const out = mkdtempSync(join(tmpdir(), 'tpukit-main-'));
  try {
    const config = loadConfig('tiny', [`base_output_directory=${out}`, 'run_name=tiny', ...overrides]);
    const first = await train(config, { log });
    const say = log ?? ((l: string) => console.log(l));
    const steps = readdirSync(checkpointDirOf(first.runDir)).filter((d) => /^\d+$/.test(d)).map(Number).filter((s) => s < first.endStep).sort((a, b) => a - b);
    const resumedFrom = steps.length ? steps[steps.length - 1] : null;
    let resumeMaxDiff = 0;
    let recompiles = first.compileStats.recompiles;
    if (resumedFrom !== null) {
      const second = join(out, 'resumed');
      cpSync(join(checkpointDirOf(first.runDir), String(resumedFrom)), join(checkpointDirOf(second), String(resumedFrom)), { recursive: true });
      const again = await train(loadConfig('tiny', [`base_output_directory=${out}`, 'run_name=resumed', 'measure_mfu=false', ...overrides]), { log: () => {}, progress: false });
      again.losses.forEach((l, i) => (resumeMaxDiff = Math.max(resumeMaxDiff, Math.abs(l - first.losses[resumedFrom - first.startStep + i]))));
      recompiles += again.compileStats.recompiles;
      say(`resumed from checkpoint ${resumedFrom}: ${again.losses.length} steps replayed; max |loss difference| vs the uninterrupted run = ${resumeMaxDiff}`);
    }
    // The KV cache holds max_target_length positions: pad the prompt to its own length, generate up to 32.
    const promptBytes = new TextEncoder().encode(config.prompt).length;
    const decodeConfig = loadConfig('tiny', [`max_prefill_predict_length=${promptBytes}`, ...overrides]);
    const sample = decode(first.state.params, decodeConfig, { maxNewTokens: Math.min(32, config.max_target_length - promptBytes) });
    say(`sample: ${JSON.stringify(sample)}`);
    return { losses: first.losses, resumedFrom, resumeMaxDiff, recompiles, sample };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}
