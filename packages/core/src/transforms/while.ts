/**
 * `lax.whileLoop` and `lax.foriLoop`. The while primitive carries jvp and vmap rules; reverse
 * mode through it is refused with a clear error, as in JAX. `foriLoop` with JS-number bounds is
 * a `scan` (so reverse mode works); with traced bounds a while loop.
 */
import { Array } from '../array';
import { definePrimitive } from '../primitive';
import { bind } from '../trace';
import * as tree from '../tree';
import { type BatchRule, moveBdim, vmapJaxpr } from './batching';
import { evalClosed } from './eval';
import { arrayLeaves } from './leaves';
import { ClosedJaxpr } from './jaxpr';
import { jvpJaxpr, type JvpRule } from './jvp';
import { type PartialEvalRule } from './partialEval';
import { NON_LINEAR } from './transpose';
import { traceFlat } from './tracing';
import { instantiate } from './zeros';
import * as lax from '../lax/ops';
import { hoist, range, rewire, sameAvals, sig } from './controlFlow';
import { scan } from './scan';

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
