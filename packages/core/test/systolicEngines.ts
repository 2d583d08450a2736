/**
 * Test helpers for the systolic GEMM engine. Operands in a GEMM engine's memory, as a compiled step's arena holds them (read in place by the
 * products, results written there): `inMemory` copies an array into a region reserved for it and
 * returns the view; `releaseAll` gives every region back.
 */
import { registerBackend } from '../src/index';
import { SystolicBackend } from '../src/backends/systolic/backend';
import type { GemmEngine } from '../src/backends/systolic/gemmEngine';

/**
 * A registered systolic backend named `name` whose engine runs the 5 x 8 micro-kernel (MR 5, MC
 * 130), chosen as the environment chooses it (`TPUKIT_GEMM_KERNEL=5x8` while its engine is made).
 */
export function backend5x8(name: string): SystolicBackend {
  const backend = new SystolicBackend(name);
  registerBackend(backend);
  const env = process.env.TPUKIT_GEMM_KERNEL;
  process.env.TPUKIT_GEMM_KERNEL = '5x8';
  try {
    void backend.engine;
  } finally {
    if (env === undefined) delete process.env.TPUKIT_GEMM_KERNEL;
    else process.env.TPUKIT_GEMM_KERNEL = env;
  }
  return backend;
}

export function engineMemory(e: GemmEngine): { inMemory: <T extends Float32Array | Uint16Array>(x: T) => T; releaseAll: () => void } {
  const addrs: number[] = [];
  const inMemory = <T extends Float32Array | Uint16Array>(x: T): T => {
    const addr = e.reserve(x.byteLength); // (grows the memory: take the buffer after)
    addrs.push(addr);
    const v = (x instanceof Uint16Array ? new Uint16Array(e.buffer(), addr, x.length) : new Float32Array(e.buffer(), addr, x.length)) as T;
    v.set(x);
    return v;
  };
  return { inMemory, releaseAll: () => addrs.splice(0).forEach((a) => e.release(a)) };
}
