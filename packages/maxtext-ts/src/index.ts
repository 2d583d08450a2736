/**
 * @tpukit/maxtext-ts: MaxText for TypeScript. This file only re-exports the public surface; the
 * optimizer library is its own entry point, `@tpukit/maxtext-ts/optim`.
 */
export { type Config, ConfigError, CONFIG_KEYS, configsDir, loadConfig, parseConfig, parseOverrides, type RawConfig, SHIPPED_CONFIGS } from './config';
export { calculateTflopsTrainingPerDevice, type StepTflops, tokensPerDevicePerStep } from './flops';
export { type Attend, type Batch, block, embed, forward, initParams, layerParams, logitsOf, loss, lossSum, type ModelConfig, modelConfig, type Params, applyRope, countParams, segmentMask, stackTrees } from './model';
export { exportOnnx, exportOnnxBytes, type OnnxExportOptions } from './onnx';
export { loadParams, saveParams, type SaveParamsOptions, unstackLayers } from './safetensors';
export { batchSharding, type LogicalAxes, logicalAxesOf, logicalToSpec, makeTrainMesh, MESH_AXES, optStateShardings, paramShardings } from './sharding';
export { type ConfigOptions } from './config';
export { makeOptimizer, makeSchedule, makeTrainStep, type StepMetrics, type TrainState, type TrainStep } from './trainStep';
export { type DataIterator, grainDataset, makeDataIterator } from './data';
export { formatStepLine, measureCpuPeakFlops, progressBar, simulatedCommunicationSeconds, simulatedSeconds, type StepReport } from './metrics';
export { EventFileWriter, encodeEvent, tfrecordFrame } from './tensorboard';
export { StepProfiler, type TraceEvent } from './profiler';
export { train, type TrainOptions, type TrainResult } from './train';
export { estimateMesh, formatPlan, memoryPerChip, meshCandidates, type MeshEstimate, type MeshShape, parameterCounts, parseTpu, plan, type Plan, PlanError, type PlanOptions } from './plan';
export { DEFAULT_PRICES, PRICE_TIERS, type PriceTable, type PriceTier } from './planPrices';
export { checkpointDirOf, restoreParams, runDirOf } from './checkpoints';
export { checkSampling, decode, decodeBatch, type DecodeResult, type Decoder, type GenerateOptions, type GenerateResult, type KVCache, makeDecoder, sampleLogits, type Sampling, type SamplingStrategy, samplingOf } from './decode';
