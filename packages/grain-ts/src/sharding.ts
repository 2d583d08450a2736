/**
 * Splitting work between processes (Grain's `ShardOptions`). `evenSplit` gives shard `i` of
 * `n` a contiguous interval; without `dropRemainder` the `r = len % n` leftover records go one
 * each to the first `r` shards, with it every shard gets exactly `floor(len / n)`.
 */
export interface ShardOptions {
  shardIndex: number;
  shardCount: number;
  /** Give every shard the same number of records by dropping the `len % shardCount` extra ones. */
  dropRemainder?: boolean;
}

export const noSharding: ShardOptions = Object.freeze({ shardIndex: 0, shardCount: 1, dropRemainder: false });

export function checkShardOptions(op: string, o: ShardOptions): Required<ShardOptions> {
  if (typeof o !== 'object' || o === null) throw new TypeError(`${op}: shardOptions must be { shardIndex, shardCount, dropRemainder? }; got ${String(o)}`);
  const { shardIndex, shardCount } = o;
  if (!Number.isSafeInteger(shardCount) || shardCount < 1) throw new RangeError(`${op}: shardCount must be an integer >= 1; got ${shardCount}`);
  if (!Number.isSafeInteger(shardIndex) || shardIndex < 0 || shardIndex >= shardCount) {
    throw new RangeError(`${op}: shardIndex must be an integer in [0, ${shardCount}); got ${shardIndex}`);
  }
  return { shardIndex, shardCount, dropRemainder: o.dropRemainder ?? false };
}

/** The half-open interval `[start, stop)` of `length` records that a shard reads. */
export function evenSplit(length: number, options: ShardOptions, op = 'shard'): [number, number] {
  const { shardIndex: i, shardCount: n, dropRemainder } = checkShardOptions(op, options);
  if (!Number.isSafeInteger(length) || length < 0) throw new RangeError(`${op}: can only shard a finite dataset; length is ${length}`);
  const base = Math.floor(length / n);
  if (dropRemainder) return [i * base, (i + 1) * base];
  const r = length % n;
  const start = i * base + Math.min(i, r);
  return [start, start + base + (i < r ? 1 : 0)];
}
