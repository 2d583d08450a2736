// Language-model helpers: tokenizers round-trip and save/load; packing never splits, mixes or
// loses a sequence; padding and bucketing give fixed shapes; each reports its padding waste.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BpeTokenizer, ByteTokenizer, MapDataset, padToLength } from '../src/index';

const corpus = ['the cat sat on the mat', 'the dog sat on the log', 'a cat and a dog', 'naïve café déjà vu 123 456'];

describe('tokenizers', () => {
  it('byte-level round-trips any valid text', () => {
    const t = new ByteTokenizer({ specialTokens: ['<pad>', '<eos>'] });
    fc.assert(fc.property(fc.string({ unit: 'grapheme' }), (s) => {
      expect(t.decode(t.encode(s))).toBe(s);
    }), { numRuns: 100 });
    expect(t.specialId('<eos>')).toBe(257);
    expect(t.vocabSize).toBe(258);
    expect(() => t.specialId('<bos>')).toThrow(/unknown special token "<bos>"/);
  });

  it('BPE training is deterministic, merges frequent pairs, saves and loads as JSON, and round-trips', () => {
    const t = BpeTokenizer.train(corpus, { vocabSize: 300, specialTokens: ['<eos>'] });
    const t2 = BpeTokenizer.train([...corpus].reverse(), { vocabSize: 300, specialTokens: ['<eos>'] });
    expect(t2.merges).toEqual(t.merges);
    expect(t.encode('the cat').length).toBeLessThan(7);
    const loaded = BpeTokenizer.fromJSON(JSON.parse(JSON.stringify(t)));
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (s) => {
        const ids = t.encode(s);
        expect(Array.from(loaded.encode(s))).toEqual(Array.from(ids));
        expect(t.decode(ids)).toBe(s);
      }),
      { numRuns: 100 },
    );
    expect(t.specialId('<eos>')).toBe(256 + t.merges.length);
    expect(() => BpeTokenizer.train(corpus, { vocabSize: 100 })).toThrow(/vocabSize must be an integer >= 256/);
    expect(() => BpeTokenizer.fromJSON({ type: 'bpe', version: 1, merges: [[300, 1]] })).toThrow(/merge 0 is \[300, 1\] but may only use ids below 256/);
  });
});

const seqArb = fc.array(fc.integer({ min: 1, max: 20 }), { maxLength: 40 });

describe('packing', () => {
  it('never splits a sequence, never mixes segments, loses no token', () => {
    fc.assert(
      fc.property(seqArb, fc.integer({ min: 1, max: 6 }), fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }), (lens, bins, maxSeg) => {
        const seqs = lens.map((n, k) => Int32Array.from({ length: n }, (_, i) => k * 1000 + i + 1));
        const rows = MapDataset.source(seqs).toIterDataset().pack({ length: 20, numBins: bins, maxSequencesPerBin: maxSeg }).toArray();
        const found: number[][] = [];
        for (const r of rows) {
          expect(r.tokens.length).toBe(20);
          if (maxSeg) expect(r.numSegments).toBeLessThanOrEqual(maxSeg);
          let real = 0;
          for (let s = 1; s <= r.numSegments; s++) {
            const idx = [...r.segmentIds.keys()].filter((i) => r.segmentIds[i] === s);
            // A segment is contiguous, its positions count from 0, and it is exactly one whole input sequence.
            expect(idx).toEqual(idx.map((_, j) => idx[0] + j));
            expect(idx.map((i) => r.positions[i])).toEqual(idx.map((_, j) => j));
            const toks = idx.map((i) => r.tokens[i]);
            const k = Math.floor((toks[0] - 1) / 1000);
            expect(toks).toEqual(Array.from(seqs[k]));
            found.push(toks);
            real += toks.length;
          }
          expect(r.numTokens).toBe(real);
          expect([...r.segmentIds].slice(real).every((x) => x === 0)).toBe(true);
        }
        expect(found.length).toBe(seqs.length);
        expect(found.map((t) => Math.floor((t[0] - 1) / 1000)).sort((a, b) => a - b)).toEqual(seqs.map((_, k) => k));
      }),
      { numRuns: 80 },
    );
  });

  it('overflow: error by default, split on request (pieces in order, no token lost)', () => {
    const long = Int32Array.from({ length: 23 }, (_, i) => i + 1);
    expect(() => MapDataset.source([long]).toIterDataset().pack({ length: 10 }).toArray()).toThrow(/a sequence of length 23 does not fit rows of length 10; pass overflow/);
    const rows = MapDataset.source([long]).toIterDataset().pack({ length: 10, overflow: 'split', numBins: 4 }).toArray();
    expect(rows.flatMap((r) => [...r.tokens].filter((_, i) => r.segmentIds[i] > 0))).toEqual(Array.from(long));
  });

  it('batches packed rows as int32 core Arrays and reports waste per strategy', () => {
    const seqs = MapDataset.range(64).map((i) => Int32Array.from({ length: 1 + ((i * 7) % 13) }, () => i + 1));
    const packed = seqs.toIterDataset().pack({ length: 16, numBins: 8 });
    const it = packed.batch({ batchSize: 4 }).iterator();
    const b = it.next().value as any;
    expect(b.tokens.shape).toEqual([4, 16]);
    expect(b.segmentIds.dtype).toBe('int32');
    expect(b.positions.dtype).toBe('int32');
    expect(b.numTokens.shape).toEqual([4]);
    const pit = packed.iterator();
    [...pit];
    const padIt = seqs.toIterDataset().padToLength(16).iterator();
    [...padIt];
    const bucketIt = seqs.toIterDataset().bucketBySequenceLength({ bucketBoundaries: [4, 8, 16], bucketBatchSizes: [4, 4, 4] }).iterator();
    const shapes = new Set([...bucketIt].map((x: any) => x.tokens.shape.join('x')));
    for (const s of shapes) expect(['4x4', '4x8', '4x16', '3x4', '2x4', '1x4', '3x8', '2x8', '1x8', '3x16', '2x16', '1x16']).toContain(s);
    const real = seqs.toArray().reduce((a, s) => a + s.length, 0);
    for (const st of [pit.stats, padIt.stats, bucketIt.stats]) expect(st.realTokens).toBe(real);
    expect(pit.stats.waste).toBeLessThan(padIt.stats.waste);
    expect(bucketIt.stats.waste).toBeLessThan(padIt.stats.waste);
    expect(padIt.stats.waste).toBeCloseTo(1 - real / (64 * 16), 10);
  });

  it('padToLength pads with segment ids 1/0 and rejects long sequences unless truncating', () => {
    const r = padToLength([5, 6], 4, { padId: 9 });
    expect(Array.from(r.tokens)).toEqual([5, 6, 9, 9]);
    expect(Array.from(r.segmentIds)).toEqual([1, 1, 0, 0]);
    expect(() => padToLength([1, 2, 3], 2)).toThrow(/length 3 is longer than 2/);
    expect(Array.from(padToLength([1, 2, 3], 2, { overflow: 'truncate' }).tokens)).toEqual([1, 2]);
  });
});
