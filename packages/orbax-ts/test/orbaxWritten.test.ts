// Checkpoints written by the real Python Orbax (orbax-checkpoint 0.12.4 with JAX 0.11.2, on the
// device machine, and mixed_raw with JAX 0.10.2 on CPU; tools/check_orbax.py `write`, FIDELITY.md): orbax-ts restores the plain layout
// (use_ocdbt=False, use_zarr3=False, use_compression=False) exactly, with and without a target,
// and refuses Orbax's default OCDBT layout, zstd-compressed Zarr v2 and Zarr v3 with an error
// that names the option to save with. expected.json holds the values Orbax saved (exact bits).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type Array as TArray, np } from '@tpukit/core';
import { CheckpointManager, ShapeDtypeStruct, args } from '../src/index';
import { encodeValues } from '../tools/bitsEncoding';
import { describeTree, mixedTree } from '../tools/mixedTree';
import { SplitSharding, tmpDir } from './helpers';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'orbax_written');
type Leaf = { dtype: string; shape: number[]; values: (string | number)[] } | { value: unknown };
const expected = JSON.parse(fs.readFileSync(path.join(fixtures, 'expected.json'), 'utf8')) as Record<string, Record<string, { state: Record<string, Leaf> }>>;

/** A private copy of one variant's directory (the manager opens it read-only; no lock file). */
function open(variant: string): CheckpointManager {
  const dir = path.join(tmpDir(), variant);
  fs.cpSync(path.join(fixtures, variant), dir, { recursive: true });
  return new CheckpointManager(dir, { readOnly: true });
}

function expectLeaf(got: unknown, want: Leaf, where: string): void {
  if ('value' in want) {
    expect(got, where).toBe(want.value);
    return;
  }
  const a = got as TArray;
  expect([a.dtype, a.shape], where).toEqual([want.dtype, want.shape]);
  expect(encodeValues(a), where).toEqual(want.values);
}

const state = expected.zarr2_raw['3'].state;
const at = (t: any, p: string): unknown => p.split('.').reduce((n, k) => n[k], t);

describe('orbax-ts restores a checkpoint the Python Orbax wrote (use_ocdbt=False, use_zarr3=False, use_compression=False)', () => {
  it('without a target: the tree from Orbax tree_metadata, every array and scalar exact', async () => {
    const mgr = open('zarr2_raw');
    expect(mgr.allSteps()).toEqual([3]);
    const out = await mgr.restore(3);
    expect(Object.keys(out)).toEqual(['state']);
    expect(Object.keys(out.state).sort()).toEqual(['count', 'ids', 'lr', 'params', 'step']);
    for (const [p, leaf] of Object.entries(state)) expectLeaf(at(out.state, p), leaf, p);
    await mgr.close();
  });

  it('without a target, a tree of booleans, strings, numbers, lists, a tuple, None and empty containers: as Orbax itself restores it', async () => {
    // mixed_raw was written by Orbax 0.12.4 (jax 0.10.2, CPU, development machine) from
    // check_orbax.py's mixed_tree; mixed_restored.json is what Orbax's own no-target restore
    // returned (its tuple comes back as a list).
    const mgr = open('mixed_raw');
    const out = await mgr.restore(3);
    const want = JSON.parse(fs.readFileSync(path.join(fixtures, 'mixed_restored.json'), 'utf8')) as unknown;
    expect(describeTree(out.state)).toEqual(want);
    // The same tree as tpukit builds it (mixedTree.ts, what write_checkpoints.ts saves for Orbax).
    expect(describeTree(mixedTree())).toEqual(want);
    await mgr.close();
  });

  it('onto a target with a sharding (arrays split over 2 devices), strict about shapes', async () => {
    const mgr = open('zarr2_raw');
    const target = {
      params: { w: new ShapeDtypeStruct([5, 3], 'float32', new SplitSharding(2)), b: new ShapeDtypeStruct([3], 'float32'), e: new ShapeDtypeStruct([2, 4], 'bfloat16') },
      ids: new ShapeDtypeStruct([4], 'int32', new SplitSharding(2)),
      count: new ShapeDtypeStruct([], 'int32'),
      step: 0,
      lr: 0,
    };
    const out = await mgr.restore(3, args.Composite({ state: args.StandardRestore(target) }));
    expect(out.state.params.w.addressableShards.length).toBe(2);
    for (const [p, leaf] of Object.entries(state)) expectLeaf(at(out.state, p), leaf, p);
    const wrong = { ...target, ids: new ShapeDtypeStruct([5], 'int32') };
    await expect(mgr.restore(3, args.Composite({ state: args.StandardRestore(wrong) }))).rejects.toThrow(/\['ids'\]: target is int32\[5\], checkpoint holds int32\[4\]/);
    await mgr.close();
  });

  it("refuses Orbax's default OCDBT layout, zstd chunks and Zarr v3, naming the option to save with", async () => {
    const cases: [string, RegExp][] = [
      ['ocdbt_default', /state is in Orbax's OCDBT format \(use_ocdbt=True, Orbax's default\), which orbax-ts does not read; save with use_ocdbt=False, use_zarr3=False and use_compression=False/],
      ['zarr2', /\/\.zarray: chunks are compressed \(\{"id":"zstd","level":1\}; Orbax's default use_compression=True\), which orbax-ts does not decode; save with use_ocdbt=False/],
      ['zarr3', /state holds Zarr v3 arrays \(use_zarr3=True\), which orbax-ts does not read; save with use_ocdbt=False/],
    ];
    for (const [variant, message] of cases) {
      const mgr = open(variant);
      await expect(mgr.restore(3), variant).rejects.toThrow(message);
      await mgr.close();
    }
  });

  it('a tpukit step is still verified: its manifest cannot be dropped to skip the checksums', async () => {
    const dir = tmpDir();
    const mgr = new CheckpointManager(dir, { enableAsyncCheckpointing: false });
    await mgr.save(1, args.StandardSave({ w: np.ones([3]) }));
    await mgr.close();
    // The marker keeps its checksum line, so a missing _CHECKSUMS is corruption, not an Orbax step.
    fs.rmSync(path.join(dir, '1', '_CHECKSUMS'));
    const again = new CheckpointManager(dir, { readOnly: true });
    await expect(again.restore(1)).rejects.toThrow(/_CHECKSUMS/);
    await again.close();
    // Dropping the marker's checksum line too does not make it pass as an unverified Orbax step.
    const marker = path.join(dir, '1', 'commit_success.txt');
    fs.writeFileSync(marker, fs.readFileSync(marker, 'utf8').split('\n').filter((l) => !l.startsWith('tpukit ')).join('\n'));
    const third = new CheckpointManager(dir, { readOnly: true });
    await expect(third.restore(1)).rejects.toThrow(/was written by tpukit but the step has no _CHECKSUMS and no checksum line in commit_success\.txt; the checkpoint at step 1 is corrupt/);
    await third.close();
  });

  it('bad tree_metadata: keys reaching Object.prototype, a huge or missing sequence index, are refused with the entry named', async () => {
    const edit = (change: (tm: Record<string, any>) => void): CheckpointManager => {
      const mgr = open('zarr2_raw');
      const file = path.join(mgr.directory, '3', 'state', '_METADATA');
      const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
      change(doc.tree_metadata);
      fs.writeFileSync(file, JSON.stringify(doc));
      return mgr;
    };
    const leaf = (keys: [string, number][]) => ({ key_metadata: keys.map(([key, key_type]) => ({ key, key_type })), value_metadata: { value_type: 'None' } });
    const cases: [(tm: Record<string, any>) => void, RegExp][] = [
      [(tm) => (tm["('params', 'b')"].key_metadata[0].key = '__proto__'), /tree_metadata entry \('params', 'b'\) has the key "__proto__", which orbax-ts does not restore/],
      [(tm) => (tm["('x', 'constructor')"] = leaf([['x', 2], ['constructor', 2]])), /has the key "constructor"/],
      [(tm) => (tm["('xs', 1000000000)"] = leaf([['xs', 2], ['1000000000', 1]])), /sequence index "1000000000" in \('xs', 1000000000\) \(the tree has 8 entries\)/],
      [(tm) => (tm["('xs', 1)"] = leaf([['xs', 2], ['1', 1]])), /a sequence of 2 elements has no element 0/],
    ];
    for (const [change, message] of cases) {
      const mgr = edit(change);
      await expect(mgr.restore(3), String(message)).rejects.toThrow(message);
      await mgr.close();
    }
    expect(({} as Record<string, unknown>).b, 'Object.prototype untouched').toBeUndefined();
  });
});
