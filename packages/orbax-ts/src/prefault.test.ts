// Pre-faulting fresh snapshot buffers (prefault.ts): the touch never changes a byte, neither on
// its own nor while the caller's copy races with it in the writer thread.
import * as crypto from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { tmpDir } from '../test/helpers';
import { BackgroundWriter } from './backgroundWriter';
import { prefault } from './prefault';

describe('prefault', () => {
  it('leaves every byte as it was (zero words, non-zero words, odd lengths)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 40_000 }), fc.integer({ min: 0, max: 100 }), (n, zeroPct) => {
        const sab = new SharedArrayBuffer(n);
        const u = new Uint8Array(sab);
        crypto.randomFillSync(u);
        for (let i = 0; i < n; i++) if (u[i] % 100 < zeroPct) u[i] = 0;
        const before = Buffer.from(u); // a copy
        prefault([sab, new SharedArrayBuffer(0)]);
        expect(Buffer.from(sab).equals(before)).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it('races with a copy into the same fresh buffers (writer thread back to front, caller front to back) without changing a byte', async () => {
    const writer = new BackgroundWriter();
    try {
      for (let round = 0; round < 3; round++) {
        const src = Array.from({ length: 4 }, () => crypto.randomBytes(4 << 20));
        for (const s of src) s.fill(0, 1 << 20, 2 << 20); // zero stretches, as in real state
        const bufs = src.map((s) => new SharedArrayBuffer(s.length));
        writer.prefault(bufs);
        bufs.forEach((b, i) => new Uint8Array(b).set(src[i]));
        // A job queued after the prefault runs only once it is done.
        await writer.submit({ root: tmpDir(), step: round, files: [], checkpointMetadata: {}, deleteSteps: [], fsync: false });
        bufs.forEach((b, i) => expect(Buffer.from(b).equals(src[i]), `round ${round} buffer ${i}`).toBe(true));
      }
    } finally {
      await writer.close();
    }
  });
});
