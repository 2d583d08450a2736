/**
 * @tpukit/maxtext-ts/optim: an optax-like optimizer library on @tpukit/core. This file only
 * re-exports the public surface.
 */
export { constantSchedule, linearSchedule, type Schedule, warmupCosineDecaySchedule, wsdSchedule } from './schedules';
export {
  adam, type AdamOptions, type AdamState, adamw, addDecayedWeights, applyUpdates, chain, clipByGlobalNorm, globalNorm, type GradientTransformation, multiSteps, type MultiStepsState, scaleByAdam, scaleByLearningRate, sgd, traceMomentum,
} from './transforms';
