import { type Array, np } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  adam, adamw, applyUpdates, chain, clipByGlobalNorm, constantSchedule, globalNorm, multiSteps, scaleByAdam, sgd, warmupCosineDecaySchedule, wsdSchedule,
} from './index';

const vals = (x: Array): number[] => globalThis.Array.from(x.dataSync() as Float32Array);
const at = (s: (c: number) => Array, c: number): number => s(c).item() as number;

describe('schedules', () => {
  it('warmupCosineDecaySchedule follows optax (linear warmup, half cosine to endValue, then endValue)', () => {
    const s = warmupCosineDecaySchedule({ peakValue: 1, warmupSteps: 2, decaySteps: 10, endValue: 0.1 });
    expect(at(s, 0)).toBe(0);
    expect(at(s, 1)).toBeCloseTo(0.5, 6);
    expect(at(s, 2)).toBeCloseTo(1, 6);
    expect(at(s, 6)).toBeCloseTo(0.55, 6); // midpoint of the cosine: (1 + 0.1) / 2
    expect(at(s, 10)).toBeCloseTo(0.1, 6);
    expect(at(s, 50)).toBeCloseTo(0.1, 6);
    expect(s(np.array(6, 'int32')).dtype).toBe('float32');
  });

  it('wsdSchedule: warmup, stable, then linear or cosine decay', () => {
    const lin = wsdSchedule({ peakValue: 2, warmupSteps: 2, decaySteps: 4, totalSteps: 10 });
    expect([0, 1, 2, 5, 6, 8, 10, 12].map((c) => at(lin, c))).toEqual([0, 1, 2, 2, 2, 1, 0, 0]);
    const cos = wsdSchedule({ peakValue: 2, warmupSteps: 2, decaySteps: 4, totalSteps: 10, decayStyle: 'cosine', endValue: 0.2 });
    expect(at(cos, 7)).toBeCloseTo(0.2 + 1.8 * 0.5 * (1 + Math.cos(Math.PI / 4)), 5);
    expect(() => wsdSchedule({ peakValue: 1, warmupSteps: 5, decaySteps: 6, totalSteps: 10 })).toThrow('wsdSchedule: totalSteps must be an integer >= 11; got 10');
  });

  it('constantSchedule', () => {
    expect(at(constantSchedule(0.25), 100)).toBe(0.25);
  });
});

describe('transformations', () => {
  it('adam: the first step is -lr * sign(g) (bias correction), the second from hand-computed moments', () => {
    const p = { w: np.array([1, -2], 'float32') };
    const g = { w: np.array([0.5, -0.25], 'float32') };
    const opt = adam({ learningRate: 0.1, b1: 0.9, b2: 0.99, eps: 1e-8 });
    let s = opt.init(p);
    const [u1, s1] = opt.update(g, s, p);
    expect(vals(u1.w)[0]).toBeCloseTo(-0.1, 6);
    expect(vals(u1.w)[1]).toBeCloseTo(0.1, 6);
    s = s1;
    const g2 = { w: np.array([1, 1], 'float32') };
    const [u2] = opt.update(g2, s, p);
    // mu = 0.9*0.05 + 0.1*1 = 0.145 -> /(1-0.81) = 0.763158; nu = 0.99*0.0025 + 0.01 = 0.012475 -> /(1-0.9801) = 0.626884
    expect(vals(u2.w)[0]).toBeCloseTo((-0.1 * 0.763158) / Math.sqrt(0.626884), 5);
  });

  it('adamw decays weights by lr * weightDecay * p', () => {
    const p = { w: np.array([1], 'float32') };
    const opt = adamw({ learningRate: 0.1, weightDecay: 0.01 });
    const [u] = opt.update({ w: np.array([0.5], 'float32') }, opt.init(p), p);
    expect(vals(applyUpdates(p, u).w)[0]).toBeCloseTo(1 - 0.1 * (1 + 0.01), 5);
    expect(() => opt.update({ w: np.array([0.5], 'float32') }, opt.init(p))).toThrow('addDecayedWeights: update needs params');
  });

  it('sgd with and without momentum', () => {
    const p = { w: np.array([1], 'float32') };
    const g = { w: np.array([2], 'float32') };
    const plain = sgd({ learningRate: 0.5 });
    expect(vals(plain.update(g, plain.init(p))[0].w)).toEqual([-1]);
    const mom = sgd({ learningRate: 1, momentum: 0.5 });
    const [, s1] = mom.update(g, mom.init(p));
    expect(vals(mom.update(g, s1)[0].w)).toEqual([-3]); // trace = 2 + 0.5 * 2
  });

  it('clipByGlobalNorm: [3, 4] to norm 1 is [0.6, 0.8]; below the threshold nothing changes', () => {
    const g = { a: np.array([3], 'float32'), b: np.array([4], 'float32') };
    expect(globalNorm(g).item()).toBe(5);
    const [c] = clipByGlobalNorm(1).update(g, {});
    expect(vals(c.a)[0]).toBeCloseTo(0.6, 6);
    expect(vals(c.b)[0]).toBeCloseTo(0.8, 6);
    expect(vals(clipByGlobalNorm(10).update(g, {})[0].a)).toEqual([3]);
  });

  it('law: clipped norm is min(norm, max) and the direction is kept', () => {
    fc.assert(
      fc.property(fc.array(fc.float({ min: -100, max: 100, noNaN: true }), { minLength: 1, maxLength: 8 }), fc.float({ min: Math.fround(0.1), max: 50, noNaN: true }), (xs, max) => {
        const g = { x: np.array(xs, 'float32') };
        const n = globalNorm(g).item() as number;
        const [c] = clipByGlobalNorm(max).update(g, {});
        const cn = globalNorm(c).item() as number;
        expect(cn).toBeCloseTo(Math.min(n, max), 3);
        vals(c.x).forEach((v, i) => expect(Math.sign(v) * Math.sign(xs[i])).toBeGreaterThanOrEqual(0));
      }),
      { numRuns: 40 },
    );
  });

  it('multiSteps averages everyK updates and applies them on the last', () => {
    const p = { w: np.array([0], 'float32') };
    const opt = multiSteps(sgd({ learningRate: 1 }), 2);
    const s0 = opt.init(p);
    const [u1, s1] = opt.update({ w: np.array([2], 'float32') }, s0, p);
    expect(vals(u1.w)).toEqual([0]);
    const [u2, s2] = opt.update({ w: np.array([4], 'float32') }, s1, p);
    expect(vals(u2.w)).toEqual([-3]);
    expect(s2.miniStep.item()).toBe(0);
    expect(() => multiSteps(sgd({ learningRate: 1 }), 0)).toThrow('multiSteps: everyK must be an integer >= 1; got 0');
  });

  it('traces into one jitted step: the count is an Array, so every step reuses one program and matches eager', () => {
    const opt = chain(clipByGlobalNorm(1), adamw({ learningRate: warmupCosineDecaySchedule({ peakValue: 0.1, warmupSteps: 2, decaySteps: 6 }), weightDecay: 0.1 }));
    const step = (p: { w: Array }, s: unknown, g: { w: Array }) => {
      const [u, ns] = opt.update(g, s as unknown[], p);
      return [applyUpdates(p, u), ns] as const;
    };
    const jitted = jit(step);
    let pe = { w: np.array([1, 2, 3], 'float32') };
    let pj = pe;
    let se: unknown = opt.init(pe);
    let sj: unknown = opt.init(pj);
    for (let i = 0; i < 4; i++) {
      const g = { w: np.array([0.3 * i, -1, 0.5], 'float32') };
      [pe, se] = step(pe, se, g) as unknown as [typeof pe, unknown];
      [pj, sj] = jitted(pj, sj, g) as unknown as [typeof pj, unknown];
      vals(pj.w).forEach((v, k) => expect(v).toBeCloseTo(vals(pe.w)[k], 5));
    }
    expect(jitted.compileStats().misses).toBe(1);
    expect(scaleByAdam().init(pe).count.dtype).toBe('int32');
  });
});
