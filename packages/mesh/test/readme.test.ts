// Runs the README's example block (under "## Example") against the source and checks what it
// prints, so that the README cannot drift from the code.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as core from '@tpukit/core';
import { expect, it } from 'vitest';
import * as mesh from '../src/index';

it('the README example runs and prints what its comments say', () => {
  const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
  const section = readme.slice(readme.indexOf('## Example'));
  const code = section.slice(section.indexOf('```ts') + 5, section.indexOf('```', section.indexOf('```ts') + 5));
  const body = code
    .replace(/^import \{([^}]*)\} from '@tpukit\/core';$/m, 'const {$1} = __core;')
    .replace(/^import \{([^}]*)\} from '@tpukit\/mesh';$/m, 'const {$1} = __mesh;');
  expect(body).not.toContain('import ');
  const printed: unknown[][] = [];
  const fakeConsole = { log: (...args: unknown[]) => printed.push(args) };
  // visualizeArraySharding prints through the real console: catch that too.
  const log = console.log;
  console.log = fakeConsole.log;
  try {
    new Function('__core', '__mesh', 'console', body)(core, mesh, fakeConsole);
  } finally {
    console.log = log;
  }
  expect(printed[0]).toEqual([8, [[2, 4], [2, 4]]]);
  expect(String(printed[1][0]).split('\n')).toHaveLength(9);
  expect(String(printed[1][0])).toContain('│ CPU 6 │ CPU 7 │');
  expect(printed[2]).toEqual([496]);
  expect(printed[3]).toEqual([[4, 1]]);
  expect(printed).toHaveLength(4);
});
