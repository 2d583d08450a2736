import { envSwitch } from './env';

/** Env `TPUKIT_DOUBLE_COUNTERS=0`: `doubleCounters` leaves the fields as they are (A/B runs). */
const enabled = envSwitch('TPUKIT_DOUBLE_COUNTERS', true);

/**
 * Run-long counters that grow past 2^31 (bytes summed over a process: the GEMM engine's operand
 * traffic, xla-lite's arena traffic, the fused attention's in-place bytes).
 *
 * V8 stores a field that has held only small integers (Smis: 32 bits on 64-bit V8 without
 * pointer compression, Node's default; 31 with it) untagged in the object and records that in
 * the object's map. The first value past that range changes the field's representation to a
 * double: the map is deprecated, and every optimised function that checked it (every function
 * that counts, and the functions it was inlined into) is deoptimised at its next call ("wrong
 * map") and compiled again. In the GPT bench that hit 10-30 steps into a run, once per counter,
 * inside the timed rounds: a burst of TurboFan work on V8's background threads (the step's `run`
 * alone 46-88 ms), which on two busy cores is taken from the step (BENCHMARKS.md, bg15).
 *
 * `doubleCounters(o)` gives each field of `o` a double representation before any code that uses
 * it is optimised (each is set to a fraction and back to its value: a representation never
 * narrows again), so passing 2^31 later changes nothing. The values are unchanged. Call it on the
 * literal that creates the counters, once per object.
 */
export function doubleCounters<T extends object>(o: T): T {
  const r = o as Record<string, number>;
  for (const k of Object.keys(r)) {
    const v = r[k];
    if (typeof v !== 'number') throw new TypeError(`doubleCounters: field ${k} must be a number; got ${typeof v}`);
    if (!enabled) continue;
    r[k] = 0.5;
    r[k] = v;
  }
  return o;
}
