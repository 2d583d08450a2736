/**
 * Host buffers for async-save snapshots, kept from one save to the next. A fresh buffer costs a
 * page fault per 4 KiB page the first time it is written, which on the development machine made
 * a fresh copy (`slice()`) about 5x slower than copying into memory that was already touched.
 * A training loop saves the same shapes again and again, so the manager hands each save the
 * buffers of the previous one (matched by byte length) and the copy in `save` runs at memcpy
 * speed from the second save on.
 *
 * The buffers are SharedArrayBuffers: the background writer reads them where they are, so
 * nothing is transferred to it and nothing has to come back. The manager never copies into a
 * buffer while a writer may still read it: `save` waits for the previous save before it plans
 * the next, and only `recycle` (called once that save's writer is done) makes buffers reusable.
 */
export type Alloc = (bytes: number) => Uint8Array;

/** A zeroed, ordinary buffer (sync saves, JSON files). */
export const freshAlloc: Alloc = (n) => new Uint8Array(n);

export class SnapshotPool {
  /** Buffers free for the next save, by byte length. */
  #free = new Map<number, SharedArrayBuffer[]>();
  /** Buffers handed out to the save being planned or written. */
  #lent: SharedArrayBuffer[] = [];
  /** Buffers allocated (not reused) for the save being planned: never written yet. */
  #fresh: SharedArrayBuffer[] = [];

  /** A buffer of exactly `n` bytes; its contents are whatever the last save left there. */
  readonly take: Alloc = (n) => {
    let sab = this.#free.get(n)?.pop();
    if (!sab) this.#fresh.push((sab = new SharedArrayBuffer(n)));
    this.#lent.push(sab);
    return new Uint8Array(sab);
  };

  /**
   * The save is planned: buffers it did not take (shapes that changed) are dropped. Returns the
   * buffers newly allocated for it (untouched memory, see prefault.ts).
   */
  endPlan(): SharedArrayBuffer[] {
    this.#free.clear();
    const fresh = this.#fresh;
    this.#fresh = [];
    return fresh;
  }

  /**
   * The save that took the lent buffers is finished (committed, failed, or never submitted):
   * with `keep` they serve the next save, otherwise they are left to the garbage collector.
   */
  recycle(keep: boolean): void {
    const lent = this.#lent;
    this.#lent = [];
    this.#fresh = [];
    if (!keep) return;
    for (const sab of lent) {
      const list = this.#free.get(sab.byteLength);
      if (list) list.push(sab);
      else this.#free.set(sab.byteLength, [sab]);
    }
  }

  /** Bytes held for reuse (tests and the README's memory note). */
  get heldBytes(): number {
    let n = 0;
    for (const [size, list] of this.#free) n += size * list.length;
    return n;
  }
}
