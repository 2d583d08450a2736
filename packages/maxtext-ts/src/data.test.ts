import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeTFRecord } from '@tpukit/grain-ts';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { makeDataIterator, resolveFiles } from './data';

const dir = mkdtempSync(join(tmpdir(), 'maxtext-data-'));
const docs = ['first document here', 'the second one', 'a third, longer document with more words in it', 'four'];
writeFileSync(join(dir, 'a.txt'), `${docs.join('\n')}\n`);
writeFileSync(join(dir, 'a.jsonl'), `${docs.map((t) => JSON.stringify({ text: t, id: 1 })).join('\n')}\n`);
writeFileSync(join(dir, 'bad.jsonl'), `${JSON.stringify({ body: 'x' })}\n`);
writeTFRecord(join(dir, 'a.tfrecord'), docs);
const cfg = (...o: string[]) => loadConfig('tiny', ['max_target_length=15', 'per_device_batch_size=2', 'dataset_type=grain', ...o]);
const decodeRows = (t: Int32Array, s: Int32Array): string[] => {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < t.length; i++) {
    if (s[i] === 0) continue;
    if (i > 0 && s[i] !== s[i - 1] && cur) (out.push(cur), (cur = ''));
    cur += String.fromCharCode(t[i]);
  }
  if (cur) out.push(cur);
  return out;
};

describe('data', () => {
  it('text, JSONL and TFRecord files give the same packed batches', () => {
    const batches = ['grain_file_type=text', 'grain_file_type=jsonl', 'grain_file_type=tfrecord'].map((t) => {
      const ext = t.split('=')[1] === 'text' ? 'txt' : t.split('=')[1];
      const it = makeDataIterator(cfg(t, `grain_train_files=${join(dir, `a.${ext}`)}`));
      return [it.next(), it.next()].map((b) => [...(b.tokens.dataSync() as Int32Array)]);
    });
    expect(batches[1]).toEqual(batches[0]);
    expect(batches[2]).toEqual(batches[0]);
  });

  it('packed rows are max_target_length + 1 long, with segment ids and restarting positions, made of whole documents or pieces', () => {
    const it = makeDataIterator(cfg(`grain_train_files=${join(dir, 'a.txt')}`));
    const b = it.next();
    expect(b.tokens.shape).toEqual([2, 16]);
    const t = b.tokens.dataSync() as Int32Array;
    const s = b.segmentIds.dataSync() as Int32Array;
    const p = b.positions.dataSync() as Int32Array;
    for (let i = 1; i < 16; i++) if (s[i] !== 0 && s[i] === s[i - 1]) expect(p[i]).toBe(p[i - 1] + 1);
    for (const piece of decodeRows(t.subarray(0, 16), s.subarray(0, 16))) expect(docs.some((d) => d.includes(piece))).toBe(true);
  });

  it('packing: false pads one document per row (truncated to the row)', () => {
    const b = makeDataIterator(cfg(`grain_train_files=${join(dir, 'a.txt')}`, 'packing=false')).next();
    const s = [...(b.segmentIds.dataSync() as Int32Array)];
    expect(new Set(s.filter((x) => x !== 0)).size).toBe(1);
  });

  it('state round-trips: a restored iterator continues with the same batches (grain and synthetic)', () => {
    for (const o of [[`grain_train_files=${join(dir, 'a.txt')}`], ['dataset_type=synthetic']]) {
      const a = makeDataIterator(cfg(...o));
      a.next();
      const state = JSON.parse(JSON.stringify(a.getState()));
      const want = [...(a.next().tokens.dataSync() as Int32Array)];
      const b = makeDataIterator(cfg(...o));
      b.setState(state);
      expect([...(b.next().tokens.dataSync() as Int32Array)]).toEqual(want);
    }
    expect(() => makeDataIterator(cfg('dataset_type=synthetic')).setState({ step: -1 })).toThrow('synthetic data: state must be { step: integer >= 0 }; got {"step":-1}');
  });

  it('globs, missing files and a JSONL row without the text field are errors naming them', () => {
    const c = cfg(`grain_train_files=${join(dir, 'a.txt')}`);
    expect(resolveFiles(c, join(dir, 'a.*'))).toHaveLength(3);
    expect(() => resolveFiles(c, join(dir, 'nope.txt'))).toThrow(`grain_train_files: ${join(dir, 'nope.txt')} does not exist`);
    expect(() => resolveFiles(c, join(dir, 'z*.txt'))).toThrow('grain_train_files: no file matches');
    expect(() => makeDataIterator(cfg('grain_file_type=jsonl', `grain_train_files=${join(dir, 'bad.jsonl')}`)).next()).toThrow('grain: a JSONL row has no string field "text" (grain_text_field)');
  });
});
