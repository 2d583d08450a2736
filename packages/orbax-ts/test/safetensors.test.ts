// safetensors: save -> load is identity (names, shapes, dtypes, bits, metadata), the layout
// follows the format (8-byte little-endian header length, JSON header padded with spaces to
// 8-byte alignment, tensors aligned to their element size), bad files get errors naming the file
// and what is wrong, loads onto a template check every tensor, and writes are atomic. An
// independent numpy reader/writer (fixtures/safetensors_np.py) cross-checks when numpy is there.
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Array as TArray, type DType, bf16, fromStorage, np, toStorage, tree } from '@tpukit/core';
import { ShapeDtypeStruct, decodeSafetensors, encodeSafetensors, loadSafetensors, saveSafetensors } from '../src/index';
import { tmpDir } from './helpers';

const here = path.dirname(fileURLToPath(import.meta.url));
const bitsOf = (x: TArray): number[] => {
  const s = toStorage(x);
  const size = s.BYTES_PER_ELEMENT;
  const u = size === 1 ? new Uint8Array(s.buffer, s.byteOffset, s.length) : size === 2 ? new Uint16Array(s.buffer, s.byteOffset, s.length) : new Uint32Array(s.buffer, s.byteOffset, s.length);
  return Array.from(u);
};
const view = (x: TArray) => ({ dtype: x.dtype, shape: [...x.shape], bits: bitsOf(x) });
const headerOf = (bytes: Uint8Array) => {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  return { n, text: Buffer.from(bytes.subarray(8, 8 + n)).toString('utf8') };
};
/** A file with this header (JSON text, unpadded) and data bytes. */
const fileWith = (header: unknown, data: number[] | Uint8Array = []): Uint8Array => {
  const h = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
  out.set(h, 8);
  out.set(data, 8 + h.length);
  return out;
};

const DTYPES: DType[] = ['bool', 'int8', 'uint8', 'int32', 'uint32', 'float16', 'bfloat16', 'float32'];
const STORAGE: Record<DType, (n: number) => ArrayLike<number> & { length: number }> = {
  bool: (n) => new Uint8Array(n), int8: (n) => new Int8Array(n), uint8: (n) => new Uint8Array(n), int32: (n) => new Int32Array(n), uint32: (n) => new Uint32Array(n),
  float16: (n) => new Uint16Array(n), bfloat16: (n) => new Uint16Array(n), float32: (n) => new Float32Array(n),
};
/** An array of `dtype` and `shape` with arbitrary bits (NaN payloads included), from `seed`. */
function arrayOf(dtype: DType, shape: number[], seed: number): TArray {
  const n = shape.reduce((a, d) => a * d, 1);
  const data = STORAGE[dtype](n) as unknown as { length: number; buffer: ArrayBufferLike };
  const bytes = new Uint8Array(data.buffer);
  let s = seed >>> 0;
  for (let i = 0; i < bytes.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    bytes[i] = dtype === 'bool' ? (s >>> 31) : s >>> 24;
  }
  return fromStorage(data as never, shape, dtype);
}

const arbLeaf = fc.record({ dtype: fc.constantFrom(...DTYPES), shape: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }), seed: fc.integer({ min: 0, max: 2 ** 31 }) });
const arbTree = fc.record({
  params: fc.dictionary(fc.stringMatching(/^[a-z_]{1,6}$/), arbLeaf, { minKeys: 1, maxKeys: 4 }),
  layers: fc.array(fc.dictionary(fc.constantFrom('w', 'b'), arbLeaf, { minKeys: 1 }), { maxLength: 3 }),
});
type LeafSpec = { dtype: DType; shape: number[]; seed: number };
const leavesOf = (d: Record<string, LeafSpec>) => Object.fromEntries(Object.entries(d).map(([k, l]) => [k, arrayOf(l.dtype, l.shape, l.seed)]));
const build = (t: { params: Record<string, LeafSpec>; layers: Record<string, LeafSpec>[] }) => ({ params: leavesOf(t.params), layers: t.layers.map(leavesOf) });

describe('safetensors save -> load', () => {
  it('is the identity on names, shapes, dtypes, bits and metadata, with an aligned layout', () => {
    fc.assert(
      fc.property(arbTree, fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 2 }), (spec, metadata) => {
        const params = build(spec);
        const bytes = encodeSafetensors(params, { metadata });
        const { n, text } = headerOf(bytes);
        expect((8 + n) % 8).toBe(0);
        expect(text).toMatch(/^\{.*\} *$/);
        const header = JSON.parse(text);
        for (const [k, v] of Object.entries(header)) {
          if (k === '__metadata__') continue;
          const { dtype, data_offsets: [b] } = v as { dtype: string; data_offsets: number[] };
          expect(b % ({ BOOL: 1, I8: 1, U8: 1, F16: 2, BF16: 2, I32: 4, U32: 4, F32: 4 } as Record<string, number>)[dtype]).toBe(0);
        }
        const got = decodeSafetensors(bytes);
        expect(got.metadata).toEqual(metadata);
        const [pairs] = tree.flattenWithPath(params);
        expect(Object.keys(got.tensors).sort()).toEqual(pairs.map(([p]) => p.map((e: any) => e.key ?? e.idx).join('.')).sort());
        const dir = tmpDir();
        const file = path.join(dir, 'model.safetensors');
        saveSafetensors(file, params, { metadata });
        const back = loadSafetensors(file, params);
        expect(tree.map(view, back)).toEqual(tree.map(view, params));
        expect(fs.readdirSync(dir)).toEqual(['model.safetensors']);
      }),
      { numRuns: 60 },
    );
  });

  it('writes the reference layout: u64 header length, JSON header padded with spaces, data in order', () => {
    const bytes = encodeSafetensors({ a: np.array([1, 2], 'float32'), b: np.array([true], 'bool') }, { metadata: { format: 'pt' } });
    const { n, text } = headerOf(bytes);
    const json = '{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"BOOL","shape":[1],"data_offsets":[8,9]}}';
    expect(text).toBe(json + ' '.repeat((8 - (json.length % 8)) % 8));
    expect(n % 8).toBe(0);
    expect([...bytes.subarray(8 + n)]).toEqual([0, 0, 128, 63, 0, 0, 0, 64, 1]);
  });

  it('names tensors by pytree path and refuses what safetensors cannot hold', () => {
    const x = np.array([1], 'float32');
    expect(Object.keys(decodeSafetensors(encodeSafetensors({ params: { w: x, b: x }, layers: [x, { k: x }] })).tensors).sort()).toEqual(['layers.0', 'layers.1.k', 'params.b', 'params.w']);
    expect(() => encodeSafetensors({ 'a.b': x, a: { b: x } })).toThrow(/encodeSafetensors: params leaves \['a'\]\['b'\] and \['a\.b'\] both get the tensor name "a\.b"/);
    expect(() => encodeSafetensors({ w: x, step: 3 })).toThrow(/encodeSafetensors: params leaf \['step'\] is a number \(3\); expected an Array/);
    expect(() => encodeSafetensors(x)).toThrow(/must be a pytree \(an object or list\) of arrays.*\{ weight: x \}/);
    expect(() => encodeSafetensors({ w: x }, { metadata: { v: 1 } as never })).toThrow(/options\.__metadata__\["v"\] must be a string; got a number/);
  });
});

describe('loading onto a template', () => {
  const params = { params: { w: np.zeros([2, 3], 'float32'), b: np.zeros([3], 'bfloat16') }, step: np.array(0, 'int32') };
  it('returns the template structure, and accepts ShapeDtypeStructs as leaves', () => {
    const dir = tmpDir();
    const file = path.join(dir, 'm.safetensors');
    const w = np.arange(0, 6, 1, 'float32').reshape([2, 3]);
    saveSafetensors(file, { params: { w, b: np.ones([3], 'bfloat16') }, step: np.array(7, 'int32') });
    const like = { params: { w: new ShapeDtypeStruct([2, 3], 'float32'), b: new ShapeDtypeStruct([3], 'bfloat16') }, step: new ShapeDtypeStruct([], 'int32') };
    const back = loadSafetensors(file, like) as unknown as typeof params;
    expect(back.params.w.toArray()).toEqual([[0, 1, 2], [3, 4, 5]]);
    expect(back.step.toArray()).toBe(7);
  });

  it('names every missing, extra, mis-shaped and wrong-dtype tensor', () => {
    const dir = tmpDir();
    const file = path.join(dir, 'm.safetensors');
    saveSafetensors(file, { params: { w: np.zeros([3, 2], 'float32'), b: np.zeros([3], 'float32') }, extra: np.zeros([1], 'int8') });
    expect(() => loadSafetensors(file, params)).toThrow(
      new RegExp(`^loadSafetensors: ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} does not match the template: missing from the file: "step"; in the file but not in the template: "extra"; "params\\.b": dtype float32 in the file, bfloat16 in the template; "params\\.w": shape \\[3, 2\\] in the file, \\[2, 3\\] in the template$`),
    );
    expect(() => loadSafetensors(file, { w: 3 })).toThrow(/loadSafetensors: the template leaf \['w'\] is a number \(3\); expected an Array or a ShapeDtypeStruct/);
    expect(() => loadSafetensors(path.join(dir, 'nope.safetensors'))).toThrow(/loadSafetensors: cannot read .*nope\.safetensors: ENOENT/);
  });
});

describe('bad files', () => {
  const good = encodeSafetensors({ a: np.array([1, 2], 'float32'), b: np.array([3], 'int32') });
  const cases: [string, Uint8Array, RegExp][] = [
    ['shorter than 8 bytes', good.subarray(0, 5), /the file is 5 bytes, shorter than its 8-byte header length/],
    ['truncated data', good.subarray(0, good.length - 1), /the tensors need 12 data bytes but the file has 11 after its header \(truncated\?\)/],
    ['truncated header', good.subarray(0, 20), /header length \d+ \(bytes 0-7\) runs past the end of the file \(20 bytes; truncated/],
    ['header length overflow', (() => { const b = good.slice(); new DataView(b.buffer).setBigUint64(0, 2n ** 63n, true); return b; })(), /header length 9223372036854775808 \(bytes 0-7\) runs past the end of the file/],
    ['overlapping offsets', fileWith({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, new Uint8Array(8)), /tensor "b" \(data bytes 4-8\) overlaps tensor "a" \(data bytes 0-8\)/],
    ['a gap', fileWith({ a: { dtype: 'U8', shape: [1], data_offsets: [1, 2] } }, [0, 0]), /data bytes 0-1 \(file offset \d+\) belong to no tensor \(a gap before tensor "a"\)/],
    ['trailing bytes', fileWith({ a: { dtype: 'U8', shape: [1], data_offsets: [0, 1] } }, [0, 0]), /the file has 2 data bytes but the tensors cover only 1/],
    ['size not matching the shape', fileWith({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, new Uint8Array(8)), /tensor "a": data_offsets \[0, 8\] hold 8 bytes but shape \[3\] of F32 needs 12/],
    ['unknown dtype', fileWith({ a: { dtype: 'F64', shape: [1], data_offsets: [0, 8] } }, new Uint8Array(8)), /tensor "a": dtype "F64" is not supported \(supported: BOOL, I8, U8, I32, U32, F16, BF16, F32, I64\)/],
    ['bad JSON', fileWith('{"a": '), /the header \(bytes 8-14\) is not valid JSON/],
    ['not an object', fileWith('[1, 2]'), /the header \(bytes 8-14\) must be a JSON object; got an array/],
    ['bad offsets', fileWith({ a: { dtype: 'U8', shape: [1], data_offsets: [1, 0] } }, [0]), /tensor "a": data_offsets must be \[begin, end\] with 0 <= begin <= end; got \[1,0\]/],
    ['metadata not strings', fileWith({ __metadata__: { n: 1 } }), /__metadata__\["n"\] must be a string; got a number/],
    ['a BOOL byte other than 0 or 1', fileWith({ m: { dtype: 'BOOL', shape: [2], data_offsets: [0, 2] } }, [1, 2]), /tensor "m" \(file offset \d+\): BOOL element 1 is the byte 2; expected 0 or 1/],
    ['an I64 outside int32', fileWith({ i: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, [0, 0, 0, 128, 0, 0, 0, 0]), /tensor "i" \(file offset \d+\): I64 element 0 is 2147483648, outside int32/],
  ];
  for (const [what, bytes, re] of cases) {
    it(`refuses ${what}, naming the file`, () => {
      const dir = tmpDir();
      const file = path.join(dir, 'bad.safetensors');
      fs.writeFileSync(file, bytes);
      expect(() => loadSafetensors(file)).toThrow(new RegExp(`^decodeSafetensors: ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: ${re.source}`));
    });
  }

  it('reads I64 tensors that fit as int32, and empty tensors', () => {
    const got = decodeSafetensors(fileWith({ i: { dtype: 'I64', shape: [2], data_offsets: [0, 16] }, e: { dtype: 'F32', shape: [0, 3], data_offsets: [16, 16] } }, [255, 255, 255, 255, 255, 255, 255, 255, 5, 0, 0, 0, 0, 0, 0, 0])).tensors;
    expect(view(got.i)).toEqual({ dtype: 'int32', shape: [2], bits: [2 ** 32 - 1, 5] });
    expect(got.e.shape).toEqual([0, 3]);
  });
});

describe('atomic writes', () => {
  it('a failed save leaves an existing file as it was and no temporary file behind', () => {
    const dir = tmpDir();
    const file = path.join(dir, 'm.safetensors');
    saveSafetensors(file, { w: np.array([1, 2], 'float32') });
    const before = fs.readFileSync(file);
    expect(() => saveSafetensors(file, { w: np.array([1], 'float32'), bad: 'x' })).toThrow(/params leaf \['bad'\] is a string/);
    // A failure after the bytes are written: the target is a non-empty directory, so the rename fails.
    const blocked = path.join(dir, 'blocked.safetensors');
    fs.mkdirSync(blocked);
    fs.writeFileSync(path.join(blocked, 'x'), 'x');
    expect(() => saveSafetensors(blocked, { w: np.array([1], 'float32') })).toThrow(/^saveSafetensors: could not write .*blocked\.safetensors: E(ISDIR|NOTEMPTY|EXIST)/);
    expect(() => saveSafetensors(path.join(dir, 'missing', 'm.safetensors'), { w: np.array([1], 'float32') })).toThrow(/^saveSafetensors: could not write .*: ENOENT/);
    expect(fs.readFileSync(file).equals(before)).toBe(true);
    expect(fs.readdirSync(dir).sort()).toEqual(['blocked.safetensors', 'm.safetensors']);
  });
});

const python = ['python3', '/usr/bin/python3'].find((p) => spawnSync(p, ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0);

describe.skipIf(!python)('cross-check with an independent numpy reader and writer', () => {
  const script = path.join(here, 'fixtures', 'safetensors_np.py');
  it('numpy reads what tpukit writes, bit for bit, with the reference layout', () => {
    const params = {
      f32: np.array([[1.5, -2], [Number.NaN, -0]], 'float32'),
      bf16: np.array([1, -2.5, 3.140625], 'bfloat16'),
      f16: np.array([0.5, -65504], 'float16'),
      i32: np.array([-2147483648, 7], 'int32'),
      u32: np.array([4294967295], 'uint32'),
      i8: np.array([-128, 127], 'int8'),
      u8: np.array([[255, 0]], 'uint8'),
      mask: np.array([true, false, true], 'bool'),
      layers: [{ w: np.array(3, 'float32') }],
      empty: np.zeros([0, 2], 'float32'),
    };
    const file = path.join(tmpDir(), 'tp.safetensors');
    saveSafetensors(file, params, { metadata: { format: 'tpukit' } });
    const out = JSON.parse(execFileSync(python!, [script, 'read', file], { encoding: 'utf8' }));
    expect(out.metadata).toEqual({ format: 'tpukit' });
    const [pairs] = tree.flattenWithPath(params);
    for (const [p, x] of pairs as [any[], TArray][]) {
      const name = p.map((e) => e.key ?? e.idx).join('.');
      expect(out.tensors[name].shape, name).toEqual([...x.shape]);
      expect(out.tensors[name].bits, name).toEqual(bitsOf(x));
    }
  });

  it('tpukit reads what numpy writes, I64 and BOOL included', () => {
    const file = path.join(tmpDir(), 'np.safetensors');
    execFileSync(python!, [script, 'write', file]);
    const { tensors, metadata } = decodeSafetensors(fs.readFileSync(file), file);
    expect(metadata).toEqual({ format: 'np' });
    expect(tensors.f32.toArray()).toEqual([[1.5, -2], [3.25, 0]]);
    expect(tensors.f16.toArray()).toEqual([0.5, -65504]);
    expect(bitsOf(tensors.bf16)).toEqual([...bf16.encode(new Float32Array([1, -2.5, 3.140625]))]);
    expect(tensors['layers.0.w'].toArray()).toEqual([-7, 2147483647]);
    expect(tensors.u32.toArray()).toEqual([4294967295]);
    expect(view(tensors.ids)).toEqual({ dtype: 'int32', shape: [1, 3], bits: [1, 2 ** 32 - 2, 3] });
    expect(tensors.u8.toArray()).toEqual([0, 255]);
    expect(tensors.i8.toArray()).toEqual([-128, 5]);
    expect(tensors.mask.toArray()).toEqual([true, false, true]);
    expect(tensors.empty.shape).toEqual([0, 3]);
  });
});
