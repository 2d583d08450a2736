/**
 * Operands in a GEMM engine's memory, as a compiled step's arena holds them (read in place by the
 * products, results written there): `inMemory` copies an array into a region reserved for it and
 * returns the view; `releaseAll` gives every region back.
 */
import type { GemmEngine } from '../src/backends/systolic/gemmEngine';

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
