/**
 * Elastic sharding: iterate a global `MapDataset` as shard `k` of `n` (global indices
 * `j ≡ base + k mod n`), with a state that can be restored under a different shard count
 * (Grain's `ElasticIterator`, which refuses filters and packing). Restoring with a new count
 * takes the saved states of all old shards: the frontier `F` is the smallest index any old
 * shard had not reached, new shard `k'` reads `F + k', F + k' + n', ...`, and skips indices an
 * old shard already consumed (`j < next[(j - base) mod n]`). Every element is read exactly once
 * across the change, filters included, because positions are global indices, not output counts.
 * The old shards' positions ride along in the state until the new shards pass them all.
 *
 * Packing and bucketing hold elements in flight (Grain refuses to reshard them). Given the list
 * of old states, they rewind each old shard to where its oldest unemitted element began, replay
 * what that shard consumed since (impersonating the old shard here) to learn the global indices
 * of elements it had already emitted, and pass those as `done`: every sequence is still read
 * exactly once. Packing restarts with empty bins, so rows differ from an unresharded run.
 */
import { IterDataset } from './iterDataset';
import { DatasetIterator, END, type End, type JsonValue, badState } from './iterator';
import type { MapDataset } from './mapDataset';
import { type ShardOptions, checkShardOptions } from './sharding';

interface Level {
  [k: string]: JsonValue;
  base: number;
  shardCount: number;
  next: number[];
  /** Indices above `next` that were consumed anyway (elements of rows a packer had emitted). */
  done: number[];
}

export interface ElasticState {
  elastic: 1;
  shardIndex: number;
  shardCount: number;
  base: number;
  next: number;
  prior: Level[];
  [k: string]: JsonValue;
}

function isElastic(s: unknown): s is ElasticState {
  return typeof s === 'object' && s !== null && (s as ElasticState).elastic === 1;
}

/** The elastic state inside an operation's state (the `start` of a pack or bucket state, or a pass-through). */
export function findElastic(s: unknown, depth = 0): ElasticState | null {
  if (isElastic(s)) return s;
  if (depth > 16 || typeof s !== 'object' || s === null) return null;
  const o = s as Record<string, unknown>;
  for (const k of ['start', 'parent']) {
    if (k in o) {
      const e = findElastic(o[k], depth + 1);
      if (e) return e;
    }
  }
  return null;
}

export class ElasticIterator<T> extends DatasetIterator<T> {
  readonly ownShardIndex: number;
  readonly ownShardCount: number;
  /** Normally the own shard; a packer replaying an old shard's rows impersonates it briefly. */
  shardIndex: number;
  shardCount: number;
  #base = 0;
  #next: number;
  #last = Number.NaN;
  #prior: Level[] = [];
  #doneSets: Set<number>[] = [];

  constructor(readonly ds: MapDataset<T>, shardOptions: ShardOptions) {
    super();
    const o = checkShardOptions('ElasticIterator', shardOptions);
    this.shardIndex = this.ownShardIndex = o.shardIndex;
    this.shardCount = this.ownShardCount = o.shardCount;
    this.#next = o.shardIndex;
  }

  #consumedBefore(j: number): boolean {
    for (let i = 0; i < this.#prior.length; i++) {
      const p = this.#prior[i];
      if (j < p.base) continue;
      const k = (j - p.base) % p.shardCount;
      if (j < p.next[k] || this.#doneSets[i].has(j)) return true;
    }
    return false;
  }

  override lastIndex(): number {
    return this.#last;
  }

  /** The global dataset, not the shard: states of any shard count restore each other. */
  override describe(): string {
    return `elastic(${this.ds.describe()})`;
  }

  #setPrior(prior: Level[]): void {
    this.#prior = prior.map((p) => ({ base: p.base, shardCount: p.shardCount, next: [...p.next], done: [...(p.done ?? [])] }));
    this.#doneSets = this.#prior.map((p) => new Set(p.done));
  }

  /**
   * @internal Positions this iterator as another shard (`state` is that shard's own state), for
   * replaying what an old shard read; the next `setState` restores this iterator's own shard.
   */
  impersonate(state: ElasticState): void {
    this.shardIndex = state.shardIndex;
    this.shardCount = state.shardCount;
    this.#base = state.base;
    this.#next = state.next;
    this.#setPrior(state.prior);
  }

  nextOrEnd(): T | End {
    const n = this.ds.length;
    while (this.#next < n) {
      const j = this.#next;
      this.#next += this.shardCount;
      if (this.#prior.length > 0 && this.#consumedBefore(j)) continue;
      const v = this.ds.get(j);
      if (v !== undefined) {
        this.#last = j;
        return v;
      }
    }
    return END;
  }

  innerState(): ElasticState {
    return { elastic: 1, shardIndex: this.shardIndex, shardCount: this.shardCount, base: this.#base, next: this.#next, prior: this.#prior.map((p) => ({ ...p, next: [...p.next], done: [...p.done] })) };
  }

  /**
   * Restores from this shard's own state (same shard count), or from the states of every shard
   * of the run being resumed (any shard count). States of operations above the elastic
   * iterator (batch, pack, ...) are accepted and searched for the elastic part.
   */
  setInnerState(state: JsonValue | JsonValue[]): void {
    this.shardIndex = this.ownShardIndex;
    this.shardCount = this.ownShardCount;
    let done: number[] = [];
    if (!Array.isArray(state) && state && typeof state === 'object' && Array.isArray((state as { reshard?: unknown }).reshard)) {
      done = ((state as { done?: number[] }).done ?? []).slice();
      state = (state as { reshard: JsonValue[] }).reshard;
    }
    if (!Array.isArray(state) || isElastic(state)) {
      const s = findElastic(state);
      if (!s) badState('ElasticIterator', 'no elastic state found (expected { elastic: 1, ... } or a list of every old shard\'s state)', state);
      if (s.impersonate === true) {
        this.impersonate(s);
        return;
      }
      if (s.shardCount !== this.shardCount || s.shardIndex !== this.shardIndex) {
        throw new Error(`ElasticIterator.setState: the state is shard ${s.shardIndex} of ${s.shardCount} but this iterator is shard ${this.shardIndex} of ${this.shardCount}; to change the shard count pass the states of all ${s.shardCount} old shards`);
      }
      this.#base = s.base;
      this.#next = s.next;
      this.#setPrior(s.prior);
      return;
    }
    const olds = state.map((x, i) => {
      const e = findElastic(x);
      if (!e) badState('ElasticIterator', `states[${i}] has no elastic state`, x);
      return e;
    });
    const n = olds[0].shardCount;
    if (olds.length !== n || olds.some((o) => o.shardCount !== n)) {
      throw new Error(`ElasticIterator.setState: got ${olds.length} states with shard counts [${olds.map((o) => o.shardCount).join(', ')}]; pass the states of all shards of one run (${n} expected)`);
    }
    const next = new Array<number>(n);
    for (const o of olds) {
      if (next[o.shardIndex] !== undefined) throw new Error(`ElasticIterator.setState: shard ${o.shardIndex} appears twice`);
      next[o.shardIndex] = o.next;
    }
    const level: Level = { base: olds[0].base, shardCount: n, next, done: done.sort((a, b) => a - b) };
    const frontier = Math.min(...next);
    this.#base = frontier;
    this.#next = frontier + this.shardIndex;
    // Older levels (from earlier reshards) still matter where some index above the frontier was
    // consumed by them; shards of one run may have saved them, so take the union.
    const seen = new Set<string>();
    const prior: Level[] = [];
    for (const p of [...olds.flatMap((o) => o.prior), level]) {
      const key = JSON.stringify(p);
      const pDone = p.done ?? [];
      if (seen.has(key) || (Math.max(...p.next) <= frontier && pDone.every((d) => d < frontier))) continue;
      seen.add(key);
      prior.push(p);
    }
    this.#setPrior(prior);
  }
}

/** A global MapDataset read as one elastic shard; chain IterDataset operations on it. */
export class ElasticDataset<T> extends IterDataset<T> {
  constructor(readonly ds: MapDataset<T>, readonly shardOptions: ShardOptions) {
    super();
    checkShardOptions('ElasticDataset', shardOptions);
  }
  iterator(): ElasticIterator<T> {
    return new ElasticIterator(this.ds, this.shardOptions);
  }
}

