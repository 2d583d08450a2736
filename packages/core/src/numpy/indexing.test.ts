// NumPy indexing (x.get / x.at) against a naive nested-loop implementation of NumPy's rules, for
// random shapes and random index expressions, plus out-of-bounds modes and bad-input errors.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Array, np } from '../index';
import { Slice, type IndexItem } from './indexing';

type Nested = number | boolean | Nested[];

function flattenNested(v: Nested): { flat: (number | boolean)[]; shape: number[] } {
  const shape: number[] = [];
  let p: Nested = v;
  while (globalThis.Array.isArray(p)) {
    shape.push(p.length);
    p = p[0];
  }
  const flat: (number | boolean)[] = [];
  const walk = (x: Nested): void => {
    if (globalThis.Array.isArray(x)) x.forEach(walk);
    else flat.push(x);
  };
  walk(v);
  return { flat, shape };
}

const prod = (s: number[]): number => s.reduce((a, b) => a * b, 1);

function pySliceList(sl: { start: number | null; stop: number | null; step: number | null }, n: number): number[] {
  const step = sl.step ?? 1;
  const out: number[] = [];
  if (step > 0) {
    let start = sl.start ?? 0;
    let stop = sl.stop ?? n;
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    start = Math.min(Math.max(start, 0), n);
    stop = Math.min(Math.max(stop, 0), n);
    for (let i = start; i < stop; i += step) out.push(i);
  } else {
    let start = sl.start ?? n - 1;
    let stop = sl.stop === null ? -1 : sl.stop < 0 ? sl.stop + n : sl.stop;
    if (sl.start !== null && start < 0) start += n;
    start = Math.min(Math.max(start, -1), n - 1);
    stop = Math.min(Math.max(stop, -1), n - 1);
    for (let i = start; i > stop; i += step) out.push(i);
  }
  return out;
}

function parseSliceText(t: string): { start: number | null; stop: number | null; step: number | null } {
  const parts = t.split(':').map((p) => (p.trim() === '' ? null : Number(p)));
  return { start: parts[0], stop: parts[1], step: parts.length > 2 ? parts[2] : null };
}

/**
 * The naive oracle: for NumPy index `items` on an array of `shape`, the result shape and, for
 * every result element in row-major order, the flat offset it reads (array indices normalised
 * for negatives and, for reads, clamped).
 */
function naive(shape: number[], items: (IndexItem | Nested)[]): { outShape: number[]; src: number[] } {
  type E = { t: 'int'; v: number } | { t: 'slice'; list: number[] } | { t: 'new' } | { t: 'arr'; flat: number[]; shape: number[] };
  const raw: ({ t: 'ell' } | { t: 'mask'; flat: boolean[]; shape: number[] } | { t: 'int'; v: number } | { t: 'sl'; s: { start: number | null; stop: number | null; step: number | null } } | { t: 'new' } | { t: 'arr'; flat: number[]; shape: number[] })[] = [];
  for (const it of items) {
    if (it === null) raw.push({ t: 'new' });
    else if (typeof it === 'number') raw.push({ t: 'int', v: it });
    else if (typeof it === 'string') raw.push(it === '...' ? { t: 'ell' } : { t: 'sl', s: parseSliceText(it) });
    else if (it instanceof Slice) raw.push({ t: 'sl', s: it });
    else {
      const { flat, shape: sh } = flattenNested(it as Nested);
      if (flat.length && typeof flat[0] === 'boolean') raw.push({ t: 'mask', flat: flat as boolean[], shape: sh });
      else raw.push({ t: 'arr', flat: flat as number[], shape: sh });
    }
  }
  const consumed = raw.reduce((n, r) => n + (r.t === 'mask' ? r.shape.length : r.t === 'new' || r.t === 'ell' ? 0 : 1), 0);
  const entries: E[] = [];
  let d = 0;
  let ell = false;
  const fullSl = (n: number): E => ({ t: 'slice', list: [...globalThis.Array(n).keys()] });
  for (const r of raw) {
    if (r.t === 'ell') {
      ell = true;
      for (let k = 0; k < shape.length - consumed; k++) entries.push(fullSl(shape[d++]));
    } else if (r.t === 'mask') {
      const pos: number[][] = r.shape.map(() => []);
      r.flat.forEach((b, f) => {
        if (!b) return;
        let rem = f;
        const c: number[] = [];
        for (let k = r.shape.length - 1; k >= 0; k--) {
          c[k] = rem % r.shape[k];
          rem = Math.floor(rem / r.shape[k]);
        }
        c.forEach((v, k) => pos[k].push(v));
      });
      for (const p of pos) entries.push({ t: 'arr', flat: p, shape: [p.length] });
      d += r.shape.length;
    } else if (r.t === 'sl') entries.push({ t: 'slice', list: pySliceList(r.s, shape[d++]) });
    else if (r.t === 'new') entries.push({ t: 'new' });
    else {
      entries.push(r);
      d++;
    }
  }
  if (!ell) while (d < shape.length) entries.push(fullSl(shape[d++]));
  const hasArr = entries.some((e) => e.t === 'arr');
  const advIdx = entries.flatMap((e, i) => (e.t === 'arr' || (hasArr && e.t === 'int') ? [i] : []));
  const contiguous = advIdx.every((p, i) => i === 0 || p === advIdx[i - 1] + 1);
  const advShapes = entries.flatMap((e) => (e.t === 'arr' ? [e.shape] : hasArr && e.t === 'int' ? [[]] : []));
  const B: number[] = [];
  const rB = Math.max(0, ...advShapes.map((s) => s.length));
  for (let k = 0; k < rB; k++) {
    let n = 1;
    for (const s of advShapes) {
      const v = s[k - (rB - s.length)];
      if (v === undefined) continue;
      if (n === 1) n = v;
      else if (v !== 1 && v !== n) throw new Error('naive: broadcast');
    }
    B.push(n);
  }
  // Output dims: each is ['sl', entryIndex] | ['new'] | ['adv'].
  const outDims: (['sl', number] | ['new'] | ['adv'])[] = [];
  let advPlaced = false;
  if (hasArr && !contiguous) {
    outDims.push(['adv']);
    advPlaced = true;
  }
  entries.forEach((e, i) => {
    if (e.t === 'slice') outDims.push(['sl', i]);
    else if (e.t === 'new') outDims.push(['new']);
    else if (hasArr && !advPlaced) {
      outDims.push(['adv']);
      advPlaced = true;
    }
  });
  const outShape = outDims.flatMap((o) => (o[0] === 'sl' ? [(entries[o[1]] as { list: number[] }).list.length] : o[0] === 'new' ? [1] : B));
  const strides = shape.map((_, k) => prod(shape.slice(k + 1)));
  const src: number[] = [];
  const total = prod(outShape);
  for (let f = 0; f < total; f++) {
    const idx: number[] = [];
    let rem = f;
    for (let k = outShape.length - 1; k >= 0; k--) {
      idx[k] = rem % outShape[k];
      rem = Math.floor(rem / outShape[k]);
    }
    let q = 0;
    const slicePos = new Map<number, number>();
    let bIdx: number[] = [];
    for (const o of outDims) {
      if (o[0] === 'sl') slicePos.set(o[1], idx[q++]);
      else if (o[0] === 'new') q++;
      else {
        bIdx = idx.slice(q, q + B.length);
        q += B.length;
      }
    }
    let off = 0;
    let dim = 0;
    entries.forEach((e, i) => {
      if (e.t === 'new') return;
      const n = shape[dim];
      let c: number;
      if (e.t === 'slice') c = e.list[slicePos.get(i)!];
      else if (e.t === 'int') c = e.v < 0 ? e.v + n : e.v;
      else {
        const sh = e.shape;
        let fo = 0;
        sh.forEach((s, k) => {
          const bi = bIdx[k + B.length - sh.length];
          fo = fo * s + (s === 1 ? 0 : bi);
        });
        c = e.flat[fo];
        if (c < 0) c += n;
        c = Math.min(Math.max(c, 0), n - 1);
      }
      off += c * strides[dim];
      dim++;
    });
    src.push(off);
  }
  return { outShape, src };
}

// ---- generators -------------------------------------------------------------------------------

const shapeArb = fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 });

function sliceArb(n: number): fc.Arbitrary<string | Slice> {
  const bound = fc.option(fc.integer({ min: -n - 2, max: n + 2 }), { nil: null });
  const step = fc.option(fc.integer({ min: -3, max: 3 }).filter((v) => v !== 0), { nil: null });
  return fc.tuple(bound, bound, step, fc.boolean(), fc.boolean()).map(([a, b, c, asObj, short]) => {
    if (asObj) return new Slice(a, b, c);
    const f = (v: number | null): string => (v === null ? '' : String(v));
    return c === null && short ? `${f(a)}:${f(b)}` : `${f(a)}:${f(b)}:${f(c)}`;
  });
}

/** A nested int list of `shape` with entries in [-n, n-1]. */
function intList(shape: number[], n: number): fc.Arbitrary<Nested> {
  if (shape.length === 0) return fc.integer({ min: -n, max: n - 1 });
  return fc.array(intList(shape.slice(1), n), { minLength: shape[0], maxLength: shape[0] }) as fc.Arbitrary<Nested>;
}

function boolList(shape: number[]): fc.Arbitrary<Nested> {
  if (shape.length === 0) return fc.boolean();
  return fc.array(boolList(shape.slice(1)), { minLength: shape[0], maxLength: shape[0] }) as fc.Arbitrary<Nested>;
}

/** A random index expression for `shape`: per-dim choices, then newaxis and ellipsis sprinkled in. */
const caseArb = shapeArb.chain((shape) =>
  fc
    .tuple(
      fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 0, maxLength: 2 }), // advanced broadcast shape
      fc.constantFrom('none', 'arrays', 'mask'),
    )
    .chain(([advShape, advKind]) => {
      const perDim = shape.map((n) => {
        const opts: fc.Arbitrary<IndexItem | Nested | 'skip'>[] = [fc.integer({ min: -n, max: n - 1 }), sliceArb(n), fc.constant('skip' as const)];
        if (advKind === 'arrays') {
          const sub = advShape.map((d) => fc.constantFrom(d, 1));
          opts.push(fc.tuple(...sub).chain((s) => fc.nat(s.length).chain((drop) => intList(s.slice(drop), n))));
        }
        if (advKind === 'mask') opts.push(boolList([n]));
        return fc.oneof(...opts);
      });
      return fc.tuple(fc.constant(shape), fc.tuple(...perDim), fc.nat(3), fc.nat(shape.length + 2), fc.boolean(), fc.nat(shape.length), fc.nat(shape.length));
    })
    .map(([shape, choices, nNew, newPos, useEll, ellPos, dropTrailing]) => {
      // At most one mask (several masks rarely broadcast), keep the rest.
      let seenMask = false;
      let items: (IndexItem | Nested)[] = [];
      for (const c of choices) {
        if (c === 'skip') items.push(':');
        else if (globalThis.Array.isArray(c) && typeof flattenNested(c as Nested).flat[0] === 'boolean') {
          if (seenMask) items.push(':');
          else {
            seenMask = true;
            items.push(c as Nested);
          }
        } else items.push(c as IndexItem);
      }
      // Up to `dropTrailing` trailing ':' may be dropped (they are implicit).
      let popped = 0;
      while (popped < dropTrailing && items.length && items[items.length - 1] === ':') {
        items.pop();
        popped++;
      }
      if (useEll) {
        const at = Math.min(ellPos, items.length);
        let k = 0;
        while (at + k < items.length && items[at + k] === ':') k++;
        // Only where the ellipsis stands for exactly the dims it replaces: k of them when nothing
        // was dropped, or the dropped trailing dims when it goes at the end.
        if (at === items.length || (k > 0 && popped === 0)) items.splice(at, k, '...');
      }
      for (let i = 0; i < nNew % 3; i++) items.splice(Math.min(newPos, items.length), 0, null);
      return { shape, items };
    }),
);

function arange(shape: number[]): Array {
  return np.arange(prod(shape)).astype('float32').reshape(shape);
}

describe('x.get (NumPy indexing) vs naive', () => {
  it('matches the naive implementation on random shapes and index expressions', () => {
    fc.assert(
      fc.property(caseArb, ({ shape, items }) => {
        const x = arange(shape);
        const { outShape, src } = naive(shape, items);
        const y = x.get(...(items as IndexItem[]));
        expect(y.shape).toEqual(outShape);
        expect(globalThis.Array.from(y.dataSync())).toEqual(src);
      }),
      { numRuns: 300 },
    );
  });

  it('agrees with x.at(...).get() and accepts Array indices as well as nested lists', () => {
    fc.assert(
      fc.property(caseArb, ({ shape, items }) => {
        const x = arange(shape);
        const asArrays = items.map((it) => (globalThis.Array.isArray(it) ? np.array(it as never) : it)) as IndexItem[];
        const a = x.get(...(items as IndexItem[]));
        const b = x.at(...asArrays).get();
        expect(b.shape).toEqual(a.shape);
        expect(b.dataSync()).toEqual(a.dataSync());
      }),
      { numRuns: 100 },
    );
  });

  it('handles the classic NumPy placement examples', () => {
    const x = arange([2, 3, 4]);
    expect(x.get([1, 0], ':', [0, 3]).shape).toEqual([2, 3]); // separated -> advanced dims first
    expect(x.get(':', [0, 1], [0, 1]).shape).toEqual([2, 2]); // adjacent -> in place
    expect(x.get(0, ':', [0, 1]).shape).toEqual([2, 3]); // int counts as advanced: separated
    expect(x.get(':', 0, [0, 1]).shape).toEqual([2, 2]);
    expect(x.get(null, '...', null).shape).toEqual([1, 2, 3, 4, 1]);
    expect(x.get('-1::-1', np.s(1), np.s(null, null, -2)).toArray()).toEqual([
      [[15, 13]],
      [[3, 1]],
    ]);
  });
});

describe('x.at(...).set/add/multiply/min/max vs naive', () => {
  const updArb = caseArb.chain(({ shape, items }) => {
    const { outShape } = naive(shape, items);
    return fc.tuple(fc.constant({ shape, items, outShape }), fc.array(fc.integer({ min: -9, max: 9 }), { minLength: prod(outShape), maxLength: prod(outShape) }));
  });

  it('set writes the indexed elements (last write wins) and add accumulates repeats', () => {
    fc.assert(
      fc.property(updArb, ([{ shape, items, outShape }, vals]) => {
        const x = arange(shape);
        const { src } = naive(shape, items);
        const v = np.array(vals.length ? vals : [0]).astype('float32');
        const vv = vals.length ? v.reshape(outShape) : np.zeros(outShape);
        const setExp = globalThis.Array.from(x.dataSync());
        const addExp = globalThis.Array.from(x.dataSync());
        const maxExp = globalThis.Array.from(x.dataSync());
        const subExp = globalThis.Array.from(x.dataSync());
        src.forEach((o, k) => {
          setExp[o] = vals[k];
          addExp[o] += vals[k];
          subExp[o] -= vals[k];
          maxExp[o] = Math.max(maxExp[o], vals[k]);
        });
        const its = items as IndexItem[];
        expect(globalThis.Array.from(x.at(...its).set(vv).dataSync())).toEqual(setExp);
        expect(globalThis.Array.from(x.at(...its).add(vv).dataSync())).toEqual(addExp);
        expect(globalThis.Array.from(x.at(...its).max(vv).dataSync())).toEqual(maxExp);
        expect(globalThis.Array.from(x.at(...its).subtract(vv).dataSync()).map((v) => v + 0)).toEqual(subExp.map((v) => v + 0));
      }),
      { numRuns: 200 },
    );
  });

  it('broadcasts a scalar value and casts it to the array dtype', () => {
    const x = np.zeros([3, 4], 'int32');
    const y = x.at(':', [0, 2]).set(2.7);
    expect(y.dtype).toBe('int32');
    expect(y.toArray()).toEqual([
      [2, 0, 2, 0],
      [2, 0, 2, 0],
      [2, 0, 2, 0],
    ]);
    expect(np.ones([2, 2]).at(0).multiply(np.array([3, 4])).toArray()).toEqual([
      [3, 4],
      [1, 1],
    ]);
    expect(np.array([5, 1, 7]).at([0, 0, 2]).min(2).toArray()).toEqual([2, 1, 2]);
    expect(np.array([8, 1, 9]).astype('float32').at([0, 0, 2]).divide(2).toArray()).toEqual([2, 1, 4.5]);
    expect(np.array([2, 3, 4]).astype('float32').at([0, 2, 2]).power(2).toArray()).toEqual([4, 3, 256]);
    expect(np.array([5, 5]).at([1, 1]).subtract(2).toArray()).toEqual([5, 1]);
    expect(np.array([1, 2, 3, 4]).at([0, 0, 2]).apply((v) => np.multiply(v, 10)).toArray()).toEqual([10, 2, 30, 4]);
    expect(np.arange(6).reshape([2, 3]).at(':', '::2').apply(np.negative).toArray()).toEqual([
      [0, 1, -2],
      [-3, 4, -5],
    ]);
    expect(() => np.arange(3).at(0).apply(() => np.zeros([2]))).toThrow(/fn must be elementwise, returning an array of shape \[3\]; got \[2\]/);
  });
});

describe('out-of-bounds modes', () => {
  const x = np.array([10, 20, 30]);
  it('get clamps by default, fills on request', () => {
    expect(x.get([5, -1, -7]).toArray()).toEqual([30, 30, 10]);
    expect(x.at([5, -1, -7]).get({ mode: 'fill', fillValue: -1 }).toArray()).toEqual([-1, 30, -1]);
    expect(np.array([1.5, 2.5]).at([2]).get({ mode: 'fill' }).dataSync()[0]).toBeNaN();
  });
  it('updates drop out-of-bounds indices by default, clip on request', () => {
    expect(x.at([5, 1]).set(0).toArray()).toEqual([10, 0, 30]);
    expect(x.at([5, 1]).set(0, { mode: 'clip' }).toArray()).toEqual([10, 0, 0]);
    expect(x.at([-4]).add(1).toArray()).toEqual([10, 20, 30]);
  });
  it('static integer indices out of range are an error', () => {
    expect(() => x.get(3)).toThrow(/index 3 is out of bounds for axis 0 with size 3/);
    expect(() => x.at(-4).set(1)).toThrow(/out of bounds/);
  });
});

describe('empty selections', () => {
  it('give empty results and leave updates as no-ops', () => {
    const z = np.zeros([0, 3]);
    expect(z.get([]).shape).toEqual([0, 3]);
    expect(z.get(':', [0, 2]).shape).toEqual([0, 2]);
    expect(np.arange(4).get([]).shape).toEqual([0]);
    expect(np.arange(4).get([]).dtype).toBe('int32');
    expect(np.arange(4).at([]).set(9).toArray()).toEqual([0, 1, 2, 3]);
    expect(np.arange(4).get('3:1').shape).toEqual([0]);
    expect(() => z.get([0])).toThrow(/cannot index with an array into an axis of size 0/);
  });
});

describe('bad indices', () => {
  const x = arange([2, 3]);
  it('names the problem', () => {
    expect(() => x.get('1:2:0')).toThrow(/step 0/);
    expect(() => x.get('1-2')).toThrow(/bad index string "1-2".*'1:3'/);
    expect(() => x.get(0, 0, 0)).toThrow(/too many indices.*\[2,3\] is 2-dimensional, but 3 were indexed/);
    expect(() => x.get('...', '...')).toThrow(/single ellipsis/);
    expect(() => x.get(0.5)).toThrow(/must be integers/);
    expect(() => x.get(np.array([0.5]))).toThrow(/integer or bool dtype/);
    expect(() => x.get([true, false, true])).toThrow(/boolean index of shape \[3\] does not match .*\[2\]/);
    expect(() => x.get([0, 1], [0, 1, 2])).toThrow(/could not be broadcast together with shapes \[2\], \[3\]/);
    expect(() => x.at(0).set(np.ones([4]))).toThrow(/value of shape \[4\] cannot broadcast to the indexed shape \[3\]/);
    expect(() => x.at(0).get({ mode: 'wrap' as never })).toThrow(/mode must be/);
    expect(() => new Slice(0, 1, 0)).toThrow(/step cannot be zero/);
  });
});
