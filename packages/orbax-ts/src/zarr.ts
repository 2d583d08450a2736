/**
 * Zarr v2 array metadata as tpukit writes and reads it (see the README): `.zarray` with
 * `compressor: null`, `filters: null`, `order: "C"`, `fill_value: null`, little-endian NumPy
 * dtype strings, and TensorStore's `"bfloat16"` extension dtype. Chunk files are the raw bytes
 * of one full chunk in C order, named by chunk-grid indices joined with `.` (`"0"` for a
 * scalar). Parsing validates everything it returns, since `.zarray` comes from disk.
 */
import type { DType } from '@tpukit/core';

const TO_ZARR: Record<DType, string> = {
  bool: '|b1',
  int8: '|i1',
  uint8: '|u1',
  int32: '<i4',
  uint32: '<u4',
  float16: '<f2',
  float32: '<f4',
  bfloat16: 'bfloat16',
};
const FROM_ZARR = new Map<string, DType>(Object.entries(TO_ZARR).map(([k, v]) => [v, k as DType]));

export const ITEMSIZE: Record<DType, number> = { bool: 1, int8: 1, uint8: 1, int32: 4, uint32: 4, float16: 2, float32: 4, bfloat16: 2 };

export function zarrDType(dtype: DType): string {
  return TO_ZARR[dtype];
}

export interface ZArrayInfo {
  readonly shape: number[];
  readonly chunks: number[];
  readonly dtype: DType;
}

/** The `.zarray` document for an array (key order as TensorStore writes it: sorted). */
export function makeZArray(info: ZArrayInfo): Record<string, unknown> {
  return {
    chunks: info.chunks,
    compressor: null,
    dtype: zarrDType(info.dtype),
    fill_value: null,
    filters: null,
    order: 'C',
    shape: info.shape,
    zarr_format: 2,
  };
}

/**
 * A Python scalar leaf as Orbax's ScalarHandler stores it: a 0-d Zarr array with one chunk `0`.
 * JS numbers that are safe integers (not -0) become int64 (`<i8`, as Python ints do), other
 * numbers float64 (`<f8`), booleans `|b1`. tpukit itself restores these leaves from the
 * `tpukit` section of `_METADATA`; the arrays are there for Orbax and zarr-python.
 */
export function scalarZArray(value: number | boolean): { zarray: Record<string, unknown>; chunk: Uint8Array } {
  let dtype: string;
  let chunk: Uint8Array;
  if (typeof value === 'boolean') {
    dtype = '|b1';
    chunk = new Uint8Array([value ? 1 : 0]);
  } else if (Number.isSafeInteger(value) && !Object.is(value, -0)) {
    dtype = '<i8';
    chunk = new Uint8Array(8);
    new DataView(chunk.buffer).setBigInt64(0, BigInt(value), true);
  } else {
    dtype = '<f8';
    chunk = new Uint8Array(8);
    new DataView(chunk.buffer).setFloat64(0, value, true);
  }
  return { zarray: { chunks: [], compressor: null, dtype, fill_value: null, filters: null, order: 'C', shape: [], zarr_format: 2 }, chunk };
}

const isDim = (v: unknown, min: number): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= min;

/** Validates a parsed `.zarray` written by tpukit (uncompressed, C order); `file` names it in errors. */
export function parseZArray(doc: unknown, file: string): ZArrayInfo {
  const fail = (key: string, why: string): never => {
    throw new Error(`zarr: ${file}: key "${key}" ${why}`);
  };
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new Error(`zarr: ${file}: expected a JSON object`);
  const z = doc as Record<string, unknown>;
  if (z.zarr_format !== 2) fail('zarr_format', `must be 2; got ${JSON.stringify(z.zarr_format)}`);
  if (!Array.isArray(z.shape) || !z.shape.every((d) => isDim(d, 0)) || z.shape.length > 32) fail('shape', `must be a list of at most 32 non-negative integers; got ${JSON.stringify(z.shape)}`);
  const shape = z.shape as number[];
  if (!Array.isArray(z.chunks) || z.chunks.length !== shape.length || !z.chunks.every((d) => isDim(d, 1))) {
    fail('chunks', `must be ${shape.length} positive integers; got ${JSON.stringify(z.chunks)}`);
  }
  const dtype = typeof z.dtype === 'string' ? FROM_ZARR.get(z.dtype) : undefined;
  if (!dtype) fail('dtype', `must be one of ${[...FROM_ZARR.keys()].join(', ')}; got ${JSON.stringify(z.dtype)}`);
  if (z.compressor !== null) fail('compressor', `must be null (tpukit writes uncompressed chunks); got ${JSON.stringify(z.compressor)}`);
  if (z.filters !== null && z.filters !== undefined) fail('filters', `must be null; got ${JSON.stringify(z.filters)}`);
  if (z.order !== 'C') fail('order', `must be "C"; got ${JSON.stringify(z.order)}`);
  if (z.dimension_separator !== undefined && z.dimension_separator !== '.') fail('dimension_separator', `must be "."; got ${JSON.stringify(z.dimension_separator)}`);
  return { shape, chunks: z.chunks as number[], dtype: dtype! };
}

/** Number of chunks along each axis. */
export const chunkGrid = (shape: readonly number[], chunks: readonly number[]): number[] => shape.map((d, i) => Math.ceil(d / chunks[i]));

/** A chunk file's name from its grid coordinates: `"1.0.3"`, or `"0"` for a scalar. */
export const chunkKey = (coords: readonly number[]): string => (coords.length === 0 ? '0' : coords.join('.'));

/** Calls `f` with every coordinate of `grid` in C order (nothing for a grid with a 0 axis). */
export function forEachCoord(grid: readonly number[], f: (coords: number[]) => void): void {
  if (grid.some((g) => g === 0)) return;
  const c = new Array<number>(grid.length).fill(0);
  for (;;) {
    f(c.slice());
    let d = grid.length - 1;
    while (d >= 0 && ++c[d] === grid[d]) c[d--] = 0;
    if (d < 0) return;
  }
}
