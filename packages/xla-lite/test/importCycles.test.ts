// No runtime import cycle in xla-lite's sources (scripts/importCycles.ts says which imports
// count: type-only imports and dynamic import() are left out; core has its own test).
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { importCycles } from '../../../scripts/importCycles';

const src = fileURLToPath(new URL('../src', import.meta.url));

test('xla-lite has no runtime import cycle', () => {
  expect(importCycles(src)).toEqual([]);
});

test('xla-lite has no import cycle counting type-only imports either', () => {
  expect(importCycles(src, { types: true })).toEqual([]);
});
