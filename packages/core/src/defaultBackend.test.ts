/** The default backend is the fast systolic one where WebAssembly SIMD runs; reference stays the oracle, chosen by name. */
import { describe, expect, it } from 'vitest';
import { defaultBackendName, getBackend, np, withBackend } from './index';
import { wasmFeatures } from './wasm/features';

describe('default backend', () => {
  it('is systolic where WebAssembly SIMD is available (Node 20 has it)', () => {
    expect(wasmFeatures().simd).toBe(true);
    expect(getBackend().name).toBe('systolic');
    expect(defaultBackendName(undefined)).toBe('systolic');
    // A float32 matmul without a precision gets the MXU's one bf16 pass, not the exact product.
    const a = np.array([[1 / 3, 2 / 7]], 'float32');
    const b = np.array([[0.7], [1 / 11]], 'float32');
    const fast = np.matmul(a, b).toArray();
    const exact = withBackend('reference', () => np.matmul(a, b).toArray());
    expect(fast).not.toEqual(exact);
  });

  it('TPUKIT_BACKEND picks a registered backend by name, and names the choices otherwise', () => {
    expect(defaultBackendName('reference')).toBe('reference');
    expect(defaultBackendName('')).toBe('systolic');
    expect(() => defaultBackendName('tpu')).toThrow('TPUKIT_BACKEND: no backend named "tpu"; registered: reference, systolic');
  });
});
