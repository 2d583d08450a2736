/**
 * Which backend arrays and ops run on when the program has not chosen one: the fast `systolic`
 * backend (WebAssembly SIMD GEMM with the TPU MXU's numerics) wherever WebAssembly SIMD128 is
 * available, else `reference` (plain TypeScript, exact float64 accumulation: the oracle tests
 * compare against, selected explicitly with `setBackend('reference')` / `withBackend`).
 * `TPUKIT_BACKEND=<name>` in the environment picks one by name.
 */
import { envVar } from './env';
import { listBackends } from './backend';
import { showValue } from './describe';
import { wasmFeatures } from './wasm/features';

/** The name of the backend to start on. */
export function defaultBackendName(env: string | undefined = envVar('TPUKIT_BACKEND')): string {
  if (env !== undefined && env !== '') {
    if (!listBackends().includes(env)) throw new Error(`TPUKIT_BACKEND: no backend named ${showValue(env)}; registered: ${listBackends().join(', ')}`);
    return env;
  }
  return wasmFeatures().simd ? 'systolic' : 'reference';
}
