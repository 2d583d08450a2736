// Real donation: a donated argument's storage holds an output of the same shape and dtype
// (written in place by a fusion, or copied in once the program has finished reading it), the
// donated input is deleted, results equal the non-donated run, unusable donations warn and
// stay alive, and a training-step loop `params = step(params, batch)` reuses one buffer.
import { type Array, lax, np, toStorage } from '@tpukit/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jit, setZeroCopyDots } from '../src/index';
import { setWasmKernels } from '../src/internal';

const f32 = (x: number[]) => np.array(x, 'float32');
const vals = (a: unknown) => [...(a as Array).dataSync()];

/** An Adam update: p, m, v updated by one 3-output loop fusion (m2 is an output and read by p2's computation). */
const adam = (p: Array, m: Array, v: Array, g: Array) => {
  const m2 = np.add(np.multiply(m, 0.9), np.multiply(g, 0.1));
  const v2 = np.add(np.multiply(v, 0.999), np.multiply(np.square(g), 0.001));
  return [np.subtract(p, np.multiply(np.divide(m2, np.add(np.sqrt(v2), 1e-8)), 3e-4)), m2, v2];
};

/**
 * Runs `fn` with programs compiled with their arena in a memory of their own (zero-copy dots
 * off): donated outputs then land in the donated storage. With zero-copy dots on, an output a
 * wasm kernel writes in place stays in the arena instead (`residentDonation.test.ts`).
 */
const ownArena = (fn: () => void) => () => {
  setZeroCopyDots(false);
  try {
    fn();
  } finally {
    setZeroCopyDots(true);
  }
};

describe('donateArgnums', () => {
  it('writes the output into the donated storage (a fusion, in place) and deletes the input', ownArena(() => {
    const step = jit(function step(p: Array, g: Array) {
      return np.subtract(p, np.multiply(g, 0.5));
    }, { donateArgnums: 0 });
    const plain = jit((p: Array, g: Array) => np.subtract(p, np.multiply(g, 0.5)));
    const compiled = step.lower(f32([1, 2, 3]), f32([1, 1, 1])).compile();
    expect(compiled.donation.inPlace.size).toBe(1);
    const before = compiled.donationStats();
    compiled.call([f32([1, 2, 3]), f32([1, 1, 1])]);
    expect(compiled.donationStats()).toEqual({ inPlaceWrites: before.inPlaceWrites + 1, copies: before.copies });
    expect([...compiled.donation.outputToParam]).toEqual([[0, 0]]);
    const p = f32([1, 2, 3]);
    const g = f32([2, 4, 6]);
    const storage = toStorage(p);
    const want = vals(plain(f32([1, 2, 3]), g));
    const out = step(p, g) as Array;
    expect(toStorage(out)).toBe(storage);
    expect(vals(out)).toEqual(want);
    expect(p.isDeleted()).toBe(true);
    expect(g.isDeleted()).toBe(false);
    expect(() => p.dataSync()).toThrow(/Array has been deleted: cannot read a float32\[3\] array; it was donated to jit\(step\) as argument 0/);
    expect(() => step(p, g)).toThrow(/jit\(step\): argument 0 \(p\) is deleted\. Array has been deleted/);
  }));

  it('copies a non-fusion output (a dot) into the donated storage after the last read', () => {
    const f = jit((x: Array, w: Array) => np.matmul(x, w), { donateArgnums: 0 });
    const x = np.array([[1, 2], [3, 4]], 'float32');
    const w = np.array([[0, 1], [1, 0]], 'float32');
    const c = f.lower(x, w).compile();
    expect(c.donation.inPlace.size).toBe(0);
    expect(c.donation.outputToParam.get(0)).toBe(0);
    c.call([np.array([[1, 2], [3, 4]], 'float32'), w]);
    expect(c.donationStats()).toEqual({ inPlaceWrites: 0, copies: 1 });
    const storage = toStorage(x);
    const out = f(x, w) as Array;
    expect(toStorage(out)).toBe(storage);
    expect(vals(out)).toEqual([2, 1, 4, 3]);
    expect(x.isDeleted()).toBe(true);
  });

  it('warns about donations no output can use, and keeps those inputs alive', () => {
    const warnings: string[] = [];
    const f = jit(function update(p: Array, g: Array) {
      return np.add(p, np.sum(g));
    }, { donateArgnums: [0, 1], onWarning: (m) => warnings.push(m) });
    const p = f32([1, 2]);
    const g = f32([1, 1, 1]);
    const out = f(p, g) as Array;
    expect(vals(out)).toEqual([4, 5]);
    expect(warnings).toEqual(['jit(update): Some donated buffers were not usable: argument 1 f32[3] (no output of the same shape and dtype can take them; they are not deleted)'.replace('f32[3]', 'float32[3]')]);
    expect(p.isDeleted()).toBe(true);
    expect(g.isDeleted()).toBe(false);
    f(f32([1, 2]), g);
    expect(warnings).toHaveLength(1); // once per compilation
  });

  it('donating the same Array twice in one call is an error, and nothing is deleted', () => {
    const f = jit(function pair(a: Array, b: Array) {
      return [np.add(a, b), np.subtract(a, b)];
    }, { donateArgnums: [0, 1] });
    const x = f32([1]);
    expect(() => f(x, x)).toThrow(/jit\(pair\): the same f32\[1\] Array is donated twice \(argument 0 and argument 1\)/);
    expect(x.isDeleted()).toBe(false);
  });

  it('an input returned as is keeps its identity and stays alive; a second output gets its own buffer', () => {
    const f = jit((x: Array) => [x, np.multiply(x, 2)], { donateArgnums: 0 });
    const x = f32([1, 2]);
    const [a, b] = f(x) as Array[];
    expect(a).toBe(x);
    expect(x.isDeleted()).toBe(false);
    expect(vals(b)).toEqual([2, 4]);
  });

  it('never overwrites the donated argument before its last read', () => {
    // Both outputs have the argument's type; the one computed after its last read takes it.
    const f = (x: Array) => {
      const y = np.exp(np.multiply(x, 2));
      const z = np.add(np.matmul(x, x), 1);
      return [y, np.subtract(z, x)];
    };
    fc.assert(
      fc.property(fc.array(fc.float({ min: -2, max: 2, noNaN: true }), { minLength: 4, maxLength: 4 }), (xs) => {
        const x0 = np.array(xs, 'float32').reshape([2, 2]);
        const want = (jit(f)(x0) as Array[]).map(vals);
        const x = np.array(xs, 'float32').reshape([2, 2]);
        const got = (jit(f, { donateArgnums: 0 })(x) as Array[]).map(vals);
        expect(got).toEqual(want);
        expect(x.isDeleted()).toBe(true);
      }),
      { numRuns: 20 },
    );
  });

  it('a loop carry that may alias the argument keeps the argument alive until the loop is done', () => {
    const f = jit((x: Array) => {
      const c = lax.foriLoop(0, 3, (_i: Array, c: Array) => np.add(c, 1), x);
      return [np.multiply(x, 10), c];
    }, { donateArgnums: 0 });
    const x = f32([1, 2]);
    const [a, c] = f(x) as Array[];
    expect(vals(a)).toEqual([10, 20]);
    expect(vals(c)).toEqual([4, 5]);
    // A loop that runs zero times hands back its initial carry, the donated argument itself.
    const g = jit((x: Array) => {
      const c = lax.whileLoop((c: Array) => np.less(np.sum(c), -1e9), (c: Array) => np.add(c, 1), x);
      return [np.multiply(x, 10), c];
    }, { donateArgnums: 0 });
    const [a2, c2] = g(f32([1, 2])) as Array[];
    expect(vals(a2)).toEqual([10, 20]);
    expect(vals(c2)).toEqual([1, 2]);
  });

  it('a training-step loop reuses one parameter buffer per leaf, with results equal to the undonated loop', ownArena(() => {
    const loss = (params: { w: Array; b: Array }, x: Array, y: Array) => np.mean(np.square(np.subtract(np.add(np.matmul(x, params.w), params.b), y)));
    const stepFn = (params: { w: Array; b: Array }, batch: { x: Array; y: Array }) => {
      const h = 1e-3;
      // Hand-written gradient of the MSE (keeps the test about donation, not autodiff).
      const r = np.subtract(np.add(np.matmul(batch.x, params.w), params.b), batch.y);
      const n = batch.x.shape[0];
      const gw = np.multiply(np.matmul(batch.x.T, r), 2 / n);
      const gb = np.multiply(np.sum(r, { axis: 0 }), 2 / n);
      return { w: np.subtract(params.w, np.multiply(gw, 10 * h)), b: np.subtract(params.b, np.multiply(gb, 10 * h)) };
    };
    const step = jit(stepFn, { donateArgnums: 0 });
    const plainStep = jit(stepFn);
    const batch = { x: np.array([[1, 2], [3, 4], [5, 6]], 'float32'), y: np.array([[1], [2], [3]], 'float32') };
    let params = { w: np.array([[0.1], [0.2]], 'float32'), b: np.array([0], 'float32') };
    let ref = { w: np.array([[0.1], [0.2]], 'float32'), b: np.array([0], 'float32') };
    const wStorage = toStorage(params.w);
    const bStorage = toStorage(params.b);
    for (let i = 0; i < 5; i++) {
      const old = params;
      params = step(params, batch) as typeof params;
      ref = plainStep(ref, batch) as typeof ref;
      expect(old.w.isDeleted() && old.b.isDeleted()).toBe(true);
      expect(toStorage(params.w)).toBe(wStorage);
      expect(toStorage(params.b)).toBe(bStorage);
    }
    expect(vals(params.w)).toEqual(vals(ref.w));
    expect(vals(params.b)).toEqual(vals(ref.b));
    expect(Number(loss(params, batch.x, batch.y).item())).toBeLessThan(Number(loss({ w: np.array([[0.1], [0.2]], 'float32'), b: np.array([0], 'float32') }, batch.x, batch.y).item()));
    expect(step.compileStats().misses).toBe(1);
  }));

  it('a multi-output fusion (an Adam update) writes each donated output straight into its argument, no end copy', ownArena(() => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3000 }), fc.integer({ min: 1, max: 1000 }), (n, seed) => {
        const data = (k: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.7 + seed * k) * (k === 2 ? 0.5 + 0.4 * Math.cos(i) : 1));
        const args = (): [Array, Array, Array, Array] => [np.array(data(0), 'float32'), np.array(data(1), 'float32'), np.array(data(2), 'float32'), np.array(data(3), 'float32')];
        const donated = jit(adam, { donateArgnums: [0, 1, 2] });
        const c = donated.lower(...args()).compile();
        const fusedTuple = [...c.donation.inPlaceTuple.values()].reduce((a, m) => a + m.size, 0);
        const a = args();
        const storages = a.slice(0, 3).map((x) => toStorage(x));
        const before = c.donationStats();
        const outs = c.call(a);
        const after = c.donationStats();
        const want = (jit(adam)(...args()) as Array[]).map(vals);
        expect(outs.map(vals)).toEqual(want);
        outs.forEach((o, q) => expect(toStorage(o), `output ${q} lives in donated argument ${q}`).toBe(storages[q]));
        // Every output the plan writes in place is counted as such, and only the others are copied at the end.
        expect(after.inPlaceWrites - before.inPlaceWrites + after.copies - before.copies).toBe(3);
        if (fusedTuple > 0) expect(after.copies - before.copies).toBe(3 - fusedTuple - c.donation.inPlace.size);
        return fusedTuple > 0 || c.stats.wasmKernels === 0;
      }),
      { numRuns: 8 },
    );
  }));

  it('a multi-output fusion on its JavaScript kernel plans no in-place tuple outputs: all three are copied, none counted as written in place', () => {
    const arg = (k: number) => f32([1, 2, 3, 4, 5].map((x) => x * (k + 1) * 0.25));
    const args = (): [Array, Array, Array, Array] => [arg(0), arg(1), arg(2), arg(3)];
    setWasmKernels(false);
    try {
      const want = (jit(adam)(...args()) as Array[]).map(vals);
      const c = jit(adam, { donateArgnums: [0, 1, 2] }).lower(...args()).compile();
      expect(c.stats.wasmKernels).toBe(0);
      expect(c.stats.multiOpFusions).toBeGreaterThan(0);
      expect(c.donation.inPlaceTuple.size).toBe(0);
      const a = args();
      const storages = a.slice(0, 3).map((x) => toStorage(x));
      const outs = c.call(a);
      expect(outs.map(vals)).toEqual(want);
      outs.forEach((o, q) => expect(toStorage(o)).toBe(storages[q]));
      expect(c.donationStats()).toEqual({ inPlaceWrites: c.donation.inPlace.size, copies: 3 - c.donation.inPlace.size });
    } finally {
      setWasmKernels(true);
    }
  });

  it('Compiled.call (ahead of time) deletes what it reused too', () => {
    const c = jit((p: Array) => np.multiply(p, 3), { donateArgnums: 0 }).lower(f32([1])).compile();
    const p = f32([2]);
    const [out] = c.call([p]);
    expect(vals(out)).toEqual([6]);
    expect(p.isDeleted()).toBe(true);
    expect(() => c.call([p])).toThrow(/Array has been deleted/);
    const two = jit((a: Array, b: Array) => np.add(a, b), { donateArgnums: 0 }).lower(f32([1]), f32([1])).compile();
    const x = f32([1]);
    expect(() => two.call([x, x])).toThrow(/donated input 0 is the same Array as input 1/);
    expect(x.isDeleted()).toBe(false);
  });
});
