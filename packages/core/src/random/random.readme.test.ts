/**
 * Runs the example under "## Random" in packages/core/README.md against the source and checks
 * what it prints, so the README section cannot drift from the code.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import * as core from '../index';

it('the README random example runs and prints what its comments say', () => {
  const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
  const section = readme.slice(readme.search(/^## Random$/m));
  const start = section.indexOf('```ts') + 5;
  const code = section.slice(start, section.indexOf('```', start));
  const body = code.replace(/^import \{([^}]*)\} from '@tpukit\/core';$/m, 'const {$1} = core;');
  expect(body).not.toContain('import ');
  const printed: unknown[][] = [];
  new Function('core', 'console', body)(core, { log: (...args: unknown[]) => printed.push(args) });
  expect(printed).toEqual([
    [0.9476670026779175],
    [0.007293820381164551],
    ['bfloat16', [3, 5, 5, 4, 6, 4, 5, 5], [2, 2, 1, 0, 2], [4, 3, 1, 0, 2, 5]],
  ]);
});
