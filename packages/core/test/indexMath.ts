/**
 * Naive row-major index arithmetic for tests' reference implementations (kept apart from
 * src/shape.ts on purpose, so the oracles do not share code with what they check).
 */
export const prod = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);

/** Flat offset -> multi-index. */
export const unravel = (f: number, s: readonly number[]): number[] => {
  const out: number[] = [];
  for (let k = s.length - 1; k >= 0; k--) {
    out[k] = f % s[k];
    f = Math.floor(f / s[k]);
  }
  return out;
};

/** Multi-index -> flat offset. */
export const ravel = (idx: number[], s: readonly number[]): number => idx.reduce((o, i, d) => o * s[d] + i, 0);
