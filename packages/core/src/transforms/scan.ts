/**
 * Control flow as primitives (jax.lax.cond / switch / scan / fori_loop / while_loop): scan here,
 * cond / switch in cond.ts, while / fori_loop in while.ts. Each
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
import { sizeOf } from '../shape';
import { bind } from '../trace';
import * as tree from '../tree';
import { type BatchRule, moveBdim, vmapJaxpr } from './batching';
import { evalJaxpr } from './eval';
import { arrayLeaves } from './leaves';
import { avalStr, ClosedJaxpr } from './jaxpr';
import { jvpJaxpr, type JvpRule } from './jvp';
import { type PartialEvalRule, partialEvalJaxpr, type PETracer } from './partialEval';
import { backwardPass, isUndef, type TransposeRule, UndefPrimal } from './transpose';
import { traceFlat } from './tracing';
import { instantiate, zerosOf } from './zeros';
import * as lax from '../lax/ops';
import { hoist, range, rewire, sameAvals, sig } from './controlFlow';

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
