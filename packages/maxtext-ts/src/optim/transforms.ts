/**
 * Gradient transformations as optax defines them: `init(params) -> state` and
 * `update(updates, state, params) -> [updates, state]`, pure and traceable, every state a pytree
 * of Arrays (so orbax-ts saves it and `jit` donates it). `chain` composes them; the aliases
 * (`adamw`, `adam`, `sgd`) are chains of the building blocks here.
 */
import { type Array, np, tree } from '@tpukit/core';
import { constantSchedule, type Schedule } from './schedules';

export interface GradientTransformation<S = unknown> {
  init(params: unknown): S;
  /** Returns the transformed updates and the new state; `params` is needed by weight decay. */
  update<U>(updates: U, state: S, params?: unknown): [U, S];
}

const mapLeaves = <U>(f: (...xs: Array[]) => Array, x: U, ...rest: unknown[]): U => tree.map(f, x, ...rest) as U;
const zeros = (params: unknown): unknown => mapLeaves((p) => np.zerosLike(p), params);
const countInit = (): Array => np.array(0, 'int32');
const inc = (count: Array): Array => np.add(count, np.array(1, 'int32'));

function needParams(op: string, params: unknown): void {
  if (params === undefined) throw new TypeError(`${op}: update needs params (pass them as the third argument)`);
}

function checkNumber(op: string, name: string, v: number, lo: number, hi = Infinity, hiOpen = false): void {
  if (typeof v !== 'number' || !(v >= lo) || (hiOpen ? !(v < hi) : !(v <= hi))) {
    throw new RangeError(`${op}: ${name} must be a number in [${lo}, ${hi}${hiOpen ? ')' : ']'}; got ${v}`);
  }
}

/** optax.chain: applies the transformations in order; the state is the list of their states. */
export function chain(...transforms: GradientTransformation<any>[]): GradientTransformation<unknown[]> {
  return {
    init: (params) => transforms.map((t) => t.init(params)),
    update(updates, state, params) {
      if (!globalThis.Array.isArray(state) || state.length !== transforms.length) throw new TypeError(`chain: state must be a list of ${transforms.length} states (from init); got ${globalThis.Array.isArray(state) ? `${state.length}` : typeof state}`);
      const next: unknown[] = [];
      let u = updates;
      transforms.forEach((t, i) => {
        const [nu, ns] = t.update(u, state[i], params);
        u = nu;
        next.push(ns);
      });
      return [u, next];
    },
  };
}

/** sqrt of the sum of squares of every leaf (optax.global_norm), in float32. */
export function globalNorm(updates: unknown): Array {
  const leaves = tree.leaves<Array>(updates);
  let s: Array = np.array(0, 'float32');
  for (const l of leaves) s = np.add(s, np.sum(np.square(np.astype(l, 'float32'))));
  return np.sqrt(s);
}

/** optax.clip_by_global_norm: scales all updates by maxNorm / globalNorm when that norm exceeds maxNorm. */
export function clipByGlobalNorm(maxNorm: number): GradientTransformation<Record<string, never>> {
  checkNumber('clipByGlobalNorm', 'maxNorm', maxNorm, 0);
  return {
    init: () => ({}),
    update(updates, state) {
      const g = globalNorm(updates);
      const scale = np.where(np.less(g, maxNorm), 1, np.divide(maxNorm, g));
      return [mapLeaves((u) => np.astype(np.multiply(u, scale), u.dtype), updates), state];
    },
  };
}

export interface AdamState {
  count: Array;
  mu: unknown;
  nu: unknown;
}

/** optax.scale_by_adam: bias-corrected first and second moments; `mu / (sqrt(nu + epsRoot) + eps)`. */
export function scaleByAdam(o: { b1?: number; b2?: number; eps?: number; epsRoot?: number } = {}): GradientTransformation<AdamState> {
  const b1 = o.b1 ?? 0.9;
  const b2 = o.b2 ?? 0.999;
  const eps = o.eps ?? 1e-8;
  const epsRoot = o.epsRoot ?? 0;
  checkNumber('scaleByAdam', 'b1', b1, 0, 1, true);
  checkNumber('scaleByAdam', 'b2', b2, 0, 1, true);
  checkNumber('scaleByAdam', 'eps', eps, 0);
  checkNumber('scaleByAdam', 'epsRoot', epsRoot, 0);
  return {
    init: (params) => ({ count: countInit(), mu: zeros(params), nu: zeros(params) }),
    update(updates, state) {
      const mu = mapLeaves((m, g) => np.add(np.multiply(m, b1), np.multiply(g, 1 - b1)), state.mu, updates);
      const nu = mapLeaves((v, g) => np.add(np.multiply(v, b2), np.multiply(np.square(g), 1 - b2)), state.nu, updates);
      const count = inc(state.count);
      const c = np.astype(count, 'float32');
      const bc1 = np.subtract(1, np.power(b1, c));
      const bc2 = np.subtract(1, np.power(b2, c));
      const out = mapLeaves((m, v) => np.divide(np.divide(m, bc1), np.add(np.sqrt(np.add(np.divide(v, bc2), epsRoot)), eps)), mu, nu);
      return [out as typeof updates, { count, mu, nu }];
    },
  };
}

/** optax.add_decayed_weights: `updates + weightDecay * params` (leaves where `mask` says true). */
export function addDecayedWeights(weightDecay: number, mask?: (path: string) => boolean): GradientTransformation<Record<string, never>> {
  checkNumber('addDecayedWeights', 'weightDecay', weightDecay, 0);
  return {
    init: () => ({}),
    update(updates, state, params) {
      if (weightDecay === 0) return [updates, state];
      needParams('addDecayedWeights', params);
      const [pairs, def] = tree.flattenWithPath<Array>(params);
      const ups = tree.leaves<Array>(updates);
      const out = pairs.map(([path, p], i) => (mask && !mask(path.map(String).join('/')) ? ups[i] : np.add(ups[i], np.multiply(p, weightDecay))));
      return [tree.unflatten(def, out) as typeof updates, state];
    },
  };
}

/** optax.scale_by_learning_rate: `-lr(count) * updates`, count from 0. */
export function scaleByLearningRate(learningRate: number | Schedule): GradientTransformation<{ count: Array }> {
  const schedule = typeof learningRate === 'number' ? constantSchedule(learningRate) : learningRate;
  return {
    init: () => ({ count: countInit() }),
    update(updates, state) {
      const lr = np.negative(schedule(state.count));
      return [mapLeaves((u) => np.astype(np.multiply(u, lr), u.dtype), updates), { count: inc(state.count) }];
    },
  };
}

/** optax.trace (heavy-ball momentum, optionally Nesterov). */
export function traceMomentum(decay: number, nesterov = false): GradientTransformation<{ trace: unknown }> {
  checkNumber('traceMomentum', 'decay', decay, 0, 1);
  return {
    init: (params) => ({ trace: zeros(params) }),
    update(updates, state) {
      const t = mapLeaves((tr, g) => np.add(g, np.multiply(tr, decay)), state.trace, updates);
      const out = nesterov ? mapLeaves((tr, g) => np.add(g, np.multiply(tr, decay)), t, updates) : t;
      return [out as typeof updates, { trace: t }];
    },
  };
}

/** Adds updates to params, keeping each parameter's dtype (optax.apply_updates). */
export function applyUpdates<P>(params: P, updates: unknown): P {
  return mapLeaves((p, u) => np.astype(np.add(p, u), p.dtype), params, updates);
}

export interface AdamOptions {
  learningRate: number | Schedule;
  b1?: number;
  b2?: number;
  eps?: number;
  epsRoot?: number;
}

/** optax.adam. */
export function adam(o: AdamOptions): GradientTransformation<unknown[]> {
  return chain(scaleByAdam(o), scaleByLearningRate(o.learningRate));
}

/** optax.adamw: Adam, then decoupled weight decay, both scaled by the learning rate. */
export function adamw(o: AdamOptions & { weightDecay?: number; mask?: (path: string) => boolean }): GradientTransformation<unknown[]> {
  return chain(scaleByAdam(o), addDecayedWeights(o.weightDecay ?? 1e-4, o.mask), scaleByLearningRate(o.learningRate));
}

/** optax.sgd, with optional (Nesterov) momentum. */
export function sgd(o: { learningRate: number | Schedule; momentum?: number; nesterov?: boolean }): GradientTransformation<unknown[]> {
  return o.momentum ? chain(traceMomentum(o.momentum, o.nesterov), scaleByLearningRate(o.learningRate)) : chain(scaleByLearningRate(o.learningRate));
}

export interface MultiStepsState {
  miniStep: Array;
  acc: unknown;
  inner: unknown;
}

/**
 * optax.MultiSteps (gradient accumulation): averages the updates of `everyK` calls and applies
 * the inner transformation to the mean on the last of them; the other calls return zeros and
 * leave the inner state alone. Traceable (the choice is a select, so one program serves all).
 */
export function multiSteps(inner: GradientTransformation<any>, everyK: number): GradientTransformation<MultiStepsState> {
  if (!Number.isInteger(everyK) || everyK < 1) throw new RangeError(`multiSteps: everyK must be an integer >= 1; got ${everyK}`);
  return {
    init: (params) => ({ miniStep: countInit(), acc: zeros(params), inner: inner.init(params) }),
    update(updates, state, params) {
      const acc = mapLeaves((a, g) => np.add(a, np.divide(g, everyK)), state.acc, updates);
      const emit = np.equal(state.miniStep, everyK - 1);
      const [innerUpdates, innerState] = inner.update(acc, state.inner, params);
      const out = mapLeaves((u) => np.where(emit, u, np.zerosLike(u)), innerUpdates);
      const nextInner = mapLeaves((n, o) => np.where(emit, n, o), innerState, state.inner);
      const nextAcc = mapLeaves((a) => np.where(emit, np.zerosLike(a), a), acc);
      const miniStep = np.where(emit, np.array(0, 'int32'), inc(state.miniStep));
      return [out as typeof updates, { miniStep, acc: nextAcc, inner: nextInner }];
    },
  };
}
