/**
 * The trainer end to end on a very small model: resume after a stop (and after a real SIGTERM
 * handler firing) replays the uninterrupted run bit for bit with one compilation; TensorBoard
 * event files read back through an independent TFRecord reader (grain-ts, CRCs checked) and a
 * hand decode of the protobuf; the trace profile; load_parameters_path; gradient accumulation.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Array, tree } from '@tpukit/core';
import { TFRecordDataSource } from '@tpukit/grain-ts';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, train } from '../src/index';

const root = mkdtempSync(join(tmpdir(), 'maxtext-train-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const small = [
  'base_emb_dim=16', 'base_num_query_heads=2', 'base_num_kv_heads=1', 'head_dim=8', 'base_mlp_dim=32', 'base_num_decoder_layers=1',
  'max_target_length=16', 'per_device_batch_size=2', 'steps=8', 'checkpoint_period=3', 'log_period=1', 'measure_mfu=false',
  'learning_rate=1e-2', `base_output_directory=${root}`,
];
const cfg = (run: string, ...extra: string[]) => loadConfig('tiny', [...small, `run_name=${run}`, ...extra]);
const quiet = { log: () => {}, progress: false } as const;
const bits = (t: unknown): number[][] => tree.leaves<Array>(t).map((a) => globalThis.Array.from(new Uint32Array((a.dataSync() as Float32Array).slice().buffer)));

describe('train', () => {
  let full: Awaited<ReturnType<typeof train>>;

  it('trains with one compilation and lowers the loss', async () => {
    full = await train(cfg('full'), quiet);
    expect(full.losses).toHaveLength(8);
    expect(full.compileStats.misses).toBe(1);
    expect(full.compileStats.recompiles).toBe(0);
    expect(full.losses[7]).toBeLessThan(full.losses[0]);
    expect(readdirSync(join(full.runDir, 'checkpoints')).filter((d) => /^\d+$/.test(d)).map(Number).sort((a, b) => a - b)).toEqual([6, 8]); // tiny keeps 2
  });

  it('a stopped run resumed from its checkpoint replays the uninterrupted loss curve bit for bit', async () => {
    const first = await train(cfg('stopped'), { ...quiet, stopAfterSteps: 4 });
    expect([first.preempted, first.endStep]).toEqual([true, 4]);
    const second = await train(cfg('stopped'), quiet);
    expect([second.restoredFrom, second.startStep, second.endStep]).toEqual(['checkpoint', 4, 8]);
    expect(second.losses).toEqual(full.losses.slice(4));
    expect(bits(second.state.params)).toEqual(bits(full.state.params));
    expect(second.compileStats.recompiles).toBe(0);
  });

  it('SIGTERM saves at the current step and exits; the rerun continues exactly', async () => {
    const lines: string[] = [];
    const first = await train(cfg('signalled'), {
      progress: false,
      log: (l) => {
        lines.push(l);
        if (l.startsWith('completed step: 1,')) process.emit('SIGTERM', 'SIGTERM');
      },
    });
    expect([first.preempted, first.endStep]).toEqual([true, 2]);
    expect(lines.some((l) => l.includes('SIGTERM after step 1: checkpoint 2 saved'))).toBe(true);
    const second = await train(cfg('signalled'), quiet);
    expect(second.startStep).toBe(2);
    expect(second.losses).toEqual(full.losses.slice(2));
  });

  it('writes TensorBoard events an independent TFRecord reader accepts, with the scalars of the JSONL', () => {
    const dir = join(full.runDir, 'tensorboard');
    const file = join(dir, readdirSync(dir)[0]);
    const src = new TFRecordDataSource(file); // checks both masked CRC-32Cs of every record
    expect(src.length).toBe(1 + 8);
    const first = decode(src.get(0));
    expect(new TextDecoder().decode(first.get(3)![0] as Uint8Array)).toBe('brain.Event:2');
    const jsonl = readFileSync(join(full.runDir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    for (let i = 1; i < src.length; i++) {
      const ev = decode(src.get(i));
      expect(ev.get(2)![0]).toBe(i - 1); // step
      const values = new Map<string, number>();
      for (const v of decode(ev.get(5)![0] as Uint8Array).get(1)! as Uint8Array[]) {
        const f = decode(v);
        values.set(new TextDecoder().decode(f.get(1)![0] as Uint8Array), f.get(2)![0] as number);
      }
      for (const tag of ['learning/loss', 'learning/grad_norm', 'learning/current_learning_rate', 'perf/step_time_seconds', 'perf/per_device_tflops_per_sec', 'perf/mfu']) expect(values.has(tag)).toBe(true);
      expect(values.get('learning/loss')).toBe(Math.fround(jsonl[i - 1]['learning/loss']));
      expect(values.get('learning/loss')).toBe(Math.fround(full.losses[i - 1]));
    }
    // a flipped byte is caught by the reader's CRC check
    const bytes = readFileSync(file);
    bytes[bytes.length - 6] ^= 1;
    const bad = join(root, 'bad.tfevents');
    writeFileSync(bad, bytes);
    expect(() => {
      const s = new TFRecordDataSource(bad);
      for (let i = 0; i < s.length; i++) s.get(i);
    }).toThrow(/crc|CRC/);
  });

  it('profiler: trace writes a Chrome trace with compile, data, step and checkpoint spans', async () => {
    const r = await train(cfg('profiled', 'profiler=trace', 'skip_first_n_steps_for_profiler=0', 'profiler_steps=4', 'steps=4'), quiet);
    const trace = JSON.parse(readFileSync(join(r.runDir, 'profile', 'trace.json'), 'utf8')) as { traceEvents: { name: string; ph: string; dur: number }[] };
    const names = new Set(trace.traceEvents.map((e) => e.name));
    for (const n of ['compile', 'data', 'step', 'checkpoint']) expect(names.has(n)).toBe(true);
    expect(trace.traceEvents.every((e) => e.ph === 'X' && e.dur >= 0)).toBe(true);
  });

  it('load_parameters_path starts a new run from another run\'s parameters', async () => {
    const r = await train(cfg('finetune', `load_parameters_path=${join(full.runDir, 'checkpoints')}`, 'steps=2'), quiet);
    expect([r.restoredFrom, r.startStep]).toEqual(['load_parameters_path', 0]);
    expect(r.losses[0]).toBeLessThan(full.losses[0] - 0.1);
    await expect(train(cfg('nothing', `load_parameters_path=${join(root, 'empty')}`, 'steps=2'), quiet)).rejects.toThrow(/load_parameters_path .* does not exist/);
  });

  it('gradient_accumulation_steps=2 over half batches follows the full-batch run (float32 activations)', async () => {
    const a = await train(cfg('acc1', 'per_device_batch_size=4', 'steps=3', 'enable_checkpointing=false', 'dataset_type=synthetic', 'dtype=float32'), quiet);
    const b = await train(cfg('acc2', 'per_device_batch_size=2', 'gradient_accumulation_steps=2', 'steps=3', 'enable_checkpointing=false', 'dataset_type=synthetic', 'dtype=float32'), quiet);
    b.losses.forEach((l, i) => expect(l).toBeCloseTo(a.losses[i], 4));
    expect(b.compileStats.recompiles).toBe(0);
  });
});

/** Minimal protobuf reader: field number -> values (varint as number, fixed32 as float, fixed64 as double, bytes). */
function decode(buf: Uint8Array): Map<number, (number | Uint8Array)[]> {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const out = new Map<number, (number | Uint8Array)[]>();
  let i = 0;
  const varint = (): number => {
    let v = 0;
    let mul = 1;
    for (;;) {
      const b = buf[i++];
      v += (b & 0x7f) * mul;
      mul *= 128;
      if (b < 0x80) return v;
    }
  };
  while (i < buf.length) {
    const key = varint();
    const [field, wire] = [Math.floor(key / 8), key % 8];
    let v: number | Uint8Array;
    if (wire === 0) v = varint();
    else if (wire === 1) { v = dv.getFloat64(i, true); i += 8; }
    else if (wire === 5) { v = dv.getFloat32(i, true); i += 4; }
    else if (wire === 2) { const n = varint(); v = buf.subarray(i, i + n); i += n; }
    else throw new Error(`protobuf: unexpected wire type ${wire}`);
    out.set(field, [...(out.get(field) ?? []), v]);
  }
  return out;
}
