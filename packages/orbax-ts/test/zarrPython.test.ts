// Cross-check with an independent reader: a numpy-only Python script (fixtures/read_zarr.py)
// verifies the checksums and reads every array from .zarray + raw chunk files. It checks the
// bytes tpukit writes are plain little-endian Zarr v2 (bfloat16 as TensorStore's "bfloat16");
// it is not zarr-python, TensorStore or Orbax (none is installable here). Skipped without numpy.
import { execFileSync, spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type Array as TArray, fromStorage, makeArrayFromCallback, np, toStorage } from '@tpukit/core';
import { CheckpointManager, args } from '../src/index';
import { SplitSharding, tmpDir } from './helpers';

const here = path.dirname(fileURLToPath(import.meta.url));
const hasNumpy = spawnSync('python3', ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0;

describe.skipIf(!hasNumpy)('zarr cross-check with numpy', () => {
  it('reads back every dtype, a scalar, an empty array and a sharded array bit for bit', async () => {
    const rows = np.arange(0, 21, 1, 'float32').reshape([7, 3]);
    const src = toStorage(rows) as Float32Array;
    const sharded = makeArrayFromCallback([7, 3], 'float32', new SplitSharding(3, 2), ([[a, b]]) => fromStorage(src.slice(a * 3, b * 3), [b - a, 3], 'float32'));
    const tree: Record<string, TArray> = {
      f32: np.array([[1.5, -2, 3e38], [Number.NaN, -0, 1e-40]], 'float32'),
      bf16: np.array([1, -2.5, 3.140625, 65280, -0.0078125], 'bfloat16'),
      f16: np.array([0.5, -65504, 6e-8], 'float16'),
      i32: np.array([-2147483648, 2147483647, 0], 'int32'),
      u32: np.array([4294967295, 1], 'uint32'),
      i8: np.array([-128, 127], 'int8'),
      u8: np.array([[255, 0], [1, 2]], 'uint8'),
      b: np.array([true, false, true], 'bool'),
      scalar: np.array(42, 'int32'),
      empty: np.zeros([0, 4], 'float32'),
      sharded,
    };
    const dir = tmpDir();
    const mgr = new CheckpointManager(dir, { enableAsyncCheckpointing: false });
    await mgr.save(1, args.StandardSave(tree));
    const out = JSON.parse(execFileSync('python3', [path.join(here, 'fixtures', 'read_zarr.py'), path.join(dir, '1'), 'default'], { encoding: 'utf8' }));
    expect(Object.keys(out).sort()).toEqual(Object.keys(tree).sort());
    for (const [name, x] of Object.entries(tree)) {
      const py = out[name];
      expect(py.shape, name).toEqual([...x.shape]);
      const s = toStorage(x);
      const bits = x.dtype === 'float32' ? [...new Uint32Array(s.buffer, s.byteOffset, s.length)] : x.dtype === 'int32' ? [...new Uint32Array(s.buffer, s.byteOffset, s.length)] : x.dtype === 'int8' ? [...new Uint8Array(s.buffer, s.byteOffset, s.length)] : [...s];
      expect(py.bits, name).toEqual(bits);
    }
    expect(out.bf16.dtype).toBe('bfloat16');
    expect(out.bf16.values).toEqual([1, -2.5, 3.140625, 65280, -0.0078125]);
    expect(out.f16.dtype).toBe('<f2');
    expect(out.b.values).toEqual([true, false, true]);
    expect(out.scalar.values).toEqual([42]);
  });
});
