/**
 * Building a sharded Array from per-device pieces (jax.make_array_from_callback). A sharding
 * says which index range each device holds; the callback supplies the data for one range. The
 * result keeps one shard per device (replicas numbered by `replicaId`, 0 for the first device
 * holding an index) and assembles the global value only when something asks for it. Used by
 * @tpukit/orbax-ts to restore a checkpoint straight into a target sharding; @tpukit/mesh can
 * build its sharded arrays the same way.
 */
import { Array, type Shard } from './array';
import { type DType, checkDType } from './dtype';
import type { Index, Sharding } from './interfaces';
import { type Shape, fmt, sizeOf } from './shape';

const indexKey = (index: Index): string => index.map(([s, e]) => `${s}:${e}`).join(',');

/**
 * An Array of `shape` and `dtype` laid out by `sharding`, whose shard for each device is
 * `dataCallback(index)`: an Array of the index range's shape and of `dtype`. The callback is
 * called once per device, in the order of `sharding.devicesIndicesMap(shape)`.
 */
export function makeArrayFromCallback(
  shape: Shape,
  dtype: DType,
  sharding: Sharding,
  dataCallback: (index: Index) => Array,
): Array {
  checkDType(dtype, 'makeArrayFromCallback');
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) throw new RangeError(`makeArrayFromCallback: shape ${fmt(shape)} must hold non-negative integers`);
  }
  const map = sharding.devicesIndicesMap(shape);
  if (map.size === 0) throw new Error(`makeArrayFromCallback: sharding ${sharding} places ${fmt(shape)} on no device`);
  const seen = new Map<string, number>();
  const shards: Shard[] = [];
  for (const [device, index] of map) {
    if (index.length !== shape.length) {
      throw new Error(`makeArrayFromCallback: sharding ${sharding} gave device ${device.id} an index of rank ${index.length} for shape ${fmt(shape)}`);
    }
    index.forEach(([s, e], d) => {
      if (!(Number.isInteger(s) && Number.isInteger(e) && 0 <= s && s <= e && e <= shape[d])) {
        throw new RangeError(`makeArrayFromCallback: sharding ${sharding} gave device ${device.id} range [${s},${e}) on axis ${d} of ${fmt(shape)}`);
      }
    });
    const data = dataCallback(index);
    const want = index.map(([s, e]) => e - s);
    if (!(data instanceof Array) || data.dtype !== dtype || data.shape.length !== want.length || data.shape.some((v, i) => v !== want[i])) {
      const got = data instanceof Array ? `${data.dtype}${fmt(data.shape)}` : typeof data;
      throw new Error(`makeArrayFromCallback: callback for index ${indexKey(index) || '()'} (device ${device.id}) must return a ${dtype}${fmt(want)} Array; got ${got}`);
    }
    const key = indexKey(index);
    const replicaId = seen.get(key) ?? 0;
    seen.set(key, replicaId + 1);
    shards.push({ device, index, replicaId, data });
  }
  // Every element must be held by some shard, or the global value would be undefined.
  const covered = [...seen.keys()].length;
  const total = sizeOf(shape);
  if (total > 0) {
    let held = 0;
    for (const sh of shards) if (sh.replicaId === 0) held += sizeOf(sh.index.map(([s, e]) => e - s));
    if (held < total) {
      throw new Error(`makeArrayFromCallback: sharding ${sharding} covers ${held} of ${total} elements of ${fmt(shape)} (${covered} distinct indices)`);
    }
  }
  const out = new Array({ shape, dtype, weakType: false }, null, null, sharding);
  out._shards = shards;
  return out;
}
