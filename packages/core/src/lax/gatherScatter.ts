/**
 * The gather and scatter primitives with their rules, in one module because they are each
 * other's transposes (gather's is a scatter-add; scatter-add's and scatter's are gathers). Their
 * shape rules and kernels are in gather.ts and scatter.ts; their lax ops are at the end. Index
 * operands never carry tangents.
 */
import { Array } from '../array';
import { type BatchRule, type BDim, type JvpRule, NON_LINEAR, type Primitive, type PrimitiveRules, definePrimitive, isUndef, type UndefPrimal } from '../primitive';
import { type ArrayLike, asArray } from '../convert';
import { bind, bind1 } from '../trace';
import { type GatherDimensionNumbers, type GatherParams, type GatherScatterMode, gatherDef } from './gather';
import { p1, shift } from './ruleKit';
import { COMBINE, type ScatterDimensionNumbers, type ScatterParams, scatterDef } from './scatter';
import { instantiate, ints, linearInJvp, moveBdim, reshape, zerosOf } from './structural';

export const gatherP = definePrimitive<GatherParams>({
  ...gatherDef,
  rules: (self) => ({
    jvp: linearInJvp(self, 1),
    transpose: ([ct], [x, idx], params) => {
      const a = (x as UndefPrimal).aval;
      const out = p1(scatterAddP, [zerosOf(a), idx as Array, ct!], {
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
export const scatterP = defineScatter('scatter', COMBINE.scatter, (self) => ({
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
export const scatterAddP = defineScatter('scatter-add', COMBINE.add, (self) => ({
  jvp: scatterLinear(self),
  transpose: ([ct], [x, idx, u], params) => {
    const ua = updatesAval(u);
    return [isUndef(x) ? ct : null, null, isUndef(u) ? gatherFromScatter(ct!, idx as Array, ua.shape, params) : null];
  },
}));
/** No jvp rules (documented gaps, see transforms/rules.test.ts). */
const noJvp = (): PrimitiveRules => ({ transpose: NON_LINEAR });
export const scatterMulP = defineScatter('scatter-mul', COMBINE.mul, noJvp);
export const scatterMinP = defineScatter('scatter-min', COMBINE.min, noJvp);
export const scatterMaxP = defineScatter('scatter-max', COMBINE.max, noJvp);

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
  return p1(gatherP, [operand, idx], {
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
  return bind(gatherP, [x, reshape(idx, [...idx.shape, 1])], {
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

// ---------------------------------------------------------------------------------------------
// The lax ops (re-exported by ops.ts)

export interface GatherOptions {
  /** Default 'fill' as in jax.lax.gather (mode=None); 'drop' is an alias of 'fill'; 'clip' and 'promise_in_bounds' clamp. */
  mode?: GatherScatterMode | 'drop';
  fillValue?: number | null;
  indicesAreSorted?: boolean;
  uniqueIndices?: boolean;
}

type GatherDnInput = Omit<GatherDimensionNumbers, 'operandBatchingDims' | 'startIndicesBatchingDims'> &
  Partial<Pick<GatherDimensionNumbers, 'operandBatchingDims' | 'startIndicesBatchingDims'>>;

/** `lax.gather` with GatherDimensionNumbers (batching dims may be omitted); index vector last. */
export function gather(operand: ArrayLike, indices: ArrayLike, dimensionNumbers: GatherDnInput, sliceSizes: readonly number[], opts: GatherOptions = {}): Array {
  const a = asArray(operand, { op: 'gather' });
  const i = asArray(indices, { op: 'gather' });
  const dn: GatherDimensionNumbers = {
    offsetDims: ints('gather', 'offset_dims', dimensionNumbers.offsetDims),
    collapsedSliceDims: ints('gather', 'collapsed_slice_dims', dimensionNumbers.collapsedSliceDims),
    startIndexMap: ints('gather', 'start_index_map', dimensionNumbers.startIndexMap),
    operandBatchingDims: ints('gather', 'operand_batching_dims', dimensionNumbers.operandBatchingDims ?? []),
    startIndicesBatchingDims: ints('gather', 'start_indices_batching_dims', dimensionNumbers.startIndicesBatchingDims ?? []),
  };
  return bind1(gatherP, [a, i], {
    dimensionNumbers: dn,
    sliceSizes: ints('gather', 'slice_sizes', sliceSizes),
    mode: opts.mode === undefined || opts.mode === 'drop' ? 'fill' : opts.mode,
    fillValue: opts.fillValue ?? null,
    indicesAreSorted: opts.indicesAreSorted ?? false,
    uniqueIndices: opts.uniqueIndices ?? false,
  });
}

export interface ScatterOptions {
  /** Default 'fill' (drop out-of-bounds windows) as in jax.lax.scatter; 'drop' is an alias. */
  mode?: GatherScatterMode | 'drop';
  indicesAreSorted?: boolean;
  uniqueIndices?: boolean;
}

type ScatterDnInput = Omit<ScatterDimensionNumbers, 'operandBatchingDims' | 'scatterIndicesBatchingDims'> &
  Partial<Pick<ScatterDimensionNumbers, 'operandBatchingDims' | 'scatterIndicesBatchingDims'>>;

const scatterOp = (p: Primitive) => (operand: ArrayLike, indices: ArrayLike, updates: ArrayLike, dimensionNumbers: ScatterDnInput, opts: ScatterOptions = {}): Array => {
  const a = asArray(operand, { op: p.name });
  const u = updates instanceof Array ? updates : asArray(updates, { dtype: a.dtype, op: p.name });
  const i = asArray(indices, { op: p.name });
  const dn: ScatterDimensionNumbers = {
    updateWindowDims: ints(p.name, 'update_window_dims', dimensionNumbers.updateWindowDims),
    insertedWindowDims: ints(p.name, 'inserted_window_dims', dimensionNumbers.insertedWindowDims),
    scatterDimsToOperandDims: ints(p.name, 'scatter_dims_to_operand_dims', dimensionNumbers.scatterDimsToOperandDims),
    operandBatchingDims: ints(p.name, 'operand_batching_dims', dimensionNumbers.operandBatchingDims ?? []),
    scatterIndicesBatchingDims: ints(p.name, 'scatter_indices_batching_dims', dimensionNumbers.scatterIndicesBatchingDims ?? []),
  };
  const mode = opts.mode === undefined || opts.mode === 'drop' ? 'fill' : opts.mode;
  return bind1(p, [a, i, u], { dimensionNumbers: dn, mode, indicesAreSorted: opts.indicesAreSorted ?? false, uniqueIndices: opts.uniqueIndices ?? false });
};

/** `lax.scatter`: replaces operand windows with updates (out-of-bounds windows dropped by default). */
export const scatter = scatterOp(scatterP);
export const scatterAdd = scatterOp(scatterAddP);
export const scatterMul = scatterOp(scatterMulP);
export const scatterMin = scatterOp(scatterMinP);
export const scatterMax = scatterOp(scatterMaxP);
