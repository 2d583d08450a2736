// gather and the scatter family against a naive per-element reading of XLA's semantics for random
// dimension numbers (batching dims included), round-trip laws, take / take_along_axis, and errors.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lax, np } from '../index';
import type { GatherScatterMode } from './gather';
import { prod, unravel, ravel } from '../../test/indexMath';


interface Case {
  shape: number[];
  batchShape: number[];
  startIndexMap: number[];
  collapsed: number[];
  opBatch: number[];
  idxBatch: number[];
  sliceSizes: number[];
  offsetDims: number[];
  indices: number[]; // flat, [...batchShape, K]
  mode: GatherScatterMode;
}

function subset<T>(xs: T[]): fc.Arbitrary<T[]> {
  return fc.tuple(...xs.map(() => fc.boolean())).map((keep) => xs.filter((_, i) => keep[i]));
}

const caseArb: fc.Arbitrary<Case> = fc
  .tuple(fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 3 }), fc.boolean(), fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 2 }))
  .chain(([shape, withBatch, batchRest]) => {
    const dims = shape.map((_, i) => i);
    const opBatch = withBatch && shape.length > 1 ? [shape.length - 1] : [];
    const free = dims.filter((d) => !opBatch.includes(d));
    return fc
      .tuple(fc.shuffledSubarray(free), subset(free), fc.nat(batchRest.length), fc.constantFrom<GatherScatterMode>('clip', 'fill', 'promise_in_bounds'))
      .chain(([startIndexMap, collapsed, pos, mode]) => {
        const batchShape = batchRest.slice();
        const idxBatch: number[] = [];
        if (opBatch.length) {
          batchShape.splice(pos, 0, shape[opBatch[0]]);
          idxBatch.push(pos);
        }
        const sizeArbs = shape.map((n, d) => (collapsed.includes(d) || opBatch.includes(d) ? fc.constant(1) : fc.integer({ min: 0, max: n })));
        const nWin = shape.length - collapsed.length - opBatch.length;
        const outRank = batchShape.length + nWin;
        const K = startIndexMap.length;
        return fc.record({
          shape: fc.constant(shape),
          batchShape: fc.constant(batchShape),
          startIndexMap: fc.constant(startIndexMap),
          collapsed: fc.constant(collapsed),
          opBatch: fc.constant(opBatch),
          idxBatch: fc.constant(idxBatch),
          sliceSizes: fc.tuple(...sizeArbs),
          offsetDims: fc.shuffledSubarray([...Array(outRank).keys()], { minLength: nWin, maxLength: nWin }).map((a) => a.sort((p, q) => p - q)),
          indices: fc.array(fc.integer({ min: -2, max: 5 }), { minLength: prod(batchShape) * K, maxLength: prod(batchShape) * K }),
          mode: fc.constant(mode),
        });
      });
  });

/** Operand index for (batch index G, window index W), or null when the slice is out of bounds ('fill'/drop). */
function operandIndex(c: Case, G: number[], W: number[], sizes: number[], drop: boolean): number[] | null {
  const K = c.startIndexMap.length;
  const start = c.shape.map(() => 0);
  const bflat = ravel(G, c.batchShape);
  for (let k = 0; k < K; k++) {
    const d = c.startIndexMap[k];
    const s = c.indices[bflat * K + k];
    const hi = c.shape[d] - sizes[d];
    if (drop) {
      if (s < 0 || s > hi) return null;
      start[d] = s;
    } else start[d] = Math.min(Math.max(s, 0), hi);
  }
  c.opBatch.forEach((d, i) => (start[d] = G[c.idxBatch[i]]));
  const winDims = c.shape.map((_, d) => d).filter((d) => !c.collapsed.includes(d) && !c.opBatch.includes(d));
  winDims.forEach((d, j) => (start[d] += W[j]));
  return start;
}

function outShapeOf(c: Case): number[] {
  const winDims = c.shape.map((_, d) => d).filter((d) => !c.collapsed.includes(d) && !c.opBatch.includes(d));
  const out: number[] = [];
  let b = 0;
  let w = 0;
  for (let i = 0; i < c.batchShape.length + winDims.length; i++) out.push(c.offsetDims.includes(i) ? c.sliceSizes[winDims[w++]] : c.batchShape[b++]);
  return out;
}

function runGather(c: Case) {
  const x = np.arange(prod(c.shape)).astype('float32').reshape(c.shape);
  const idx = c.indices.length ? np.array(c.indices, 'int32').reshape([...c.batchShape, c.startIndexMap.length]) : np.zeros([...c.batchShape, c.startIndexMap.length], 'int32');
  return lax.gather(
    x,
    idx,
    { offsetDims: c.offsetDims, collapsedSliceDims: c.collapsed, startIndexMap: c.startIndexMap, operandBatchingDims: c.opBatch, startIndicesBatchingDims: c.idxBatch },
    c.sliceSizes,
    { mode: c.mode },
  );
}

describe('gather', () => {
  it('matches a naive reading of XLA gather for random dimension numbers and modes', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const y = runGather(c);
        const outShape = outShapeOf(c);
        expect(y.shape).toEqual(outShape);
        const expected: number[] = [];
        for (let f = 0; f < prod(outShape); f++) {
          const o = unravel(f, outShape);
          const G = o.filter((_, i) => !c.offsetDims.includes(i));
          const W = o.filter((_, i) => c.offsetDims.includes(i));
          const at = operandIndex(c, G, W, c.sliceSizes, c.mode === 'fill');
          expected.push(at === null ? NaN : ravel(at, c.shape));
        }
        expect(Array.from(y.dataSync())).toEqual(expected);
      }),
      { numRuns: 200 },
    );
  });

  it('fills with the dtype default: NaN, most negative signed, largest unsigned, true', () => {
    const dn = { offsetDims: [], collapsedSliceDims: [0], startIndexMap: [0] };
    expect(lax.gather(np.array([1, 2], 'int32'), [[3]], dn, [1]).toArray()).toEqual([-2147483648]);
    expect(lax.gather(np.array([1, 2], 'uint8'), [[3]], dn, [1]).toArray()).toEqual([255]);
    expect(lax.gather(np.array([false]), [[3]], dn, [1]).toArray()).toEqual([true]);
    expect(lax.gather(np.array([1, 2], 'bfloat16'), [[-1]], dn, [1], { fillValue: 7 }).toArray()).toEqual([7]);
    expect(lax.gather(np.array([1, 2]), [[5]], dn, [1], { mode: 'drop', fillValue: 3 }).toArray()).toEqual([3]);
    expect(lax.gather(np.array([1, 2]), [[5]], dn, [1], { mode: 'clip' }).toArray()).toEqual([2]);
  });
});

describe('scatter family', () => {
  const kinds = ['scatter', 'scatter-add', 'scatter-mul', 'scatter-min', 'scatter-max'] as const;
  const fns = { scatter: lax.scatter, 'scatter-add': lax.scatterAdd, 'scatter-mul': lax.scatterMul, 'scatter-min': lax.scatterMin, 'scatter-max': lax.scatterMax };
  const comb = {
    scatter: (_a: number, b: number) => b,
    'scatter-add': (a: number, b: number) => a + b,
    'scatter-mul': (a: number, b: number) => a * b,
    'scatter-min': Math.min,
    'scatter-max': Math.max,
  };

  it('matches a naive application of the updates (out-of-bounds windows dropped or clipped)', () => {
    fc.assert(
      fc.property(caseArb, fc.constantFrom(...kinds), (c, kind) => {
        const updShape = outShapeOf(c);
        const upd = Array.from({ length: prod(updShape) }, (_, i) => (i % 7) - 3);
        const x = np.arange(prod(c.shape)).astype('float32').reshape(c.shape);
        const idx = c.indices.length ? np.array(c.indices, 'int32').reshape([...c.batchShape, c.startIndexMap.length]) : np.zeros([...c.batchShape, 0], 'int32');
        const u = upd.length ? np.array(upd).astype('float32').reshape(updShape) : np.zeros(updShape);
        const y = fns[kind](
          x,
          idx,
          u,
          { updateWindowDims: c.offsetDims, insertedWindowDims: c.collapsed, scatterDimsToOperandDims: c.startIndexMap, operandBatchingDims: c.opBatch, scatterIndicesBatchingDims: c.idxBatch },
          { mode: c.mode === 'clip' ? 'clip' : 'drop' },
        );
        const expected = Array.from(x.dataSync());
        const winDims = c.shape.map((_, d) => d).filter((d) => !c.collapsed.includes(d) && !c.opBatch.includes(d));
        const full = c.shape.map(() => 1);
        winDims.forEach((d, j) => (full[d] = updShape[c.offsetDims[j]]));
        // Application order (it matters for 'scatter' with overlapping windows): batch index
        // major, then window index, both row-major, as the kernel documents.
        const winShape = c.offsetDims.map((d) => updShape[d]);
        const order = [...Array(upd.length).keys()]
          .map((f) => {
            const o = unravel(f, updShape);
            const G = o.filter((_, i) => !c.offsetDims.includes(i));
            const W = o.filter((_, i) => c.offsetDims.includes(i));
            return { f, key: ravel(G, c.batchShape) * prod(winShape) + ravel(W, winShape) };
          })
          .sort((p, q) => p.key - q.key)
          .map((e) => e.f);
        for (const f of order) {
          const o = unravel(f, updShape);
          const G = o.filter((_, i) => !c.offsetDims.includes(i));
          const W = o.filter((_, i) => c.offsetDims.includes(i));
          const at = operandIndex(c, G, W, full, c.mode !== 'clip');
          if (at === null) continue;
          const off = ravel(at, c.shape);
          expected[off] = comb[kind](expected[off], upd[f]);
        }
        expect(Array.from(y.dataSync())).toEqual(expected);
      }),
      { numRuns: 200 },
    );
  });

  it('round trips: scatter of what gather read is the identity; gather of unique scattered rows returns them', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const cc = { ...c, mode: 'clip' as const };
        const x = np.arange(prod(c.shape)).astype('float32').reshape(c.shape);
        const idx = c.indices.length ? np.array(c.indices, 'int32').reshape([...c.batchShape, c.startIndexMap.length]) : np.zeros([...c.batchShape, 0], 'int32');
        const g = runGather(cc);
        const dn = { updateWindowDims: c.offsetDims, insertedWindowDims: c.collapsed, scatterDimsToOperandDims: c.startIndexMap, operandBatchingDims: c.opBatch, scatterIndicesBatchingDims: c.idxBatch };
        expect(lax.scatter(x, idx, g, dn, { mode: 'clip' }).dataSync()).toEqual(x.dataSync());
      }),
      { numRuns: 100 },
    );
    // Unique in-bounds row indices: gather(scatter(zeros, idx, rows), idx) == rows.
    fc.assert(
      fc.property(fc.shuffledSubarray([0, 1, 2, 3, 4, 5], { minLength: 1 }), (rows) => {
        const upd = np.add(np.arange(rows.length * 3).reshape([rows.length, 3]), 1).astype('float32');
        const idx = np.array(rows.map((r) => [r]), 'int32');
        const z = lax.scatter(np.zeros([6, 3]), idx, upd, { updateWindowDims: [1], insertedWindowDims: [0], scatterDimsToOperandDims: [0] });
        const back = lax.gather(z, idx, { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0] }, [1, 3]);
        expect(back.dataSync()).toEqual(upd.dataSync());
      }),
      { numRuns: 30 },
    );
  });

  it('integer scatter-add wraps like the dtype; bool add is or', () => {
    const dn = { updateWindowDims: [], insertedWindowDims: [0], scatterDimsToOperandDims: [0] };
    expect(lax.scatterAdd(np.array([2147483647], 'int32'), [[0]], np.array([1], 'int32'), dn).toArray()).toEqual([-2147483648]);
    expect(lax.scatterAdd(np.array([250], 'uint8'), [[0], [0]], np.array([5, 5], 'uint8'), dn).toArray()).toEqual([4]);
    expect(lax.scatterAdd(np.array([false, true]), [[0], [1]], np.array([true, false]), dn).toArray()).toEqual([true, true]);
    expect(lax.scatterMax(np.array([1, NaN]), [[0]], np.array([NaN]), dn).dataSync()[0]).toBeNaN();
  });

  it('rejects bad dimension numbers with the values', () => {
    const x = np.zeros([3, 4]);
    const idx = np.array([[0], [1]], 'int32');
    expect(() => lax.gather(x, idx, { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0] }, [2, 4])).toThrow(/slice_sizes\[0\] is 2 but dimension 0 is collapsed/);
    expect(() => lax.gather(x, idx, { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0, 1] }, [1, 4])).toThrow(/index vector \(last dimension of indices \[2,1\]\) has 1 entries but start_index_map \[0,1\] has 2/);
    expect(() => lax.gather(x, idx, { offsetDims: [0], collapsedSliceDims: [0], startIndexMap: [0] }, [1, 5])).toThrow(/slice_sizes \[1,5\] must lie within operand \[3,4\]/);
    expect(() => lax.gather(x, idx, { offsetDims: [1, 2], collapsedSliceDims: [0], startIndexMap: [0] }, [1, 4])).toThrow(/offset_dims \[1,2\] must have 1 entries/);
    expect(() => lax.gather(x, idx, { offsetDims: [1], collapsedSliceDims: [2], startIndexMap: [0] }, [1, 4])).toThrow(/collapsed_slice_dims \[2\] has 2, out of range/);
    expect(() => lax.gather(x, np.array([[0.5]]), { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0] }, [1, 4])).toThrow(/indices must have an integer dtype; got float32/);
    expect(() => lax.gather(x, idx, { offsetDims: [1], collapsedSliceDims: [0], startIndexMap: [0] }, [1, 4], { mode: 'wrap' as never })).toThrow(/mode must be one of clip, fill, promise_in_bounds/);
    const sdn = { updateWindowDims: [1], insertedWindowDims: [0], scatterDimsToOperandDims: [0] };
    expect(() => lax.scatter(x, idx, np.zeros([3, 4]), sdn)).toThrow(/updates \[3,4\] scatter dimension 0 must match indices batch shape \[2\]/);
    expect(() => lax.scatter(x, idx, np.zeros([2, 5]), sdn)).toThrow(/update window dimension 1 \(size 5\) is larger than operand dimension 1 \(size 4\)/);
    expect(() => lax.scatter(x, idx, np.zeros([2, 4], 'int32'), sdn)).toThrow(/updates dtype int32 must equal operand dtype float32/);
  });
});

describe('take / take_along_axis', () => {
  it('take matches indexing along an axis, with fill / clip / wrap modes', () => {
    const x = np.arange(12).reshape([3, 4]);
    expect(np.take(x, [2, 0], { axis: 1 }).toArray()).toEqual([
      [2, 0],
      [6, 4],
      [10, 8],
    ]);
    expect(np.take(x, [[5]]).toArray()).toEqual([[5]]);
    expect(np.take(np.arange(4), [-1, 4, 9], { mode: 'clip' }).toArray()).toEqual([0, 3, 3]);
    expect(np.take(np.arange(4), [-1, 5], { mode: 'wrap' }).toArray()).toEqual([3, 1]);
    expect(np.take(np.arange(4), [-1, 4], { mode: 'fill', fillValue: -9 }).toArray()).toEqual([3, -9]);
    expect(() => np.take(x, [0], { axis: 2 })).toThrow(/axis 2 is out of range for an array of rank 2/);
  });

  it('take_along_axis with argsort sorts each row', () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.integer({ min: -5, max: 5 }), { minLength: 3, maxLength: 3 }), { minLength: 1, maxLength: 4 }), (rows) => {
        const x = np.array(rows);
        const y = np.takeAlongAxis(x, np.argsort(x, { axis: 1 }), 1);
        expect(y.toArray()).toEqual(rows.map((r) => [...r].sort((a, b) => a - b)));
        const z = np.takeAlongAxis(x, np.argsort(x, { axis: 0 }), 0);
        expect(z.dataSync()).toEqual(np.sort(x, { axis: 0 }).dataSync());
      }),
      { numRuns: 40 },
    );
    expect(() => np.takeAlongAxis(np.zeros([2, 2]), np.zeros([2], 'int32'), 0)).toThrow(/must have the same number of dimensions/);
  });
});
