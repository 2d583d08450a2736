/**
 * `pnpm bench:grain`: input-pipeline throughput of @tpukit/grain-ts on a synthetic corpus,
 * against the naive peer a user would write (read the whole file, split lines, JSON.parse /
 * a plain loop), measured in the same run. Prints records/s for JSONL and TFRecord reading,
 * tokens/s for tokenize + pack + batch with 0, 1 and 2 worker threads, the packing + batching
 * rate alone, and the time to the first batch. Worker threads load a small .mjs module written
 * to the temp folder, whose `buildTokenized` is the same as the one here.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BpeTokenizer, JsonLinesDataSource, MapDataset, Rng, TFRecordDataSource, TextLineDataSource, writeTFRecord } from '@tpukit/grain-ts';

const WORDS = 'the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so no will more can out up said about other into than its time only could new them man some these then two first may any like now my such make over our even most after'.split(' ');

function makeCorpus(lines: number): string[] {
  const rng = new Rng(1, 0);
  const out: string[] = [];
  for (let i = 0; i < lines; i++) {
    const n = 8 + rng.integers(0, 120);
    const ws: string[] = [];
    for (let k = 0; k < n; k++) ws.push(WORDS[Math.floor(Math.sqrt(rng.random()) * WORDS.length)]);
    out.push(ws.join(' '));
  }
  return out;
}

/** Worker entry: the tokenizing dataset over the text file (the same on every thread). */
export function buildTokenized(args: { textPath: string; tokenizer: unknown; epochs: number }) {
  const tok = BpeTokenizer.fromJSON(args.tokenizer);
  return MapDataset.source(new TextLineDataSource(args.textPath))
    .map((line) => tok.encode(line))
    .repeat(args.epochs);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function time(fn: () => void, runs = 5): number {
  fn();
  const t: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    t.push(performance.now() - t0);
  }
  return median(t);
}

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), 'grain-bench-'));
  try {
    const lines = makeCorpus(20_000);
    const textPath = join(dir, 'corpus.txt');
    const jsonlPath = join(dir, 'corpus.jsonl');
    const tfPath = join(dir, 'corpus.tfrecord');
    writeFileSync(textPath, `${lines.join('\n')}\n`);
    writeFileSync(jsonlPath, `${lines.map((text, id) => JSON.stringify({ id, text })).join('\n')}\n`);
    const enc = new TextEncoder();
    writeTFRecord(tfPath, lines.map((l) => enc.encode(l)));
    const n = lines.length;
    const fmt = (perMs: number) => `${((perMs * 1e3) / 1e6).toFixed(2)} M`;
    console.log(`grain-ts pipeline bench: ${n} lines, ${(readFileSync(textPath).length / 1e6).toFixed(1)} MB text (median of 5 runs; shared machine, numbers are noisy)`);

    // JSONL reading.
    const tJsonl = time(() => {
      const src = new JsonLinesDataSource<{ id: number }>(jsonlPath);
      let s = 0;
      for (const r of MapDataset.source(src)) s += r.id;
      src.close();
    });
    const tJsonlNaive = time(() => {
      let s = 0;
      for (const l of readFileSync(jsonlPath, 'utf8').split('\n')) if (l) s += JSON.parse(l).id;
    });
    console.log(`JSONL read (index + iterate)     ${fmt(n / tJsonl)} records/s   naive readFile+split+parse ${fmt(n / tJsonlNaive)}  ratio ${(tJsonlNaive / tJsonl).toFixed(2)}`);
    const tTf = time(() => {
      const src = new TFRecordDataSource(tfPath);
      let s = 0;
      for (const r of MapDataset.source(src)) s += r.length;
      src.close();
    });
    const tTfNaive = time(() => {
      const b = readFileSync(tfPath);
      let s = 0;
      for (let p = 0; p < b.length;) {
        const len = b.readUInt32LE(p);
        s += b.subarray(p + 12, p + 12 + len).slice().length;
        p += 16 + len;
      }
    });
    console.log(`TFRecord read (CRC-checked)      ${fmt(n / tTf)} records/s   naive readFile, no CRC ${fmt(n / tTfNaive)}  ratio ${(tTfNaive / tTf).toFixed(2)}`);

    // Tokenize + pack + batch.
    const tok = BpeTokenizer.train(lines.slice(0, 2000), { vocabSize: 512 });
    const tokenized = lines.map((l) => tok.encode(l));
    const totalTokens = tokenized.reduce((a, t) => a + t.length, 0);
    const L = 1024;
    const B = 8;
    const pb = () => {
      const it = MapDataset.source(tokenized).toIterDataset().pack({ length: L, numBins: B }).batch({ batchSize: B }).iterator();
      for (const _ of it);
      return it;
    };
    const tPack = time(pb);
    const naivePack = () => {
      // The loop a user writes: greedy next-fit into one row at a time, then stack rows.
      let row = new Int32Array(L);
      let used = 0;
      const rows: Int32Array[] = [];
      for (const t of tokenized) {
        if (used + t.length > L) {
          rows.push(row);
          row = new Int32Array(L);
          used = 0;
        }
        row.set(t, used);
        used += t.length;
      }
      rows.push(row);
      return rows.length;
    };
    const tNaivePack = time(naivePack);
    console.log(`pack + batch (first-fit, ${B} bins, [${B},${L}] int32 Arrays)  ${fmt(totalTokens / tPack)} tokens/s   naive next-fit loop (no segment ids, no Arrays) ${fmt(totalTokens / tNaivePack)}  ratio ${(tNaivePack / tPack).toFixed(2)}`);

    // Padding waste per strategy on this corpus (fraction of pad tokens; deterministic).
    const seqDs = MapDataset.source(tokenized).toIterDataset();
    const maxLen = tokenized.reduce((a, t) => Math.max(a, t.length), 0);
    const padIt = seqDs.padToLength(maxLen).iterator();
    for (const _ of padIt);
    const q = [...tokenized.map((t) => t.length)].sort((a, b) => a - b);
    const bounds = [...new Set([q[Math.floor(q.length / 4)], q[Math.floor(q.length / 2)], q[Math.floor((3 * q.length) / 4)], maxLen])];
    const bucketIt = seqDs.bucketBySequenceLength({ bucketBoundaries: bounds, bucketBatchSizes: bounds.map(() => B) }).iterator();
    for (const _ of bucketIt);
    const packIt = seqDs.pack({ length: L, numBins: B }).iterator();
    for (const _ of packIt);
    // Bucketing throughput: route by length, pad each full bucket to its boundary, collate.
    const tBucket = time(() => {
      const it = seqDs.bucketBySequenceLength({ bucketBoundaries: bounds, bucketBatchSizes: bounds.map(() => B) }).iterator();
      for (const _ of it);
    });
    const tNaiveBucket = time(() => {
      // The loop a user writes: one list per bucket, a padded [B, boundary] block when it fills.
      const lists: Int32Array[][] = bounds.map(() => []);
      let blocks = 0;
      for (const t of tokenized) {
        const j = bounds.findIndex((b) => t.length <= b);
        lists[j].push(t);
        if (lists[j].length === B) {
          const block = new Int32Array(B * bounds[j]);
          lists[j].forEach((r, i) => block.set(r, i * bounds[j]));
          lists[j] = [];
          blocks++;
        }
      }
      return blocks;
    });
    console.log(`bucketBySequenceLength + collate (${bounds.length} buckets, batch ${B})  ${fmt(totalTokens / tBucket)} tokens/s   naive bucket loop (no segment ids, no Arrays) ${fmt(totalTokens / tNaiveBucket)}  ratio ${(tNaiveBucket / tBucket).toFixed(2)}`);
    const pct = (w: number) => `${(100 * w).toFixed(1)}%`;
    console.log(`padding waste: padToLength(${maxLen}) ${pct(padIt.stats.waste)}, bucketBySequenceLength([${bounds.join(', ')}]) ${pct(bucketIt.stats.waste)}, pack(${L}, ${B} bins) ${pct(packIt.stats.waste)}`);

    // Node 20 workers cannot load this .ts file, so the worker module is a small .mjs written here.
    const workerModule = join(dir, 'tokenize-worker.mjs');
    const dist = new URL('../packages/grain-ts/dist/index.js', import.meta.url).href;
    writeFileSync(workerModule, `import { BpeTokenizer, JsonLinesDataSource, MapDataset, TFRecordDataSource, TextLineDataSource } from ${JSON.stringify(dist)};
export function buildJsonl(args) {
  return MapDataset.source(new JsonLinesDataSource(args.path)).repeat(args.epochs);
}
export function buildTfrecord(args) {
  return MapDataset.source(new TFRecordDataSource(args.path)).repeat(args.epochs);
}
export function buildTokenized(args) {
  const tok = BpeTokenizer.fromJSON(args.tokenizer);
  return MapDataset.source(new TextLineDataSource(args.textPath)).map((line) => tok.encode(line)).repeat(args.epochs);
}
`);
    const spec = { module: workerModule, exportName: 'buildTokenized', args: { textPath, tokenizer: tok.toJSON() as never, epochs: 3 } };
    const epochs = buildTokenized({ textPath, tokenizer: tok.toJSON(), epochs: 3 });
    // Reading with workers: records parsed / CRC-checked in worker threads, sent to this thread.
    for (const [name, exportName, path, make] of [
      ['JSONL', 'buildJsonl', jsonlPath, () => MapDataset.source(new JsonLinesDataSource(jsonlPath)).repeat(3)],
      ['TFRecord', 'buildTfrecord', tfPath, () => MapDataset.source(new TFRecordDataSource(tfPath)).repeat(3)],
    ] as const) {
      const ds = make();
      const parts: string[] = [];
      for (const workerCount of [0, 1, 2]) {
        const rates: number[] = [];
        for (let r = 0; r < 3; r++) {
          const it = (ds as MapDataset<unknown>).toIterDataset({ workerCount, prefetch: 1024, chunkSize: 256, worker: { module: workerModule, exportName, args: { path, epochs: 3 } } }).iterator();
          it.next();
          const t1 = performance.now();
          let k = 1;
          for (const _ of it) k++;
          rates.push((k - 1) / (performance.now() - t1));
          it.close();
        }
        parts.push(`workerCount=${workerCount} ${fmt(median(rates))}`);
      }
      console.log(`${name} read, steady state (3 epochs): ${parts.join(', ')} records/s`);
    }

    // Three epochs of the corpus, so steady-state throughput is measured over a few seconds;
    // the first batch (including worker start-up) is timed separately.
    let ref = 0;
    for (const workerCount of [0, 1, 2]) {
      const rates: number[] = [];
      const firsts: number[] = [];
      for (let r = 0; r < 3; r++) {
        const t0 = performance.now();
        const it = epochs.toIterDataset({ workerCount, prefetch: 512, chunkSize: 64, worker: spec }).pack({ length: L, numBins: B }).batch({ batchSize: B }).iterator();
        it.next();
        const t1 = performance.now();
        firsts.push(t1 - t0);
        for (const _ of it);
        const t2 = performance.now();
        it.close();
        const tokensAfterFirst = 3 * totalTokens - B * L; // the first batch holds at most B*L tokens
        rates.push(tokensAfterFirst / (t2 - t1));
      }
      const rate = median(rates);
      if (workerCount === 0) ref = rate;
      console.log(`tokenize + pack + batch, workerCount=${workerCount}: ${fmt(rate)} tokens/s steady  (${(rate / ref).toFixed(2)}x workerCount=0), first batch after ${median(firsts).toFixed(0)} ms`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
