/**
 * The built `maxtext` bin in a child process: config errors exit 2 with the message, `flops`
 * prints MaxText's formula, and a real SIGTERM during `train` saves a checkpoint and exits 0, after
 * which the same command resumes from that step; `export` writes safetensors / ONNX and `decode`
 * reads the safetensors.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const bin = join(__dirname, '..', 'dist', 'cli.js');
const out = mkdtempSync(join(tmpdir(), 'maxtext-cli-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));
const small = ['base_emb_dim=16', 'base_num_query_heads=2', 'base_num_kv_heads=1', 'head_dim=8', 'base_mlp_dim=32', 'base_num_decoder_layers=1', 'max_target_length=16', 'per_device_batch_size=2', 'log_period=1', 'measure_mfu=false', `base_output_directory=${out}`, 'run_name=cli'];

describe('maxtext CLI', () => {
  it('a bad key or value exits 2 naming it', () => {
    const r = spawnSync(process.execPath, [bin, 'train', 'tiny', 'stepz=3'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('config overrides: unknown key "stepz"; did you mean steps?');
    const r2 = spawnSync(process.execPath, [bin, 'train', 'tiny', 'dtype=float64'], { encoding: 'utf8' });
    expect(r2.stderr).toContain('dtype = "float64" is not allowed: expected one of bfloat16, float32');
  });

  it('flops prints calculate_tflops_training_per_device', () => {
    const r = spawnSync(process.execPath, [bin, 'flops', 'tiny'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('0.000302 TFLOPs/step/device (learnable weights 0.000277, attention 0.000025), 512 tokens/step/device');
  });

  it('SIGTERM during train saves and exits cleanly; the same command resumes there', async () => {
    const child = spawn(process.execPath, [bin, 'train', 'tiny', ...small, 'steps=400', 'checkpoint_period=1000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let signalled = false;
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!signalled && /completed step: 2,/.test(stdout)) {
        signalled = true;
        child.kill('SIGTERM');
      }
    });
    const code = await new Promise<number | null>((res) => child.on('exit', (c) => res(c)));
    expect(code).toBe(0);
    const m = /SIGTERM after step (\d+): checkpoint (\d+) saved/.exec(stdout);
    expect(m).not.toBeNull();
    const saved = Number(m![2]);
    expect(saved).toBeLessThan(400);
    expect(readdirSync(join(out, 'cli', 'checkpoints'))).toContain(String(saved));
    const again = spawnSync(process.execPath, [bin, 'train', 'tiny', ...small, `steps=${saved + 2}`, 'checkpoint_period=1000'], { encoding: 'utf8' });
    expect(again.status).toBe(0);
    expect(again.stdout).toContain(`restored from checkpoint at step ${saved}`);
    expect(again.stdout).toContain(`completed step: ${saved + 1},`);
    expect(again.stdout).not.toContain(`completed step: ${saved - 1},`);
  });

  it('export writes the run as safetensors and ONNX; decode reads the safetensors with a KV cache', () => {
    const dec = [...small, 'max_prefill_predict_length=8'];
    const st = join(out, 'cli.safetensors');
    const e = spawnSync(process.execPath, [bin, 'export', 'tiny', st, ...dec, '--dtype', 'bfloat16'], { encoding: 'utf8' });
    expect(e.stderr).toBe('');
    expect(e.stdout).toContain(`wrote ${st} (`);
    const o = spawnSync(process.execPath, [bin, 'export', 'tiny', join(out, 'cli.onnx'), ...dec, '--length', '8'], { encoding: 'utf8' });
    expect(o.status).toBe(0);
    expect(readdirSync(out)).toContain('cli.onnx');
    const d = spawnSync(process.execPath, [bin, 'decode', 'tiny', ...dec, `load_parameters_path=${st}`, 'prompt=abc'], { encoding: 'utf8' });
    expect(d.status).toBe(0);
    expect(d.stdout.startsWith('abc')).toBe(true);
    expect(d.stderr).toMatch(/^prefill [\d.]+ tokens\/s, generate [\d.]+ tokens\/s \(8 new tokens, greedy\)/);
    const bad = spawnSync(process.execPath, [bin, 'export', 'tiny', join(out, 'x.bin'), ...dec], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('maxtext export: <out> must end in .safetensors or .onnx; got');
  });
});
