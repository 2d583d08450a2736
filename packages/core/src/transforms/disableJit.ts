/**
 * `disableJit()`, as `jax.disable_jit`: while disabled, `jit`-wrapped functions run eagerly
 * (same results, op by op, plain debugging; nothing is traced, cached or counted). Also set by
 * the environment variable `TPUKIT_DISABLE_JIT=1` at load time.
 */
import { envSwitch } from '../env';

let disabled = envSwitch('TPUKIT_DISABLE_JIT', false);

export function isJitDisabled(): boolean {
  return disabled;
}

/** Disables jit globally (`disableJit()`), re-enables it (`disableJit(false)`), or runs `fn` with jit disabled. */
export function disableJit(): void;
export function disableJit(on: boolean): void;
export function disableJit<T>(fn: () => T): T;
export function disableJit<T>(arg: boolean | (() => T) = true): T | void {
  if (typeof arg === 'function') {
    const prev = disabled;
    disabled = true;
    try {
      return arg();
    } finally {
      disabled = prev;
    }
  }
  if (typeof arg !== 'boolean') throw new TypeError(`disableJit: expected a boolean or a function; got ${arg === null ? 'null' : typeof arg}`);
  disabled = arg;
}
