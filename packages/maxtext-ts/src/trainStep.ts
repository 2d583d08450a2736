/**
 * The whole training step as one jitted function (MaxText's `train_step` under `jax.jit`):
 * forward, backward (summed over `gradient_accumulation_steps` microbatches by `lax.scan`),
 * gradient clipping and the optimizer update. The state `{ params, optState, step }` is donated
 * and the step count is an int32 Array, so one program serves the whole run (0 recompiles).
 */
import { type Array, lax, np, random, tree, valueAndGrad } from '@tpukit/core';
import { devicePut, type Mesh, NamedSharding, P } from '@tpukit/mesh';
import { jit, type XlaJitted } from '@tpukit/xla-lite';
import type { Config } from './config';
import { batchSharding, optStateShardings, paramShardings } from './sharding';
import { type Batch, initParams, lossSum, type ModelConfig, modelConfig, type Params } from './model';
import {
  adam, adamw, applyUpdates, chain, clipByGlobalNorm, constantSchedule, globalNorm, type GradientTransformation, type Schedule, sgd, warmupCosineDecaySchedule, wsdSchedule,
} from './optim/index';

export interface TrainState {
  params: Params;
  optState: unknown;
  /** Steps completed, int32 scalar. */
  step: Array;
}

/** Per-step scalars (float32 Arrays; read them only when logging). */
export interface StepMetrics {
  loss: Array;
  totalWeights: Array;
  /** Global norm of the gradients before clipping. */
  rawGradNorm: Array;
  learningRate: Array;
}

/** MaxText's learning-rate schedule from the config (warmup, then cosine or WSD decay). */
export function makeSchedule(c: Config): Schedule {
  const total = c.learning_rate_schedule_steps === -1 ? c.steps : c.learning_rate_schedule_steps;
  const warmup = Math.floor(total * c.warmup_steps_fraction);
  const end = c.learning_rate * c.learning_rate_final_fraction;
  switch (c.lr_schedule_type) {
    case 'cosine':
      return warmupCosineDecaySchedule({ initValue: 0, peakValue: c.learning_rate, warmupSteps: warmup, decaySteps: total, endValue: end });
    case 'wsd': {
      const decay = Math.floor(total * c.wsd_decay_steps_fraction);
      if (warmup + decay > total) throw new RangeError(`config: warmup_steps_fraction (${c.warmup_steps_fraction}) + wsd_decay_steps_fraction (${c.wsd_decay_steps_fraction}) must not exceed 1`);
      return wsdSchedule({ peakValue: c.learning_rate, warmupSteps: warmup, decaySteps: decay, totalSteps: total, endValue: end, decayStyle: c.wsd_decay_style });
    }
    case 'constant':
      return constantSchedule(c.learning_rate);
    default:
      return c.lr_schedule_type satisfies never;
  }
}

/** The optimizer from the config: clipping (when the threshold is > 0), then opt_type. */
export function makeOptimizer(c: Config, schedule: Schedule = makeSchedule(c)): GradientTransformation<unknown[]> {
  const base = { learningRate: schedule, b1: c.adam_b1, b2: c.adam_b2, eps: c.adam_eps, epsRoot: c.adam_eps_root };
  let opt: GradientTransformation<unknown[]>;
  switch (c.opt_type) {
    case 'adamw':
      opt = adamw({ ...base, weightDecay: c.adam_weight_decay });
      break;
    case 'adam':
      opt = adam(base);
      break;
    case 'sgd':
      opt = sgd({ learningRate: schedule });
      break;
    default:
      return c.opt_type satisfies never;
  }
  return c.gradient_clipping_threshold > 0 ? chain(clipByGlobalNorm(c.gradient_clipping_threshold), opt) : chain(opt);
}

export interface TrainStep {
  model: ModelConfig;
  optimizer: GradientTransformation<unknown[]>;
  schedule: Schedule;
  /** The step, not jitted (for the cost ledger and debugging). */
  fn: (state: TrainState, batch: Batch) => [TrainState, StepMetrics];
  /** The step under jit, the state donated. */
  jitted: XlaJitted<(state: TrainState, batch: Batch) => [TrainState, StepMetrics]>;
  /** A fresh state from `init_weights_seed` (placed on the mesh when there is one). */
  init(): TrainState;
  /** The mesh the step is partitioned over (null: one device, unsharded). */
  mesh: Mesh | null;
  /** `state` laid out as the step expects it (identity without a mesh); restored states go through this. */
  place(state: TrainState): TrainState;
  /** A host batch laid out as the step expects it: rows split over data x fsdp (identity without a mesh). */
  placeBatch(batch: Batch): Batch;
}

/**
 * The train step; with `mesh` (see sharding.ts' makeTrainMesh) it is one GSPMD program over the
 * mesh's devices: parameters and optimizer state sharded by `logical_axis_rules`, the batch split
 * over data x fsdp, and the step's outputs given the inputs' shardings (so every step reuses one
 * compiled program).
 */
export function makeTrainStep(c: Config, opts: { mesh?: Mesh | null } = {}): TrainStep {
  const mesh = opts.mesh ?? null;
  const m = modelConfig(c);
  const schedule = makeSchedule(c);
  const optimizer = makeOptimizer(c, schedule);
  const accum = c.gradient_accumulation_steps;
  const gradsOf = valueAndGrad((p: Params, b: Batch) => lossSum(p, b, m), { hasAux: true });

  const fn = (state: TrainState, batch: Batch): [TrainState, StepMetrics] => {
    let sum: Array;
    let weights: Array;
    let grads: Params;
    if (accum === 1) {
      [[sum, weights], grads] = gradsOf(state.params, batch) as [[Array, Array], Params];
    } else {
      // [G*B, L] -> [G, B, L]; scan sums loss, weights and gradients over the microbatches.
      const micro = tree.map((x: Array) => np.reshape(x, [accum, x.shape[0] / accum, ...x.shape.slice(1)]), batch) as unknown as Batch;
      const zero = tree.map((p: Array) => np.zerosLike(p, 'float32'), state.params) as Params;
      const init = { g: zero, s: np.array(0, 'float32'), w: np.array(0, 'float32') };
      const [acc] = lax.scan((carry: typeof init, mb: Batch) => {
        const [[s, w], g] = gradsOf(state.params, mb) as [[Array, Array], Params];
        return [{ g: tree.map((a: Array, x: Array) => np.add(a, x), carry.g, g), s: np.add(carry.s, s), w: np.add(carry.w, w) }, null];
      }, init, micro);
      [sum, weights, grads] = [acc.s, acc.w, acc.g];
    }
    const denom = np.maximum(weights, 1);
    grads = tree.map((g: Array, p: Array) => np.astype(np.divide(g, denom), p.dtype), grads, state.params) as Params;
    const rawGradNorm = globalNorm(grads);
    const [updates, optState] = optimizer.update(grads, state.optState as unknown[], state.params);
    const params = applyUpdates(state.params, updates);
    const metrics: StepMetrics = { loss: np.divide(sum, denom), totalWeights: weights, rawGradNorm, learningRate: schedule(state.step) };
    return [{ params, optState, step: np.add(state.step, np.array(1, 'int32')) }, metrics];
  };

  const initHost = (): TrainState => {
    const params = initParams(m, random.key(c.init_weights_seed));
    return { params, optState: optimizer.init(params), step: np.array(0, 'int32') };
  };
  const common = { model: m, optimizer, schedule, fn, mesh };
  if (mesh === null) {
    return { ...common, jitted: jit(fn, { donateArgnums: [0], warnAfterRecompiles: 1 }), init: initHost, place: (s) => s, placeBatch: (b) => b };
  }
  // Shardings follow the parameter tree, so they are derived from one host init.
  const host = initHost();
  const replicated = new NamedSharding(mesh, P());
  const pS = paramShardings(host.params, c, mesh);
  const stateS = { params: pS, optState: optStateShardings(host.optState, host.params, pS, mesh), step: replicated };
  const metricsS = { loss: replicated, totalWeights: replicated, rawGradNorm: replicated, learningRate: replicated };
  const outShardings = tree.leaves<NamedSharding>([stateS, metricsS], { isLeaf: (x) => x instanceof NamedSharding });
  const bS = batchSharding(c, mesh);
  const place = (s: TrainState): TrainState => devicePut(s, stateS);
  return {
    ...common,
    jitted: jit(fn, { donateArgnums: [0], warnAfterRecompiles: 1, outShardings }),
    init: () => place(initHost()),
    place,
    placeBatch: (b) => devicePut(b, bS),
  };
}
