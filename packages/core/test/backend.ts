/**
 * Test helper: runs the tests of the enclosing describe block (or file) on a named backend and
 * restores the previous one afterwards. The default backend is `systolic` (bf16 MXU numerics);
 * tests that assert exact reference numerics (finite differences, float64 accumulation) select
 * `reference` with it explicitly.
 */
import { afterAll, beforeAll } from 'vitest';
import { getBackend, setBackend } from '../src/index';

export function onBackend(name: string): void {
  let prev = '';
  beforeAll(() => {
    prev = getBackend().name;
    setBackend(name);
  });
  afterAll(() => {
    setBackend(prev);
  });
}
