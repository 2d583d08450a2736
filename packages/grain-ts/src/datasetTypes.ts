/**
 * The plain types datasets share: random-access sources and `toIterDataset` options (mapDataset.ts,
 * mapToIter.ts), and the rows, options and padding statistics of packing and padding
 * (packing.ts, padding.ts, and the `IterDataset` methods they install). Types only, below
 * every dataset module, so those modules need not import each other for them.
 */
import type { WorkerSpec } from './workerPool';

/** What `MapDataset.source` accepts: any `{ length, get(i) }`, or a plain JS array. */
export interface RandomAccessDataSource<T> {
  readonly length: number;
  get(index: number): T;
}

export interface ToIterOptions {
  /** Threads computing elements (0: on the calling thread). Output is the same for any count. */
  workerCount?: number;
  /** Elements computed ahead per worker. */
  prefetch?: number;
  /** How workers rebuild this dataset (required when `workerCount > 0`). */
  worker?: WorkerSpec;
  /** Elements per request to a worker (default 16). Larger chunks amortise messaging for small elements. */
  chunkSize?: number;
}

export type Sequence = Int32Array | readonly number[];

/** One packed (or padded) row. Features other than `tokens` are packed alongside with the same layout. */
export interface PackedRow {
  tokens: Int32Array;
  segmentIds: Int32Array;
  positions: Int32Array;
  /** Real (non-pad) tokens in the row. */
  numTokens: number;
  /** Sequences in the row. */
  numSegments: number;
  [feature: string]: Int32Array | number;
}

export interface PaddingStats {
  rows: number;
  realTokens: number;
  totalTokens: number;
  /** Fraction of pad tokens: `1 - realTokens / totalTokens`. */
  waste: number;
}

export interface PackOptions {
  /** Row length in tokens. */
  length: number;
  /** Rows filled at once (default 16); more bins pack tighter but hold more elements in flight. */
  numBins?: number;
  /** Most sequences per row (default no limit). */
  maxSequencesPerBin?: number;
  /** A sequence longer than `length`: 'error' (default), 'truncate' to `length`, or 'split' into pieces. */
  overflow?: 'error' | 'truncate' | 'split';
  padId?: number;
}

export interface PadOptions {
  padId?: number;
  /** A longer sequence: 'error' (default) or 'truncate'. */
  overflow?: 'error' | 'truncate';
}

export interface BucketOptions {
  /** Ascending upper bounds (inclusive) of sequence length per bucket; rows are padded to them. */
  bucketBoundaries: number[];
  /** Batch size per bucket (one per boundary). */
  bucketBatchSizes: number[];
  padId?: number;
  /** Drop partly filled buckets at the end instead of emitting smaller batches. */
  dropRemainder?: boolean;
  /** A sequence longer than the last boundary: 'error' (default), 'truncate' or 'drop'. */
  overflow?: 'error' | 'truncate' | 'drop';
}

/** What a `toIterDataset` stream reads (a `MapDataset`): `get(i)` is `undefined` where an element is filtered out. */
export interface IndexedDataset<T> {
  readonly length: number;
  get(index: number): T | undefined;
  describe(): string;
}
