// The tree whose `_sharding` file is pinned in fixtures/orbax_sharding/_sharding, and which
// orbaxNoTarget.test.ts has the real Orbax restore. No vitest import: a script can build it too.
import { type Device, type Index, type Sharding, fromStorage, makeArrayFromCallback, np, toStorage } from '@tpukit/core';

const devices: Device[] = [0, 1].map((id) => ({ id, deviceKind: 'virtual', platform: 'cpu', processIndex: 0 }));

/** Rows split in two halves over two virtual devices. */
const halves: Sharding = {
  deviceSet: devices,
  isFullyReplicated: false,
  devicesIndicesMap: (shape) => new Map<Device, Index>(devices.map((d, i) => [d, shape.map((s, ax) => (ax === 0 ? ([(i * s) / 2, ((i + 1) * s) / 2] as const) : ([0, s] as const)))])),
  shardShape: (shape) => shape.map((s, ax) => (ax === 0 ? s / 2 : s)),
  toString: () => 'halves',
};

/**
 * float32 rows split over 2 devices, bfloat16, a 0-d int32 under a key whose base64 holds '_',
 * and non-array leaves (a number, a boolean, a string: no `_sharding` entry).
 */
export function shardingFixtureTree(): Record<string, unknown> {
  const src = toStorage(np.arange(0, 12, 1, 'float32')) as Float32Array;
  return {
    params: {
      w: makeArrayFromCallback([4, 3], 'float32', halves, ([[a, b]]) => fromStorage(src.slice(a * 3, b * 3), [b - a, 3], 'float32')),
      b: np.array([0.5, -1.25, 3.140625], 'bfloat16'),
    },
    'ab?': np.array(-7, 'int32'),
    step: 7,
    lr: 0.25,
    done: true,
    name: 'run-a',
  };
}
