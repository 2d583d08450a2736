/**
 * @tpukit/core: jax, jax.numpy, jax.lax, jax.random and jax.tree_util for TypeScript.
 * This file only re-exports the public surface.
 */
import { registerBackend, setBackend } from './backend';
import { referenceBackend } from './backends/reference';
import './methods';
import { backend as systolicBackend } from './backends/systolic/index';
import { defaultBackendName } from './defaultBackend';

registerBackend(referenceBackend);
registerBackend(systolicBackend);
// The fast backend by default where it runs; `reference` stays the oracle (see defaultBackend.ts).
setBackend(defaultBackendName());

export { Array, type NestedArray, type Shard } from './array';
export { type Backend, getBackend, type HostKernelCapability, listBackends, registerBackend, setBackend, withBackend } from './backend';
export { referenceBackend } from './backends/reference';
export { defaultBackendName } from './defaultBackend';
export * as bf16 from './bf16';
export * as f16 from './f16';
export { type ArrayLike, asArray, isArray } from './convert';
export * as debug from './debug/index';
export { cpuDevice, devices, SingleDeviceSharding } from './device';
export { makeArrayFromCallback } from './shardedArray';
export { fromStorage, toStorage } from './storage';
export {
  type DType,
  type DataArray,
  type StorageArray,
  type TypeWithWeak,
  DTYPES,
  dtypeInfo,
  finfo,
  isDType,
  promoteTypes,
  resultType,
} from './dtype';
export { type Checkpointable, type Device, type Index, type Sharding, isCheckpointable } from './interfaces';
export * as lax from './lax/index';
export * as nn from './nn';
export * as np from './numpy/index';
export * as random from './random/index';
export { type HostArray, type Kernel, type Primitive, type ShapedArray, allPrimitives, definePrimitive, getPrimitive } from './primitive';
export { type Shape, broadcastShapes } from './shape';
export { getNumThreads, setNumThreads } from './threads';
export { describeValue, showValue } from './describe';
export { defaultMatmulPrecision, getDefaultMatmulPrecision, operandPrecisions, setDefaultMatmulPrecision } from './lax/precision';
export { DEFAULT_MAX_ARRAY_BYTES, checkArrayBytes, getMaxArrayBytes, setMaxArrayBytes } from './sizeGuard';
export { type Trace, bind, evalPrimitive, evalPrimitiveInto, setDynamicTrace } from './trace';
export * as systolic from './backends/systolic/index';
export * as tree from './tree';
export * as wasm from './wasm/index';
export type { KeyEntry, KeyPath, PyTree, TreeDef } from './tree';
export * from './transforms/index';
