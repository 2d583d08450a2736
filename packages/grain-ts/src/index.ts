/**
 * @tpukit/grain-ts: deterministic, checkpointable, parallel input pipelines (Grain for
 * TypeScript). This file only re-exports the public surface.
 */
import './packing';
import './padding';

export { collate } from './collate';
export { DataLoader, DataLoaderIterator, type DataLoaderOptions } from './dataLoader';
export { ElasticDataset, ElasticIterator, type ElasticState } from './elastic';
export { IndexSampler, type IndexSamplerOptions, type RecordMetadata } from './indexSampler';
export { IndexShuffle } from './indexShuffle';
export { FnIterDataset, IterDataset, type PaddedDataset } from './iterDataset';
export { DatasetIterator, END, type JsonValue, type PipelineState } from './iterator';
export type { BucketOptions, PackOptions, PackedRow, PadOptions, PaddingStats, RandomAccessDataSource, Sequence, ToIterOptions } from './datasetTypes';
export { MapDataset } from './mapDataset';
export { MixSchedule } from './mixSchedule';
export { Batch, type FilterTransform, type MapTransform, type Operation, type RandomMapTransform } from './operations';
export { padToLength } from './padding';
export { Rng, philox4x32 } from './rng';
export { type ShardOptions, evenSplit } from './sharding';
export { crc32c, maskCrc, maskedCrc32c } from './sources/crc32c';
export { JsonLinesDataSource, TextLineDataSource } from './sources/lineFiles';
export { type CorruptRecord, TFRecordDataSource, type TFRecordOptions, writeTFRecord } from './sources/tfrecord';
export { BpeTokenizer, type BpeJson, type BpeTrainOptions } from './tokenizers/bpeTokenizer';
export { ByteTokenizer } from './tokenizers/byteTokenizer';
export type { Tokenizer } from './tokenizers/tokenizer';
export type { WorkerSpec } from './workerPool';
