/**
 * The gather and scatter primitives with their rules, in one module because they are each
 * other's transposes (gather's is a scatter-add; scatter-add's and scatter's are gathers). Their
 * shape rules and kernels are in gather.ts and scatter.ts; their lax ops are in ops.ts. Index
 * operands never carry tangents.
 */
import type { Array } from '../array';
import { type BatchRule, type BDim, type JvpRule, NON_LINEAR, type Primitive, type PrimitiveRules, definePrimitive, isUndef, type UndefPrimal } from '../primitive';
import { bind } from '../trace';
import { type GatherParams, gatherDef } from './gather';
import { p1, shift } from './ruleKit';
import { COMBINE, type ScatterParams, scatterDef } from './scatter';
import { instantiate, linearInJvp, moveBdim, reshape, zerosOf } from './structural';

export const gather = definePrimitive<GatherParams>({
  ...gatherDef,
  rules: (self) => ({
    jvp: linearInJvp(self, 1),
    transpose: ([ct], [x, idx], params) => {
      const a = (x as UndefPrimal).aval;
      const out = p1(scatterAdd, [zerosOf(a), idx as Array, ct!], {
        dimensionNumbers: scatterDnFromGather(params.dimensionNumbers),
        mode: params.mode,
        indicesAreSorted: params.indicesAreSorted,
        uniqueIndices: params.uniqueIndices,
      });
      return [out, null];
    },
    batch: gatherBatch(self),
  }),
});

/** scatter / scatter-add: operand and updates are linear, indices (operand 1) are not. */
const scatterLinear = (prim: Primitive): JvpRule => ([x, idx, u], [tx, , tu], params) => {
  const y = p1(prim, [x, idx, u], params);
  if (tx === null && tu === null) return [[y], [null]];
  return [[y], [p1(prim, [instantiate(tx, x.aval), idx, instantiate(tu, u.aval)], params)]];
};

const defineScatter = (name: string, combine: (typeof COMBINE)[keyof typeof COMBINE], rules: (self: Primitive) => PrimitiveRules): Primitive<ScatterParams> =>
  definePrimitive<ScatterParams>({ ...scatterDef(name, combine), rules: (self) => ({ batch: scatterBatch(self), ...rules(self) }) });

const updatesAval = (u: Array | UndefPrimal) => (isUndef(u) ? u.aval : (u as Array).aval);

// Overwriting scatter: transposable when indices are unique (as in JAX).
export const scatter = defineScatter('scatter', COMBINE.scatter, (self) => ({
  jvp: scatterLinear(self),
  transpose: ([ct], [x, idx, u], params) => {
    const ua = updatesAval(u);
    return [
      isUndef(x) ? p1(self, [ct!, idx as Array, zerosOf(ua)], params) : null,
      null,
      isUndef(u) ? gatherFromScatter(ct!, idx as Array, ua.shape, params) : null,
    ];
  },
}));
export const scatterAdd = defineScatter('scatter-add', COMBINE.add, (self) => ({
  jvp: scatterLinear(self),
  transpose: ([ct], [x, idx, u], params) => {
    const ua = updatesAval(u);
    return [isUndef(x) ? ct : null, null, isUndef(u) ? gatherFromScatter(ct!, idx as Array, ua.shape, params) : null];
  },
}));
/** No jvp rules (documented gaps, see transforms/rules.test.ts). */
const noJvp = (): PrimitiveRules => ({ transpose: NON_LINEAR });
export const scatterMul = defineScatter('scatter-mul', COMBINE.mul, noJvp);
export const scatterMin = defineScatter('scatter-min', COMBINE.min, noJvp);
export const scatterMax = defineScatter('scatter-max', COMBINE.max, noJvp);

// ---------------------------------------------------------------------------------------------
// Transposes

/** Scatter dimension numbers that undo a gather's (and the gather that reads a scatter's updates). */
function scatterDnFromGather(dn: any) {
  return {
    updateWindowDims: dn.offsetDims,
    insertedWindowDims: dn.collapsedSliceDims,
    scatterDimsToOperandDims: dn.startIndexMap,
    operandBatchingDims: dn.operandBatchingDims,
    scatterIndicesBatchingDims: dn.startIndicesBatchingDims,
  };
}
function gatherFromScatter(operand: Array, idx: Array, updatesShape: readonly number[], params: any): Array {
  const dn = params.dimensionNumbers;
  const skip = new Set<number>([...dn.insertedWindowDims, ...dn.operandBatchingDims]);
  let w = 0;
  const sliceSizes = operand.shape.map((_, d) => (skip.has(d) ? 1 : updatesShape[dn.updateWindowDims[w++]]));
  return p1(gather, [operand, idx], {
    dimensionNumbers: {
      offsetDims: dn.updateWindowDims,
      collapsedSliceDims: dn.insertedWindowDims,
      startIndexMap: dn.scatterDimsToOperandDims,
      operandBatchingDims: dn.operandBatchingDims,
      startIndicesBatchingDims: dn.scatterIndicesBatchingDims,
    },
    sliceSizes,
    mode: params.mode,
    fillValue: null,
    indicesAreSorted: params.indicesAreSorted,
    uniqueIndices: params.uniqueIndices,
  });
}

/** `take_along_axis` with in-range indices, as a gather with batching dims (sort's and top_k's jvp). */
export function takeAlong(x: Array, idx: Array, axis: number): Array {
  const others = x.shape.map((_, d) => d).filter((d) => d !== axis);
  return bind(gather, [x, reshape(idx, [...idx.shape, 1])], {
    dimensionNumbers: { offsetDims: [], collapsedSliceDims: [axis], startIndexMap: [axis], operandBatchingDims: others, startIndicesBatchingDims: others },
    sliceSizes: x.shape.map(() => 1),
    mode: 'clip',
    fillValue: null,
    indicesAreSorted: false,
    uniqueIndices: false,
  })[0];
}

// ---------------------------------------------------------------------------------------------
// Batching

const isB = (d: BDim): boolean => d !== null;

function gatherBatch(prim: Primitive): BatchRule {
  return ([x, idx], [dx, di], params, n) => {
    const dn = params.dimensionNumbers;
    const s = (a: readonly number[]) => shift(a);
    if (dx !== null && di === null) {
      // The operand's batch dim becomes a leading offset (window) dim of full size.
      return [[p1(prim, [moveBdim(x, dx, 0, n), idx], {
        ...params,
        dimensionNumbers: { offsetDims: [0, ...s(dn.offsetDims)], collapsedSliceDims: s(dn.collapsedSliceDims), startIndexMap: s(dn.startIndexMap), operandBatchingDims: s(dn.operandBatchingDims), startIndicesBatchingDims: dn.startIndicesBatchingDims },
        sliceSizes: [n, ...params.sliceSizes],
      })], [0]];
    }
    if (dx === null) {
      // Batched indices: a new leading batch dim of the indices, which leads the output.
      return [[p1(prim, [x, moveBdim(idx, di, 0, n)], {
        ...params,
        dimensionNumbers: { ...dn, offsetDims: s(dn.offsetDims), startIndicesBatchingDims: s(dn.startIndicesBatchingDims) },
      })], [0]];
    }
    return [[p1(prim, [moveBdim(x, dx, 0, n), moveBdim(idx, di, 0, n)], {
      ...params,
      dimensionNumbers: {
        offsetDims: s(dn.offsetDims),
        collapsedSliceDims: s(dn.collapsedSliceDims),
        startIndexMap: s(dn.startIndexMap),
        operandBatchingDims: [0, ...s(dn.operandBatchingDims)],
        startIndicesBatchingDims: [0, ...s(dn.startIndicesBatchingDims)],
      },
      sliceSizes: [1, ...params.sliceSizes],
    })], [0]];
  };
}

/** Scatters: a leading window dim when the indices are shared; a batching dim pair when not. */
function scatterBatch(prim: Primitive): BatchRule {
  return (vals, dims, params, n) => {
    const [x, idx, u] = vals;
    const dn = params.dimensionNumbers;
    if (isB(dims[1])) {
      // Batched indices: everything batched at 0, the batch a new batching dim pair.
      return [[p1(prim, [moveBdim(x, dims[0], 0, n), moveBdim(idx, dims[1], 0, n), moveBdim(u, dims[2], 0, n)], {
        ...params,
        dimensionNumbers: {
          updateWindowDims: shift(dn.updateWindowDims),
          insertedWindowDims: shift(dn.insertedWindowDims),
          scatterDimsToOperandDims: shift(dn.scatterDimsToOperandDims),
          operandBatchingDims: [0, ...shift(dn.operandBatchingDims)],
          scatterIndicesBatchingDims: [0, ...shift(dn.scatterIndicesBatchingDims)],
        },
      })], [0]];
    }
    return [[p1(prim, [moveBdim(x, dims[0], 0, n), idx, moveBdim(u, dims[2], 0, n)], {
      ...params,
      dimensionNumbers: {
        updateWindowDims: [0, ...shift(dn.updateWindowDims)],
        insertedWindowDims: shift(dn.insertedWindowDims),
        scatterDimsToOperandDims: shift(dn.scatterDimsToOperandDims),
        operandBatchingDims: shift(dn.operandBatchingDims),
        scatterIndicesBatchingDims: dn.scatterIndicesBatchingDims,
      },
    })], [0]];
  };
}
