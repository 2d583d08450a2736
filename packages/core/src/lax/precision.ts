/**
 * `lax.Precision`, as jax.lax.Precision: how many bf16 passes a float32 matmul makes on the MXU.
 *
 *   DEFAULT  aliases 'default', 'fastest', 'bfloat16'            1 pass (operands rounded to bf16)
 *   HIGH     aliases 'high', 'bfloat16_3x', 'tensorfloat32'      3 passes (bf16_3x)
 *   HIGHEST  aliases 'highest', 'float32'                        6 passes (bf16_6x, float32-like)
 *
 * A dot's `precision` is one of these (any alias, canonicalised when the dot is built), a pair
 * `[lhs, rhs]` as JAX's tuple form, or null: the process default (`defaultMatmulPrecision`, as
 * `jax.default_matmul_precision`), read when the dot runs, else DEFAULT. Anything else is an
 * error naming the operation and the valid names, on every backend.
 */
import { showValue } from '../describe';

export type Precision = 'default' | 'high' | 'highest';
/** What a dot stores: a canonical precision, one per operand, or null (the default). */
export type CanonicalPrecision = Precision | readonly [Precision, Precision] | null;
/** Anything `canonicalizePrecision` accepts. */
export type PrecisionLike = string | readonly [string, string] | null | undefined;

/** jax.lax.Precision's members. */
export const Precision = Object.freeze({ DEFAULT: 'default', HIGH: 'high', HIGHEST: 'highest' } as const);

const ALIASES: Readonly<Record<string, Precision>> = {
  default: 'default',
  fastest: 'default',
  bfloat16: 'default',
  high: 'high',
  bfloat16_3x: 'high',
  tensorfloat32: 'high',
  highest: 'highest',
  float32: 'highest',
};

const VALID = `lax.Precision.DEFAULT / HIGH / HIGHEST or one of ${Object.keys(ALIASES).map((k) => `'${k}'`).join(', ')} (case-insensitive), a pair [lhs, rhs] of them, or null`;

function one(p: unknown, op: string): Precision {
  const name = typeof p === 'string' ? ALIASES[p.toLowerCase()] : undefined;
  if (name === undefined) throw new TypeError(`${op}: unknown precision ${showValue(p)}; valid: ${VALID}`);
  return name;
}

/** Resolves aliases ('float32' -> 'highest', 'HIGH' -> 'high'); a pair of equal precisions becomes one. */
export function canonicalizePrecision(p: unknown, op: string): CanonicalPrecision {
  if (p === null || p === undefined) return null;
  if (globalThis.Array.isArray(p)) {
    if (p.length !== 2) throw new TypeError(`${op}: a precision pair must be [lhs, rhs]; got ${showValue(p)}`);
    const a = one(p[0], op);
    const b = one(p[1], op);
    return a === b ? a : [a, b];
  }
  return one(p, op);
}

/** True when `p` is what `canonicalizePrecision` returns (a shape rule's check on bound params). */
export function isCanonicalPrecision(p: unknown): p is CanonicalPrecision {
  const ok = (x: unknown): boolean => x === 'default' || x === 'high' || x === 'highest';
  return p === null || ok(p) || (globalThis.Array.isArray(p) && p.length === 2 && ok(p[0]) && ok(p[1]));
}

let defaultPrecision: Precision | null = null;

/** The process default for dots built without a precision (null: DEFAULT). */
export function getDefaultMatmulPrecision(): Precision | null {
  return defaultPrecision;
}

/** Sets the default for dots without a precision, as `jax.config.update('jax_default_matmul_precision', p)`; returns the previous one. */
export function setDefaultMatmulPrecision(p: PrecisionLike): Precision | null {
  const prev = defaultPrecision;
  const c = canonicalizePrecision(p, 'setDefaultMatmulPrecision');
  if (globalThis.Array.isArray(c)) throw new TypeError(`setDefaultMatmulPrecision: takes one precision, not a pair; got ${showValue(p)}`);
  defaultPrecision = c as Precision | null;
  return prev;
}

/**
 * `jax.default_matmul_precision(p)` as a scope: runs `fn` with the default set to `p` and
 * restores the previous default when `fn` returns or throws (or, for a promise, settles; other
 * work interleaved with it meanwhile sees the same default, as in JAX's global config).
 */
export function defaultMatmulPrecision<T>(p: PrecisionLike, fn: () => T): T {
  const prev = setDefaultMatmulPrecision(p);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    defaultPrecision = prev;
    throw e;
  }
  if (result !== null && typeof result === 'object' && typeof (result as { then?: unknown }).then === 'function') {
    return (result as unknown as Promise<unknown>).finally(() => {
      defaultPrecision = prev;
    }) as T;
  }
  defaultPrecision = prev;
  return result;
}

/** The precision a dot runs at, per operand: its own, else the process default, else DEFAULT. */
export function effectivePrecision(p: CanonicalPrecision): readonly [Precision, Precision] {
  return operandPrecisions(p ?? defaultPrecision ?? 'default');
}

/** A dot's explicit precision per operand (`[lhs, rhs]`), for printing; null stays unprinted. */
export function operandPrecisions(p: Precision | readonly [Precision, Precision]): readonly [Precision, Precision] {
  return typeof p === 'string' ? [p, p] : p;
}

/** The higher of a pair (the MXU runs one pass scheme for the product: the more precise one). */
export function higherPrecision([a, b]: readonly [Precision, Precision]): Precision {
  const rank = { default: 0, high: 1, highest: 2 } as const;
  return rank[a] >= rank[b] ? a : b;
}
