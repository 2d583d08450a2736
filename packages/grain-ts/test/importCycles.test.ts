// No import cycle in grain-ts's sources, counting type-only imports too (scripts/importCycles.ts
// says which imports count; core's test checks the checker itself).
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { importCycles } from '../../../scripts/importCycles';

test('grain-ts has no import cycle, type-only imports included', () => {
  expect(importCycles(fileURLToPath(new URL('../src', import.meta.url)), { types: true })).toEqual([]);
});
