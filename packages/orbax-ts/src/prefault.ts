/**
 * Pre-faulting fresh snapshot buffers from the writer thread. The first async save of a manager
 * (or of a new shape) copies into SharedArrayBuffers no one has touched yet, and each 4 KiB page
 * costs a page fault on its first write: on the development machine that made the copy about
 * 5x slower than a copy into touched memory. While `save` copies front to back on the caller's
 * thread, the writer thread touches the same buffers back to front, so the faults are taken on
 * both cores and `save` blocks for about half as long (1 GB: 354-415 ms against 604-1148 ms for
 * a fresh `slice()`, measured in one process).
 *
 * The touch is `Atomics.compareExchange(word, 0, 0)`: a write access (so the page is faulted
 * in) that stores nothing but the 0 already there, and stores nothing at all once the caller's
 * copy has put other bytes in that word. It can therefore race with the copy without ever
 * changing a byte the copy wrote, and needs no coordination with it.
 */

/** Words (4 bytes) per 4 KiB page. */
const WORDS_PER_PAGE = 1024;

/** Touches one word per 4 KiB page of each buffer, last buffer and last page first. */
export function prefault(buffers: readonly SharedArrayBuffer[]): void {
  for (let b = buffers.length - 1; b >= 0; b--) {
    const words = new Int32Array(buffers[b], 0, buffers[b].byteLength >> 2);
    for (let i = words.length - 1; i >= 0; i -= WORDS_PER_PAGE) Atomics.compareExchange(words, i, 0, 0);
  }
}
