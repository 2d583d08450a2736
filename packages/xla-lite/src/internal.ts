/**
 * @tpukit/xla-lite/internal: the compiler's own surface, for tools and tests that build or
 * inspect HLO by hand (IR classes, lowering, the passes, kernel generators, analyses, text and
 * StableHLO printers), plus everything the main entry exports. Not covered by semver promises
 * the way the main entry is. Re-exports only.
 */
export * from './index';
export { computationCost, memoryAnalysis } from './analysis';
export { cacheKey } from './diskCache';
export { envDefaults } from './compiled';
export { buildExecutable } from './executable';
export { setResidentDonation } from './wasm/program';
export { setRowKernelPaths } from './wasm/rowsKernel';
export { setRowScratchAlign, setTanhWalks, type TanhWalks } from './wasm/emitKernel';
export { bytesOf, HloComputation, HloInstruction, HloModule, makeInstruction, numel } from './hlo';
export { compileFusionKernel } from './js/fusionKernels';
export { compileKernel, type FusedKernel, kernelSource } from './js/kernel';
export { compileRowKernel, rowKernelSource } from './js/rowKernel';
export { lowerJaxpr, opcodeOf } from './lower';
export { emptyPassStats, optimize } from './pipeline';
export { algebraicSimplify } from './passes/algebraic';
export { assignBuffers, type BufferAssignment } from './passes/bufferAssignment';
export { constantFold } from './passes/constantFolding';
export { cse } from './passes/cse';
export { dce } from './passes/dce';
export { FUSED_OPS, fuseElementwise, isFusible, outlineFusion } from './passes/fusion';
export { assignLayouts, foldDotTransposes, gemmReadable, insertLayoutCopies, physicalParams } from './passes/layoutAssignment';
export { fuseDotEpilogues, splitOutputFusion } from './passes/outputFusion';
export { columnReduction, fuseSiblingReductions, MAX_SIBLING_OUTPUTS } from './passes/siblingFusion';
export { fuseRows } from './passes/rowFusion';
export { DOT_GROUP_LIMIT, dotGroupJoinsOf, dotGroupsOf, exportOrderOf, groupDots, MAX_DOT_GROUP } from './passes/dotGroups';
export { nominalFlopsOf, oneHotOf, rewriteOneHotDots } from './passes/oneHotDot';
export { isOneHotPrimitive, oneHotGatherP, oneHotInArenaEnabled, oneHotSegmentSumP, type OneHotParams, setOneHotInArena } from './js/oneHotKernels';
export { hasStableHlo, tensorType, toStableHlo } from './stablehlo';
export { expandForExport, hasExpansion } from './passes/exportExpansion';
export { hloType, moduleText } from './text';
export { BoardCollectives, CollectiveBoard, type CollectiveOpcode, type CollectiveParams, type CollectiveRuntime, collectiveFor, getCollectiveRuntime, InThreadCollectives, type ReduceOp, setCollectiveRuntime } from './spmd/collectives';
export { buildDeviceProgram, deviceImage, type ModuleImage, withSpmdDevice } from './spmd/deviceProgram';
export { setSpmdDeviceRunner, type SpmdDeviceRunner, type SpmdProgram } from './spmd/spmdJit';
export { type Box, fromCoreSharding, type Layout } from './spmd/hloSharding';
export { COLLECTIVES, partitionModule, type PartitionResult } from './spmd/partition';
export { propagateShardings } from './spmd/propagation';
