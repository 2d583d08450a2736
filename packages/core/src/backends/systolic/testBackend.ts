/**
 * Test support (not exported by the package): a systolic backend of a test's own, registered
 * under `name`, and deterministic non-trivial data for its products.
 */
import { registerBackend } from '../../backend';
import { SystolicBackend } from './backend';

export function systolicTestBackend(name: string): { backend: SystolicBackend; engine: SystolicBackend['engine'] } {
  const backend = new SystolicBackend(name);
  registerBackend(backend);
  return { backend, engine: backend.engine };
}

/** `n` float32 values of a wavy sequence (varied magnitudes and signs), a different one per seed. */
export function wavyData(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.sin(i * 0.731 + seed) * (1 + (i % 7));
  return out;
}
