/**
 * Runs the README's first example block (the one under "## Example") against the source and
 * checks what it prints, so that the README cannot drift from the code.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import * as core from '../src/index';

it('the README example runs and prints what its comments say', () => {
  const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
  const section = readme.slice(readme.indexOf('## Example'));
  const code = section.slice(section.indexOf('```ts') + 5, section.indexOf('```', section.indexOf('```ts') + 5));
  const body = code.replace(/^import \{([^}]*)\} from '@tpukit\/core';$/m, 'const {$1} = core;');
  expect(body).not.toContain('import ');
  const printed: unknown[][] = [];
  const fakeConsole = { log: (...args: unknown[]) => printed.push(args) };
  new Function('core', 'console', body)(core, fakeConsole);
  expect(printed[0]).toEqual(['bfloat16', [2, 2], [[4, 4], [8.5, 8.5]]]);
  expect(printed[1]).toEqual(['int8']);
  expect((printed[2][0] as number[]).map((v) => v.toFixed(4))).toEqual(['0.0900', '0.2447', '0.6652']);
  expect(printed[3]).toEqual([{ b: [2], w: [3, 2] }]);
  expect(printed[4]).toEqual([[255, 0, 0]]);
  expect(printed[5]).toEqual(['3eab']);
  expect(printed.length).toBe(6);
});
