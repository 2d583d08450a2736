/**
 * Placing arrays on devices: `devicePut(x, sharding)` (jax.device_put), `reshard` and
 * `withShardingConstraint` (jax.lax.with_sharding_constraint). A placed array keeps one shard
 * per device (its own copy of its index range, `x.addressableShards`) and `x.sharding`; core
 * assembles the global value when an operation reads it. Under a transformation (jit, grad,
 * vmap) `withShardingConstraint` records a `sharding_constraint` equation in the program, whose
 * evaluation reshards, whose jvp / transpose constrain the tangent / cotangent the same way,
 * and whose batching rule leaves the batch dimension unsplit.
 */
import { type Array, type Device, fromStorage, lax, makeArrayFromCallback, type Sharding, SingleDeviceSharding, toStorage, tree } from '@tpukit/core';
import { asArray, type BatchRule, bind, definePrimitive, type JvpRule, moveBdim, type TransposeRule } from '@tpukit/core/internal';
import { copyToDevice } from './deviceBuffers';
import { CpuDevice } from './devices';
import { NamedSharding } from './namedSharding';
import { PartitionSpec } from './partitionSpec';

const isSharding = (s: unknown): s is Sharding =>
  typeof s === 'object' && s !== null && typeof (s as Sharding).devicesIndicesMap === 'function' && typeof (s as Sharding).shardShape === 'function';
const isDevice = (s: unknown): s is Device => typeof s === 'object' && s !== null && typeof (s as Device).id === 'number' && typeof (s as Device).platform === 'string';

function toSharding(s: unknown, what: string): Sharding {
  if (isSharding(s)) return s;
  if (isDevice(s)) return new SingleDeviceSharding(s);
  throw new TypeError(`${what}: expected a Sharding (NamedSharding, SingleDeviceSharding) or a Device; got ${s instanceof PartitionSpec ? `the bare spec ${s} (wrap it: new NamedSharding(mesh, spec))` : JSON.stringify(s)}`);
}

/**
 * One array laid out by `sharding`: every device gets its own copy of its index range, in a
 * buffer that device owns when it is a CPU device (shared memory its worker thread computes on).
 */
function place(x: Array, sharding: Sharding, what: string): Array {
  if (sharding instanceof NamedSharding) sharding.check(x.shape, what);
  else sharding.shardShape(x.shape);
  // makeArrayFromCallback asks for the shards in the map's order.
  const order = [...sharding.devicesIndicesMap(x.shape).keys()];
  let k = 0;
  return makeArrayFromCallback(x.shape, x.dtype, sharding, (index) => {
    const device = order[k++];
    const full = index.every(([s, e], d) => s === 0 && e === x.shape[d]);
    const part = full ? x : lax.slice(x, index.map(([s]) => s), index.map(([, e]) => e));
    // A copy (or a fresh slice) so that no two devices share a buffer.
    if (device instanceof CpuDevice) return copyToDevice(part, device.id);
    return full ? fromStorage(toStorage(x).slice(), x.shape, x.dtype) : part;
  });
}

/**
 * Puts every Array leaf of `x` on the devices of `sharding` (a Sharding, or a Device meaning
 * `SingleDeviceSharding(device)`); a pytree of shardings matching `x` places leaf by leaf.
 */
export function devicePut<T>(x: T, sharding: Sharding | Device | unknown): T {
  const leaves = tree.leaves(x);
  if (isSharding(sharding) || isDevice(sharding)) {
    const s = toSharding(sharding, 'devicePut');
    return tree.map((l: unknown) => place(asArray(l as Array, { op: 'devicePut' }), s, 'devicePut'), x) as T;
  }
  const shardings = tree.leaves(sharding, { isLeaf: (v) => isSharding(v) || isDevice(v) });
  if (shardings.length !== leaves.length) {
    throw new Error(`devicePut: the shardings tree has ${shardings.length} leaves but the value has ${leaves.length}`);
  }
  let i = 0;
  return tree.map((l: unknown) => place(asArray(l as Array, { op: 'devicePut' }), toSharding(shardings[i++], 'devicePut'), 'devicePut'), x) as T;
}

/** `x` (an Array, or a pytree of them) laid out by `sharding` instead of its current sharding. */
export function reshard<T>(x: T, sharding: Sharding | Device): T {
  const s = toSharding(sharding, 'reshard');
  return tree.map((l: unknown) => place(asArray(l as Array, { op: 'reshard' }), s, 'reshard'), x) as T;
}

interface ConstraintParams {
  readonly sharding: Sharding;
}

export const shardingConstraintP = definePrimitive<ConstraintParams>({
  name: 'sharding_constraint',
  hlo: 'custom-call',
  abstractEval: ([a], { sharding }) => {
    if (sharding instanceof NamedSharding) sharding.check(a.shape, 'withShardingConstraint');
    return [a];
  },
  impl: ([a]) => [a.data.slice()],
});
const bindC = (x: Array, params: ConstraintParams): Array => bind(shardingConstraintP, [x], params)[0];
shardingConstraintP.rules.eval = ([x]: Array[], { sharding }: ConstraintParams) => [place(x, sharding, 'withShardingConstraint')];
shardingConstraintP.rules.jvp = (([x], [t], params: ConstraintParams) => [
  [bindC(x, params)],
  [t === null ? null : bindC(t, params)],
]) satisfies JvpRule;
shardingConstraintP.rules.transpose = (([ct], _args, params: ConstraintParams) => [ct === null ? null : bindC(ct, params)]) satisfies TransposeRule;
shardingConstraintP.rules.batch = (([x], [d], { sharding }: ConstraintParams, n) => {
  if (!(sharding instanceof NamedSharding)) return [[x], [d]];
  // The batch dimension goes first and is not split.
  const spec = new PartitionSpec(null, ...sharding.spec.entries);
  return [[bindC(moveBdim(x, d, 0, n), { sharding: new NamedSharding(sharding.mesh, spec) })], [0]];
}) satisfies BatchRule;

/**
 * `jax.lax.with_sharding_constraint`: `x` (an Array or a pytree of them) laid out by `sharding`.
 * On concrete values it reshards now; under jit / grad / vmap it records the constraint.
 */
export function withShardingConstraint<T>(x: T, sharding: Sharding | Device): T {
  const s = toSharding(sharding, 'withShardingConstraint');
  return tree.map((l: unknown) => bindC(asArray(l as Array, { op: 'withShardingConstraint' }), { sharding: s }), x) as T;
}
