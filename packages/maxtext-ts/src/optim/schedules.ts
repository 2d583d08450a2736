/**
 * Learning-rate schedules as optax defines them: functions of the step count. The count is an
 * int32 scalar Array (the optimizer state's `count`) so a schedule traces into the jitted train
 * step and changes every step without a recompile; a JS number works too (for plots and tests).
 */
import { type Array, np } from '@tpukit/core';

/** `count -> value`; traceable. */
export type Schedule = (count: Array | number) => Array;

const asF32 = (count: Array | number): Array => np.astype(typeof count === 'number' ? np.array(count, 'int32') : count, 'float32');

function check(op: string, name: string, v: number, min: number, integer = false): void {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || (integer && !Number.isInteger(v))) {
    throw new RangeError(`${op}: ${name} must be ${integer ? 'an integer' : 'a finite number'} >= ${min}; got ${v}`);
  }
}

/** optax.constant_schedule. */
export function constantSchedule(value: number): Schedule {
  check('constantSchedule', 'value', value, -Infinity);
  return (count) => np.add(np.multiply(asF32(count), 0), value);
}

/** Linear from `initValue` to `endValue` over `transitionSteps`, then `endValue` (optax.linear_schedule). */
export function linearSchedule(o: { initValue: number; endValue: number; transitionSteps: number }): Schedule {
  check('linearSchedule', 'transitionSteps', o.transitionSteps, 0, true);
  return (count) => {
    if (o.transitionSteps === 0) return np.add(np.multiply(asF32(count), 0), o.endValue);
    const frac = np.clip(np.divide(asF32(count), o.transitionSteps), 0, 1);
    return np.add(o.initValue, np.multiply(frac, o.endValue - o.initValue));
  };
}

/** `from` at 0 to `to` at `steps`, along half a cosine; `to` after. */
function cosineSegment(count: Array, from: number, to: number, steps: number): Array {
  const frac = np.clip(np.divide(count, Math.max(steps, 1)), 0, 1);
  const a = np.multiply(np.add(np.cos(np.multiply(frac, Math.PI)), 1), 0.5);
  return np.add(np.multiply(a, from), np.multiply(np.subtract(1, a), to));
}

/**
 * optax.warmup_cosine_decay_schedule: linear warmup from `initValue` to `peakValue` over
 * `warmupSteps`, then cosine decay to `endValue` at `decaySteps` (counted from 0, warmup
 * included), then `endValue`.
 */
export function warmupCosineDecaySchedule(o: { initValue?: number; peakValue: number; warmupSteps: number; decaySteps: number; endValue?: number }): Schedule {
  const op = 'warmupCosineDecaySchedule';
  check(op, 'warmupSteps', o.warmupSteps, 0, true);
  check(op, 'decaySteps', o.decaySteps, o.warmupSteps, true);
  const init = o.initValue ?? 0;
  const end = o.endValue ?? 0;
  return (count) => {
    const c = asF32(count);
    const warm = np.add(init, np.multiply(np.divide(c, Math.max(o.warmupSteps, 1)), o.peakValue - init));
    const decay = cosineSegment(np.subtract(c, o.warmupSteps), o.peakValue, end, o.decaySteps - o.warmupSteps);
    return np.where(np.less(c, o.warmupSteps), warm, decay);
  };
}

/**
 * Warmup-stable-decay (MaxText's `lr_schedule_type: wsd`): linear warmup from 0 to `peakValue`
 * over `warmupSteps`, constant until `totalSteps - decaySteps`, then down to `endValue` at
 * `totalSteps` (linearly or along half a cosine), then `endValue`.
 */
export function wsdSchedule(o: { peakValue: number; warmupSteps: number; decaySteps: number; totalSteps: number; endValue?: number; decayStyle?: 'linear' | 'cosine' }): Schedule {
  const op = 'wsdSchedule';
  check(op, 'warmupSteps', o.warmupSteps, 0, true);
  check(op, 'decaySteps', o.decaySteps, 0, true);
  check(op, 'totalSteps', o.totalSteps, o.warmupSteps + o.decaySteps, true);
  const style = o.decayStyle ?? 'linear';
  if (style !== 'linear' && style !== 'cosine') throw new RangeError(`${op}: decayStyle must be 'linear' or 'cosine'; got ${JSON.stringify(style)}`);
  const end = o.endValue ?? 0;
  const decayStart = o.totalSteps - o.decaySteps;
  return (count) => {
    const c = asF32(count);
    const warm = np.multiply(np.divide(c, Math.max(o.warmupSteps, 1)), o.peakValue);
    const t = np.subtract(c, decayStart);
    const decay =
      style === 'linear'
        ? np.add(o.peakValue, np.multiply(np.clip(np.divide(t, Math.max(o.decaySteps, 1)), 0, 1), end - o.peakValue))
        : cosineSegment(t, o.peakValue, end, o.decaySteps);
    return np.where(np.less(c, o.warmupSteps), warm, np.where(np.less(c, decayStart), np.add(np.multiply(c, 0), o.peakValue), decay));
  };
}
