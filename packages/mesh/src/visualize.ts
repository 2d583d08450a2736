/**
 * `debug.visualizeArraySharding(x)` (jax.debug.visualize_array_sharding): a text table of which
 * devices hold which block of a 1-d or 2-d array, one cell per distinct block, listing the
 * devices that hold it (replicas share a cell).
 */
import type { Array } from '@tpukit/core';

const ranges = (xs: (readonly [number, number])[]): (readonly [number, number])[] => {
  const uniq = new Map<string, readonly [number, number]>();
  for (const r of xs) uniq.set(`${r[0]}:${r[1]}`, r);
  return [...uniq.values()].sort((a, b) => a[0] - b[0]);
};

/** The table as a string; printed with console.log unless `print: false`. */
export function visualizeArraySharding(x: Array, opts: { print?: boolean } = {}): string {
  if (x.ndim > 2) throw new Error(`visualizeArraySharding: only 1-d and 2-d arrays can be shown; got shape [${x.shape.join(',')}]`);
  const shards = x.addressableShards;
  const rowOf = (s: (typeof shards)[number]) => (x.ndim === 2 ? s.index[0] : ([0, 1] as const));
  const colOf = (s: (typeof shards)[number]) => (x.ndim === 0 ? ([0, 1] as const) : s.index[x.ndim - 1]);
  const rows = ranges(shards.map(rowOf));
  const cols = ranges(shards.map(colOf));
  const cell = (r: readonly [number, number], c: readonly [number, number]) => {
    const ids = shards.filter((s) => rowOf(s)[0] === r[0] && rowOf(s)[1] === r[1] && colOf(s)[0] === c[0] && colOf(s)[1] === c[1]).map((s) => s.device.id);
    return ids.length === 0 ? '' : `${shards[0].device.platform.toUpperCase()} ${ids.join(',')}`;
  };
  const text = rows.map((r) => cols.map((c) => cell(r, c)));
  const width = Math.max(...text.flat().map((t) => t.length)) + 2;
  const pad = (t: string) => {
    const left = Math.floor((width - t.length) / 2);
    return ' '.repeat(left) + t + ' '.repeat(width - t.length - left);
  };
  const line = (l: string, m: string, r: string) => l + cols.map(() => '─'.repeat(width)).join(m) + r;
  const out = [line('┌', '┬', '┐')];
  text.forEach((row, i) => {
    out.push(`│${row.map(pad).join('│')}│`);
    out.push(i === text.length - 1 ? line('└', '┴', '┘') : line('├', '┼', '┤'));
  });
  const s = out.join('\n');
  if (opts.print !== false) console.log(s);
  return s;
}
