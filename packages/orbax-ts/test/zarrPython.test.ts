// Cross-checks with independent readers. (1) A numpy-only Python script (fixtures/read_zarr.py)
// verifies the checksums and reads every array from .zarray + raw chunk files; skipped without
// numpy. (2) The real zarr-python (fixtures/zarr_python_read.py) opens every array of a step with
// zarr.open and reads it whole: every dtype, scalars, an empty array and arrays chunked along one
// and two axes with padded edge chunks; bfloat16 (no numpy dtype) is read by zarr-python as '<u2'
// from the same chunk files. Skipped, saying why, when no python3 on PATH or /usr/bin can
// `import zarr` (Debian: apt-get install python3-zarr). Neither is TensorStore or Orbax.
import { execFileSync, spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type Array as TArray, type Device, type Index, type Sharding, fromStorage, makeArrayFromCallback, np, toStorage } from '@tpukit/core';
import { CheckpointManager, args } from '../src/index';
import { SplitSharding, dev, tmpDir } from './helpers';

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

/** The first of python3 (PATH) and /usr/bin/python3 that can import zarr, or why none can. */
function findZarrPython(): { python: string } | { why: string } {
  const tried: string[] = [];
  for (const python of ['python3', '/usr/bin/python3']) {
    const r = spawnSync(python, ['-c', 'import zarr, numpy; print(zarr.__version__)'], { encoding: 'utf8' });
    if (r.status === 0) return { python };
    tried.push(`${python}: ${r.error ? r.error.message : (r.stderr.trim().split('\n').pop() ?? `exit ${r.status}`)}`);
  }
  return { why: `zarr-python is not importable (${tried.join('; ')}); install it (Debian: apt-get install python3-zarr) to run this check` };
}

/** Rows split in `r` parts and columns in `c` parts (ceil), one device each: a 2-D chunk grid. */
class GridSharding implements Sharding {
  readonly deviceSet: Device[];
  readonly isFullyReplicated = false;
  constructor(readonly r: number, readonly c: number) {
    this.deviceSet = Array.from({ length: r * c }, (_, i) => dev(i));
  }
  devicesIndicesMap(shape: readonly number[]): Map<Device, Index> {
    const [pr, pc] = [Math.ceil(shape[0] / this.r), Math.ceil(shape[1] / this.c)];
    const m = new Map<Device, Index>();
    this.deviceSet.forEach((d, i) => {
      const [a, b] = [Math.floor(i / this.c), i % this.c];
      m.set(d, [[Math.min(a * pr, shape[0]), Math.min((a + 1) * pr, shape[0])], [Math.min(b * pc, shape[1]), Math.min((b + 1) * pc, shape[1])]]);
    });
    return m;
  }
  shardShape(shape: readonly number[]): number[] {
    return [Math.ceil(shape[0] / this.r), Math.ceil(shape[1] / this.c)];
  }
  toString(): string {
    return `GridSharding(${this.r}x${this.c})`;
  }
}

/** Storage bits as unsigned integers of the item size (bool as 0/1), the way the script prints them. */
function bitsOf(x: TArray): number[] {
  const s = toStorage(x);
  const bytes = new Uint8Array(s.buffer, s.byteOffset, s.byteLength);
  const size = s.BYTES_PER_ELEMENT;
  const U = size === 4 ? Uint32Array : size === 2 ? Uint16Array : Uint8Array;
  return [...new U(bytes.slice().buffer)];
}

const zarrPython = findZarrPython();

describe.skipIf('why' in zarrPython)(`zarr-python reads tpukit checkpoints${'why' in zarrPython ? ` (skipped: ${zarrPython.why})` : ''}`, () => {
  it('zarr.open reads every array of a step: all dtypes, 0-d, empty, multi-chunk with padded edges, bf16 as uint16; Python scalars and strings as Orbax stores them', async () => {
    const python = (zarrPython as { python: string }).python;
    const grid = np.arange(0, 70, 1, 'float32').reshape([7, 10]).mul(0.5);
    const gsrc = toStorage(grid) as Float32Array;
    const tiled = makeArrayFromCallback([7, 10], 'float32', new GridSharding(3, 4), ([[r0, r1], [c0, c1]]) => {
      const out = new Float32Array((r1 - r0) * (c1 - c0));
      for (let r = r0; r < r1; r++) out.set(gsrc.subarray(r * 10 + c0, r * 10 + c1), (r - r0) * (c1 - c0));
      return fromStorage(out, [r1 - r0, c1 - c0], 'float32');
    });
    const isrc = toStorage(np.arange(0, 40, 1, 'int32').reshape([10, 4])) as Int32Array;
    const rows = makeArrayFromCallback([10, 4], 'int32', new SplitSharding(4, 2), ([[a, b]]) => fromStorage(isrc.slice(a * 4, b * 4), [b - a, 4], 'int32'));
    const hsrc = toStorage(np.linspace(-3, 3, 24, { dtype: 'bfloat16' }).reshape([4, 6])) as Uint16Array;
    const bfCols = makeArrayFromCallback([4, 6], 'bfloat16', new SplitSharding(4, 1, 1), ([, [a, b]]) => {
      const out = new Uint16Array(4 * (b - a));
      for (let r = 0; r < 4; r++) out.set(hsrc.subarray(r * 6 + a, r * 6 + b), r * (b - a));
      return fromStorage(out, [4, b - a], 'bfloat16');
    });
    const tree = (k: number): Record<string, unknown> => ({
      f32: np.array([[1.5, -2, 3e38], [Number.NaN, -0, 1e-40 * k]], 'float32'),
      f16: np.array([0.5, -65504, 6e-8, Number.POSITIVE_INFINITY], 'float16'),
      bf16: np.array([1, -2.5, 3.140625, 65280, -0.0078125 * k], 'bfloat16'),
      i32: np.array([-2147483648, 2147483647, 0, k], 'int32'),
      u32: np.array([4294967295, 1], 'uint32'),
      i8: np.array([-128, 127, -k], 'int8'),
      u8: np.array([[255, 0], [1, k]], 'uint8'),
      b: np.array([true, false, true, k === 2], 'bool'),
      f32_scalar: np.array(0.25 * k, 'float32'),
      i32_scalar: np.array(-7 * k, 'int32'),
      empty: np.zeros([0, 4], 'float32'),
      tiled,
      rows,
      bf16_cols: bfCols,
      // Non-array leaves, stored as Orbax does: 0-d Zarr arrays and _strings.json.
      step: 7 * k,
      lr: 0.5 / k,
      neg0: -0,
      flag: k === 2,
      name: `run-${k}`,
      nothing: null,
      opt: { state: [], cfg: {} },
    });
    const dir = tmpDir();
    const mgr = new CheckpointManager(dir, { fsync: false }); // async: step 2 reuses step 1's snapshot buffers
    await mgr.save(1, args.StandardSave(tree(1)));
    await mgr.save(2, args.StandardSave(tree(2)));
    await mgr.close();
    const want = tree(2);
    const out = JSON.parse(execFileSync(python, [path.join(here, 'fixtures', 'zarr_python_read.py'), path.join(dir, '2'), 'default'], { encoding: 'utf8' }));
    expect(out._zarr_version).toMatch(/^2\./);
    const strings = out._strings;
    const treeMetadata = out._tree_metadata;
    delete out._zarr_version;
    delete out._strings;
    delete out._tree_metadata;
    const arrays = Object.entries(want).filter((e): e is [string, TArray] => typeof e[1] === 'object' && e[1] !== null && 'dtype' in e[1]);
    const scalars = { step: ['<i8', 'int64', [14, 0]], lr: ['<f8', 'float64', [0, 0x3fd00000]], neg0: ['<f8', 'float64', [0, 0x80000000]], flag: ['|b1', 'bool', [1]] } as const;
    expect(Object.keys(out).sort()).toEqual([...arrays.map(([n]) => n), ...Object.keys(scalars)].sort());
    for (const [name, [dtype, zd, words]] of Object.entries(scalars)) {
      expect([out[name].dtype, out[name].zarr_dtype, out[name].shape], name).toEqual([dtype, zd, []]);
      // 64-bit values come back as one uint64; compare its two little-endian 32-bit words.
      const v = BigInt.asUintN(64, BigInt(out[name].bits[0]));
      expect(words.length === 1 ? [Number(v)] : [Number(v & 0xffffffffn), Number(v >> 32n)], name).toEqual([...words]);
    }
    expect(strings).toEqual({ name: 'run-2' });
    expect(treeMetadata["('name',)"].value_metadata).toEqual({ value_type: 'string', skip_deserialize: false });
    expect(treeMetadata["('step',)"].value_metadata).toEqual({ value_type: 'scalar', skip_deserialize: false });
    expect(treeMetadata["('nothing',)"].value_metadata).toEqual({ value_type: 'None', skip_deserialize: true });
    expect(treeMetadata["('opt', 'state')"]).toEqual({ key_metadata: [{ key: 'opt', key_type: 2 }, { key: 'state', key_type: 2 }], value_metadata: { value_type: 'List', skip_deserialize: true } });
    expect(treeMetadata["('opt', 'cfg')"].value_metadata.value_type).toBe('Dict');
    const zdtype = { float32: 'float32', float16: 'float16', bfloat16: 'uint16', int32: 'int32', uint32: 'uint32', int8: 'int8', uint8: 'uint8', bool: 'bool' };
    for (const [name, x] of arrays) {
      const py = out[name];
      expect(py.shape, name).toEqual([...x.shape]);
      expect(py.zarr_dtype, name).toBe(zdtype[x.dtype]);
      expect(py.bits, name).toEqual(bitsOf(x));
      if (x.dtype === 'bfloat16') expect(py.dtype, name).toBe('bfloat16');
    }
    // Chunk grids as zarr-python sees them (edge chunks padded, every chunk present).
    expect([out.tiled.chunks, out.tiled.nchunks, out.tiled.nchunks_initialized]).toEqual([[3, 3], 12, 12]);
    expect([out.rows.chunks, out.rows.nchunks, out.rows.nchunks_initialized]).toEqual([[3, 4], 4, 4]);
    expect([out.bf16_cols.chunks, out.bf16_cols.nchunks, out.bf16_cols.via]).toEqual([[4, 2], 3, 'zarr.open_array(dtype <u2)']);
    expect([out.f32_scalar.shape, out.f32_scalar.nchunks]).toEqual([[], 1]);
    expect([out.empty.shape, out.empty.nchunks_initialized]).toEqual([[0, 4], 0]);
  });
});

describe.skipIf(!hasNumpy)('Orbax tree_metadata keys match Python', () => {
  it("keyTupleString is Python's str(tuple(keys)) for awkward keys", async () => {
    const { keyTupleString } = await import('../src/treeMetadata');
    const keys = [['a'], ['params', 'w'], ["it's"], ['say "hi"'], ['both \' and "'], ['back\\slash'], ['tab\tnew\nline'], ['ünï', '0'], ['\x01']];
    const py = JSON.parse(execFileSync('python3', ['-c', 'import json,sys; print(json.dumps([str(tuple(k)) for k in json.load(sys.stdin)]))'], { input: JSON.stringify(keys), encoding: 'utf8' }));
    expect(keys.map((k) => keyTupleString(k.map((key) => ({ kind: 'dict', key }) as const)))).toEqual(py);
  });
});
