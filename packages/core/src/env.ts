/**
 * Reading tpukit's switches from the process environment (Node); elsewhere every variable reads
 * as unset. The one place core touches `process.env`, so that a runtime without a `process`
 * global (browsers, workers started from a string) needs no guard at each switch.
 */

/** An environment variable, or undefined where the runtime has no process environment. */
export function envVar(name: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
}

/**
 * An on/off switch: `'1'` on, `'0'` off, unset or empty `dflt`. Any other value throws, naming the
 * variable and the value (a mistyped `off` silently leaving a benchmark's A/B switch on would make
 * both sides of a comparison the same code).
 */
export function envSwitch(name: string, dflt: boolean): boolean {
  const v = envVar(name);
  if (v === undefined || v === '') return dflt;
  if (v === '1') return true;
  if (v === '0') return false;
  throw new Error(`tpukit: environment variable ${name} must be 0 or 1; got ${JSON.stringify(v)}`);
}

/**
 * A number from the environment: unset or empty gives undefined; otherwise it must be an integer in
 * [min, max] (`integer`) or a finite number in that range, or this throws naming the variable and
 * the value.
 */
export function envNumber(name: string, min: number, max: number, integer = true): number | undefined {
  const v = envVar(name);
  if (v === undefined || v === '') return undefined;
  const x = Number(v);
  if ((integer ? !Number.isInteger(x) : !Number.isFinite(x)) || x < min || x > max) throw new Error(`tpukit: environment variable ${name} must be ${integer ? 'an integer' : 'a number'} in ${min}..${max}; got ${JSON.stringify(v)}`);
  return x;
}
