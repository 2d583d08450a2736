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
export { chipCount, customTopology, DEFAULT_LINK_LATENCY, type Generation, generations, hops, slice, type Topology, torus2d, torus3d } from './topology';
export { type Algorithm, type CollectiveKind, type CollectiveOp, collectiveTime } from './cost/collectiveTime';
export { interconnect, type InterconnectOptions, useInterconnect } from './cost/interconnect';
export { collectivesOf, type ProgramLike, type ProgramSummary, simulate, simulateStep, type SimulateOptions, type StepEstimate, summarize } from './cost/simulate';
export { flopsPerToken, LLAMA_7B, paramCount, scalingTable, type Strategy, stateBytesPerChip, type TransformerConfig, transformerStep } from './cost/transformer';
