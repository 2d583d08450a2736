/**
 * Input pipelines from the config (MaxText's `dataset_type`): `grain` reads text, JSONL or
 * TFRecord files through grain-ts (seeded shuffle reseeded per epoch, byte-level tokens, first-fit
 * packing with segment ids and positions, or padding when `packing: false`); `synthetic` draws
 * uniform random tokens per step from the seed (for benchmarks). Rows hold
 * `max_target_length + 1` tokens (inputs and shifted targets). Both iterators are Checkpointable
 * with small JSON state, saved as the checkpoint's `iter` item.
 */
import { existsSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { type Array, type Checkpointable, np, random } from '@tpukit/core';
import { ByteTokenizer, JsonLinesDataSource, MapDataset, padToLength, TextLineDataSource, TFRecordDataSource } from '@tpukit/grain-ts';
import { type Config, ConfigError, configPath } from './config';
import type { Batch } from './model';

export interface DataIterator extends Checkpointable<unknown> {
  next(): Batch;
}

/** Files matching `pattern` (a path, or a glob with * and ? in the file name), resolved against the config's folder. */
export function resolveFiles(c: Config, pattern: string): string[] {
  const out: string[] = [];
  for (const part of pattern.split(',').map((s) => s.trim()).filter(Boolean)) {
    const full = configPath(c, part);
    const name = basename(full);
    if (!/[*?]/.test(name)) {
      if (!existsSync(full)) throw new ConfigError(`config ${c.source}: grain_train_files: ${full} does not exist`);
      out.push(full);
      continue;
    }
    const re = new RegExp(`^${name.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`);
    const dir = dirname(full);
    const hits = existsSync(dir) ? readdirSync(dir).filter((f) => re.test(f)).sort().map((f) => join(dir, f)) : [];
    if (hits.length === 0) throw new ConfigError(`config ${c.source}: grain_train_files: no file matches ${full}`);
    out.push(...hits);
  }
  return out;
}

function documents(c: Config): MapDataset<string> {
  const files = resolveFiles(c, c.grain_train_files);
  switch (c.grain_file_type) {
    case 'text':
      return MapDataset.source(new TextLineDataSource(files));
    case 'jsonl':
      return MapDataset.source(new JsonLinesDataSource<Record<string, unknown>>(files)).map((row) => {
        const v = row?.[c.grain_text_field];
        if (typeof v !== 'string') throw new TypeError(`grain: a JSONL row has no string field ${JSON.stringify(c.grain_text_field)} (grain_text_field); got ${JSON.stringify(row).slice(0, 80)}`);
        return v;
      });
    case 'tfrecord': {
      const dec = new TextDecoder();
      return MapDataset.source(new TFRecordDataSource(files)).map((r: Uint8Array) => dec.decode(r));
    }
    default:
      return c.grain_file_type satisfies never;
  }
}

/** The grain-ts pipeline of the config, as a dataset (iterate it for batches). */
export function grainDataset(c: Config) {
  const tok = new ByteTokenizer();
  const rowLength = c.max_target_length + 1;
  const tokens = documents(c)
    .shuffle({ seed: c.data_shuffle_seed })
    .repeat()
    .map((text: string) => tok.encode(text));
  const rows = c.packing ? tokens.toIterDataset().pack({ length: rowLength, numBins: 4, overflow: 'split' }) : tokens.map((t: Int32Array) => padToLength(t, rowLength, { overflow: 'truncate' })).toIterDataset();
  return rows.batch({ batchSize: c.global_batch_size_to_load, dropRemainder: true });
}

class GrainIterator implements DataIterator {
  readonly #it;
  constructor(c: Config) {
    this.#it = grainDataset(c).iterator();
  }
  next(): Batch {
    const r = this.#it.next();
    if (r.done) throw new Error('grain: the input pipeline ended (it repeats forever, so this is a bug)');
    const b = r.value as Record<string, Array>;
    return { tokens: b.tokens, segmentIds: b.segmentIds, positions: b.positions };
  }
  getState(): unknown {
    return this.#it.getState();
  }
  setState(s: unknown): void {
    this.#it.setState(s as never);
  }
}

/** Uniform random tokens, one key per step (fold_in(seed, step)); state: the next step. */
class SyntheticIterator implements DataIterator {
  #step = 0;
  readonly #segments: Array;
  readonly #positions: Array;
  constructor(readonly c: Config) {
    const shape = [c.global_batch_size_to_load, c.max_target_length + 1];
    this.#segments = np.ones(shape, 'int32');
    this.#positions = np.broadcastTo(np.arange(shape[1], undefined, undefined, 'int32'), shape);
  }
  next(): Batch {
    const key = random.foldIn(random.key(this.c.data_shuffle_seed), this.#step++);
    const tokens = random.randint(key, [this.c.global_batch_size_to_load, this.c.max_target_length + 1], 0, this.c.vocab_size);
    return { tokens, segmentIds: this.#segments, positions: this.#positions };
  }
  getState(): unknown {
    return { step: this.#step };
  }
  setState(s: unknown): void {
    const step = (s as { step?: unknown })?.step;
    if (!Number.isInteger(step) || (step as number) < 0) throw new TypeError(`synthetic data: state must be { step: integer >= 0 }; got ${JSON.stringify(s)}`);
    this.#step = step as number;
  }
}

export function makeDataIterator(c: Config): DataIterator {
  return c.dataset_type === 'grain' ? new GrainIterator(c) : new SyntheticIterator(c);
}
