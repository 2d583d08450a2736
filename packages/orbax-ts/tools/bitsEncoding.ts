/**
 * How the orbax fidelity fixtures write array values (expected.json of write_checkpoints.ts and
 * check_orbax.py): floats as the hex of their bit patterns (float32 8 digits, bfloat16 4),
 * booleans as 0/1, integers as numbers. Shared by the writer and test/orbaxWritten.test.ts.
 */
import type { Array } from '@tpukit/core';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** `a`'s values as the fixtures encode them. */
export function encodeValues(a: Array): (string | number)[] {
  return globalThis.Array.from(a.dataSync() as ArrayLike<number>, (v) => {
    if (a.dtype === 'float32' || a.dtype === 'bfloat16') {
      f32[0] = v;
      return a.dtype === 'bfloat16' ? (u32[0] >>> 16).toString(16).padStart(4, '0') : u32[0].toString(16).padStart(8, '0');
    }
    return a.dtype === 'bool' ? (v ? 1 : 0) : Number(v);
  });
}
