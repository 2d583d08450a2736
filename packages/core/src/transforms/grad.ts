/**
 * The user-facing differentiation API over pytrees: `jvp`, `linearize`, `vjp`, `grad`,
 * `valueAndGrad`. Forward mode is the jvp interpreter; reverse mode is `linearize` (jvp under
 * partial evaluation, leaving a linear jaxpr) followed by `backwardPass` (transposition). The
 * functions flatten pytree arguments and outputs so the interpreters only see flat lists of
 * Arrays; gradients come back with the structure of the arguments.
 */
import { Array } from '../array';
import * as lax from '../lax/ops';
import { vmap } from './batching';
import { asArray } from '../convert';
import { isFloat } from '../dtype';
import { fmt } from '../shape';
import * as tree from '../tree';
import { evalClosed } from './eval';
import { jvpFlat } from './jvp';
import { linearizeFlat } from './partialEval';
import { arrayLeaves } from './leaves';
import { backwardPass } from './transpose';
import { filled, instantiate, zerosOf } from './zeros';
import { describeValue, showValue } from '../describe';

/** A flat function over leaves built from a pytree function; records the output structure. */
export function flatten1<A extends unknown[]>(f: (...args: any[]) => unknown, inTree: tree.TreeDef, what: string): { fn: (...leaves: Array[]) => Array[]; outTree: () => tree.TreeDef } {
  let outTree: tree.TreeDef | null = null;
  return {
    fn: (...leaves: Array[]) => {
      const args = tree.unflatten(inTree, leaves) as unknown as A;
      const [outs, def] = arrayLeaves(f(...args), what);
      outTree = def;
      return outs;
    },
    outTree: () => outTree!,
  };
}

/** `jax.jvp(f, primals, tangents)`: outputs and their tangents (pytrees like the outputs). */
export function jvp(f: (...args: any[]) => unknown, primals: readonly unknown[], tangents: readonly unknown[]): [unknown, unknown] {
  const [ps, inTree] = arrayLeaves(primals, 'jvp');
  const [ts, tTree] = arrayLeaves(tangents, 'jvp');
  if (!inTree.equals(tTree)) throw new Error(`jvp: primals and tangents must have the same structure; got ${inTree} and ${tTree}`);
  ps.forEach((p, i) => {
    if (p.dtype !== ts[i].dtype || p.shape.join() !== ts[i].shape.join()) {
      throw new TypeError(`jvp: tangent ${i} is ${ts[i].dtype}${fmt(ts[i].shape)} but its primal is ${p.dtype}${fmt(p.shape)}; they must match`);
    }
  });
  const ff = flatten1((...a) => f(...a), inTree, 'jvp');
  const [po, to] = jvpFlat(ff.fn, ps, ts);
  const outTree = ff.outTree();
  return [tree.unflatten(outTree, po), tree.unflatten(outTree, to.map((t, i) => instantiate(t, po[i].aval)))];
}

/** `jax.linearize(f, ...primals)`: the outputs and the (linear) jvp function at `primals`. */
export function linearize(f: (...args: any[]) => unknown, ...primals: unknown[]): [unknown, (...tangents: unknown[]) => unknown] {
  const [ps, inTree] = arrayLeaves(primals, 'linearize');
  const ff = flatten1(f, inTree, 'linearize');
  const [po, lin] = linearizeFlat(ff.fn, ps, ps.map(() => true));
  const outTree = ff.outTree();
  const fJvp = (...tangents: unknown[]): unknown => {
    const [ts, tTree] = arrayLeaves(tangents, 'linearize');
    if (!tTree.equals(inTree)) throw new Error(`linearize: tangents must have the structure of the primals (${inTree}); got ${tTree}`);
    return tree.unflatten(outTree, evalClosed(lin.jaxpr, ts));
  };
  return [tree.unflatten(outTree, po), fJvp];
}

/** `jax.vjp(f, ...primals)`: the outputs and a function from output cotangents to argument cotangents. */
export function vjp(f: (...args: any[]) => unknown, ...primals: unknown[]): [unknown, (ct: unknown) => unknown[]] {
  const [ps, inTree] = arrayLeaves(primals, 'vjp');
  const ff = flatten1(f, inTree, 'vjp');
  const [po, lin] = linearizeFlat(ff.fn, ps, ps.map(() => true));
  const outTree = ff.outTree();
  const fVjp = (ct: unknown): unknown[] => {
    const [cts, ctTree] = arrayLeaves(ct, 'vjp');
    if (!ctTree.equals(outTree)) throw new Error(`vjp: the cotangent must have the structure of the output (${outTree}); got ${ctTree}`);
    cts.forEach((c, i) => {
      if (c.shape.join() !== po[i].shape.join()) throw new Error(`vjp: cotangent ${i} has shape ${fmt(c.shape)} but the output has shape ${fmt(po[i].shape)}`);
    });
    const res = backwardPass(lin.jaxpr.jaxpr, lin.jaxpr.consts, ps.map(() => true), [], cts);
    return tree.unflatten(inTree, res.map((r, i) => r ?? zerosOf(ps[i].aval))) as unknown[];
  };
  return [tree.unflatten(outTree, po), fVjp];
}

export interface GradOptions {
  /** Which positional arguments to differentiate with respect to (default 0). */
  argnums?: number | readonly number[];
  /** `f` returns `[loss, aux]`; aux is passed through undifferentiated. */
  hasAux?: boolean;
}

/** `jax.value_and_grad`: `[value, grads]` (with `hasAux`: `[[value, aux], grads]`). */
export function valueAndGrad(f: (...args: any[]) => unknown, opts: GradOptions = {}): (...args: any[]) => [unknown, unknown] {
  const argnums = opts.argnums ?? 0;
  const nums = typeof argnums === 'number' ? [argnums] : [...argnums];
  return (...args: any[]) => {
    for (const n of nums) {
      if (!Number.isInteger(n) || n < 0 || n >= args.length) throw new RangeError(`grad: argnums ${showValue(argnums)} out of range for ${args.length} positional arguments`);
    }
    const diff = nums.map((n) => args[n]);
    const [leaves, inTree] = arrayLeaves(diff, 'grad');
    leaves.forEach((l, i) => {
      if (!isFloat(l.dtype)) {
        throw new TypeError(`grad: requires floating-point inputs, but differentiated input leaf ${i} has dtype ${l.dtype}; cast it (astype('float32')) or leave it out of argnums`);
      }
    });
    let auxTree: tree.TreeDef | null = null;
    let nAux = 0;
    const fn = (...ls: Array[]): Array[] => {
      const a = args.slice();
      const d = tree.unflatten(inTree, ls) as unknown[];
      nums.forEach((n, i) => (a[n] = d[i]));
      let out = f(...a);
      let aux: Array[] = [];
      if (opts.hasAux) {
        if (!globalThis.Array.isArray(out) || out.length !== 2) throw new TypeError('grad: with hasAux the function must return [value, aux]');
        const [al, at] = tree.flatten((out as unknown[])[1]);
        auxTree = at;
        aux = al as Array[];
        nAux = aux.length;
        out = (out as unknown[])[0];
      }
      if (!(out instanceof Array) && typeof out !== 'number') {
        const pair = globalThis.Array.isArray(out) && out.length === 2 && !opts.hasAux;
        throw new TypeError(`grad: the function must return a scalar Array; it returned ${describeValue(out)}${pair ? " (to return [value, aux], pass { hasAux: true })" : ''}`);
      }
      const y = out instanceof Array ? out : asArray(out);
      if (y.ndim !== 0) throw new TypeError(`grad: the function must return a scalar; it returned shape ${fmt(y.shape)} (use vjp or jacrev for non-scalar outputs)`);
      if (!isFloat(y.dtype)) throw new TypeError(`grad: the function must return a float scalar; it returned ${y.dtype}`);
      return [y, ...aux];
    };
    const [po, lin] = linearizeFlat(fn, leaves, leaves.map(() => true));
    const cts = [filled(1, po[0].aval), ...new globalThis.Array(nAux).fill(null)];
    const g = backwardPass(lin.jaxpr.jaxpr, lin.jaxpr.consts, leaves.map(() => true), [], cts);
    const grads = tree.unflatten(inTree, g.map((r, i) => r ?? zerosOf(leaves[i].aval))) as unknown[];
    const gOut = typeof argnums === 'number' ? grads[0] : grads;
    const value = opts.hasAux ? [po[0], tree.unflatten(auxTree!, po.slice(1))] : po[0];
    return [value, gOut];
  };
}

/** `jax.grad`: the gradient of a scalar function (with `hasAux`: `[grads, aux]`). */
export function grad(f: (...args: any[]) => unknown, opts: GradOptions = {}): (...args: any[]) => any {
  const vg = valueAndGrad(f, opts);
  return (...args: any[]) => {
    const [v, g] = vg(...args);
    return opts.hasAux ? [g, (v as unknown[])[1]] : g;
  };
}

// ---------------------------------------------------------------------------------------------
// Jacobians: vmap of jvp over input basis vectors (forward) or of vjp over output basis vectors
// (reverse). For an input leaf of shape I and an output leaf of shape O the block has shape
// [...O, ...I]; blocks nest as the output's structure holding the inputs' structure.


function basis(a: Array): Array {
  const n = a.size;
  const eye = lax.convertElementType(lax.eq(lax.broadcastedIota('int32', [n, n], 0), lax.broadcastedIota('int32', [n, n], 1)), a.dtype);
  return lax.reshape(eye, [n, ...a.shape]);
}

/** `[n, ...O]` (one row per input element) -> `[...O, ...I]`. */
function rowsToBlock(rows: Array, inShape: readonly number[]): Array {
  const outRank = rows.ndim - 1;
  const t = outRank === 0 ? rows : lax.transpose(rows, [...globalThis.Array.from({ length: outRank }, (_, i) => i + 1), 0]);
  return lax.reshape(t, [...rows.shape.slice(1), ...inShape]);
}

function argsFor(argnums: number | readonly number[], args: unknown[], what: string): number[] {
  const nums = typeof argnums === 'number' ? [argnums] : [...argnums];
  for (const n of nums) if (!Number.isInteger(n) || n < 0 || n >= args.length) throw new RangeError(`${what}: argnums ${showValue(argnums)} out of range for ${args.length} arguments`);
  return nums;
}

/** `jax.jacfwd`: the Jacobian by forward mode (one jvp per input element, batched with vmap). */
export function jacfwd(f: (...args: any[]) => unknown, opts: { argnums?: number | readonly number[] } = {}): (...args: any[]) => any {
  const argnums = opts.argnums ?? 0;
  return (...args: any[]) => {
    const nums = argsFor(argnums, args, 'jacfwd');
    const [leaves, inTree] = arrayLeaves(nums.map((n) => args[n]), 'jacfwd');
    const call = (ls: Array[]): unknown => {
      const a = args.slice();
      const d = tree.unflatten(inTree, ls) as unknown[];
      nums.forEach((n, i) => (a[n] = d[i]));
      return f(...a);
    };
    let outTree: tree.TreeDef | null = null;
    // blocks[inLeaf][outLeaf]
    const blocks = leaves.map((leaf, li) => {
      const rows = vmap((t: Array) => {
        const tans = leaves.map((l, k) => (k === li ? t : zerosOf(l.aval)));
        const [, to] = jvpFlat((...ls) => {
          const [o, ot] = arrayLeaves(call(ls), 'jacfwd');
          outTree = ot;
          return o;
        }, leaves, tans);
        return to.map((x, k) => x ?? zerosOf(leaves[k].aval));
      })(basis(leaf)) as Array[];
      return rows.map((r) => rowsToBlock(r, leaf.shape));
    });
    return assemble(blocks, outTree!, inTree, typeof argnums === 'number');
  };
}

/** `jax.jacrev`: the Jacobian by reverse mode (one vjp per output element, batched with vmap). */
export function jacrev(f: (...args: any[]) => unknown, opts: { argnums?: number | readonly number[] } = {}): (...args: any[]) => any {
  const argnums = opts.argnums ?? 0;
  return (...args: any[]) => {
    const nums = argsFor(argnums, args, 'jacrev');
    const [leaves, inTree] = arrayLeaves(nums.map((n) => args[n]), 'jacrev');
    let outTree: tree.TreeDef | null = null;
    const fn = (...ls: Array[]): Array[] => {
      const a = args.slice();
      const d = tree.unflatten(inTree, ls) as unknown[];
      nums.forEach((n, i) => (a[n] = d[i]));
      const [o, ot] = arrayLeaves(f(...a), 'jacrev');
      outTree = ot;
      return o;
    };
    const [po, lin] = linearizeFlat(fn, leaves, leaves.map(() => true));
    // blocksByOut[outLeaf][inLeaf] -> transpose to [inLeaf][outLeaf] ordering of assemble.
    const byOut = po.map((out, oi) => {
      const rows = vmap((ct: Array) => {
        const cts = po.map((o, k) => (k === oi ? ct : zerosOf(o.aval)));
        return backwardPass(lin.jaxpr.jaxpr, lin.jaxpr.consts, leaves.map(() => true), [], cts).map((g, k) => g ?? zerosOf(leaves[k].aval));
      })(basis(out)) as Array[];
      // rows[k]: [nOut, ...I_k] -> [...O, ...I_k]
      return rows.map((r, k) => lax.reshape(r, [...out.shape, ...leaves[k].shape]));
    });
    const blocks = leaves.map((_, li) => po.map((_o, oi) => byOut[oi][li]));
    return assemble(blocks, outTree!, inTree, typeof argnums === 'number');
  };
}

function assemble(blocks: Array[][], outTree: tree.TreeDef, inTree: tree.TreeDef, single: boolean): unknown {
  const nOut = blocks.length ? blocks[0].length : 0;
  const perOut = globalThis.Array.from({ length: nOut }, (_, oi) => {
    const byIn = tree.unflatten(inTree, blocks.map((b) => b[oi])) as unknown[];
    return single ? byIn[0] : byIn;
  });
  return tree.unflatten(outTree, perOut);
}

/** `jax.hessian`: `jacfwd(jacrev(f))`. */
export function hessian(f: (...args: any[]) => unknown, opts: { argnums?: number | readonly number[] } = {}): (...args: any[]) => any {
  return jacfwd(jacrev(f, opts), opts);
}
