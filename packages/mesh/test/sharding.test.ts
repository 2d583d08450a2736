// Devices, meshes, PartitionSpec, NamedSharding, devicePut / reshard / withShardingConstraint and
// the sharding table: layouts against hand-worked examples, and every bad input a clear error.
import { type Array, grad, jit, makeJaxpr, np, vmap } from '@tpukit/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { Mesh, NamedSharding, P, PartitionSpec, SingleDeviceSharding, debug, deviceCount, devicePut, devices, makeMesh, reshard, setCpuDeviceCount, withShardingConstraint } from '../src/index';
import { expectClose, ramp } from './helpers';

beforeAll(() => setCpuDeviceCount(8));

describe('devices', () => {
  it('returns the configured number of CPU devices with stable identities', () => {
    setCpuDeviceCount(4);
    const four = devices();
    expect(four.map((d) => d.id)).toEqual([0, 1, 2, 3]);
    expect(four[0]).toMatchObject({ deviceKind: 'cpu', platform: 'cpu', processIndex: 0 });
    setCpuDeviceCount(8);
    expect(devices().slice(0, 4)).toEqual(four);
    expect(deviceCount()).toBe(8);
  });
  it('rejects a bad count', () => {
    expect(() => setCpuDeviceCount(0)).toThrow(/setCpuDeviceCount: the device count must be a positive integer; got 0/);
    expect(() => setCpuDeviceCount(2.5)).toThrow(/got 2.5/);
  });
});

describe('Mesh and makeMesh', () => {
  it('lays devices out row-major and reports axis sizes', () => {
    const m = makeMesh([4, 2], ['x', 'y']);
    expect(m.shape).toEqual({ x: 4, y: 2 });
    expect(m.devices.map((d) => d.id)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(m.coords(5)).toEqual([2, 1]);
    expect(String(m)).toBe('Mesh(x=4, y=2)');
    const ds = devices();
    expect(new Mesh([[ds[0], ds[1]], [ds[2], ds[3]]], ['a', 'b']).axisSizes).toEqual([2, 2]);
  });
  it('rejects bad meshes', () => {
    const ds = devices();
    expect(() => makeMesh([4, 4], ['x', 'y'])).toThrow(/makeMesh: shape \[4,4\] needs 16 devices but 8 are available/);
    expect(() => makeMesh([2, 2], ['x', 'x'])).toThrow(/Mesh: axis name 'x' appears twice/);
    expect(() => makeMesh([2], ['x', 'y'])).toThrow(/makeMesh: shape \[2\] has 1 axes but 2 axis names/);
    expect(() => new Mesh([ds[0], ds[0]], ['x'])).toThrow(/Mesh: device 0 appears twice/);
    expect(() => new Mesh([[ds[0], ds[1]], [ds[2]]] as never, ['x', 'y'])).toThrow(/ragged/);
  });
});

describe('NamedSharding', () => {
  const mesh = () => makeMesh([4, 2], ['x', 'y']);
  it('maps devices to index ranges (tuples of axes split major-to-minor, other axes replicate)', () => {
    const s = new NamedSharding(mesh(), P('x', null));
    const m = s.devicesIndicesMap([8, 6]);
    expect([...m.values()].map((ix) => ix[0])).toEqual([[0, 2], [0, 2], [2, 4], [2, 4], [4, 6], [4, 6], [6, 8], [6, 8]]);
    expect(s.shardShape([8, 6])).toEqual([2, 6]);
    expect(s.isFullyReplicated).toBe(false);
    const t = new NamedSharding(mesh(), P(['y', 'x']));
    // Device at (x, y) holds block y*4 + x of 8.
    expect([...t.devicesIndicesMap([16]).values()].map((ix) => ix[0][0] / 2)).toEqual([0, 4, 1, 5, 2, 6, 3, 7]);
    expect(new NamedSharding(mesh(), P()).isFullyReplicated).toBe(true);
    expect(String(s)).toBe("NamedSharding(mesh={x:4, y:2}, spec=P('x', null))");
    expect(String(t)).toBe("NamedSharding(mesh={x:4, y:2}, spec=P(['y', 'x']))");
  });
  it('rejects a missing axis, an axis used twice, an indivisible dimension and too many entries', () => {
    expect(() => new NamedSharding(mesh(), P('z'))).toThrow(/NamedSharding: spec P\('z'\) names axis 'z', which Mesh\(x=4, y=2\) does not have \(its axes: 'x', 'y'\)/);
    expect(() => new NamedSharding(mesh(), P('x', ['y', 'x']))).toThrow(/uses mesh axis 'x' twice/);
    expect(() => new NamedSharding(mesh(), P('x')).shardShape([6, 3])).toThrow(/dimension 0 of \[6,3\] \(size 6\) is not divisible by 'x' = 4/);
    expect(() => new NamedSharding(mesh(), P(null, null, 'x')).shardShape([8, 8])).toThrow(/spec P\(null, null, 'x'\) has 3 entries but the array \[8,8\] has only 2 dimensions/);
    expect(() => P(3 as never)).toThrow(/PartitionSpec: entry 0 must be an axis name/);
  });
});

describe('devicePut', () => {
  it('gives every device its own copy of its block and keeps the global value', () => {
    const x = ramp([8, 4]);
    const y = devicePut(x, new NamedSharding(makeMesh([4, 2], ['x', 'y']), P('x', 'y')));
    expect(y.sharding).toBeInstanceOf(NamedSharding);
    const shards = y.addressableShards;
    expect(shards).toHaveLength(8);
    expect(shards[3].index).toEqual([[2, 4], [2, 4]]);
    expect(globalThis.Array.from(shards[3].data.dataSync())).toEqual([10, 11, 14, 15]);
    expect(new Set(shards.map((s) => s.data)).size).toBe(8);
    expect(globalThis.Array.from(y.dataSync())).toEqual(globalThis.Array.from(x.dataSync()));
    expectClose(np.sum(y.mul(2)), np.sum(x.mul(2)));
  });
  it('numbers replicas and places a pytree', () => {
    const mesh = makeMesh([2, 2], ['x', 'y']);
    const t = devicePut({ a: ramp([4]), b: [ramp([2, 2])] }, new NamedSharding(mesh, P('x')));
    expect(t.a.addressableShards.map((s) => s.replicaId)).toEqual([0, 1, 0, 1]);
    expect(t.b[0].sharding.toString()).toContain("P('x')");
    expect(devicePut(ramp([3]), devices()[5]).sharding).toEqual(new SingleDeviceSharding(devices()[5]));
  });
  it('reshards to another layout and rejects bad shardings', () => {
    const mesh = makeMesh([4, 2], ['x', 'y']);
    const x = devicePut(ramp([8, 4]), new NamedSharding(mesh, P('x')));
    const y = reshard(x, new NamedSharding(mesh, P(null, 'y')));
    expect(y.addressableShards[1].index).toEqual([[0, 8], [2, 4]]);
    expect(globalThis.Array.from(y.dataSync())).toEqual(globalThis.Array.from(ramp([8, 4]).dataSync()));
    expect(() => devicePut(ramp([6]), new NamedSharding(mesh, P('x')))).toThrow(/devicePut: dimension 0 of \[6\] \(size 6\) is not divisible by 'x' = 4/);
    expect(() => devicePut(ramp([4]), P('x') as never)).toThrow(/devicePut: expected a Sharding .* got the bare spec P\('x'\) \(wrap it: new NamedSharding\(mesh, spec\)\)/);
  });
});

describe('withShardingConstraint', () => {
  const mesh = () => makeMesh([4, 2], ['x', 'y']);
  it('reshards concrete values', () => {
    const y = withShardingConstraint(ramp([8, 2]), new NamedSharding(mesh(), P('x')));
    expect(y.sharding.toString()).toContain("P('x')");
    expect(y.addressableShards[2].index).toEqual([[2, 4], [0, 2]]);
  });
  it('is recorded under jit and passes tangents, cotangents and batches through', () => {
    const s = new NamedSharding(mesh(), P('x'));
    const f = (x: Array) => np.sum(np.sin(withShardingConstraint(x, s)));
    expect(makeJaxpr(f)(ramp([8])).toString()).toContain('sharding_constraint');
    expectClose(grad(f)(ramp([8], 0.1)), np.cos(ramp([8], 0.1)));
    expectClose(jit(f)(ramp([8], 0.1)), f(ramp([8], 0.1)));
    const v = vmap((r: Array) => withShardingConstraint(r, s))(ramp([3, 8]));
    expectClose(v, ramp([3, 8]));
    expect(() => withShardingConstraint(ramp([6]), s)).toThrow(/withShardingConstraint: dimension 0 of \[6\]/);
  });
});

describe('debug.visualizeArraySharding', () => {
  it('draws one cell per block with the devices that hold it', () => {
    const m = makeMesh([2, 2], ['x', 'y']);
    const a = devicePut(ramp([4, 4]), new NamedSharding(m, P('x', 'y')));
    expect(debug.visualizeArraySharding(a, { print: false })).toBe(
      ['┌───────┬───────┐', '│ CPU 0 │ CPU 1 │', '├───────┼───────┤', '│ CPU 2 │ CPU 3 │', '└───────┴───────┘'].join('\n'),
    );
    const b = devicePut(ramp([4, 4]), new NamedSharding(m, P(null, 'x')));
    expect(debug.visualizeArraySharding(b, { print: false })).toBe(['┌─────────┬─────────┐', '│ CPU 0,1 │ CPU 2,3 │', '└─────────┴─────────┘'].join('\n'));
    expect(() => debug.visualizeArraySharding(ramp([2, 2, 2]), { print: false })).toThrow(/only 1-d and 2-d arrays/);
  });
});

it('PartitionSpec compares entries, not trailing nulls', () => {
  expect(P('x', null).equals(P('x'))).toBe(true);
  expect(new PartitionSpec(['x', 'y']).equals(P('x', 'y'))).toBe(false);
});
