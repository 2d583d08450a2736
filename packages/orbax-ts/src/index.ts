/**
 * @tpukit/orbax-ts: Orbax checkpointing for TypeScript. This file only re-exports the public surface.
 */
export { CheckpointManager, type CheckpointManagerOptions, type SaveOptions } from './checkpointManager';
export {
  Composite, JsonRestore, JsonSave, type RestoreArg, type SaveArg, ShapeDtypeStruct, StandardRestore, type StandardRestoreOptions, StandardSave, args,
} from './args';
export { LOCK_FILE, type LockInfo, type LockOptions, liveWriter } from './lock';
export { type PreemptionHandle, type PreemptionSignal, installPreemptionHandler, preemptionSignal, resetPreemption } from './preemption';
export {
  type DecodedSafetensors, type SafetensorsSaveOptions, type TensorSpec, decodeSafetensors, encodeSafetensors, loadSafetensors, matchSafetensors, saveSafetensors, tensorName,
} from './safetensors';
export { type Metrics, type RetentionOptions, stepsToKeep } from './retention';
