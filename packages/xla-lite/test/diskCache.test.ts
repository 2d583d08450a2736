// The persistent compilation cache: a retrace (as a second process would do) loads the
// optimised module from disk, skips the passes, and computes the same values.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lax, nn, np } from '@tpukit/core';
import { afterEach, describe, expect, it } from 'vitest';
import { compileLog, diskCacheStats, jit, setCacheDir } from '../src/index';
import { expectAllclose } from './build';

const dirs: string[] = [];
afterEach(() => {
  setCacheDir(null);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('setCacheDir', () => {
  it('writes a compiled module and loads it for a fresh trace of the same program', () => {
    const dir = mkdtempSync(join(tmpdir(), 'xla-cache-'));
    dirs.push(dir);
    setCacheDir(dir);
    const f = (x: any, w: any) => np.sum(np.tanh(np.add(np.matmul(x, w), np.array([1, 2], 'int32').astype('float32'))), { axis: 0 });
    const x = np.array([[1, 2, 3], [4, 5, 6]], 'float32');
    const w = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, -0.6]], 'float32');
    const before = diskCacheStats();
    const n0 = compileLog().length;
    const a = jit(f)(x, w);
    expect(readdirSync(dir).filter((n) => n.endsWith('.json'))).toHaveLength(1);
    expect(diskCacheStats().writes).toBe(before.writes + 1);
    const b = jit(f)(x, w); // a new jit: new trace, new jaxpr object, same text
    const recs = compileLog().slice(n0);
    expect(recs.map((r) => r.fromDisk)).toEqual([false, true]);
    expect(diskCacheStats().hits).toBe(before.hits + 1);
    expectAllclose(b, a);
    expectAllclose(b, f(x, w));
    // A different shape is a different key.
    jit(f)(np.ones([3, 3]), w);
    expect(readdirSync(dir).filter((n) => n.endsWith('.json'))).toHaveLength(2);
  });

  it('does not cache modules whose parameters hold sub-programs', () => {
    const dir = mkdtempSync(join(tmpdir(), 'xla-cache-'));
    dirs.push(dir);
    setCacheDir(dir);
    const before = diskCacheStats().uncacheable;
    const g = (x: any) => lax.cond(np.greater(np.sum(x), 0), (v: any) => np.sin(v), (v: any) => np.cos(v), x);
    expectAllclose(jit(g)(np.ones([3])), g(np.ones([3])));
    expect(diskCacheStats().uncacheable).toBe(before + 1);
    expect(readdirSync(dir).filter((n) => n.endsWith('.json'))).toHaveLength(0);
  });

  it('round-trips row, output fusions and layout copies (with their layouts)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'xla-cache-'));
    dirs.push(dir);
    setCacheDir(dir);
    const f = (x: any, w: any, c: any) =>
      [np.add(nn.softmax(np.sum(c, { axis: 1 }), { axis: -1 }), lax.dotGeneral(c, c, [[[0, 2], [0, 2]], [[], []]]).sum()), nn.relu(np.matmul(x, w))];
    const args = [np.full([2, 3], 0.5), np.full([3, 4], 0.25), np.ones([2, 3, 4])] as const;
    const n0 = compileLog().length;
    const a = jit(f)(...args);
    const b = jit(f)(...args);
    expect(compileLog().slice(n0).map((r) => r.fromDisk)).toEqual([false, true]);
    const stored = readdirSync(dir).filter((n) => n.endsWith('.json')).map((n) => readFileSync(join(dir, n), 'utf8')).join();
    for (const k of ['"kind":"kRow"', '"kind":"kOutput"', '"opcode":"copy"', '"layout":[2,0,1]']) expect(stored).toContain(k);
    for (const k of [0, 1]) {
      expectAllclose(b[k], a[k]);
      expectAllclose(b[k], f(...args)[k], { rtol: 1e-5 });
    }
  });
});
