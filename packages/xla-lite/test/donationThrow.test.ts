// A call that throws after a kernel has written over a donated argument (in the argument's own
// storage, or in the arena region where the argument lies resident): the argument already holds
// updated values, so it is deleted (a retry would apply the update twice), with an error naming
// the function and the argument; a donated argument nothing wrote over stays usable.
import { type Array, debug, np, toStorage, withBackend } from '@tpukit/core';
import { afterEach, describe, expect, it } from 'vitest';
import { jit, setZeroCopyDots } from '../src/index';

afterEach(() => setZeroCopyDots(true));

const data = (n: number, s: number) => np.array(Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + s)), 'float32');

/** `jit(step)` donating p; the host callback (traced after the update, reading g) throws while `boom.on`. */
function stepJit(boom: { on: boolean }) {
  return jit(function step(p: Array, g: Array) {
    const p2 = np.subtract(p, np.multiply(g, 0.5));
    debug.callback((x: Array) => {
      if (boom.on) throw new Error(`boom ${x.shape}`);
    }, g);
    return p2;
  }, { donateArgnums: 0 });
}

describe('a call that throws after writing over a donated argument', () => {
  for (const zeroCopy of [true, false])
    it(`deletes the argument with an error naming the function and argument (${zeroCopy ? 'resident in the arena' : 'written in its own storage'})`, () => {
      setZeroCopyDots(zeroCopy);
      const boom = { on: false };
      const f = stepJit(boom);
      withBackend('systolic', () => {
        const g = data(300, 2);
        const p1 = f(data(300, 1), g) as Array;
        const before = (toStorage(p1) as Float32Array).slice();
        boom.on = true;
        expect(() => f(p1, g)).toThrow(/boom 300/);
        const after = p1.isDeleted() ? null : (toStorage(p1) as Float32Array).slice();
        // (Without the fix: p1 is alive but already holds p1 - g/2, and a retry subtracts again.)
        expect(after === null ? 'deleted' : globalThis.Array.from(after).every((v, i) => v === before[i]) ? 'intact' : 'updated').toBe('deleted');
        expect(() => p1.dataSync()).toThrow(/Array has been deleted: cannot read a float32\[300\] array; jit\(step\) threw \(boom 300\) after writing over its donated argument 0[ ,]/);
        boom.on = false;
        expect(() => f(p1, g)).toThrow(/deleted/);
      });
    });
  it('a donated argument no kernel wrote over (its output is copied in at the end) stays usable, and a retry gives the right values', () => {
    const boom = { on: true };
    const f = jit(function mix(p: Array, w: Array) {
      const p2 = np.matmul(p, w);
      debug.callback(() => {
        if (boom.on) throw new Error('boom');
      });
      return p2;
    }, { donateArgnums: 0 });
    withBackend('systolic', () => {
      const p = data(16, 1).reshape([4, 4]);
      const w = data(16, 2).reshape([4, 4]);
      const want = [...(np.matmul(p, w).dataSync() as Float32Array)];
      expect(() => f(p, w)).toThrow(/boom/);
      expect(p.isDeleted()).toBe(false);
      boom.on = false;
      expect([...((f(p, w) as Array).dataSync() as Float32Array)]).toEqual(want);
      expect(p.isDeleted()).toBe(true);
    });
  });
});
