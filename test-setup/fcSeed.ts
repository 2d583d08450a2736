/**
 * One fast-check seed per test run, so that every property test can be replayed.
 *
 * - `FC_SEED=n` (an integer) wins: that seed is used.
 * - Under CI (`CI=true`) without FC_SEED the seed is fixed (`CI_SEED`), so CI cannot flake on a
 *   lucky draw; a property that fails under CI fails every time.
 * - Locally without FC_SEED a random seed is drawn per run, so local runs keep exploring.
 *
 * This module is both parts of the vitest setup: `globalSetup` (the main process: choose the
 * seed, print it once, hand it to the test workers) and the `seedFastCheck` helper the workers'
 * setup file calls. Replay a failure with `FC_SEED=<seed> npx vitest run <file>`.
 */
export const CI_SEED = 20261125;

/** The seed this run uses, from the environment (`FC_SEED`, `CI`), or a random one. */
export function chooseSeed(env: NodeJS.ProcessEnv = process.env): { seed: number; why: string } {
  const given = env.FC_SEED;
  if (given !== undefined && given !== '') {
    const seed = Number(given);
    if (!Number.isInteger(seed) || seed < -(2 ** 31) || seed >= 2 ** 32) {
      throw new Error(`FC_SEED must be an integer in [-2^31, 2^32); got ${JSON.stringify(given)}`);
    }
    return { seed: seed | 0, why: 'from FC_SEED' };
  }
  if (env.CI === 'true' || env.CI === '1') return { seed: CI_SEED, why: 'fixed under CI' };
  return { seed: (Math.random() * 2 ** 32) | 0, why: 'random; set FC_SEED to replay' };
}
