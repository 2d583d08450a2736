/**
 * A seeded permutation of `[0, n)` computed one index at a time, with no table and no buffer:
 * Grain's global shuffle (`index_shuffle`) is a small block cipher over the index bits with
 * cycle walking. This one is a balanced Feistel network (6 rounds of a murmur-style round
 * function) over the smallest even bit width covering `n`; values `>= n` are re-encrypted
 * until they land in range (cycle walking keeps it a bijection on `[0, n)`). Because it is a
 * pure function `index -> index`, shuffled datasets stay random-access and their iterator
 * state stays one integer.
 */
import { mix32 } from './rng';

const ROUNDS = 6;
const MAX_LEN = 2 ** 32;

/** A permutation of `[0, n)` for one seed. `apply(i)` is allocation-free. */
export class IndexShuffle {
  readonly n: number;
  readonly seed: number;
  readonly #half: number;
  readonly #mask: number;
  readonly #keys: Uint32Array;

  constructor(n: number, seed: number) {
    if (!Number.isSafeInteger(n) || n < 0 || n > MAX_LEN) {
      throw new RangeError(`indexShuffle: length must be an integer in [0, 2^32]; got ${n}`);
    }
    if (!Number.isSafeInteger(seed) || seed < 0 || seed >= MAX_LEN) {
      throw new RangeError(`indexShuffle: seed must be an integer in [0, 2^32); got ${seed}`);
    }
    this.n = n;
    this.seed = seed;
    let bits = 2;
    while (2 ** bits < n) bits += 2;
    this.#half = bits / 2;
    this.#mask = (2 ** this.#half - 1) >>> 0;
    this.#keys = new Uint32Array(ROUNDS);
    let s = mix32(seed ^ 0x5bd1e995);
    for (let r = 0; r < ROUNDS; r++) {
      s = mix32((s + 0x9e3779b9 + r) >>> 0);
      this.#keys[r] = s;
    }
  }

  #encrypt(x: number): number {
    const h = this.#half;
    const m = this.#mask;
    let l = Math.floor(x / 2 ** h) & m;
    let r = x & m;
    for (let k = 0; k < ROUNDS; k++) {
      const f = mix32((r ^ this.#keys[k]) >>> 0) & m;
      const t = (l ^ f) & m;
      l = r;
      r = t;
    }
    return l * 2 ** h + r;
  }

  /** The image of `index` (which must be in `[0, n)`). */
  apply(index: number): number {
    let x = this.#encrypt(index);
    while (x >= this.n) x = this.#encrypt(x);
    return x;
  }
}
