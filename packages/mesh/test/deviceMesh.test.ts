// createDeviceMesh: logical axes laid onto a physical chip grid the way
// mesh_utils.create_device_mesh does (innermost logical axis first, on as many physical
// dimensions as multiply to its size), checked against hand-worked layouts.
import type { Device } from '@tpukit/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { Mesh, createDeviceMesh, generations, setCpuDeviceCount, torus2d, torus3d } from '../src/index';
import { assignAxes } from '../src/deviceMesh';

const ids = (x: unknown): unknown => (globalThis.Array.isArray(x) ? x.map(ids) : (x as Device).id);

beforeAll(() => setCpuDeviceCount(128));

describe('createDeviceMesh', () => {
  it('assigns the innermost logical axis first, preferring more physical dimensions', () => {
    expect(assignAxes([8, 16], [4, 4, 8])).toEqual([[2], [0, 1]]);
    expect(() => assignAxes([2, 64], [4, 4, 8])).toThrow(/multiplies to 64, the size of logical axis 1/);
    expect(assignAxes([1, 128], [4, 4, 8])).toEqual([[], [0, 1, 2]]);
    // Ties go to the first free dimension, as itertools.combinations orders them in JAX.
    expect(assignAxes([4, 4, 8], [4, 4, 8])).toEqual([[1], [0], [2]]);
    expect(assignAxes([16, 8], [4, 4, 8])).toEqual([[0, 1], [2]]);
  });
  it('lays a [8,16] mesh on a 4x4x8 torus: the 16-axis on the 4x4 plane, the 8-axis on the z ring', () => {
    const m = createDeviceMesh([8, 16], { topology: { name: 'v4-4x4x8', dims: [4, 4, 8], wraparound: [true, true, true] } }) as Device[][];
    // Chip (x, y, z) is device x*32 + y*8 + z; logical (i, j) is chip (j/4, j%4, i).
    expect(m[0].slice(0, 5).map((d) => d.id)).toEqual([0, 8, 16, 24, 32]);
    expect(m.map((row) => row[0].id)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(m[3][6].id).toEqual(1 * 32 + 2 * 8 + 3);
    expect(new Set(m.flat().map((d) => d.id)).size).toBe(128);
    expect(new Mesh(m, ['data', 'model']).shape).toEqual({ data: 8, model: 16 });
  });
  it('takes the TPU topology records: a v4 4x4x8 torus and a v5e 4x4 slice', () => {
    const v4 = createDeviceMesh([8, 16], { topology: torus3d(generations.v4, [4, 4, 8]) }) as Device[][];
    expect(v4[3][6].id).toBe(1 * 32 + 2 * 8 + 3);
    // 16 on a 4x4 grid: the single logical axis takes both dimensions, row-major.
    expect(ids(createDeviceMesh([16], { topology: torus2d(generations.v5e, [4, 4]) }))).toEqual(globalThis.Array.from({ length: 16 }, (_, i) => i));
    // [4, 4] on 4x4: the inner axis goes to the first free dimension (x), as in JAX.
    expect((createDeviceMesh([4, 4], { topology: torus2d(generations.v5e, [4, 4]) }) as Device[][])[0].map((d) => d.id)).toEqual([0, 4, 8, 12]);
  });
  it('keeps row-major order without a topology, transposes a square grid like JAX, and rejects impossible layouts', () => {
    expect(ids(createDeviceMesh([2, 4]))).toEqual([[0, 1, 2, 3], [4, 5, 6, 7]]);
    expect(ids(createDeviceMesh([2, 2], { topology: { dims: [2, 2] } }))).toEqual([[0, 2], [1, 3]]);
    expect(ids(createDeviceMesh([4], { topology: { dims: [2, 2] } }))).toEqual([0, 1, 2, 3]);
    expect(() => createDeviceMesh([3, 4], { topology: { dims: [2, 6] } })).toThrow(/no set of free physical dimensions of \[2,6\] .* multiplies to 4, the size of logical axis 1/);
    expect(() => createDeviceMesh([4, 4], { topology: { name: 'v5e', dims: [2, 4] } })).toThrow(/the mesh \[4,4\] has 16 devices but the topology v5e\[2,4\] has 8 chips/);
    expect(() => createDeviceMesh([256])).toThrow(/needs 256 devices but 128 are available/);
  });
});
