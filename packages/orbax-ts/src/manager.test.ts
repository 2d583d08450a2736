// CheckpointManager behaviour: composite items, async saves, errors surfacing, cadence, layout.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { bf16, np, toStorage } from '@tpukit/core';
import { tmpDir } from '../test/helpers';
import { CheckpointManager, ShapeDtypeStruct, args } from './index';

const state = () => ({
  params: { w: np.array([[1, 2, 3], [4, 5, 6]], 'float32'), b: np.array([0.5, -1.25], 'bfloat16') },
  step: 7,
  name: 'run-a',
  layers: [np.array([1, 2], 'int32'), null],
});

describe('CheckpointManager', () => {
  it('saves and restores several named items (async), with the Orbax layout', async () => {
    const dir = tmpDir();
    const mgr = new CheckpointManager(dir);
    const saved = await mgr.save(1, args.Composite({ state: args.StandardSave(state()), iter: args.JsonSave({ pos: 42 }) }), { metrics: { loss: 0.5 } });
    expect(saved).toBe(true);
    await mgr.waitUntilFinished();
    expect(mgr.latestStep()).toBe(1);
    const files = fs.readdirSync(path.join(dir, '1')).sort();
    expect(files).toEqual(['_CHECKPOINT_METADATA', '_CHECKSUMS', 'commit_success.txt', 'iter', 'metrics', 'state']);
    // As Orbax's handlers lay it out: arrays and Python scalars as Zarr arrays, strings in _strings.json.
    expect(fs.readdirSync(path.join(dir, '1', 'state')).sort()).toEqual(['_METADATA', '_sharding', '_strings.json', 'layers.0', 'params.b', 'params.w', 'step']);
    expect(JSON.parse(fs.readFileSync(path.join(dir, '1', 'state', '_strings.json'), 'utf8'))).toEqual({ name: 'run-a' });
    expect(JSON.parse(fs.readFileSync(path.join(dir, '1', 'state', 'step', '.zarray'), 'utf8'))).toMatchObject({ shape: [], chunks: [], dtype: '<i8' });
    expect([...fs.readFileSync(path.join(dir, '1', 'state', 'step', '0'))]).toEqual([7, 0, 0, 0, 0, 0, 0, 0]);
    const tm = JSON.parse(fs.readFileSync(path.join(dir, '1', 'state', '_METADATA'), 'utf8')).tree_metadata;
    expect(tm["('layers', '1')"]).toEqual({ key_metadata: [{ key: 'layers', key_type: 2 }, { key: 1, key_type: 1 }], value_metadata: { value_type: 'None', skip_deserialize: true } });
    expect(fs.readdirSync(path.join(dir, '1', 'state', 'params.w')).sort()).toEqual(['.zarray', '0.0']);
    const z = JSON.parse(fs.readFileSync(path.join(dir, '1', 'state', 'params.b', '.zarray'), 'utf8'));
    expect(z).toEqual({ chunks: [2], compressor: null, dtype: 'bfloat16', fill_value: null, filters: null, order: 'C', shape: [2], zarr_format: 2 });
    const raw = fs.readFileSync(path.join(dir, '1', 'state', 'params.b', '0'));
    expect([...new Uint16Array(raw.buffer, raw.byteOffset, 2)]).toEqual([...bf16.encode(new Float32Array([0.5, -1.25]))]);
    const meta = JSON.parse(fs.readFileSync(path.join(dir, '1', '_CHECKPOINT_METADATA'), 'utf8'));
    expect(meta.item_handlers.iter).toMatch(/JsonCheckpointHandler/);
    expect(meta.metrics).toEqual({ loss: 0.5 });
    expect(typeof meta.commit_timestamp_nsecs).toBe('number');
    expect(JSON.parse(fs.readFileSync(path.join(dir, '1', 'metrics', 'metrics'), 'utf8'))).toEqual({ loss: 0.5 });
    expect(JSON.parse(fs.readFileSync(path.join(dir, '1', 'iter', 'metadata'), 'utf8'))).toEqual({ pos: 42 });

    const back = await mgr.restore(1);
    expect(back.iter).toEqual({ pos: 42 });
    expect(back.state.step).toBe(7);
    expect(back.state.name).toBe('run-a');
    expect(back.state.layers[1]).toBeNull();
    expect(back.state.params.w.toArray()).toEqual([[1, 2, 3], [4, 5, 6]]);
    expect(back.state.params.b.dtype).toBe('bfloat16');
    expect([...toStorage(back.state.params.b)]).toEqual([...toStorage(state().params.b)]);
    await mgr.close();
  });

  it('restores into a target (arrays or ShapeDtypeStructs) and a JSON item into a Checkpointable', async () => {
    const mgr = new CheckpointManager(tmpDir(), { enableAsyncCheckpointing: false });
    await mgr.save(3, { state: args.StandardSave(state()), iter: args.JsonSave({ getState: () => ({ epoch: 2 }), setState: () => {} }) });
    let got: unknown = null;
    const target = { ...state(), params: { w: new ShapeDtypeStruct([2, 3], 'float32'), b: np.zeros([2], 'bfloat16') } };
    const back = await mgr.restore(undefined, { state: args.StandardRestore(target), iter: args.JsonRestore({ getState: () => null, setState: (s) => (got = s) }) });
    expect(back.state.params.w.toArray()).toEqual([[1, 2, 3], [4, 5, 6]]);
    expect(got).toEqual({ epoch: 2 });
    await mgr.close();
  });

  it('a single unnamed item comes back as is', async () => {
    const mgr = new CheckpointManager(tmpDir());
    await mgr.save(0, args.StandardSave({ a: np.array([1, 2, 3], 'uint8') }));
    await mgr.waitUntilFinished();
    expect(fs.existsSync(path.join(mgr.directory, '0', 'default', '_METADATA'))).toBe(true);
    const back = await mgr.restore();
    expect(back.a.toArray()).toEqual([1, 2, 3]);
    await mgr.close();
  });

  it('follows saveIntervalSteps and force, refuses existing steps', async () => {
    const mgr = new CheckpointManager(tmpDir(), { saveIntervalSteps: 5, enableAsyncCheckpointing: false });
    const a = args.JsonSave({ x: 1 });
    expect(mgr.shouldSave(3)).toBe(false);
    expect(await mgr.save(3, a)).toBe(false);
    expect(await mgr.save(5, a)).toBe(true);
    expect(mgr.shouldSave(5)).toBe(false);
    expect(await mgr.save(4, a)).toBe(false);
    expect(await mgr.save(4, a, { force: true })).toBe(true);
    await expect(mgr.save(5, a, { force: true })).rejects.toThrow(/step 5 already exists/);
    expect(mgr.allSteps()).toEqual([4, 5]);
    await mgr.close();
  });

  it('a second async save waits for the first; steps appear only when committed', async () => {
    const mgr = new CheckpointManager(tmpDir());
    const big = { w: np.zeros([256, 1024], 'float32') };
    await mgr.save(1, args.StandardSave(big));
    expect(mgr.latestStep()).toBe(null); // not committed yet (or just committed: never reported early)
    await mgr.save(2, args.StandardSave(big));
    expect(mgr.allSteps()).toEqual([1]);
    await mgr.waitUntilFinished();
    expect(mgr.allSteps()).toEqual([1, 2]);
    await mgr.close();
  });

  it('async save copies the state before returning: later writes to the source buffer do not leak in', async () => {
    const mgr = new CheckpointManager(tmpDir());
    const { fromStorage } = await import('@tpukit/core');
    const data = new Float32Array(1 << 16).map((_, i) => i);
    const x = fromStorage(data, [1 << 16], 'float32'); // shares `data`, like a buffer a later step reuses
    await mgr.save(1, args.StandardSave({ x }));
    data.fill(-1); // the "next training step" overwrites the live buffer while the write is in flight
    await mgr.waitUntilFinished();
    const back = await mgr.restore(1);
    expect(back.x.dataSync()[12345]).toBe(12345);
    expect(back.x.dataSync()[65535]).toBe(65535);
    await mgr.close();
  });

  it('errors of a background save surface on the next call and do not vanish', async () => {
    const dir = tmpDir();
    const mgr = new CheckpointManager(dir);
    fs.mkdirSync(path.join(dir, '9')); // an unmarked directory where step 9 will go: the commit's rename fails
    fs.writeFileSync(path.join(dir, '9', 'junk'), 'x');
    await mgr.save(9, args.JsonSave({ a: 1 }), { force: true });
    await expect(mgr.waitUntilFinished()).rejects.toThrow(/background save failed: save: step 9 already exists/);
    expect(mgr.latestStep()).toBe(null);
    await mgr.save(10, args.JsonSave({ a: 2 }));
    await mgr.close();
    expect(new CheckpointManager(dir).allSteps()).toEqual([10]);
  });

  it('error on the next save() when the previous background save failed', async () => {
    const dir = tmpDir();
    const mgr = new CheckpointManager(dir);
    fs.mkdirSync(path.join(dir, '1'));
    await mgr.save(1, args.JsonSave({ a: 1 }));
    await expect(mgr.save(2, args.JsonSave({ a: 1 }))).rejects.toThrow(/background save failed/);
    await mgr.close();
  });

  it('rejects bad arguments with errors that say what is valid', async () => {
    const mgr = new CheckpointManager(tmpDir());
    await expect(mgr.save(-1, args.JsonSave(1))).rejects.toThrow(/non-negative integer; got -1/);
    await expect(mgr.save(1, { metrics: args.JsonSave(1) })).rejects.toThrow(/"metrics" is reserved/);
    await expect(mgr.save(1, { '../x': args.JsonSave(1) })).rejects.toThrow(/not a safe file name/);
    await expect(mgr.save(1, args.StandardSave({ 'a/b': np.zeros([1]) }))).rejects.toThrow(/not a safe file name/);
    await expect(mgr.save(1, args.StandardSave({ a: { b: np.zeros([1]) }, 'a.b': np.zeros([1]) }))).rejects.toThrow(/both map to parameter name "a.b"/);
    await expect(mgr.save(1, args.StandardSave({ f: () => 1 }))).rejects.toThrow(/leaf at \['f'\] is function/);
    await expect(mgr.save(1, args.StandardSave({ '_strings.json': 'x' }))).rejects.toThrow(/would be stored as "_strings.json", a file name Orbax reserves/);
    await expect(mgr.restore()).rejects.toThrow(/no complete checkpoint/);
    expect(() => new CheckpointManager(path.join(tmpDir(), 'nope'), { createIfMissing: false })).toThrow(/does not exist/);
    expect(() => new CheckpointManager(tmpDir(), { maxToKeep: 0 })).toThrow(/maxToKeep must be a positive integer/);
    await expect(mgr.save(1, args.StandardSave({ a: 1, b: np.zeros([1]) }))).resolves.toBe(true); // failed plans left the snapshot pool usable
    await mgr.waitUntilFinished();
    await mgr.close();
  });
});
