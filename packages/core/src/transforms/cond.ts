/**
 * `lax.cond` / `lax.switch` as a primitive: its branches are closed jaxprs in its parameters,
 * so one program can be staged, compiled and transformed as a whole. The primitive carries its
 * own rules (jvp, vmap, partial evaluation, transposition), which transform the branches.
 */
import { Array } from '../array';
import { definePrimitive } from '../primitive';
import { fmt } from '../shape';
import { bind } from '../trace';
import * as tree from '../tree';
import { type BatchRule, moveBdim, vmapJaxpr } from './batching';
import { evalClosed } from './eval';
import { arrayLeaves } from './leaves';
import { avalStr, ClosedJaxpr } from './jaxpr';
import { jvpJaxpr, type JvpRule } from './jvp';
import { type PartialEvalRule, partialEvalJaxpr, type PETracer } from './partialEval';
import { isUndef, transposeJaxpr, type TransposeRule, UndefPrimal } from './transpose';
import { traceFlat } from './tracing';
import { instantiate, zerosOf } from './zeros';
import * as lax from '../lax/ops';
import { hoist, sameAvals, sig } from './controlFlow';

// ---------------------------------------------------------------------------------------------
// cond / switch

export interface CondParams {
  readonly branches: readonly ClosedJaxpr[];
}

export const condP = definePrimitive<CondParams>({
  name: 'cond',
  hlo: 'conditional',
  abstractEval([index, ...ops], { branches }) {
    if (index.dtype !== 'int32' || index.shape.length !== 0) throw new TypeError(`cond: the branch index must be an int32 scalar; got ${avalStr(index)}`);
    for (const b of branches) {
      if (!sameAvals(b.inAvals, ops)) throw new TypeError(`cond: operands ${sig(ops)} do not match a branch's inputs ${sig(b.inAvals)}`);
    }
    return branches[0].outAvals;
  },
  impl() {
    throw new Error('cond: runs through its eval rule');
  },
});

condP.rules.eval = ([index, ...ops]: Array[], { branches }: CondParams): Array[] => {
  const i = Math.min(Math.max(index.item() as number, 0), branches.length - 1);
  return evalClosed(branches[i], ops);
};

condP.rules.jvp = (([index, ...ops], [, ...tans], { branches }: CondParams) => {
  const nonzero = tans.map((t) => t !== null);
  const jb = branches.map((b) => jvpJaxpr(b, nonzero, true));
  const outs = bind(condP, [index, ...ops, ...(tans.filter((t) => t !== null) as Array[])], { branches: jb.map((j) => j.jaxpr) });
  const n = branches[0].outAvals.length;
  let k = n;
  return [outs.slice(0, n), jb[0].outNonzero.map((nz) => (nz ? outs[k++] : null))];
}) satisfies JvpRule;

condP.rules.batch = (([index, ...ops], [idim, ...dims], { branches }: CondParams, size) => {
  const batched = dims.map((d) => d !== null);
  const moved = ops.map((o, i) => (dims[i] === null ? o : moveBdim(o, dims[i], 0, size)));
  if (idim === null) {
    const vb = branches.map((b) => vmapJaxpr(b, batched, size, true).jaxpr);
    return [bind(condP, [index, ...moved], { branches: vb }), vb[0].outAvals.map(() => 0)];
  }
  // A batched index: run every branch and select per batch member (what JAX does too).
  const idx = lax.clamp(0, moveBdim(index, idim, 0, size), branches.length - 1);
  const results = branches.map((b) => evalClosed(vmapJaxpr(b, batched, size, true).jaxpr, moved));
  const outs = results[0].map((_, k) => {
    const cases = results.map((r) => r[k]);
    const w = cases[0].ndim > 1 ? lax.broadcastInDim(idx, cases[0].shape, [0]) : idx;
    return branches.length === 2 ? lax.select(lax.ne(w, 0), cases[1], cases[0]) : lax.selectN(w, ...cases);
  });
  return [outs, outs.map(() => 0)];
}) satisfies BatchRule;

condP.rules.partialEval = ((trace, [index, ...ops], { branches }: CondParams) => {
  if (index.known === null) return trace.stage(condP, [index, ...ops], { branches }, branches[0].outAvals);
  const unknowns = ops.map((o) => o.known === null);
  // Outputs unknown in any branch are unknown in all.
  let outUk = branches[0].outAvals.map(() => false);
  for (const b of branches) outUk = outUk.map((u, i) => u || partialEvalJaxpr(b, unknowns, false).outUnknowns[i]);
  const splits = branches.map((b) => partialEvalJaxpr(b, unknowns, outUk));
  const resAvals = splits.map((s) => s.known.outAvals.slice(s.known.outAvals.length - s.numRes));
  const allRes = resAvals.flat();
  const offsets = resAvals.map((_, b) => resAvals.slice(0, b).reduce((n, r) => n + r.length, 0));
  const knownIns = ops.filter((o) => o.known !== null).map((o) => o.known!);
  const knownB = splits.map((s, b) =>
    traceFlat((...xs) => {
      const outs = evalClosed(s.known, xs);
      const nk = outs.length - s.numRes;
      const res = allRes.map((a, r) => (r >= offsets[b] && r < offsets[b] + s.numRes ? outs[nk + r - offsets[b]] : zerosOf(a)));
      return [...outs.slice(0, nk), ...res];
    }, knownIns.map((k) => k.aval), 'cond'),
  );
  const kOuts = bind(condP, [index.known, ...knownIns], { branches: knownB });
  const nk = kOuts.length - allRes.length;
  const unkOps = ops.filter((o) => o.known === null);
  const unknownB = splits.map((s, b) =>
    traceFlat((...xs) => evalClosed(s.unknown, [...xs.slice(offsets[b], offsets[b] + s.numRes), ...xs.slice(allRes.length)]), [...allRes, ...unkOps.map((o) => o.aval)], 'cond'),
  );
  const resT = kOuts.slice(nk).map((r) => trace.pure(r) as PETracer);
  const uOuts = trace.stage(condP, [trace.pure(index.known) as PETracer, ...resT, ...unkOps], { branches: unknownB }, unknownB[0].outAvals);
  let ki = 0;
  let ui = 0;
  return outUk.map((u) => (u ? uOuts[ui++] : kOuts[ki++]));
}) satisfies PartialEvalRule;

condP.rules.transpose = ((allCts, [index, ...ops], { branches }: CondParams) => {
  if (isUndef(index)) throw new Error('transpose: the cond index cannot be linear');
  const linear = ops.map(isUndef);
  const tb = branches.map((b) => transposeJaxpr(b, linear));
  const outAvals = branches[0].outAvals;
  const res = bind(condP, [index, ...(ops.filter((o) => !isUndef(o)) as Array[]), ...allCts.map((c, i) => instantiate(c, outAvals[i]))], { branches: tb });
  let k = 0;
  return [null, ...ops.map((o) => (o instanceof UndefPrimal ? res[k++] : null))];
}) satisfies TransposeRule;

/** Traces each branch at the operands' types; all branches get the union of their constants. */
function traceBranches(fns: readonly ((...ops: any[]) => unknown)[], operands: unknown[], what: string): { branches: ClosedJaxpr[]; consts: Array[]; ops: Array[]; outTree: tree.TreeDef } {
  const [ops, inTree] = arrayLeaves(operands, what);
  const avals = ops.map((o) => o.aval);
  let outTree: tree.TreeDef | null = null;
  const traced = fns.map((f, b) => {
    const c = traceFlat((...xs) => {
      const [outs, ot] = arrayLeaves(f(...(tree.unflatten(inTree, xs) as unknown[])), what);
      if (outTree && !outTree.equals(ot)) throw new TypeError(`${what}: branch ${b} returns structure ${ot} but branch 0 returns ${outTree}`);
      outTree = ot;
      return outs;
    }, avals, what);
    return hoist(c);
  });
  for (const [c] of traced) {
    if (!sameAvals(c.outAvals, traced[0][0].outAvals)) throw new TypeError(`${what}: branches must return the same types; got ${sig(traced[0][0].outAvals)} and ${sig(c.outAvals)}`);
  }
  const consts = traced.flatMap(([, k]) => k);
  const constAvals = consts.map((c) => c.aval);
  const offsets = traced.map((_, b) => traced.slice(0, b).reduce((n, [, k]) => n + k.length, 0));
  const branches = traced.map(([c, k], b) =>
    k.length === consts.length ? c : traceFlat((...xs) => evalClosed(c, [...xs.slice(offsets[b], offsets[b] + k.length), ...xs.slice(consts.length)]), [...constAvals, ...avals], what),
  );
  return { branches, consts, ops, outTree: outTree! };
}

/** `lax.switch(index, branches, ...operands)`: runs `branches[clamp(index)]`. */
export function switchBranches(index: Array | number, branches: readonly ((...ops: any[]) => unknown)[], ...operands: unknown[]): any {
  if (branches.length === 0) throw new Error('switch: needs at least one branch');
  const idx = lax.convertElementType(index instanceof Array ? index : lax.convertElementType(index, 'int32'), 'int32');
  if (idx.ndim !== 0) throw new TypeError(`switch: the index must be a scalar; got shape ${fmt(idx.shape)}`);
  const { branches: bs, consts, ops, outTree } = traceBranches(branches, operands, 'switch');
  return tree.unflatten(outTree, bind(condP, [idx, ...consts, ...ops], { branches: bs }));
}

/** `lax.cond(pred, trueFun, falseFun, ...operands)`. */
export function cond(pred: Array | boolean, trueFun: (...ops: any[]) => unknown, falseFun: (...ops: any[]) => unknown, ...operands: unknown[]): any {
  const p = pred instanceof Array ? pred : lax.convertElementType(pred ? 1 : 0, 'bool');
  if (p.ndim !== 0) throw new TypeError(`cond: the predicate must be a scalar; got shape ${fmt(p.shape)} (use np.where for elementwise selection)`);
  const idx = lax.convertElementType(p.dtype === 'bool' ? p : lax.ne(p, 0), 'int32');
  return switchBranches(idx, [falseFun, trueFun], ...operands);
}
