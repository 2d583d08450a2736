/**
 * The deterministic interleaving behind `mix`: which component each position of a mixture
 * draws from. Weights are normalised and turned into integer counts per block (the smallest
 * block that holds them exactly, else largest remainder over 10^6 reduced by the gcd); a block
 * lists the components in smooth weighted round-robin order. Position `i` is block `floor(i / size)`, slot `i % size`, so the
 * component and the index within it are O(1) to compute: the mixture stays random-access and
 * its iterator state stays one integer, and every block holds exactly the stated proportions.
 */

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

export class MixSchedule {
  /** Components in block order. */
  readonly order: Int32Array;
  /** For each slot, how many earlier slots of the block draw from the same component. */
  readonly rank: Int32Array;
  /** Per component, slots per block. */
  readonly counts: Int32Array;
  readonly size: number;

  constructor(weights: readonly number[], op = 'mix') {
    if (weights.length === 0) throw new RangeError(`${op}: needs at least one dataset`);
    for (const [i, w] of weights.entries()) {
      if (!(Number.isFinite(w) && w >= 0)) throw new RangeError(`${op}: weights must be finite and >= 0; weights[${i}] = ${w}`);
    }
    const total = weights.reduce((a, b) => a + b, 0);
    if (!(total > 0)) throw new RangeError(`${op}: weights must not all be 0; got [${weights.join(', ')}]`);
    const share = weights.map((w) => w / total);
    // The smallest block that holds the shares exactly (e.g. [2, 1] -> 3, [0.3, 0.7] -> 10)...
    let counts: number[] | null = null;
    for (let d = 1; d <= 10_000 && counts === null; d++) {
      const c = share.map((p) => Math.round(p * d));
      if (c.reduce((a, b) => a + b, 0) === d && c.every((ci, k) => Math.abs(ci / d - share[k]) < 1e-9)) counts = c;
    }
    if (counts === null) {
      // ...else largest remainder over 10^6, reduced by the gcd.
      const scale = 1_000_000;
      const exact = share.map((p) => p * scale);
      counts = exact.map(Math.floor);
      let short = scale - counts.reduce((a, b) => a + b, 0);
      const byRemainder = exact.map((e, i) => [e - Math.floor(e), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
      for (let j = 0; short > 0; j++, short--) counts[byRemainder[j][1]]++;
    }
    const g = counts.reduce((a, c) => gcd(a, c), 0);
    this.counts = Int32Array.from(counts.map((c) => c / g));
    this.size = this.counts.reduce((a, b) => a + b, 0);
    this.order = new Int32Array(this.size);
    this.rank = new Int32Array(this.size);
    // Smooth weighted round-robin: each slot goes to the component furthest behind its share.
    const credit = new Float64Array(weights.length);
    const seen = new Int32Array(weights.length);
    for (let s = 0; s < this.size; s++) {
      let best = -1;
      for (let k = 0; k < weights.length; k++) {
        credit[k] += this.counts[k];
        if (this.counts[k] > 0 && (best < 0 || credit[k] > credit[best])) best = k;
      }
      credit[best] -= this.size;
      this.order[s] = best;
      this.rank[s] = seen[best]++;
    }
  }

  /** Component of position `i`. */
  component(i: number): number {
    return this.order[i % this.size];
  }

  /** Index within its component of position `i`. */
  indexInComponent(i: number): number {
    const block = Math.floor(i / this.size);
    const slot = i % this.size;
    return block * this.counts[this.order[slot]] + this.rank[slot];
  }

  /** How many positions can be served before some component runs out (lengths may be Infinity). */
  lengthFor(lengths: readonly number[]): number {
    let best = Infinity;
    for (let k = 0; k < lengths.length; k++) {
      const c = this.counts[k];
      if (c === 0 || lengths[k] === Infinity) continue;
      const fullBlocks = Math.floor(lengths[k] / c);
      const left = lengths[k] - fullBlocks * c;
      // Position of the (left+1)-th slot of component k in the next block: that one is missing.
      let slot = 0;
      for (let seen = 0; slot < this.size; slot++) {
        if (this.order[slot] === k) {
          if (seen === left) break;
          seen++;
        }
      }
      best = Math.min(best, fullBlocks * this.size + slot);
    }
    return best;
  }
}
