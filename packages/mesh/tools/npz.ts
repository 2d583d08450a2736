/**
 * A NumPy `.npz` writer (a zip of `.npy` files, stored uncompressed) for the fidelity tools:
 * tpukit's inputs and outputs go to real JAX/XLA this way (`np.load` reads them). Float arrays
 * are written as float32 (bfloat16 values are exact in float32; the reader converts back where
 * the module wants bf16), integers as int32 / uint32 / uint8 / int8, booleans as `|b1`.
 */
import { writeFileSync } from 'node:fs';
import * as zlib from 'node:zlib';

export interface NpyArray {
  shape: readonly number[];
  dtype: string;
  data: ArrayLike<number> | ArrayLike<boolean>;
}

const DESCR: Record<string, [string, new (n: number) => ArrayLike<number> & { buffer: ArrayBufferLike }]> = {
  float32: ['<f4', Float32Array],
  bfloat16: ['<f4', Float32Array],
  float16: ['<f4', Float32Array],
  int32: ['<i4', Int32Array],
  uint32: ['<u4', Uint32Array],
  int8: ['|i1', Int8Array],
  uint8: ['|u1', Uint8Array],
  bool: ['|b1', Uint8Array],
};

/** The bytes of one `.npy` file (format version 1.0). */
export function npyBytes(a: NpyArray): Uint8Array {
  const spec = DESCR[a.dtype];
  if (!spec) throw new TypeError(`npz: dtype ${a.dtype} has no .npy mapping here`);
  const [descr, Ctor] = spec;
  const n = a.shape.reduce((x, y) => x * y, 1);
  if (a.data.length !== n) throw new RangeError(`npz: ${a.data.length} values for shape [${a.shape.join(', ')}]`);
  const body = new Ctor(n) as unknown as { [i: number]: number; buffer: ArrayBufferLike };
  for (let i = 0; i < n; i++) body[i] = Number(a.data[i]);
  const shape = a.shape.length === 1 ? `(${a.shape[0]},)` : `(${a.shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const bytes = new Uint8Array(10 + header.length + (body.buffer as ArrayBuffer).byteLength);
  bytes.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, header.length & 0xff, header.length >> 8]);
  bytes.set(new TextEncoder().encode(header), 10);
  bytes.set(new Uint8Array(body.buffer as ArrayBuffer), 10 + header.length);
  return bytes;
}

/** A zip archive of `files` (name -> bytes), every entry stored (method 0). */
export function zipStored(files: Record<string, Uint8Array>): Uint8Array {
  const parts: Uint8Array[] = [];
  const central: Uint8Array[] = [];
  let offset = 0;
  for (const [name, data] of Object.entries(files)) {
    const nm = new TextEncoder().encode(name);
    const crc = zlib.crc32(data);
    const local = new DataView(new ArrayBuffer(30));
    local.setUint32(0, 0x04034b50, true);
    local.setUint16(4, 20, true);
    local.setUint32(14, crc, true);
    local.setUint32(18, data.length, true);
    local.setUint32(22, data.length, true);
    local.setUint16(26, nm.length, true);
    parts.push(new Uint8Array(local.buffer), nm, data);
    const cen = new DataView(new ArrayBuffer(46));
    cen.setUint32(0, 0x02014b50, true);
    cen.setUint16(4, 20, true);
    cen.setUint16(6, 20, true);
    cen.setUint32(16, crc, true);
    cen.setUint32(20, data.length, true);
    cen.setUint32(24, data.length, true);
    cen.setUint16(28, nm.length, true);
    cen.setUint32(42, offset, true);
    central.push(new Uint8Array(cen.buffer), nm);
    offset += 30 + nm.length + data.length;
  }
  const cenSize = central.reduce((s, p) => s + p.length, 0);
  const end = new DataView(new ArrayBuffer(22));
  end.setUint32(0, 0x06054b50, true);
  end.setUint16(8, Object.keys(files).length, true);
  end.setUint16(10, Object.keys(files).length, true);
  end.setUint32(12, cenSize, true);
  end.setUint32(16, offset, true);
  return new Uint8Array(Buffer.concat([...parts, ...central, new Uint8Array(end.buffer)]));
}

/** Writes `arrays` (name -> array) as an `.npz` file at `path`. */
export function writeNpz(path: string, arrays: Record<string, NpyArray>): void {
  const files: Record<string, Uint8Array> = {};
  for (const [k, a] of Object.entries(arrays)) files[`${k}.npy`] = npyBytes(a);
  writeFileSync(path, zipStored(files));
}
