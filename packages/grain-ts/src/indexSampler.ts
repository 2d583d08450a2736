/**
 * `IndexSampler` (Grain's sampler for the `DataLoader` path): which record each step reads.
 * The process's shard is taken first (a contiguous even split of `[0, numRecords)`), then
 * shuffled globally per epoch with the seeded index permutation, then repeated `numEpochs`
 * times. Step `k` of shard `s` of `n` has the global index `k * n + s` (the index the
 * per-record random stream is keyed by) and reads `recordKey`.
 */
import { MapDataset } from './mapDataset';
import { type ShardOptions, checkShardOptions, noSharding } from './sharding';

export interface IndexSamplerOptions {
  numRecords: number;
  shardOptions?: ShardOptions;
  shuffle?: boolean;
  /** Passes over the shard; `null` for endless. Default 1. */
  numEpochs?: number | null;
  seed?: number | null;
}

export interface RecordMetadata {
  /** Global index of this step across shards. */
  index: number;
  /** Which record of the source to read. */
  recordKey: number;
}

export class IndexSampler {
  readonly options: Required<Omit<IndexSamplerOptions, 'seed'>> & { seed: number | null };
  readonly #keys: MapDataset<number>;
  readonly #shardCount: number;
  readonly #shardIndex: number;

  constructor(options: IndexSamplerOptions) {
    const { numRecords } = options ?? ({} as IndexSamplerOptions);
    if (!Number.isSafeInteger(numRecords) || numRecords < 0) throw new RangeError(`IndexSampler: numRecords must be an integer >= 0; got ${numRecords}`);
    const shard = checkShardOptions('IndexSampler', options.shardOptions ?? noSharding);
    const shuffle = options.shuffle ?? false;
    const numEpochs = options.numEpochs === undefined ? 1 : options.numEpochs;
    if (numEpochs !== null && (!Number.isSafeInteger(numEpochs) || numEpochs < 1)) {
      throw new RangeError(`IndexSampler: numEpochs must be an integer >= 1 or null (endless); got ${numEpochs}`);
    }
    if (shuffle && (options.seed === undefined || options.seed === null)) throw new Error('IndexSampler: shuffle: true needs a seed');
    this.options = { numRecords, shardOptions: shard, shuffle, numEpochs, seed: options.seed ?? null };
    let keys = MapDataset.range(numRecords).shard(shard);
    if (shuffle) keys = keys.shuffle({ seed: options.seed! });
    if (keys.length > 0) keys = keys.repeat(numEpochs ?? undefined);
    this.#keys = keys;
    this.#shardCount = shard.shardCount;
    this.#shardIndex = shard.shardIndex;
  }

  /** Steps this shard takes (Infinity when endless). */
  get length(): number {
    return this.#keys.length;
  }

  get(step: number): RecordMetadata {
    return { index: step * this.#shardCount + this.#shardIndex, recordKey: this.#keys.get(step)! };
  }

  /** The sampler as text (saved with a DataLoader state and checked on restore, as Grain does with repr). */
  describe(): string {
    const o = this.options;
    return `IndexSampler(numRecords=${o.numRecords}, shard=${o.shardOptions.shardIndex}/${o.shardOptions.shardCount}${o.shardOptions.dropRemainder ? ' drop' : ''}, shuffle=${o.shuffle}, numEpochs=${o.numEpochs}, seed=${o.seed})`;
  }
}
