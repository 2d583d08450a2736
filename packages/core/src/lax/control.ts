/**
 * Control flow as primitives (jax.lax.cond / switch / scan / fori_loop / while_loop). Each
 * takes its sub-programs as closed jaxprs in its parameters, so one program can be staged,
 * compiled and transformed as a whole (a transformer's layers can be one `scan`). Each
 * primitive carries its own rules, which transform the sub-jaxprs: jvp and vmap for all of
 * them; partial evaluation and transposition (reverse mode) for cond / switch / scan and for
 * fori loops with a static trip count (they are scans); reverse mode through `whileLoop` is
 * refused with a clear error, as in JAX.
 */
import { Array } from '../array';
import { allocStorage } from '../dtype';
import { definePrimitive, type ShapedArray } from '../primitive';
import { fmt, sizeOf } from '../shape';
import { bind } from '../trace';
import * as tree from '../tree';
import { type BatchRule, moveBdim, vmapJaxpr } from '../transforms/batching';
import { evalClosed, evalJaxpr } from '../transforms/eval';
import { arrayLeaves } from '../transforms/grad';
import { ClosedJaxpr, Jaxpr } from '../transforms/jaxpr';
import { avalStr } from '../transforms/jaxpr';
import { jvpJaxpr, type JvpRule } from '../transforms/jvp';
import { type PartialEvalRule, partialEvalJaxpr, type PETracer } from '../transforms/partialEval';
import { backwardPass, isUndef, NON_LINEAR, transposeJaxpr, type TransposeRule, UndefPrimal } from '../transforms/transpose';
import { traceFlat } from '../transforms/tracing';
import { instantiate, zerosOf } from '../transforms/zeros';
import * as lax from './index';

const sameAvals = (a: readonly ShapedArray[], b: readonly ShapedArray[]): boolean =>
  a.length === b.length && a.every((x, i) => x.dtype === b[i].dtype && x.shape.join() === b[i].shape.join());
const sig = (a: readonly ShapedArray[]): string => `(${a.map(avalStr).join(', ')})`;

/** A closed jaxpr re-wired: new input order `inPerm[k]` = old input index; outputs likewise. */
function rewire(c: ClosedJaxpr, inPerm: readonly number[], outPerm: readonly number[]): ClosedJaxpr {
  const inAvals = inPerm.map((i) => c.inAvals[i]);
  return traceFlat((...xs) => {
    const args = new globalThis.Array<Array>(xs.length);
    inPerm.forEach((old, k) => (args[old] = xs[k]));
    const outs = evalClosed(c, args);
    return outPerm.map((o) => outs[o]);
  }, inAvals, 'rewire');
}

/** Constants of a traced closed jaxpr turned into leading inputs. */
function hoist(c: ClosedJaxpr): [ClosedJaxpr, Array[]] {
  if (c.consts.length === 0) return [c, []];
  const j = c.jaxpr;
  return [new ClosedJaxpr(new Jaxpr([], [...j.constvars, ...j.invars], j.eqns, j.outs), []), c.consts];
}

const range = (n: number, s = 0): number[] => globalThis.Array.from({ length: n }, (_, i) => s + i);

// ---------------------------------------------------------------------------------------------
// cond / switch

export interface CondParams {
  readonly branches: readonly ClosedJaxpr[];
}

export const condP = definePrimitive<CondParams>({
  name: 'cond',
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

// ---------------------------------------------------------------------------------------------
// scan

export interface ScanParams {
  /** (consts, carry, x) -> (carry, y). */
  readonly jaxpr: ClosedJaxpr;
  readonly numConsts: number;
  readonly numCarry: number;
  readonly length: number;
  readonly reverse: boolean;
}

export const scanP = definePrimitive<ScanParams>({
  name: 'scan',
  abstractEval(avals, { jaxpr, numConsts, numCarry, length }) {
    const carry = avals.slice(numConsts, numConsts + numCarry);
    const xs = avals.slice(numConsts + numCarry);
    for (const x of xs) {
      if (x.shape[0] !== length) throw new Error(`scan: every xs leaf must have leading dimension ${length}; got ${avalStr(x)}`);
    }
    const body = [...avals.slice(0, numConsts), ...carry, ...xs.map((x) => ({ ...x, shape: x.shape.slice(1) }))];
    if (!sameAvals(jaxpr.inAvals, body)) throw new TypeError(`scan: operands ${sig(body)} do not match the body's inputs ${sig(jaxpr.inAvals)}`);
    const outs = jaxpr.outAvals;
    if (!sameAvals(outs.slice(0, numCarry), carry)) {
      throw new TypeError(`scan: the body must return a carry of the same types as its input carry: got ${sig(outs.slice(0, numCarry))}, expected ${sig(carry)}`);
    }
    return [...outs.slice(0, numCarry), ...outs.slice(numCarry).map((y) => ({ ...y, shape: [length, ...y.shape] }))];
  },
  impl() {
    throw new Error('scan: runs through its eval rule');
  },
});

/** Row `i` of a concrete array along its leading axis. */
function row(x: Array, i: number): Array {
  const n = sizeOf(x.shape.slice(1));
  const data = x._storage().slice(i * n, (i + 1) * n);
  return Array._fromStorage(data, x.shape.slice(1), x.dtype, x.weakType);
}

/** Stacks concrete arrays along a new leading axis. */
function stack(rows: Array[], aval: ShapedArray, length: number): Array {
  const n = sizeOf(aval.shape);
  const out = allocStorage(aval.dtype, n * length);
  rows.forEach((r, i) => (out as { set(a: ArrayLike<number>, o: number): void }).set(r._storage(), i * n));
  return Array._fromStorage(out, [length, ...aval.shape], aval.dtype, aval.weakType);
}

scanP.rules.eval = (args: Array[], { jaxpr, numConsts, numCarry, length, reverse }: ScanParams): Array[] => {
  const consts = args.slice(0, numConsts);
  let carry = args.slice(numConsts, numConsts + numCarry);
  const xs = args.slice(numConsts + numCarry);
  const yAvals = jaxpr.outAvals.slice(numCarry);
  const ys: Array[][] = yAvals.map(() => new globalThis.Array(length));
  for (let k = 0; k < length; k++) {
    const i = reverse ? length - 1 - k : k;
    const outs = evalJaxpr(jaxpr.jaxpr, jaxpr.consts, [...consts, ...carry, ...xs.map((x) => row(x, i))]);
    carry = outs.slice(0, numCarry);
    outs.slice(numCarry).forEach((y, j) => (ys[j][i] = y));
  }
  return [...carry, ...ys.map((r, j) => stack(r, yAvals[j], length))];
};

scanP.rules.jvp = ((primals, tangents, params: ScanParams) => {
  const { jaxpr, numConsts: nc, numCarry: nk } = params;
  const nz = tangents.map((t) => t !== null);
  // Fixpoint: a carry whose tangent becomes nonzero in the body is nonzero on entry too.
  let carryNz = nz.slice(nc, nc + nk);
  let jj;
  for (;;) {
    const mask = [...nz.slice(0, nc), ...carryNz, ...nz.slice(nc + nk)];
    jj = jvpJaxpr(jaxpr, mask, [...carryNz, ...jaxpr.outAvals.slice(nk).map(() => false)]);
    const outCarryNz = jj.outNonzero.slice(0, nk);
    if (outCarryNz.every((b, i) => b === carryNz[i])) break;
    carryNz = carryNz.map((b, i) => b || outCarryNz[i]);
  }
  const mask = [...nz.slice(0, nc), ...carryNz, ...nz.slice(nc + nk)];
  const n = primals.length;
  // jvp jaxpr inputs: primals, then tangents of masked inputs; reorder to consts, carry, xs groups.
  const tanIdx: number[] = [];
  mask.forEach((m, i) => m && tanIdx.push(i));
  const pos = (i: number): number => n + tanIdx.indexOf(i);
  const grp = (lo: number, hi: number): number[] => [...range(hi - lo, lo), ...tanIdx.filter((i) => i >= lo && i < hi).map(pos)];
  const inPerm = [...grp(0, nc), ...grp(nc, nc + nk), ...grp(nc + nk, n)];
  const ny = jaxpr.outAvals.length - nk;
  const outNz = jj.outNonzero;
  const tanOutIdx: number[] = [];
  outNz.forEach((m, i) => m && tanOutIdx.push(i));
  const nOut = jaxpr.outAvals.length;
  const opos = (i: number): number => nOut + tanOutIdx.indexOf(i);
  const outPerm = [...range(nk), ...tanOutIdx.filter((i) => i < nk).map(opos), ...range(ny, nk), ...tanOutIdx.filter((i) => i >= nk).map(opos)];
  const body = rewire(jj.jaxpr, inPerm, outPerm);
  const tin = (i: number): Array => instantiate(tangents[i], primals[i].aval);
  const args = inPerm.map((k) => (k < n ? primals[k] : tin(tanIdx[k - n])));
  const nTc = tanIdx.filter((i) => i < nc).length;
  const nTk = carryNz.filter(Boolean).length;
  const outs = bind(scanP, args, { ...params, jaxpr: body, numConsts: nc + nTc, numCarry: nk + nTk });
  const carryOut = outs.slice(0, nk);
  const carryTan = outs.slice(nk, nk + nTk);
  const ysOut = outs.slice(nk + nTk, nk + nTk + ny);
  const ysTan = outs.slice(nk + nTk + ny);
  let a = 0;
  let b = 0;
  const tOut = [...carryNz.map((z) => (z ? carryTan[a++] : null)), ...outNz.slice(nk).map((z) => (z ? ysTan[b++] : null))];
  return [[...carryOut, ...ysOut], tOut];
}) satisfies JvpRule;

scanP.rules.batch = ((vals, dims, params: ScanParams, size) => {
  const { jaxpr, numConsts: nc, numCarry: nk } = params;
  const b = dims.map((d) => d !== null);
  let carryB = b.slice(nc, nc + nk);
  let vj;
  for (;;) {
    vj = vmapJaxpr(jaxpr, [...b.slice(0, nc), ...carryB, ...b.slice(nc + nk)], size, [...carryB, ...jaxpr.outAvals.slice(nk).map(() => false)]);
    const outCarryB = vj.outBatched.slice(0, nk);
    if (outCarryB.every((x, i) => x === carryB[i])) break;
    carryB = carryB.map((x, i) => x || outCarryB[i]);
  }
  // vmapJaxpr batches body inputs at dim 0: consts and carry at 0, xs at 1 (dim 0 is the scan axis).
  const args = vals.map((v, i) => {
    const isCarry = i >= nc && i < nc + nk;
    const want = isCarry ? carryB[i - nc] : b[i];
    if (!want) return v;
    return moveBdim(v, dims[i], i >= nc + nk ? 1 : 0, size);
  });
  const outs = bind(scanP, args, { ...params, jaxpr: vj.jaxpr });
  return [outs, vj.outBatched.map((x, i) => (x ? (i < nk ? 0 : 1) : null))];
}) satisfies BatchRule;

scanP.rules.partialEval = ((trace, tracers, params: ScanParams) => {
  const { jaxpr, numConsts: nc, numCarry: nk } = params;
  const uk = tracers.map((t) => t.known === null);
  let carryUk = uk.slice(nc, nc + nk);
  let split;
  for (;;) {
    split = partialEvalJaxpr(jaxpr, [...uk.slice(0, nc), ...carryUk, ...uk.slice(nc + nk)], [...carryUk, ...jaxpr.outAvals.slice(nk).map(() => false)]);
    const out = split.outUnknowns.slice(0, nk);
    if (out.every((x, i) => x === carryUk[i])) break;
    carryUk = carryUk.map((x, i) => x || out[i]);
  }
  const inUk = [...uk.slice(0, nc), ...carryUk, ...uk.slice(nc + nk)];
  const numRes = split.numRes;
  const knownT = tracers.filter((_, i) => !inUk[i]);
  // Known carries that became unknown are instantiated as residual-free constants of the unknown scan.
  const kn = (lo: number, hi: number) => range(hi - lo, lo).filter((i) => !inUk[i]).length;
  const kc = kn(0, nc);
  const kk = kn(nc, nc + nk);
  const kOuts = bind(scanP, knownT.map((t) => t.known!), { ...params, jaxpr: split.known, numConsts: kc, numCarry: kk });
  const nKnownOut = kOuts.length - numRes;
  const res = kOuts.slice(nKnownOut);
  // Unknown body inputs: residuals, unknown consts, unknown carry, unknown xs -> reorder residuals into xs.
  const uc = range(nc).filter((i) => inUk[i]).length;
  const ukk = range(nk, nc).filter((i) => inUk[i]).length;
  const ux = range(tracers.length - nc - nk, nc + nk).filter((i) => inUk[i]).length;
  const inPerm = [...range(uc, numRes), ...range(ukk, numRes + uc), ...range(numRes), ...range(ux, numRes + uc + ukk)];
  const body = rewire(split.unknown, inPerm, range(split.unknown.outAvals.length));
  const unkT = tracers.map((t, i) => (inUk[i] ? (t.known !== null ? (trace.pure(t.known) as PETracer) : t) : null)).filter((t): t is PETracer => t !== null);
  const resT = res.map((r) => trace.pure(r) as PETracer);
  const args = [...unkT.slice(0, uc + ukk), ...resT, ...unkT.slice(uc + ukk)];
  const outAvals = scanP.abstractEval(args.map((a) => a.aval), { ...params, jaxpr: body, numConsts: uc, numCarry: ukk });
  const uOuts = trace.stage(scanP, args, { ...params, jaxpr: body, numConsts: uc, numCarry: ukk }, outAvals);
  let ki = 0;
  let ui = 0;
  return split.outUnknowns.map((u) => (u ? uOuts[ui++] : kOuts[ki++]));
}) satisfies PartialEvalRule;

scanP.rules.transpose = ((cts, args, params: ScanParams) => {
  const { jaxpr, numConsts: nc, numCarry: nk, length, reverse } = params;
  const consts = args.slice(0, nc);
  const carry = args.slice(nc, nc + nk);
  const xs = args.slice(nc + nk);
  // A known initial carry (e.g. an instantiated zero tangent) is treated as linear, as JAX does:
  // its cotangent is computed and then dropped by the caller.
  const linC = consts.map(isUndef);
  const linX = xs.map(isUndef);
  const nlConsts = consts.filter((c) => !isUndef(c)) as Array[];
  const nlXs = xs.filter((x) => !isUndef(x)) as Array[];
  const ctConstAvals = consts.filter(isUndef).map((c) => (c as UndefPrimal).aval);
  const carryAvals = carry.map((c) => c.aval);
  const yAvals = jaxpr.outAvals.slice(nk);
  const bodyAvals = jaxpr.inAvals;
  const linear = [...linC, ...carry.map(() => true), ...linX];
  // Transposed body: consts = non-linear consts; carry = (ct of linear consts, ct carry); xs = (non-linear xs, ct ys).
  const body = traceFlat(
    (...zs) => {
      let k = 0;
      const nlc = zs.slice(k, (k += nlConsts.length));
      const acc = zs.slice(k, (k += ctConstAvals.length));
      const ctCarry = zs.slice(k, (k += nk));
      const nlx = zs.slice(k, (k += nlXs.length));
      const ctY = zs.slice(k);
      let a = 0;
      let bb = 0;
      const bodyArgs = [...linC.map((l) => (l ? null : nlc[a++])), ...carry.map(() => null), ...linX.map((l) => (l ? null : nlx[bb++]))];
      const g = backwardPass(jaxpr.jaxpr, jaxpr.consts, linear, bodyArgs, [...ctCarry, ...ctY]);
      const gi = (i: number): Array => g[i] ?? zerosOf(bodyAvals[i]);
      const ctC = range(nc).filter((i) => linC[i]).map(gi);
      return [...acc.map((x, i) => lax.add(x, ctC[i])), ...range(nk, nc).map(gi), ...range(xs.length, nc + nk).filter((i) => linX[i - nc - nk]).map(gi)];
    },
    [...nlConsts.map((c) => c.aval), ...ctConstAvals, ...carryAvals, ...nlXs.map((x) => ({ ...x.aval, shape: x.shape.slice(1) })), ...yAvals],
    'transpose(scan)',
  );
  const init = [...ctConstAvals.map(zerosOf), ...cts.slice(0, nk).map((c, i) => instantiate(c, carryAvals[i]))];
  const ctYs = cts.slice(nk).map((c, i) => instantiate(c, { ...yAvals[i], shape: [length, ...yAvals[i].shape] }));
  const outs = bind(scanP, [...nlConsts, ...init, ...nlXs, ...ctYs], {
    jaxpr: body,
    numConsts: nlConsts.length,
    numCarry: ctConstAvals.length + nk,
    length,
    reverse: !reverse,
  });
  let ci = 0;
  let xi = 0;
  const ctConsts = outs.slice(0, ctConstAvals.length);
  const ctInit = outs.slice(ctConstAvals.length, ctConstAvals.length + nk);
  const ctXs = outs.slice(ctConstAvals.length + nk);
  return [...linC.map((l) => (l ? ctConsts[ci++] : null)), ...ctInit, ...linX.map((l) => (l ? ctXs[xi++] : null))];
}) satisfies TransposeRule;

/**
 * `lax.scan(f, init, xs, { length, reverse })`: `f(carry, x) -> [carry, y]` over the leading
 * axis of `xs` (any pytree, or null with `length`); returns `[finalCarry, stackedYs]`.
 */
export function scan(f: (carry: any, x: any) => [unknown, unknown], init: unknown, xs: unknown = null, opts: { length?: number; reverse?: boolean } = {}): [any, any] {
  const [carry, carryTree] = arrayLeaves(init, 'scan');
  const [xsl, xsTree] = arrayLeaves(xs, 'scan');
  const lengths = new Set(xsl.map((x) => x.shape[0]));
  if (xsl.some((x) => x.ndim === 0)) throw new TypeError('scan: xs leaves must have a leading axis to scan over; got a scalar');
  if (lengths.size > 1) throw new Error(`scan: xs leaves have different leading sizes ${[...lengths].join(', ')}`);
  const length = opts.length ?? (xsl.length ? xsl[0].shape[0] : undefined);
  if (length === undefined) throw new Error('scan: with no xs, pass { length }');
  if (xsl.length && xsl[0].shape[0] !== length) throw new Error(`scan: length ${length} does not match the xs leading size ${xsl[0].shape[0]}`);
  let yTree: tree.TreeDef | null = null;
  const xAvals = xsl.map((x) => ({ ...x.aval, shape: x.shape.slice(1) }));
  const traced = traceFlat((...zs) => {
    const c = tree.unflatten(carryTree, zs.slice(0, carry.length));
    const x = tree.unflatten(xsTree, zs.slice(carry.length));
    const out = f(c, x);
    if (!globalThis.Array.isArray(out) || out.length !== 2) throw new TypeError('scan: the body must return [carry, y]');
    const [cl, ct] = arrayLeaves(out[0], 'scan');
    if (!ct.equals(carryTree)) throw new TypeError(`scan: the body's carry output has structure ${ct}, but the input carry has ${carryTree}`);
    const outCarry = cl.map((v, i) => {
      const want = carry[i].aval;
      if (v.dtype !== want.dtype || v.shape.join() !== want.shape.join()) {
        throw new TypeError(`scan: the body's carry output ${i} is ${avalStr(v.aval)} but the carry input is ${avalStr(want)}; they must match`);
      }
      return v;
    });
    const [yl, yt] = arrayLeaves(out[1], 'scan');
    yTree = yt;
    return [...outCarry, ...yl];
  }, [...carry.map((c) => c.aval), ...xAvals], 'scan');
  const [body, consts] = hoist(traced);
  const outs = bind(scanP, [...consts, ...carry, ...xsl], { jaxpr: body, numConsts: consts.length, numCarry: carry.length, length, reverse: opts.reverse ?? false });
  return [tree.unflatten(carryTree, outs.slice(0, carry.length)), tree.unflatten(yTree!, outs.slice(carry.length))];
}

// ---------------------------------------------------------------------------------------------
// while

export interface WhileParams {
  readonly condJaxpr: ClosedJaxpr;
  readonly bodyJaxpr: ClosedJaxpr;
  readonly condNconsts: number;
  readonly bodyNconsts: number;
}

export const whileP = definePrimitive<WhileParams>({
  name: 'while',
  abstractEval(avals, { condJaxpr, bodyJaxpr, condNconsts, bodyNconsts }) {
    const carry = avals.slice(condNconsts + bodyNconsts);
    const c = condJaxpr.outAvals;
    if (c.length !== 1 || c[0].dtype !== 'bool' || c[0].shape.length !== 0) throw new TypeError(`while_loop: cond_fun must return a bool scalar; got ${sig(c)}`);
    if (!sameAvals(bodyJaxpr.outAvals, carry)) throw new TypeError(`while_loop: body_fun must return the carry's types ${sig(carry)}; got ${sig(bodyJaxpr.outAvals)}`);
    return carry;
  },
  impl() {
    throw new Error('while: runs through its eval rule');
  },
});

whileP.rules.eval = (args: Array[], { condJaxpr, bodyJaxpr, condNconsts, bodyNconsts }: WhileParams): Array[] => {
  const cc = args.slice(0, condNconsts);
  const bc = args.slice(condNconsts, condNconsts + bodyNconsts);
  let carry = args.slice(condNconsts + bodyNconsts);
  while (evalClosed(condJaxpr, [...cc, ...carry])[0].item()) carry = evalClosed(bodyJaxpr, [...bc, ...carry]);
  return carry;
};

whileP.rules.jvp = ((primals, tangents, params: WhileParams) => {
  const { condJaxpr, bodyJaxpr, condNconsts: cn, bodyNconsts: bn } = params;
  const nz = tangents.map((t) => t !== null);
  const bcNz = nz.slice(cn, cn + bn);
  let carryNz = nz.slice(cn + bn);
  let jj;
  for (;;) {
    jj = jvpJaxpr(bodyJaxpr, [...bcNz, ...carryNz], carryNz);
    if (jj.outNonzero.every((b, i) => b === carryNz[i])) break;
    carryNz = carryNz.map((b, i) => b || jj!.outNonzero[i]);
  }
  const nb = bn + carryNz.length;
  const bcT = range(bn).filter((i) => bcNz[i]);
  const kT = range(carryNz.length).filter((i) => carryNz[i]);
  // jvp body inputs: [bc, carry, bcT, carryT] -> want [bc, bcT, carry, carryT]
  const inPerm = [...range(bn), ...range(bcT.length, nb), ...range(carryNz.length, bn), ...range(kT.length, nb + bcT.length)];
  const body = rewire(jj.jaxpr, inPerm, range(jj.jaxpr.outAvals.length));
  const carryAvals = primals.slice(cn + bn).map((p) => p.aval);
  const cond = traceFlat((...zs) => evalClosed(condJaxpr, [...zs.slice(0, cn), ...zs.slice(cn, cn + carryAvals.length)]), [...condJaxpr.inAvals, ...kT.map((i) => carryAvals[i])], 'while');
  const carryIn = primals.slice(cn + bn);
  const args = [
    ...primals.slice(0, cn),
    ...primals.slice(cn, cn + bn),
    ...bcT.map((i) => tangents[cn + i]!),
    ...carryIn,
    ...kT.map((i) => instantiate(tangents[cn + bn + i], carryAvals[i])),
  ];
  const outs = bind(whileP, args, { condJaxpr: cond, bodyJaxpr: body, condNconsts: cn, bodyNconsts: bn + bcT.length });
  const n = carryAvals.length;
  let k = n;
  return [outs.slice(0, n), carryNz.map((z) => (z ? outs[k++] : null))];
}) satisfies JvpRule;

whileP.rules.batch = ((vals, dims, params: WhileParams, size) => {
  const { condJaxpr, bodyJaxpr, condNconsts: cn, bodyNconsts: bn } = params;
  // Every carry is batched; the loop runs while any member's predicate holds, and members
  // that are done keep their carry (select), which is also right when the predicate is unbatched.
  const b = dims.map((d) => d !== null);
  const nCarry = vals.length - cn - bn;
  const carryB = range(nCarry).map(() => true);
  const vb = vmapJaxpr(bodyJaxpr, [...b.slice(cn, cn + bn), ...carryB], size, true).jaxpr;
  const vc = vmapJaxpr(condJaxpr, [...b.slice(0, cn), ...carryB], size, true).jaxpr;
  const carryAvals = vb.outAvals;
  const cAvals = vc.inAvals.slice(0, cn);
  const bAvals = vb.inAvals.slice(0, bn);
  const cond = traceFlat((...zs) => [lax.reduceOr(evalClosed(vc, zs)[0], [0])], [...cAvals, ...carryAvals], 'while');
  const body = traceFlat(
    (...zs) => {
      const cc = zs.slice(0, cn);
      const bc = zs.slice(cn, cn + bn);
      const carry = zs.slice(cn + bn);
      const pred = evalClosed(vc, [...cc, ...carry])[0];
      const next = evalClosed(vb, [...bc, ...carry]);
      return next.map((x, i) => lax.select(x.ndim > 1 ? lax.broadcastInDim(pred, x.shape, [0]) : pred, x, carry[i]));
    },
    [...cAvals, ...bAvals, ...carryAvals],
    'while',
  );
  const args = vals.map((v, i) => (i >= cn + bn || b[i] ? moveBdim(v, dims[i], 0, size) : v));
  const outs = bind(whileP, [...args.slice(0, cn), ...args.slice(0, cn), ...args.slice(cn)], { condJaxpr: cond, bodyJaxpr: body, condNconsts: cn, bodyNconsts: cn + bn });
  return [outs, outs.map(() => 0)];
}) satisfies BatchRule;

whileP.rules.partialEval = (() => {
  throw new Error(
    'whileLoop: reverse-mode differentiation (grad / vjp / linearize) of a while loop is not supported, as in JAX; use lax.scan, or lax.foriLoop with a static trip count',
  );
}) satisfies PartialEvalRule;

// A while loop is never applied to linear values (its partial-eval rule refuses reverse mode).
whileP.rules.transpose = NON_LINEAR;

/** `lax.whileLoop(condFun, bodyFun, init)`. */
export function whileLoop(condFun: (carry: any) => unknown, bodyFun: (carry: any) => unknown, init: unknown): any {
  const [carry, carryTree] = arrayLeaves(init, 'whileLoop');
  const avals = carry.map((c) => c.aval);
  const [cj, cc] = hoist(
    traceFlat((...zs) => {
      const [p] = arrayLeaves(condFun(tree.unflatten(carryTree, zs)), 'whileLoop');
      if (p.length !== 1) throw new TypeError('whileLoop: condFun must return one bool scalar');
      return p;
    }, avals, 'whileLoop'),
  );
  const [bj, bc] = hoist(
    traceFlat((...zs) => {
      const [out, ot] = arrayLeaves(bodyFun(tree.unflatten(carryTree, zs)), 'whileLoop');
      if (!ot.equals(carryTree)) throw new TypeError(`whileLoop: bodyFun returns structure ${ot}, but the carry has ${carryTree}`);
      return out;
    }, avals, 'whileLoop'),
  );
  const outs = bind(whileP, [...cc, ...bc, ...carry], { condJaxpr: cj, bodyJaxpr: bj, condNconsts: cc.length, bodyNconsts: bc.length });
  return tree.unflatten(carryTree, outs);
}

/**
 * `lax.foriLoop(lower, upper, body, init)`: `body(i, carry) -> carry` for i in [lower, upper).
 * With JS-number bounds it is a scan (so reverse mode works); with traced bounds a while loop.
 */
export function foriLoop(lower: number | Array, upper: number | Array, body: (i: Array, carry: any) => unknown, init: unknown): any {
  if (typeof lower === 'number' && typeof upper === 'number') {
    const n = Math.max(0, upper - lower);
    const [carry] = scan(
      ([i, c]: [Array, unknown]) => [[lax.add(i, 1), body(i, c)], null] as [unknown, unknown],
      [lax.convertElementType(lower, 'int32'), init],
      null,
      { length: n },
    );
    return (carry as unknown[])[1];
  }
  const lo = lax.convertElementType(lower, 'int32');
  const hi = lax.convertElementType(upper, 'int32');
  const [, , res] = whileLoop(
    ([i, h]: [Array, Array]) => lax.lt(i, h),
    ([i, h, c]: [Array, Array, unknown]) => [lax.add(i, 1), h, body(i, c)],
    [lo, hi, init],
  ) as unknown[];
  return res;
}

