// einsum against naive summation loops for random subscripts (repeated labels, ellipsis with
// broadcasting, implicit and explicit outputs), tensordot against einsum, and spec errors.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { np } from '../index';
import { expectAllclose } from '../../test/matchers';

const prod = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);
const LETTERS = ['a', 'b', 'c', 'd', 'B'];

interface Spec {
  sizes: Record<string, number>;
  ellShape: number[];
  ops: { labels: string[]; ellAt: number; ellShape: number[] }[]; // ellAt -1: none
  out: string[] | null; // null: implicit
  values: number[][];
}

const specArb: fc.Arbitrary<Spec> = fc
  .record({
    sizes: fc.tuple(...LETTERS.map(() => fc.integer({ min: 1, max: 3 }))).map((s) => Object.fromEntries(LETTERS.map((l, i) => [l, s[i]]))),
    ellShape: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 2 }),
    nOps: fc.integer({ min: 1, max: 3 }),
  })
  .chain(({ sizes, ellShape, nOps }) =>
    fc
      .tuple(
        fc.array(
          fc.record({
            labels: fc.array(fc.constantFrom(...LETTERS), { maxLength: 3 }),
            useEll: fc.boolean(),
            ellPos: fc.nat(3),
            ellDrop: fc.nat(2),
            ones: fc.array(fc.boolean(), { minLength: 2, maxLength: 2 }),
          }),
          { minLength: nOps, maxLength: nOps },
        ),
        fc.boolean(),
        fc.shuffledSubarray(LETTERS),
      )
      .map(([ops, implicit, outPick]) => {
        const built = ops.map((o) => {
          if (!o.useEll) return { labels: o.labels, ellAt: -1, ellShape: [] as number[] };
          const rank = Math.max(0, ellShape.length - (o.ellDrop % (ellShape.length + 1)));
          const sub = ellShape.slice(ellShape.length - rank).map((d, i) => (o.ones[i] ? 1 : d));
          return { labels: o.labels, ellAt: Math.min(o.ellPos, o.labels.length), ellShape: sub };
        });
        const used = new Set(built.flatMap((o) => o.labels));
        const anyEll = built.some((o) => o.ellAt >= 0);
        // The broadcast ellipsis shape actually present.
        const eRank = Math.max(0, ...built.map((o) => o.ellShape.length));
        const eShape = Array.from({ length: eRank }, (_, k) => Math.max(1, ...built.map((o) => o.ellShape[k - (eRank - o.ellShape.length)] ?? 1)));
        const out = implicit ? null : outPick.filter((l) => used.has(l));
        return { sizes, ellShape: anyEll ? eShape : [], ops: built, out, values: [] as number[][] };
      }),
  )
  .chain((s) =>
    fc.tuple(fc.constant(s), fc.tuple(...s.ops.map((o) => fc.array(fc.integer({ min: -3, max: 3 }), { minLength: opSize(s, o), maxLength: opSize(s, o) })))).map(([sp, vals]) => ({ ...sp, values: vals })),
  );

function opShape(s: Spec, o: Spec['ops'][number]): number[] {
  const named = o.labels.map((l) => s.sizes[l]);
  return o.ellAt < 0 ? named : [...named.slice(0, o.ellAt), ...o.ellShape, ...named.slice(o.ellAt)];
}
function opSize(s: Spec, o: Spec['ops'][number]): number {
  return prod(opShape(s, o));
}

function specString(s: Spec): string {
  const term = (o: Spec['ops'][number]): string => (o.ellAt < 0 ? o.labels.join('') : `${o.labels.slice(0, o.ellAt).join('')}...${o.labels.slice(o.ellAt).join('')}`);
  const ins = s.ops.map(term).join(',');
  if (s.out === null) return ins;
  return `${ins}->${s.ops.some((o) => o.ellAt >= 0) ? '...' : ''}${s.out.join('')}`;
}

/** Sum over every assignment of every label of the product of the operand entries. */
function naive(s: Spec): { shape: number[]; values: number[] } {
  const counts = new Map<string, number>();
  for (const o of s.ops) for (const l of o.labels) counts.set(l, (counts.get(l) ?? 0) + 1);
  const outLetters = s.out ?? [...counts.keys()].filter((l) => counts.get(l) === 1).sort();
  const ellLabels = s.ellShape.map((_, k) => `#${k}`);
  const outLabels = [...ellLabels, ...outLetters];
  const all = [...ellLabels, ...new Set(s.ops.flatMap((o) => o.labels))];
  const size = (l: string): number => (l.startsWith('#') ? s.ellShape[Number(l.slice(1))] : s.sizes[l]);
  const outShape = outLabels.map(size);
  const out = new Array(prod(outShape)).fill(0);
  const dims = all.map(size);
  for (let f = 0; f < prod(dims); f++) {
    const val = new Map<string, number>();
    let rem = f;
    for (let k = all.length - 1; k >= 0; k--) {
      val.set(all[k], rem % dims[k]);
      rem = Math.floor(rem / dims[k]);
    }
    let p = 1;
    s.ops.forEach((o, i) => {
      const shape = opShape(s, o);
      const e = o.ellShape.length;
      const labs = o.ellAt < 0 ? o.labels : [...o.labels.slice(0, o.ellAt), ...o.ellShape.map((_, k) => `#${s.ellShape.length - e + k}`), ...o.labels.slice(o.ellAt)];
      const off = labs.reduce((acc, l, d) => acc * shape[d] + (shape[d] === 1 ? 0 : val.get(l)!), 0);
      p *= s.values[i][off];
    });
    const oo = outLabels.reduce((acc, l, d) => acc * outShape[d] + val.get(l)!, 0);
    out[oo] += p;
  }
  return { shape: outShape, values: out };
}

describe('einsum', () => {
  it('matches naive summation loops for random subscripts', () => {
    fc.assert(
      fc.property(specArb, (s) => {
        const spec = specString(s);
        const ops = s.ops.map((o, i) => np.array(s.values[i].length ? s.values[i] : [0]).astype('float32').reshape(opShape(s, o)));
        const ops2 = s.ops.map((o, i) => (s.values[i].length ? ops[i] : np.zeros(opShape(s, o))));
        const { shape, values } = naive(s);
        const y = np.einsum(spec, ...ops2);
        expect(y.shape).toEqual(shape);
        expectAllclose(y, values, { rtol: 0, atol: 0 });
      }),
      { numRuns: 200 },
    );
  });

  it('handles the common named forms', () => {
    const a = np.arange(6).reshape([2, 3]).astype('float32');
    const b = np.arange(12).reshape([3, 4]).astype('float32');
    expect(np.einsum('ij,jk->ik', a, b).dataSync()).toEqual(np.matmul(a, b).dataSync());
    expect(np.einsum('ij->ji', a).dataSync()).toEqual(np.transpose(a).dataSync());
    expect(np.einsum('ii', np.arange(9).reshape([3, 3])).item()).toBe(12);
    expect(np.einsum('i,i', np.array([1, 2]), np.array([3, 4])).item()).toBe(11);
    expect(np.einsum('i,j->ij', np.array([1, 2]), np.array([3, 4, 5])).toArray()).toEqual([
      [3, 4, 5],
      [6, 8, 10],
    ]);
    expect(np.einsum('bij,bjk->bik', np.ones([5, 2, 3]), np.ones([5, 3, 4])).shape).toEqual([5, 2, 4]);
    expect(np.einsum('ij,jk', np.ones([2, 3], 'int32'), np.ones([3, 2])).dtype).toBe('float32');
    expect(np.einsum('ij,jk', a, b, { precision: 'highest' }).dataSync()).toEqual(np.matmul(a, b).dataSync());
  });

  it('rejects bad subscripts with a clear message', () => {
    const a = np.ones([2, 3]);
    expect(() => np.einsum('ij,jk', a)).toThrow(/name 2 operand\(s\) but 1 were given/);
    expect(() => np.einsum('ijk', a)).toThrow(/operand 0 term "ijk" has 3 labels but the operand has shape \[2,3\]/);
    expect(() => np.einsum('i1', a)).toThrow(/invalid character "1"/);
    expect(() => np.einsum('ij->ii', a)).toThrow(/output label 'i' appears more than once/);
    expect(() => np.einsum('ij->k', a)).toThrow(/output label 'k' does not appear in any input/);
    expect(() => np.einsum('ij,ij', a, np.ones([3, 2]))).toThrow(/label 'i' has size 3 in operand 1 \(shape \[3,2\]\) but 2 elsewhere/);
    expect(() => np.einsum('i...j...', a)).toThrow(/more than one '...'/);
    expect(() => np.einsum('i->i->i', a)).toThrow(/more than one '->'/);
  });
});

describe('tensordot / outer / diagonal', () => {
  it('tensordot equals the matching einsum', () => {
    const arb = fc
      .tuple(fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 0, maxLength: 2 }), fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 2 }), fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 2 }), fc.boolean())
      .map(([shared, fa, fb, asPair]) => ({ shared, fa, fb, asPair }));
    fc.assert(
      fc.property(arb, ({ shared, fa, fb, asPair }) => {
        const a = np.arange(prod([...fa, ...shared])).astype('float32').reshape([...fa, ...shared]);
        const b = np.arange(prod([...shared, ...fb])).astype('float32').reshape([...shared, ...fb]);
        const la = 'abcdef';
        const lf = 'uv';
        const lg = 'xy';
        const sa = fa.map((_, i) => lf[i]).join('') + shared.map((_, i) => la[i]).join('');
        const sb = shared.map((_, i) => la[i]).join('') + fb.map((_, i) => lg[i]).join('');
        const out = fa.map((_, i) => lf[i]).join('') + fb.map((_, i) => lg[i]).join('');
        const want = np.einsum(`${sa},${sb}->${out}`, a, b);
        const axes = asPair ? ([shared.map((_, i) => fa.length + i), shared.map((_, i) => i)] as [number[], number[]]) : shared.length;
        const got = np.tensordot(a, b, axes);
        expect(got.shape).toEqual(want.shape);
        expect(got.dataSync()).toEqual(want.dataSync());
      }),
      { numRuns: 60 },
    );
    expect(() => np.tensordot(np.ones([2, 3]), np.ones([4, 2]), 1)).toThrow(/shape mismatch: a \[2,3\] axis 1 \(size 3\) vs b \[4,2\] axis 0 \(size 4\)/);
    expect(() => np.tensordot(np.ones([2]), np.ones([2]), 2)).toThrow(/axes 2 must be an integer between 0 and min\(rank a, rank b\) = 1/);
  });

  it('outer, diagonal, diag, trace, tril, triu', () => {
    expect(np.outer(np.array([1, 2]), np.array([[1], [2], [3]])).shape).toEqual([2, 3]);
    const m = np.arange(12).reshape([3, 4]);
    expect(np.diagonal(m).toArray()).toEqual([0, 5, 10]);
    expect(np.diagonal(m, 1).toArray()).toEqual([1, 6, 11]);
    expect(np.diagonal(m, -1).toArray()).toEqual([4, 9]);
    expect(np.diagonal(m, 5).toArray()).toEqual([]);
    expect(np.diagonal(np.arange(8).reshape([2, 2, 2]), 0, 1, 2).toArray()).toEqual([
      [0, 3],
      [4, 7],
    ]);
    expect(np.trace(m).item()).toBe(15);
    expect(np.diag(np.array([1, 2]), 1).toArray()).toEqual([
      [0, 1, 0],
      [0, 0, 2],
      [0, 0, 0],
    ]);
    expect(np.tril(m, -1).toArray()).toEqual([
      [0, 0, 0, 0],
      [4, 0, 0, 0],
      [8, 9, 0, 0],
    ]);
    expect(np.triu(m).toArray()).toEqual([
      [0, 1, 2, 3],
      [0, 5, 6, 7],
      [0, 0, 10, 11],
    ]);
    expect(() => np.diagonal(np.ones([3]))).toThrow(/rank >= 2; got \[3\]/);
    expect(() => np.diagonal(m, 0, 1, -1)).toThrow(/axis1 and axis2 cannot be the same/);
  });
});
