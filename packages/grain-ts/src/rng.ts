/**
 * Counter-based random numbers for `randomMap` (Grain uses numpy's Philox with the counter set
 * to `[0, 0, op_seed, index]` per element). This is Philox4x32-10 (Salmon et al., SC'11): the
 * stream for an element depends only on `(seed, index)`, never on which worker or thread ran
 * it, so pipelines give identical results for any `workerCount`.
 */

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** High 32 bits of the 64-bit product of two uint32 (exact, via 16-bit halves). */
function mulhi(a: number, b: number): number {
  const aLo = a & 0xffff;
  const aHi = a >>> 16;
  const bLo = b & 0xffff;
  const bHi = b >>> 16;
  const lolo = aLo * bLo;
  const mid1 = aHi * bLo;
  const mid2 = aLo * bHi;
  const carry = ((lolo >>> 16) + (mid1 & 0xffff) + (mid2 & 0xffff)) >>> 16;
  return (aHi * bHi + (mid1 >>> 16) + (mid2 >>> 16) + carry) >>> 0;
}

/** One Philox4x32-10 block: 4 counter words and 2 key words in, 4 random words out (into `out`). */
export function philox4x32(c0: number, c1: number, c2: number, c3: number, k0: number, k1: number, out: Uint32Array): void {
  for (let r = 0; r < 10; r++) {
    const hi0 = mulhi(M0, c0);
    const lo0 = Math.imul(M0, c0) >>> 0;
    const hi1 = mulhi(M1, c2);
    const lo1 = Math.imul(M1, c2) >>> 0;
    const n0 = (hi1 ^ c1 ^ k0) >>> 0;
    const n2 = (hi0 ^ c3 ^ k1) >>> 0;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 = (k0 + W0) >>> 0;
    k1 = (k1 + W1) >>> 0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

const TWO32 = 4294967296;

/**
 * A random stream keyed by a seed and positioned by an element index. `reset(seed, index)`
 * makes it the stream of element `index` without allocating, so a pipeline reuses one `Rng`.
 */
export class Rng {
  #k0 = 0;
  #k1 = 0;
  #c0 = 0;
  #c1 = 0;
  #block = 0;
  readonly #buf = new Uint32Array(4);
  #pos = 4;

  constructor(seed = 0, index = 0) {
    this.reset(seed, index);
  }

  /** Positions the stream at element `index` of the stream for `seed` (both non-negative integers < 2^53). */
  reset(seed: number, index: number): this {
    if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`Rng: seed must be a non-negative safe integer; got ${seed}`);
    if (!Number.isSafeInteger(index) || index < 0) throw new RangeError(`Rng: index must be a non-negative safe integer; got ${index}`);
    this.#k0 = seed >>> 0;
    this.#k1 = Math.floor(seed / TWO32) >>> 0;
    this.#c0 = index >>> 0;
    this.#c1 = Math.floor(index / TWO32) >>> 0;
    this.#block = 0;
    this.#pos = 4;
    return this;
  }

  /** A uniform uint32. */
  uint32(): number {
    if (this.#pos === 4) {
      philox4x32(this.#c0, this.#c1, this.#block >>> 0, Math.floor(this.#block / TWO32) >>> 0, this.#k0, this.#k1, this.#buf);
      this.#block++;
      this.#pos = 0;
    }
    return this.#buf[this.#pos++];
  }

  /** A uniform float in [0, 1) with 53 random bits. */
  random(): number {
    const hi = this.uint32() >>> 5; // 27 bits
    const lo = this.uint32() >>> 6; // 26 bits
    return (hi * 67108864 + lo) / 9007199254740992;
  }

  /** A uniform integer in [low, high) (unbiased, by rejection). */
  integers(low: number, high: number): number {
    if (!Number.isSafeInteger(low) || !Number.isSafeInteger(high) || high <= low) {
      throw new RangeError(`Rng.integers: need integers low < high; got low=${low}, high=${high}`);
    }
    const span = high - low;
    if (span <= TWO32) {
      const limit = TWO32 - (TWO32 % span);
      for (;;) {
        const x = this.uint32();
        if (x < limit) return low + (x % span);
      }
    }
    return low + Math.floor(this.random() * span);
  }

  /** A standard normal sample (Box-Muller). */
  normal(): number {
    const u = 1 - this.random();
    const v = this.random();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Shuffles `xs` in place (Fisher-Yates) and returns it. */
  shuffle<T>(xs: T[]): T[] {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = this.integers(0, i + 1);
      const t = xs[i];
      xs[i] = xs[j];
      xs[j] = t;
    }
    return xs;
  }
}

/** Mixes a 32-bit value (murmur3 finaliser); used to derive per-operation seeds. */
export function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** A seed for the operation at `position` of a pipeline seeded with `seed` (Grain's `ds.seed()` derivation). */
export function deriveSeed(seed: number, position: number): number {
  return mix32((mix32(seed >>> 0) ^ Math.imul(position + 1, 0x9e3779b9)) >>> 0);
}
