// random decides on its fused host kernels from the Backend's `hostKernels` capability, not by
// testing concrete backends: reference and systolic offer it (systolic not while costing ops
// into a ledger), a backend without it gets the op-by-op lax chain with the same values.
import { describe, expect, test } from 'vitest';
import { type Backend, np, random, registerBackend, systolic, withBackend } from '../index';
import { referenceBackend } from '../internal';
import { canFuse, flushesSubnormals } from './fused';

const plain: Backend = { ...referenceBackend, name: 'plain-host', hostKernels: undefined };
registerBackend(plain);

describe('random asks the backend for the host-kernel capability', () => {
  test('reference yes, systolic unless costing, a backend without it no', () => {
    const x = np.array([1, 2], 'uint32');
    expect(withBackend('reference', () => canFuse(x))).toBe(true);
    expect(withBackend('systolic', () => canFuse(x))).toBe(true);
    expect(withBackend('systolic', () => systolic.withLedger(() => canFuse(x)).result)).toBe(false);
    expect(withBackend('plain-host', () => canFuse(x))).toBe(false);
    expect(withBackend('plain-host', () => flushesSubnormals())).toBe(false);
  });

  test('flushSubnormals comes from the capability', () => {
    systolic.configure({ flushSubnormals: true });
    try {
      expect(withBackend('systolic', () => flushesSubnormals())).toBe(true);
    } finally {
      systolic.configure({ flushSubnormals: false });
    }
    expect(withBackend('systolic', () => flushesSubnormals())).toBe(false);
  });

  test('same samples with and without the capability', () => {
    const k = random.key(7);
    const fused = withBackend('reference', () => random.normal(k, [64]).dataSync());
    const chain = withBackend('plain-host', () => random.normal(k, [64]).dataSync());
    expect([...chain]).toEqual([...fused]);
  });
});
