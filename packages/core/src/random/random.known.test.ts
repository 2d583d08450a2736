/**
 * Known-answer tests for `random`: every expected value here is published, either by the
 * Random123 authors (Threefry vectors, as used by JAX's random_test.py) or by JAX itself
 * (jax.random module docstring on docs.jax.dev, tests/random_test.py). Which mode produced each
 * value is stated next to it: "partitionable" (jax_threefry_partitionable=True, the default since
 * JAX 0.5) or "original" (the layout before JAX 0.5, reached here with
 * setThreefryPartitionable(false)).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { np, random } from '../index';
import { asArray } from '../internal';
import { expectAllclose } from '../../test/matchers';

const u32 = (xs: number[]) => asArray(Uint32Array.from(xs));
const hex = (x: number) => `0x${(x >>> 0).toString(16).padStart(8, '0')}`;

/** JAX's RandomValuesCase seed: zlib.adler32((name + impl).encode()). */
function adler32(s: string): number {
  let a = 1;
  let b = 0;
  for (const ch of new TextEncoder().encode(s)) {
    a = (a + ch) % 65521;
    b = (b + a) % 65521;
  }
  return (b * 65536 + a) >>> 0;
}
const caseKey = (name: string) => random.key(adler32(`${name}threefry2x32`));

/**
 * NumPy prints float32 arrays with 8 digits after the point (trailing zeros dropped), so a printed
 * value pins the float to within 5e-9. uniform(0, 1) float32 outputs are multiples of 2^-23
 * (1.2e-7 apart), so exactly one possible output lies that close: this checks the exact bits.
 */
function expectPinned(actual: number, printed: number): void {
  expect(Math.abs(actual - printed)).toBeLessThanOrEqual(5e-9);
  expect(Number.isInteger(actual * 2 ** 23)).toBe(true);
}

afterEach(() => {
  random.setThreefryPartitionable(true);
});

describe('threefry2x32 primitive: Random123 known-answer vectors (as in JAX random_test.py testThreefry2x32)', () => {
  const cases: [number[], number[], string[]][] = [
    [[0, 0], [0, 0], ['0x6b200159', '0x99ba4efe']],
    [[0xffffffff, 0xffffffff], [0xffffffff, 0xffffffff], ['0x1cb996fc', '0xbb002be7']],
    [[0x13198a2e, 0x03707344], [0x243f6a88, 0x85a308d3], ['0xc4923a9c', '0x483df7a0']],
  ];
  it.each(cases)('key %j counter %j', (k, x, expected) => {
    const [a, b] = random.threefry2x32(u32([k[0]]), u32([k[1]]), u32([x[0]]), u32([x[1]]));
    expect([hex(a.dataSync()[0]), hex(b.dataSync()[0])]).toEqual(expected);
  });

  it('broadcasts scalar key words against counter arrays (and any rank-compatible mix)', () => {
    const k1 = asArray(0x13198a2e >>> 0, { dtype: 'uint32' });
    const k2 = asArray(0x03707344, { dtype: 'uint32' });
    const x1 = u32([0, 0x243f6a88, 0]);
    const x2 = u32([0, 0x85a308d3, 0]).reshape([1, 3]);
    const [a, b] = random.threefry2x32(k1, k2, x1, x2);
    expect(a.shape).toEqual([1, 3]);
    expect(hex(a.dataSync()[1])).toBe('0xc4923a9c');
    expect(hex(b.dataSync()[1])).toBe('0x483df7a0');
    expect(a.dataSync()[0]).toBe(a.dataSync()[2]);
  });

  it('names the operand and dtype when a non-uint32 array is passed', () => {
    const f = asArray([1, 2], { dtype: 'int32' });
    expect(() => random.threefry2x32(f, u32([1, 2]), u32([1, 2]), u32([1, 2]))).toThrow(/threefry2x32: operand k1 must be uint32; got int32\[2\]/);
  });
});

describe('keys (both modes): JAX random_test.py test_prng_seeds_and_keys, x64 disabled', () => {
  it.each([
    [0, [0, 0]],
    [1, [0, 1]],
    [-1, [0, 4294967295]],
    [-2, [0, 4294967294]],
    [2147483647 + 100, [0, 2147483747]],
    [-2147483648 - 100, [0, 2147483548]],
  ])('key(%d) = %j', (seed, expected) => {
    expect(random.key(seed).toArray()).toEqual(expected);
    expect(random.PRNGKey(seed).dtype).toBe('uint32');
  });

  it('fold_in(key(0), 4) = [2285895361, 433833334] (testPRNGValues; fold_in is the same in both modes)', () => {
    expect(random.foldIn(random.key(0), 4).toArray()).toEqual([2285895361, 433833334]);
    random.setThreefryPartitionable(false);
    expect(random.foldIn(random.key(0), 4).toArray()).toEqual([2285895361, 433833334]);
  });

  it('partitionable: fold_in(key, i) == split(key, 3)[i] (test_threefry_split_fold_in_symmetry)', () => {
    const k = random.key(72);
    const s = random.split(k, 3).toArray() as number[][];
    for (let i = 0; i < 3; i++) expect(random.foldIn(k, i).toArray()).toEqual(s[i]);
  });
});

describe('partitionable mode (JAX >= 0.5 default): jax.random module docstring, docs.jax.dev/en/latest/jax.random.html', () => {
  it('random.uniform(random.key(0)) -> 0.947667', () => {
    const u = random.uniform(random.key(0));
    expect(u.dtype).toBe('float32');
    expect(u.shape).toEqual([]);
    expectPinned(u.item() as number, 0.947667);
  });

  it('key, subkey = random.split(key); random.uniform(subkey) -> 0.00729382', () => {
    const keys = random.split(random.key(0)).toArray() as number[][];
    const subkey = random.wrapKeyData(Uint32Array.from(keys[1]));
    expectPinned(random.uniform(subkey).item() as number, 0.00729382);
  });

  it('the same call in the original mode gives the old docstring value 0.41845703 instead', () => {
    random.setThreefryPartitionable(false);
    expectPinned(random.uniform(random.key(0)).item() as number, 0.41845703);
  });
});

describe('original (non-partitionable) mode: JAX random_test.py values from before the 0.5 flip', () => {
  it('testRngRandomBits: key(1701), 8/16/32-bit bits of shape (3,)', () => {
    random.setThreefryPartitionable(false);
    const k = random.key(1701);
    expect(random.randomBits(k, 8, [3]).toArray()).toEqual([216, 115, 43]);
    expect(random.bits(k, [3], 'uint8').toArray()).toEqual([216, 115, 43]);
    expect(random.randomBits(k, 16, [3]).toArray()).toEqual([41682, 1300, 55017]);
    expect(random.bits(k, [3]).toArray()).toEqual([56197195, 4200222568, 961309823]);
  });

  it('testPRNGValues: split(key(0), 4) and randint(key(0), (3, 3), 0, 8)', () => {
    random.setThreefryPartitionable(false);
    const k = random.key(0);
    expect(random.split(k, 4).toArray()).toEqual([
      [2285895361, 1501764800],
      [1518642379, 4090693311],
      [433833334, 4221794875],
      [839183663, 3740430601],
    ]);
    expect(random.randint(k, [3, 3], 0, 8).toArray()).toEqual([[2, 1, 3], [6, 1, 5], [6, 3, 4]]);
  });

  it('old jax.random docstring: uniform(key(0)) = 0.41845703, uniform(split(key(0))[1]) = 0.10536897', () => {
    // Quoted in the translated docs at developer.aliyun.com/article/1559758 (JAX 0.4.x).
    random.setThreefryPartitionable(false);
    expectPinned(random.uniform(random.key(0)).item() as number, 0.41845703);
    expectPinned(random.uniform(random.splitKeys(random.key(0))[1]).item() as number, 0.10536897);
  });

  it('normal floats to the exact float32 bit: Deep Learning with Python 3rd ed. section 3.5.3', () => {
    // jax.random.normal(jax.random.key(123), (3,)) and the same after split(key, num=1)[0]. The
    // printed values are NumPy's shortest round-trip reprs (fewer than 8 decimals), so
    // Math.fround(printed) is the exact float32 JAX returned: this pins erfinv's arithmetic.
    random.setThreefryPartitionable(false);
    const k = random.key(123);
    const exact = (a: ReturnType<typeof random.normal>, printed: number[]) => expect(globalThis.Array.from(a.dataSync())).toEqual(printed.map(Math.fround));
    exact(random.normal(k, [3]), [-0.1470326, 0.5524756, 1.648498]);
    exact(random.normal(random.splitKeys(k, 1)[0], [3]), [0.5362355, -1.1920372, 2.450225]);
  });

  it('normal draws of the pre-0.5 "Pseudorandom numbers" tutorial loop with key(12), printed in full', () => {
    // jax.readthedocs.io/en/latest/random-numbers.html as captured in github.com/GALVINLAI/lai_PSR_RCBCD:
    // for i in range(3): new_key, subkey = split(key); print(normal(subkey)); key = new_key
    random.setThreefryPartitionable(false);
    let k = random.key(12);
    const draws: number[] = [];
    for (let i = 0; i < 3; i++) {
      const [next, sub] = random.splitKeys(k);
      draws.push(random.normal(sub).item() as number);
      k = next;
    }
    expect(draws).toEqual([0.735927939414978, 1.810187578201294, 0.11553369462490082]);
  });

  it('jax.nn.initializers.uniform(10.0)(key(42), (2, 3)) docstring (doctest skipped; output predates the 0.5 flip)', () => {
    random.setThreefryPartitionable(false);
    const w = np.multiply(random.uniform(random.key(42), [2, 3]), 10);
    expect(globalThis.Array.from(w.dataSync())).toEqual([7.298188, 8.691938, 8.7230015, 2.0818567, 1.8662417, 5.5022564].map(Math.fround));
  });

  it('_RANDOM_VALUES_CASES (threefry2x32, seed adler32(name + impl))', () => {
    random.setThreefryPartitionable(false);
    expect(random.bits(caseKey('bits'), [5], 'uint8').toArray()).toEqual([10, 158, 82, 54, 158]);
    expect(random.randomBits(caseKey('bits'), 16, [5]).toArray()).toEqual([6738, 38161, 50695, 57337, 61600]);
    expect(random.bits(caseKey('bits'), [5]).toArray()).toEqual([1978747883, 4134381225, 3628107870, 689687174, 2788938207]);
    expect(random.bernoulli(caseKey('bernoulli'), 0.5, [5]).toArray()).toEqual([false, true, true, true, false]);
    expect(random.randint(caseKey('randint'), [5], 0, 10).toArray()).toEqual([0, 5, 7, 7, 5]);
    const tol = { rtol: 0, atol: 1e-6 };
    expectAllclose(random.uniform(caseKey('uniform'), [5]), [0.298671, 0.073213, 0.873356, 0.260549, 0.412797], tol);
    expectAllclose(random.normal(caseKey('normal'), [5]), [-1.173234, -1.511662, 0.070593, -0.099764, 1.052845], tol);
    expectAllclose(random.gumbel(caseKey('gumbel'), [5]), [2.06701, 0.911726, 0.145736, 0.185427, -0.00711], tol);
    expectAllclose(random.truncatedNormal(caseKey('truncated_normal'), 0, 2, [5]), [0.582807, 1.709771, 0.159513, 0.861376, 0.36148], tol);
    expectAllclose(random.exponential(caseKey('exponential'), [5]), [0.526067, 0.043046, 0.039932, 0.46427, 0.123886], tol);
    expectAllclose(random.laplace(caseKey('laplace'), [5]), [0.578939, -0.204902, 0.555733, 0.911053, -0.96456], tol);
    expectAllclose(random.logistic(caseKey('logistic'), [5]), [0.19611, -1.709053, -0.274093, -0.208322, -1.675489], tol);
    expectAllclose(random.pareto(caseKey('pareto'), 0.5, [5]), [2.751398, 1.281863, 87.85448, 1.254542, 2.824487], { rtol: 1e-6, atol: 1e-6 });
    expectAllclose(random.weibullMin(caseKey('weibull_min'), 1, 1, [5]), [1.605863, 0.841809, 0.224218, 0.4826, 0.027901], tol);
  });
});
