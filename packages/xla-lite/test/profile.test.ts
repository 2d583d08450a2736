// The runtime profiler: records per executed instruction when on, nothing when off, same results.
import { nn, np, withBackend } from '@tpukit/core';
import { afterEach, describe, expect, it } from 'vitest';
import { jit, profile } from '../src/index';

const x = np.array(Array.from({ length: 64 * 32 }, (_, i) => Math.sin(i)), 'float32').reshape([64, 32]);
const w = np.array(Array.from({ length: 32 * 16 }, (_, i) => Math.cos(i)), 'float32').reshape([32, 16]);
const mlp = (a: typeof x, b: typeof w) => np.sum(nn.softmax(np.tanh(np.matmul(a, b)), { axis: -1 }), { axis: 0 });

afterEach(() => {
  profile.enable(false);
  profile.reset();
});

describe('profile', () => {
  it('records nothing while off', () => {
    profile.enable(false);
    profile.reset();
    const f = jit(function profOff(a: typeof x, b: typeof w) {
      return mlp(a, b);
    });
    f(x, w);
    f(x, w);
    expect(profile.records().filter((r) => r.executable === 'profOff')).toEqual([]);
  });

  it('puts dots with batch dims (attention per head) in a category of their own', () => {
    const q = np.array(Array.from({ length: 2 * 8 * 4 }, (_, i) => Math.sin(i)), 'float32').reshape([2, 8, 4]);
    withBackend('systolic', () => {
      const f = jit(function profBatched(a: typeof q, b: typeof x) {
        return [np.matmul(a, np.swapaxes(a, -1, -2)), np.matmul(b, np.transpose(b))];
      });
      profile.enable();
      profile.reset();
      f(q, x);
      const cats = profile.records().filter((r) => r.executable === 'profBatched').map((r) => `${r.category}: ${r.detail}`);
      expect(cats.filter((c) => c.startsWith('dot (batched): f32[2,8,4] x f32[2,8,4]'))).toHaveLength(1);
      expect(cats.filter((c) => c.startsWith('dot: f32[64,32] x f32[64,32]'))).toHaveLength(1);
    });
  });

  it('times every instruction of each call, by category, without changing results', () => {
    withBackend('systolic', () => {
      const f = jit(function profOn(a: typeof x, b: typeof w) {
        return mlp(a, b);
      });
      const off = f(x, w).toArray();
      profile.enable();
      profile.reset();
      const on1 = f(x, w).toArray();
      f(x, w);
      expect(on1).toEqual(off);
      const rs = profile.records().filter((r) => r.executable === 'profOn');
      const call = rs.find((r) => r.category === '(call)')!;
      expect(call.calls).toBe(2);
      const inst = rs.filter((r) => r.category !== '(call)');
      for (const r of inst) expect(r.calls).toBe(2);
      expect(inst.some((r) => r.category === 'dot' || r.category === 'dot+epilogue')).toBe(true);
      expect(inst.some((r) => r.category.startsWith('fusion '))).toBe(true);
      const dot = inst.find((r) => r.category.startsWith('dot'))!;
      expect(dot.detail).toContain('f32[64,32] x f32[32,16]');
      const sum = inst.reduce((s, r) => s + r.ms, 0);
      expect(sum).toBeLessThanOrEqual(call.ms + 1e-6);
      for (const r of inst) expect(r.cpuMs).toBeGreaterThanOrEqual(0);
      expect(inst.reduce((s, r) => s + r.cpuMs, 0)).toBeCloseTo(call.cpuMs, 6);
      expect(profile.records('cpu').map((r) => r.cpuMs)).toEqual(profile.records('cpu').map((r) => r.cpuMs).sort((a, b) => b - a));
      const cats = profile.byCategory();
      expect(cats.reduce((s, c) => s + c.ms, 0)).toBeCloseTo(profile.records().filter((r) => r.category !== '(call)').reduce((s, r) => s + r.ms, 0), 6);
      expect(profile.report()).toContain('profOn');
      // Each top instruction's line carries its call count (a dot group's time lands on one member).
      expect(profile.report().split('\n').filter((l) => l.includes('[profOn]') && /CPU +2x /.test(l))).toHaveLength(Math.min(20, inst.length));
      profile.reset();
      expect(profile.records().filter((r) => r.executable === 'profOn')).toEqual([]);
    });
  });
});
