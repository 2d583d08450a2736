import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { doubleCounters } from './counters';

/**
 * Runs `wrap` (a function's source) on two counter objects made by the same literal in a child
 * Node with V8's natives syntax, adds 2^31 to one of them, and reports whether the two still
 * share a map (V8's `%HaveSameMap`): a field whose representation changes deprecates the map.
 */
function probe(wrap: string): { same: boolean; bytes: number; jobs: number } {
  // (\`enabled\`: the module's TPUKIT_DOUBLE_COUNTERS switch, which doubleCounters' source reads)
  const code = `
const enabled = true;
const wrap = ${wrap};
const make = () => ({ bytes: 0, jobs: 0 });
const a = wrap(make()), b = wrap(make());
a.bytes += 2 ** 31;
a.jobs += 1;
console.log(JSON.stringify({ same: %HaveSameMap(a, b), bytes: a.bytes, jobs: a.jobs }));
`;
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '-e', code], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`probe failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { same: boolean; bytes: number; jobs: number };
}

describe('doubleCounters', () => {
  it('keeps the values and returns the same object', () => {
    const o = { a: 0, b: 3, c: 2 ** 40 };
    expect(doubleCounters(o)).toBe(o);
    expect(o).toEqual({ a: 0, b: 3, c: 2 ** 40 });
    expect(Object.is(o.a, 0)).toBe(true);
  });

  it('rejects a field that is not a number, naming it', () => {
    expect(() => doubleCounters({ a: 0, b: 'x' })).toThrow('doubleCounters: field b must be a number; got string');
  });

  // V8 only (Node): the property the function exists for. Plain counters change their map when a
  // field passes the small-integer range (the first case shows that this probe sees it).
  it.runIf(typeof process !== 'undefined' && !!process.versions?.v8)('counters keep their map when a count passes 2^31', () => {
    expect(probe('(o) => o')).toEqual({ same: false, bytes: 2 ** 31, jobs: 1 });
    expect(probe(doubleCounters.toString())).toEqual({ same: true, bytes: 2 ** 31, jobs: 1 });
  });
});
