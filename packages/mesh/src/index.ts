/**
 * @tpukit/mesh: jax.sharding and shard_map for TypeScript. This file only re-exports the public
 * surface.
 */
export { CpuDevice, deviceCount, devices, setCpuDeviceCount } from './devices';
export { type DeviceProgram, runOnDevices } from './deviceRuntime';
export { Mesh, makeMesh } from './mesh';
export { createDeviceMesh, type TopologyLike } from './deviceMesh';
export { P, PartitionSpec, type SpecEntry } from './partitionSpec';
export { NamedSharding } from './namedSharding';
export { SingleDeviceSharding } from '@tpukit/core';
export { devicePut, reshard, shardingConstraintP, withShardingConstraint } from './placement';
export { allGather, allToAll, axisIndex, axisSize, pmax, pmean, pmin, ppermute, psum, psumScatter, pvary } from './collectives';
export { shardMap, type ShardMapOptions } from './shardMap';
export * as debug from './debugNs';
