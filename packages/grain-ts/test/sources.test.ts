// File sources: CRC-32C vectors, TFRecord write-then-read identity, every single flipped byte
// detected with an error naming file and offset, skip-and-count mode, JSONL/text random access.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { JsonLinesDataSource, MapDataset, TFRecordDataSource, TextLineDataSource, crc32c, maskedCrc32c, writeTFRecord } from '../src/index';

const dir = mkdtempSync(join(tmpdir(), 'grain-sources-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const enc = new TextEncoder();

describe('crc32c', () => {
  it('matches the standard check values', () => {
    expect(crc32c(enc.encode('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
    // Chunked equals whole.
    const b = enc.encode('The quick brown fox jumps over the lazy dog, twice over.');
    expect(crc32c(b, 13, b.length, crc32c(b, 0, 13))).toBe(crc32c(b));
    // A TFRecord header for an empty record, as TensorFlow writes it.
    expect(maskedCrc32c(new Uint8Array(8))).toBe(((((crc32c(new Uint8Array(8)) >>> 15) | (crc32c(new Uint8Array(8)) << 17)) >>> 0) + 0xa282ead8) >>> 0);
  });
});

describe('TFRecord', () => {
  const recordsArb = fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 12 });

  it('write-then-read is the identity', () => {
    let n = 0;
    fc.assert(
      fc.property(recordsArb, (records) => {
        const p = join(dir, `rt${n++}.tfrecord`);
        writeTFRecord(p, records);
        const src = new TFRecordDataSource(p);
        expect(src.length).toBe(records.length);
        records.forEach((r, i) => expect(Array.from(src.get(i))).toEqual(Array.from(r)));
        src.close();
      }),
      { numRuns: 30 },
    );
  });

  it('detects any single flipped byte, naming the file and byte offset', () => {
    const p = join(dir, 'flip.tfrecord');
    writeTFRecord(p, [enc.encode('alpha'), enc.encode(''), enc.encode('a longer third record')]);
    const good = readFileSync(p);
    const q = join(dir, 'flipped.tfrecord');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: good.length - 1 }), fc.integer({ min: 1, max: 255 }), (at, mask) => {
        const bad = Buffer.from(good);
        bad[at] ^= mask;
        writeFileSync(q, bad);
        expect(() => {
          const src = new TFRecordDataSource(q);
          try {
            for (let i = 0; i < src.length; i++) src.get(i);
          } finally {
            src.close();
          }
        }).toThrow(/TFRecordDataSource: corrupt record .*flipped\.tfrecord at byte offset \d+: (length CRC|data CRC|truncated)/);
      }),
      { numRuns: 120 },
    );
  });

  it('skip mode: one flipped byte loses exactly the record it hit, the rest come back in order', () => {
    const recs = ['first record', 'second', 'the third record is longer', 'fourth'].map((x) => enc.encode(x));
    const p = join(dir, 'skip.tfrecord');
    writeTFRecord(p, recs);
    const good = readFileSync(p);
    const q = join(dir, 'skip-bad.tfrecord');
    const starts = recs.reduce<number[]>((a, r, i) => [...a, i === 0 ? 0 : a[i - 1] + 16 + recs[i - 1].length], []);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: good.length - 1 }), fc.integer({ min: 1, max: 255 }), (at, mask) => {
        const bad = Buffer.from(good);
        bad[at] ^= mask;
        writeFileSync(q, bad);
        const hit = starts.filter((st) => st <= at).length - 1;
        const src = new TFRecordDataSource(q, { onCorrupt: 'skip' });
        const got = [...Array(src.length).keys()].map((i) => new TextDecoder().decode(src.get(i)));
        src.close();
        expect(got).toEqual(recs.filter((_, i) => i !== hit).map((r) => new TextDecoder().decode(r)));
        expect(src.skipped).toBe(1);
        expect(src.corrupt[0].offset).toBe(starts[hit]);
      }),
      { numRuns: 80 },
    );
  });

  it('a truncated file names the offset; skip mode counts and resynchronises', () => {
    const p = join(dir, 'trunc.tfrecord');
    writeTFRecord(p, ['one', 'two', 'three'].map((s) => enc.encode(s)));
    const full = readFileSync(p);
    writeFileSync(p, full.subarray(0, full.length - 3));
    expect(() => new TFRecordDataSource(p)).toThrow(/trunc\.tfrecord at byte offset 38: truncated record: length 5 needs 21 bytes but only 18 remain/);
    const bad = Buffer.from(full);
    bad[12 + 1] ^= 1; // data of record 0
    writeFileSync(p, bad);
    const src = new TFRecordDataSource(p, { onCorrupt: 'skip' });
    expect(src.length).toBe(2);
    expect(src.skipped).toBe(1);
    expect(src.corrupt[0]).toMatchObject({ offset: 0, reason: expect.stringMatching(/data CRC mismatch/) });
    expect(new TextDecoder().decode(src.get(0))).toBe('two');
    src.close();
  });

  it('records larger than the 1 MiB read block round-trip and are CRC-checked', () => {
    const p = join(dir, 'large.tfrecord');
    const big = new Uint8Array(1_500_000).map((_, i) => (i * 31) & 255);
    writeTFRecord(p, [enc.encode('small'), big, enc.encode('after')]);
    const src = new TFRecordDataSource(p);
    expect(src.get(1).length).toBe(big.length);
    expect(src.get(1).every((v, i) => v === big[i])).toBe(true);
    expect(new TextDecoder().decode(src.get(2))).toBe('after');
    src.close();
    const bad = readFileSync(p);
    bad[12 + 5 + 4 + 12 + 700_000] ^= 4;
    writeFileSync(p, bad);
    const src2 = new TFRecordDataSource(p);
    expect(() => src2.get(1)).toThrow(/corrupt record 1 in .*large\.tfrecord at byte offset 21: data CRC mismatch/);
    src2.close();
  });

  it('reads several files as one source and works with MapDataset', () => {
    const a = join(dir, 'a.tfrecord');
    const b = join(dir, 'b.tfrecord');
    writeTFRecord(a, ['a0', 'a1']);
    writeTFRecord(b, ['b0']);
    const src = new TFRecordDataSource([a, b]);
    expect(MapDataset.source(src).map((r) => new TextDecoder().decode(r)).toArray()).toEqual(['a0', 'a1', 'b0']);
    expect(src.locate(2)).toEqual({ file: b, offset: 0, length: 2 });
    expect(src.get(0).constructor).toBe(Uint8Array);
    expect(() => src.get(3)).toThrow(/index must be an integer in \[0, 3\); got 3/);
    src.close();
  });
});

describe('line files', () => {
  it('text lines by offset, with \\r\\n and no final newline', () => {
    const p = join(dir, 'x.txt');
    writeFileSync(p, 'first\r\nsecond\n\nfourth é');
    const src = new TextLineDataSource(p);
    expect(src.length).toBe(4);
    expect([3, 0, 2, 1].map((i) => src.get(i))).toEqual(['fourth é', 'first', '', 'second']);
    src.close();
  });

  it('lines crossing 1 MiB block edges (\\r\\n split across blocks) match a plain split', () => {
    const p = join(dir, 'big.txt');
    const lines = Array.from({ length: 40_000 }, (_, i) => 'x'.repeat((i * 37) % 101) + i);
    writeFileSync(p, lines.join('\r\n'));
    const src = new TextLineDataSource(p);
    expect(src.length).toBe(lines.length);
    for (let i = 0; i < lines.length; i += 1) if (src.get(i) !== lines[i]) expect(src.get(i)).toBe(lines[i]);
    src.close();
    expect(() => new TextLineDataSource(join(dir, 'missing.txt'))).toThrow(/TextLineDataSource: cannot open .*missing\.txt/);
    expect(() => new JsonLinesDataSource([])).toThrow(/expected a path or a non-empty list of paths; got \[\]/);
  });

  it('JSON Lines: random access, blank lines skipped, bad JSON names file and offset', () => {
    const p = join(dir, 'x.jsonl');
    const rows = Array.from({ length: 500 }, (_, i) => ({ i, text: `row ${i}` }));
    writeFileSync(p, `${rows.map((r) => JSON.stringify(r)).join('\n')}\n\n{"broken": \n`);
    const src = new JsonLinesDataSource<{ i: number }>(p);
    expect(src.length).toBe(501);
    expect(src.get(321)).toEqual(rows[321]);
    expect(src.get(0)).toEqual(rows[0]);
    expect(() => src.get(500)).toThrow(/invalid JSON in .*x\.jsonl record 500 \(byte offset \d+\)/);
    src.close();
  });
});
