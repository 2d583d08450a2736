// The main entry exports exactly the names in publicApi.txt: the user-facing API. Widening it
// is a conscious change (regenerate the list with `tsx scripts/entryExports.ts
// packages/core/src/index.ts > packages/core/test/publicApi.txt` and say why in a changeset);
// what only compilers and other packages need goes to `@tpukit/core/internal`.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { entryExports } from '../../../scripts/entryExports';
import * as index from '../src/index';
import * as internal from '../src/internal';

const committed = readFileSync(fileURLToPath(new URL('./publicApi.txt', import.meta.url)), 'utf8').trim().split('\n');
const src = (f: string): string => fileURLToPath(new URL(`../src/${f}`, import.meta.url));

test('the main entry exports the committed list, types included', () => {
  expect(entryExports(src('index.ts'))).toEqual(committed);
});

test('its run-time values are the list\'s values', () => {
  const values = committed.filter((l) => l.endsWith(' value')).map((l) => l.split(' ')[0]);
  expect(Object.keys(index).sort()).toEqual(values.sort());
});

test('the internal entry has everything the main entry has, and the compiler surface', () => {
  for (const name of Object.keys(index)) expect((internal as Record<string, unknown>)[name], name).toBe((index as Record<string, unknown>)[name]);
  for (const name of ['bind', 'getPrimitive', 'allPrimitives', 'Jaxpr', 'registerCompiler', 'wasm', 'asArray', 'showValue']) {
    expect(internal, name).toHaveProperty(name);
    expect(index, name).not.toHaveProperty(name);
  }
});
