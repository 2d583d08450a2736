// Tests for makeArrayFromCallback and the raw-storage accessors (toStorage / fromStorage).
import { describe, expect, it } from 'vitest';
import { type Device, type Index, type Sharding, fromStorage, makeArrayFromCallback, np, toStorage } from './index';

const dev = (id: number): Device => ({ id, deviceKind: 'virtual', platform: 'cpu', processIndex: 0 });

/** Rows split over `parts` groups, each group held by `replicas` devices. */
class RowSharding implements Sharding {
  readonly deviceSet: Device[];
  readonly isFullyReplicated = false;
  constructor(readonly parts: number, readonly replicas = 1) {
    this.deviceSet = Array.from({ length: parts * replicas }, (_, i) => dev(i));
  }
  devicesIndicesMap(shape: readonly number[]): Map<Device, Index> {
    const per = Math.ceil(shape[0] / this.parts);
    const m = new Map<Device, Index>();
    this.deviceSet.forEach((d, i) => {
      const p = i % this.parts;
      m.set(d, [[Math.min(p * per, shape[0]), Math.min((p + 1) * per, shape[0])], ...shape.slice(1).map((n) => [0, n] as const)]);
    });
    return m;
  }
  shardShape(shape: readonly number[]): number[] {
    return [Math.ceil(shape[0] / this.parts), ...shape.slice(1)];
  }
  toString(): string {
    return `RowSharding(${this.parts}x${this.replicas})`;
  }
}

describe('makeArrayFromCallback', () => {
  const full = np.arange(0, 15, 1, 'float32').reshape([5, 3]);
  const fullData = Array.from(full.dataSync());
  const slice = (index: Index) => {
    const [[r0, r1]] = index;
    return fromStorage(new Float32Array(fullData.slice(r0 * 3, r1 * 3)), [r1 - r0, 3], 'float32');
  };

  it('assembles the global value from the shards and numbers replicas', () => {
    const calls: string[] = [];
    const x = makeArrayFromCallback([5, 3], 'float32', new RowSharding(2, 2), (idx) => {
      calls.push(JSON.stringify(idx));
      return slice(idx);
    });
    expect(calls).toHaveLength(4);
    expect(Array.from(x.dataSync())).toEqual(fullData);
    expect(x.addressableShards.map((s) => s.replicaId)).toEqual([0, 0, 1, 1]);
    expect(x.addressableShards[1].index).toEqual([[3, 5], [0, 3]]);
    expect(x.sharding.toString()).toBe('RowSharding(2x2)');
    // Arithmetic works on the assembled value.
    expect(Array.from(x.add(1).dataSync())).toEqual(fullData.map((v) => v + 1));
  });

  it('assembles float32 shards bit for bit (NaN payloads survive)', () => {
    const bits = new Uint32Array([0x7f800001, 0x7fc00123, 0xffc00456, 0x3f800000, 0x80000000, 0x7fa00000]);
    const values = new Float32Array(bits.buffer);
    const x = makeArrayFromCallback([6, 1], 'float32', new RowSharding(3), (index) => {
      const [[r0, r1]] = index;
      return fromStorage(values.slice(r0, r1), [r1 - r0, 1], 'float32');
    });
    const got = toStorage(x) as Float32Array;
    expect([...new Uint32Array(got.buffer, got.byteOffset, got.length)]).toEqual([...bits]);
  });

  it('rejects a callback result of the wrong shape or dtype, naming the index', () => {
    expect(() => makeArrayFromCallback([5, 3], 'float32', new RowSharding(2), () => full)).toThrow(/index 0:3,0:3 .*float32\[3,3\].*float32\[5,3\]/);
    expect(() => makeArrayFromCallback([5, 3], 'int32', new RowSharding(2), slice)).toThrow(/int32\[3,3\]/);
  });
});

describe('toStorage / fromStorage', () => {
  it('round-trips bfloat16 bit patterns exactly, NaN payloads included', () => {
    const bits = new Uint16Array([0x7fc1, 0xff80, 0x0001, 0x3f80]);
    const x = fromStorage(bits, [2, 2], 'bfloat16');
    expect(x.dtype).toBe('bfloat16');
    expect(Array.from(toStorage(x))).toEqual(Array.from(bits));
  });
  it('checks the storage type and length', () => {
    expect(() => fromStorage(new Float32Array(4), [2, 2], 'bfloat16')).toThrow(/bfloat16 is stored as Uint16Array; got Float32Array/);
    expect(() => fromStorage(new Float32Array(3), [2, 2], 'float32')).toThrow(/\[2,2\] has 4 elements; got 3/);
  });
});
