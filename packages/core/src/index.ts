/**
 * @tpukit/core: jax, jax.numpy, jax.lax, jax.random and jax.tree_util for TypeScript, the
 * user-facing API. Importing it registers the built-in backends and installs the Array methods.
 * This file only re-exports (plus that setup); what only compilers and other packages building
 * on core need (primitive records, jaxpr internals, tracers and rules, the compiler seam,
 * backend internals, the WebAssembly assembler) is `@tpukit/core/internal`. The names exported
 * here are checked against `test/publicApi.txt`.
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

// Arrays, dtypes, pytrees and the jax.* namespaces.
export { Array, type ArrayLike, type IndexItem, type IndexUpdate, type NestedArray, type Shard } from './array';
export { isArray } from './convert';
export { type DType, type DataArray, type StorageArray, type TypeWithWeak, DTYPES, dtypeInfo, finfo, isDType, promoteTypes, resultType } from './dtype';
export { type Shape, broadcastShapes } from './shape';
export { fromStorage, toStorage } from './storage';
export * as bf16 from './bf16';
export * as f16 from './f16';
export * as lax from './lax/index';
export * as nn from './nn';
export * as np from './numpy/index';
export * as random from './random/index';
export * as tree from './tree';
export type { KeyEntry, KeyPath, PyTree, TreeDef } from './tree';
export * as debug from './debug/index';

// Transformations (jax.jit, jax.grad, jax.vmap, ...) and their errors.
export { ConcretizationTypeError, UnexpectedTracerError } from './transforms/core';
export { ClosedJaxpr } from './transforms/jaxpr';
export { makeJaxpr, type ShapeDtypeStruct } from './transforms/tracing';
export { type GradOptions, grad, hessian, jacfwd, jacrev, jvp, linearize, valueAndGrad, vjp } from './transforms/grad';
export { vmap, type VmapOptions } from './transforms/batching';
export { type CompileStats, jit, type JitOptions, type Jitted, type Traced } from './transforms/jit';
export { disableJit, isJitDisabled } from './transforms/disableJit';
export { customJvp, type CustomJvpFunction, customVjp, type CustomVjpFunction, stopGradient } from './transforms/custom';
export { checkpoint, type CheckpointOptions, checkpointPolicies, remat, type SaveablePolicy } from './transforms/checkpoint';

// Devices, shardings and the shared interfaces other packages implement.
export { type Checkpointable, type Device, type Index, type Sharding, isCheckpointable } from './interfaces';
export { cpuDevice, devices, SingleDeviceSharding } from './device';
export { makeArrayFromCallback } from './shardedArray';

// Backends and process-wide settings.
export { type Backend, getBackend, type HostKernelCapability, listBackends, registerBackend, setBackend, withBackend } from './backend';
export { defaultBackendName } from './defaultBackend';
export * as systolic from './backends/systolic/index';
export { getNumThreads, setNumThreads } from './threads';
export { defaultMatmulPrecision, getDefaultMatmulPrecision, setDefaultMatmulPrecision } from './lax/precision';
export { DEFAULT_MAX_ARRAY_BYTES, getMaxArrayBytes, setMaxArrayBytes } from './sizeGuard';
