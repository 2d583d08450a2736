/**
 * `random` under core's transformations: vmap over a batch of keys equals a loop over the keys,
 * jit equals eager evaluation, and a traced program shows the threefry2x32 primitive. The vmapped
 * foldIn case is JAX's own test_threefry_split_vmapped_fold_in_symmetry (partitionable layout).
 */
import { describe, expect, it } from 'vitest';
import { type Array, jit, makeJaxpr, np, random, vmap } from '../index';
import { asArray } from '../internal';

const rows = (keys: Array): Array[] => (keys.toArray() as number[][]).map((r) => random.wrapKeyData(Uint32Array.from(r)));
const stack = (xs: Array[]) => xs.map((x) => x.toArray());

describe('vmap over keys equals a loop over the keys', () => {
  const keys = random.split(random.key(42), 4);
  it.each([
    ['uniform', (k: Array) => random.uniform(k, [3])],
    ['normal bf16', (k: Array) => random.normal(k, [2, 2], { dtype: 'bfloat16' })],
    ['randint', (k: Array) => random.randint(k, [5], -3, 9)],
    ['bernoulli', (k: Array) => random.bernoulli(k, 0.3, [6])],
    ['categorical', (k: Array) => random.categorical(k, asArray([0.1, 1.5, -0.3]), { shape: [4] })],
    ['permutation', (k: Array) => random.permutation(k, 7)],
    ['split', (k: Array) => random.split(k, 3)],
    ['choice without replacement', (k: Array) => random.choice(k, 9, { shape: [4], replace: false })],
  ] as const)('%s', (_name, f) => {
    const batched = vmap(f)(keys) as Array;
    expect(batched.toArray()).toEqual(stack(rows(keys).map((k) => f(k))));
  });

  it('in both counter layouts', () => {
    random.withThreefryPartitionable(false, () => {
      const f = (k: Array) => random.uniform(k, [5]);
      expect((vmap(f)(keys) as Array).toArray()).toEqual(stack(rows(keys).map((k) => f(k))));
    });
  });

  it('vmapped foldIn over data equals split (JAX test_threefry_split_vmapped_fold_in_symmetry)', () => {
    const key = random.key(72);
    const folded = vmap((d: Array) => random.foldIn(key, d))(np.arange(3, undefined, 1, 'uint32')) as Array;
    expect(folded.toArray()).toEqual(random.split(key, 3).toArray());
  });
});

describe('jit and tracing', () => {
  it('jit(sampler) gives the same values as eager evaluation', () => {
    const key = random.key(7);
    const f = (k: Array) => np.add(random.normal(k, [8]), random.uniform(random.foldIn(k, 1), [8]));
    expect((jit(f)(key) as Array).toArray()).toEqual(f(key).toArray());
    expect((jit((k: Array) => random.permutation(k, 20))(key) as Array).toArray()).toEqual(random.permutation(key, 20).toArray());
  });

  it('a traced sampler is a program over the threefry2x32 primitive', () => {
    const jaxpr = makeJaxpr((k: Array) => random.uniform(k, [4]))(random.key(0));
    expect(String(jaxpr)).toContain('threefry2x32');
  });
});
