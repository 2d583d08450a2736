/**
 * The per-record half of a `DataLoader` as a random-access dataset: step `k` reads the record
 * the sampler names and applies the operations before the first `Batch`. The main thread and
 * every worker build it the same way, so worker output equals single-thread output.
 */
import { IndexSampler, type IndexSamplerOptions } from './indexSampler';
import type { JsonValue } from './iterator';
import type { RandomAccessDataSource } from './datasetTypes';
import { type Operation, operationKind } from './operations';
import { Rng, deriveSeed } from './rng';

export interface LoaderParts {
  source: RandomAccessDataSource<unknown>;
  operations?: readonly Operation[];
}

export interface LoaderJob {
  sampler: IndexSamplerOptions;
  /** How many leading operations run per record. */
  perRecord: number;
}

export function describeSourceOf(src: RandomAccessDataSource<unknown>): string {
  const s = src as { describe?: () => string; constructor?: { name?: string } };
  return typeof s.describe === 'function' ? s.describe() : `${Array.isArray(src) ? 'array' : s.constructor?.name ?? 'source'}(len=${src.length})`;
}

/** Step -> processed record (or `undefined` when a filter drops it). */
export function makeLoaderDataset(parts: LoaderParts, sampler: IndexSampler, perRecord: number): { length: number; get(k: number): unknown; describe(): string } {
  const ops = (parts.operations ?? []).slice(0, perRecord);
  const kinds = ops.map((op, i) => operationKind(op, i));
  const seed = sampler.options.seed ?? 0;
  const seeds = ops.map((_, i) => deriveSeed(seed, i));
  const rng = new Rng();
  const src = parts.source;
  if (!src || typeof src.get !== 'function' || typeof src.length !== 'number') {
    throw new TypeError(`DataLoader: source must be { length, get(i) }; got ${src === null ? 'null' : typeof src}`);
  }
  if (src.length < sampler.options.numRecords) {
    throw new RangeError(`DataLoader: sampler.numRecords is ${sampler.options.numRecords} but the source has only ${src.length} records`);
  }
  return {
    length: sampler.length,
    get(k: number): unknown {
      const meta = sampler.get(k);
      let x: unknown = src.get(meta.recordKey);
      for (let i = 0; i < ops.length; i++) {
        switch (kinds[i]) {
          case 'map': x = (ops[i] as { map(x: unknown): unknown }).map(x); break;
          case 'randomMap': x = (ops[i] as { randomMap(x: unknown, r: Rng): unknown }).randomMap(x, rng.reset(seeds[i], meta.index)); break;
          case 'filter': if (!(ops[i] as { filter(x: unknown): boolean }).filter(x)) return undefined; break;
          case 'batch': throw new Error('DataLoader: internal error: a Batch among the per-record operations');
        }
      }
      return x;
    },
    describe: () => `loader(${sampler.describe()}, ${describeSourceOf(src)}, ops=${kinds.join(',')})`,
  };
}

/** What a worker calls with the export of a `DataLoader` worker module. */
export function buildLoaderDataset(made: unknown, job: JsonValue | undefined): { length: number; get(k: number): unknown; describe(): string } {
  const j = job as unknown as LoaderJob;
  const parts = made as LoaderParts;
  if (!parts || typeof parts !== 'object' || !('source' in parts)) {
    throw new TypeError('worker: a DataLoader worker module must return { source, operations }');
  }
  return makeLoaderDataset(parts, new IndexSampler(j.sampler), j.perRecord);
}
