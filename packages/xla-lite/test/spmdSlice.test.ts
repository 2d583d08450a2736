/**
 * GSPMD through slice, concatenate and pad: the dims these ops leave alone keep their split (each
 * device works on its own block, no collective), a split dim they cut, join or pad is gathered
 * first. This is what keeps a data-parallel language model data parallel: `tokens[:, :-1]`,
 * `tokens[:, 1:]` and RoPE's half-concatenation no longer replicate the batch.
 */
import { type Array, lax, makeArrayFromCallback, np, type Sharding } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { jit } from '../src/internal';
import { GridSharding, type Spec } from './gridSharding';

const S = (...spec: Spec) => new GridSharding({ x: 2 }, spec);
const put = (x: Array, s: Sharding): Array => makeArrayFromCallback(x.shape, x.dtype, s, (idx) => lax.slice(x, idx.map(([a]) => a), idx.map(([, b]) => b)));
const COLLS = /(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)\(/g;
const x = np.arange(0, 8 * 6, 1, 'float32').reshape([8, 6]);

function run(f: (a: Array) => Array, spec: Spec): { text: string; out: Array } {
  const j = jit(f);
  const arg = put(x, S(...spec));
  const text = j.lower(arg).compile().asText();
  const out = j(arg) as Array;
  expect(globalThis.Array.from(out.dataSync())).toEqual(globalThis.Array.from(f(x).dataSync()));
  return { text, out };
}

describe('slice / concatenate / pad keep the split of the dims they leave alone', () => {
  const cases: [string, (a: Array) => Array][] = [
    ['slice of the columns (tokens[:, 1:])', (a) => lax.slice(a, [0, 1], [8, 6])],
    ['concatenate along the columns', (a) => lax.concatenate([lax.slice(a, [0, 3], [8, 6]), lax.slice(a, [0, 0], [8, 3])], 1)],
    ['pad of the columns', (a) => lax.pad(a, np.array(0, 'float32'), [[0, 0, 0], [1, 2, 0]])],
  ];
  for (const [name, f] of cases) {
    it(`${name}: rows split over x, no collective, the result split the same way`, () => {
      const { text, out } = run(f, ['x', null]);
      expect(text.match(COLLS) ?? []).toEqual([]);
      expect(out.addressableShards.map((s) => s.index[0])).toEqual([[0, 4], [4, 8]]);
    });
  }

  it('a slice that cuts the split dim gathers it first', () => {
    const { text } = run((a) => lax.slice(a, [1, 0], [7, 6]), ['x', null]);
    expect(text.match(COLLS)).toEqual(['all-gather(']);
  });

  it('a batch-split lookup into a table split on its columns (FSDP embedding) gathers the table, keeps the batch split', () => {
    const table = np.arange(0, 10 * 4, 1, 'float32').reshape([10, 4]);
    const ids = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9], [0, 1, 2]], 'int32');
    const f = (t: Array, i: Array) => np.take(t, i, { axis: 0 });
    const j = jit(f);
    const [t, i] = [put(table, S(null, 'x')), put(ids, S('x', null))];
    const text = j.lower(t, i).compile().asText();
    const out = j(t, i) as Array;
    expect(globalThis.Array.from(out.dataSync())).toEqual(globalThis.Array.from(f(table, ids).dataSync()));
    expect(text.match(COLLS)).toEqual(['all-gather(']);
    expect(out.addressableShards.map((s) => s.index[0])).toEqual([[0, 2], [2, 4]]);
  });
});
