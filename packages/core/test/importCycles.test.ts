// No import cycle in core's sources, at runtime nor counting type-only imports
// (scripts/importCycles.ts says which imports count). Also checks the checker finds cycles.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';
import { importCycles } from '../../../scripts/importCycles';

const src = fileURLToPath(new URL('../src', import.meta.url));

test('core has no runtime import cycle', () => {
  expect(importCycles(src)).toEqual([]);
});

test('core has no import cycle counting type-only imports either', () => {
  expect(importCycles(src, { types: true })).toEqual([]);
});

describe('the cycle checker', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'import-cycles-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const tree = (name: string, files: Record<string, string>): string => {
    const root = path.join(dir, name);
    for (const [f, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
      writeFileSync(path.join(root, f), text);
    }
    return root;
  };

  test('finds a cycle through an index re-export, shortest path first', () => {
    const root = tree('cycle', {
      'a.ts': "import { b } from './sub';\nexport const a = 1;\n",
      'sub/index.ts': "export * from './b';\n",
      'sub/b.ts': "import { a } from '../a';\nexport const b = a;\n",
      'c.ts': "import { a } from './a';\n",
    });
    expect(importCycles(root)).toEqual([['a.ts', 'sub/index.ts', 'sub/b.ts', 'a.ts']]);
  });

  test('a file importing itself is a cycle', () => {
    expect(importCycles(tree('self', { 'a.ts': "import './a';\n" }))).toEqual([['a.ts', 'a.ts']]);
  });

  test('type-only imports, dynamic imports and test files are not edges', () => {
    const root = tree('types', {
      'a.ts': "import type { B } from './b';\nimport { type C } from './c';\nexport const a = 1;\n",
      'b.ts': "import { a } from './a';\nexport type B = number;\n",
      'c.ts': "export type { A } from './a';\nimport { a } from './a';\nexport type C = number;\n",
      'd.ts': "export const d = () => import('./e');\n",
      'e.ts': "import { d } from './d';\n",
      'e.test.ts': "import './f';\n",
      'f.ts': "import './e.test';\n",
    });
    expect(importCycles(root)).toEqual([]);
    // With `types`, the type-only edges count (dynamic import() and test files still do not).
    expect(importCycles(root, { types: true })).toEqual([['a.ts', 'b.ts', 'a.ts']]);
  });
});
