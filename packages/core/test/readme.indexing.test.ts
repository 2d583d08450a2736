/**
 * Runs the example block of the README's "Indexing and shape manipulation" section against the
 * source, so the section cannot drift from the code, and checks the values its comments state.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import * as core from '../src/index';

it('the indexing README example runs and gives what its comments say', () => {
  const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
  const section = readme.slice(readme.indexOf('## Indexing and shape manipulation'));
  const start = section.indexOf('```ts') + 5;
  const code = section.slice(start, section.indexOf('```', start));
  const body = code.replace(/^import \{([^}]*)\} from '@tpukit\/core';$/m, 'const {$1} = core;');
  expect(body).not.toContain('import ');
  const { x, y } = new Function('core', `${body}\nreturn { x, y };`)(core) as { x: core.Array; y: core.Array };
  const { np } = core;
  expect(x.get(1, '::-1', '1:3').shape).toEqual([3, 2]);
  expect(x.get([1, 0], ':', [0, 3]).shape).toEqual([2, 3]);
  expect(x.get(np.greater(x, 20)).toArray()).toEqual([21, 22, 23]);
  expect(y.get(0, ':', 0).toArray()).toEqual(np.add(x.get(0, ':', 0), 2).toArray());
  expect(np.split(np.arange(6), [1, 4]).map((a) => a.toArray())).toEqual([[0], [1, 2, 3], [4, 5]]);
  expect(np.pad(np.array([1, 2, 3]), [2, 3], { mode: 'reflect' }).toArray()).toEqual([3, 2, 1, 2, 3, 2, 1, 2]);
  expect(np.tensordot(np.ones([2, 3, 4]), np.ones([3, 4, 5]), 2).shape).toEqual([2, 5]);
  expect(np.argsort(np.array([3, 1, 2, 1])).toArray()).toEqual([1, 3, 2, 0]);
  expect(core.lax.topK(np.array([1, 5, 3]), 2).map((a) => a.toArray())).toEqual([[5, 3], [1, 2]]);
  // The table's shapes.
  const z = np.zeros([4, 5, 6]);
  expect([z.get(-1), z.get(':', '1:3', '::-2'), z.get(np.s(null, null, 2)), z.get(null, 0), z.get('...', 0), z.get([0, 2], ':', [1, 1])].map((a) => a.shape)).toEqual([
    [5, 6],
    [4, 2, 3],
    [2, 5, 6],
    [1, 5, 6],
    [4, 5],
    [2, 5],
  ]);
  const w = np.arange(120).reshape([4, 5, 6]);
  expect(w.get(np.greater(w, 100)).shape).toEqual([19]);
});
