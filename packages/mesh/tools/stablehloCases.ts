/**
 * The functions the fidelity check exports to StableHLO and runs on a real XLA (FIDELITY.md), with
 * deterministic inputs and the tolerances their comparison uses. `export_stablehlo_cases.ts`
 * writes them out; `test/xlaOutputs.test.ts` compares tpukit with the outputs XLA produced.
 */
import { type Array, checkpoint, customJvp, customVjp, grad, lax, nn, np, random, valueAndGrad } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import { createHash } from 'node:crypto';
import { tinyTransformerLoss, tinyTransformerParams, tinyTokens } from '../../xla-lite/test/tinyTransformer';
import { makeMesh, NamedSharding, P, setCpuDeviceCount } from '../src/index';

export type Fn = (...xs: Array[]) => Array | Array[];
export interface Case {
  name: string;
  fn: Fn;
  args: Array[];
  /** |got - want| <= atol + rtol |want| for each output element, per XLA platform. */
  tol: { atol: number; rtol: number };
  /** Looser tolerance on GPU, where XLA's DEFAULT f32 dot may use TF32. */
  gpuTol?: { atol: number; rtol: number };
  note: string;
  shardings?: { in: NamedSharding[]; out?: NamedSharding | NamedSharding[] };
  partitions?: number;
}

/** The jit options of a case (its shardings, if any). */
export const jitOptions = (c: Case): Record<string, unknown> => (c.shardings ? { inShardings: c.shardings.in, ...(c.shardings.out ? { outShardings: c.shardings.out } : {}) } : {});

/**
 * The StableHLO modules exported for a case: 'low' (`lower().asStableHlo()`, unoptimised) and,
 * for a single-device case, 'opt' (`compile().asStableHlo()`: fusions inline, fused attention and
 * one-hot gathers expanded). A partitioned program's optimised module is its per-device program
 * (collectives, local slices), which has no StableHLO form, so a sharded case has 'low' only.
 * `text` throws where the export refuses the case.
 */
export function caseModules(c: Case): { kind: 'low' | 'opt'; text: () => string }[] {
  const lowered = jit(c.fn as (...xs: Array[]) => Array, jitOptions(c) as never).lower(...c.args);
  const low = { kind: 'low' as const, text: () => lowered.asStableHlo() };
  return c.shardings ? [low] : [low, { kind: 'opt' as const, text: () => lowered.compile().asStableHlo() }];
}

const rnd = (seed: number, shape: number[], scale = 1): Array => np.multiply(random.normal(random.key(seed), shape), scale);
const ints = (n: number, mod: number, shape: number[], s = 0): Array => np.array(Int32Array.from({ length: n }, (_, i) => (i * 7 + s * 3) % mod)).reshape(shape);

export function cases(opts: { sharded?: boolean } = {}): Case[] {
  const out: Case[] = [];
  const F32 = { atol: 1e-5, rtol: 1e-5 };
  out.push({
    name: 'elementwise',
    note: 'broadcast add/mul/div, tanh/exp/log/sqrt/abs, compare + select, integer ops, converts',
    fn: (a, b, i) => [
      np.add(np.tanh(np.add(np.multiply(a, 2), b)), np.divide(np.exp(b), np.add(np.square(a), 1))),
      np.where(np.greater(a, 0), np.sqrt(np.abs(a)), np.multiply(np.log(np.add(np.abs(a), 1)), 0.1)),
      np.add(np.multiply(i, 3), np.remainder(i, 5)),
      np.asarray(np.add(a, b), 'bfloat16'),
      np.maximum(np.minimum(a, 0.5), -0.5),
    ],
    args: [rnd(1, [4, 5]), rnd(2, [5]), ints(20, 13, [4, 5])],
    tol: F32,
  });
  for (const prec of ['default', 'high', 'highest'] as const) {
    out.push({
      name: `dot_${prec}`,
      note: `f32 matmul + batched dot_general with precision ${prec} (tpukit: ${prec === 'default' ? '1 bf16 pass' : prec === 'high' ? '3 bf16 passes' : '6 bf16 passes'})`,
      fn: (a, b, c) => [lax.dot(a, b, { precision: prec }), lax.dotGeneral(c, c, [[[2], [2]], [[0], [0]]], { precision: prec })],
      args: [rnd(3, [8, 33]), rnd(4, [33, 6]), rnd(5, [3, 4, 17])],
      // bf16 operands (8 significant bits) in one pass: relative error ~2^-8 per product.
      tol: prec === 'default' ? { atol: 5e-2, rtol: 2e-2 } : prec === 'high' ? { atol: 1e-4, rtol: 1e-4 } : F32,
      // XLA:GPU runs HIGH as one TF32 pass (10-bit mantissa), a TPU (and tpukit) as 3 bf16 passes.
      ...(prec === 'high' ? { gpuTol: { atol: 2e-2, rtol: 5e-3 } } : {}),
    });
  }
  out.push({
    name: 'dot_bf16',
    note: 'bf16 x bf16 -> f32 (preferred_element_type), as a TPU MXU matmul',
    fn: (a, b) => lax.dot(np.asarray(a, 'bfloat16'), np.asarray(b, 'bfloat16'), { preferredElementType: 'float32' }),
    args: [rnd(6, [8, 40]), rnd(7, [40, 5])],
    tol: { atol: 1e-4, rtol: 1e-4 },
  });
  out.push({
    name: 'reductions',
    note: 'sum / max / min / prod over axes, mean, logsumexp-style softmax',
    fn: (a) => [np.sum(a, { axis: 1 }), np.max(a, { axis: 0 }), np.min(a), np.prod(np.add(np.multiply(a, 0.1), 1), { axis: -1 }), np.mean(a, { axis: [0, 2] }), nn.logSoftmax(a, { axis: -1 })],
    args: [rnd(8, [3, 7, 5])],
    tol: F32,
  });
  out.push({
    name: 'gather_onehot',
    note: 'np.take rows (embedding gather), nn.oneHot, take_along_axis',
    fn: (t, i, j) => [np.take(t, i, { axis: 0 }), nn.oneHot(j, 6), np.sum(np.multiply(np.take(t, i, { axis: 0 }), 2), { axis: -1 })],
    args: [rnd(9, [11, 4]), ints(6, 11, [2, 3], 1), ints(5, 6, [5], 2)],
    tol: F32,
  });
  out.push({
    name: 'gather_modes',
    note: "np.take in 'fill' mode with negative and out-of-bounds indices (NaN / fill value), in 'clip' mode, and the scatter-add of its gradient with repeated indices",
    fn: (t, i) => {
      const [val, g] = valueAndGrad((x: Array) => np.sum(np.multiply(np.take(x, i, { axis: 0, mode: 'clip' }), np.arange(24, undefined, 1, 'float32').reshape([6, 4]))))(t) as unknown as [Array, Array];
      return [np.take(t, i, { axis: 0 }), np.take(t, i, { axis: 0, mode: 'fill', fillValue: -7 }), np.take(t, i, { axis: 1, mode: 'clip' }), val, g];
    },
    args: [rnd(20, [5, 4]), np.array(Int32Array.from([0, -1, 7, 4, 2, 2]))],
    tol: F32,
  });
  out.push({
    name: 'misc_ops',
    note: 'dynamic_slice / dynamic_update_slice (clamped starts), shifts, round (away / even), is_finite, exp2, bitcast_convert_type',
    fn: (a, u, n, s) => [
      lax.dynamicSlice(a, [s, np.array(3, 'int32')], [2, 3]),
      lax.dynamicUpdateSlice(a, u, [np.array(3, 'int32'), s]),
      lax.shiftLeft(n, np.array(Int32Array.from([1, 2, 3, 31]))),
      lax.shiftRightArithmetic(n, np.array(Int32Array.from([1, 2, 3, 31]))),
      lax.shiftRightLogical(n, np.array(Int32Array.from([1, 2, 3, 31]))),
      lax.round(np.multiply(a, 2.5)),
      lax.round(np.multiply(a, 2.5), 1),
      lax.isFinite(np.divide(1, np.subtract(a, 0.125))),
      lax.isFinite(np.divide(np.subtract(a, 0.125), np.subtract(a, 0.125))),
      lax.exp2(a),
      lax.bitcastConvertType(a, 'int32'),
    ],
    args: [np.array(Float32Array.from({ length: 20 }, (_, i) => (i - 9.5) / 4)).reshape([4, 5]), rnd(21, [2, 2]), np.array(Int32Array.from([5, -7, 1 << 20, -1])), np.array(1, 'int32')],
    tol: F32,
  });
  out.push({
    name: 'arg_cum_sort',
    note: 'argmax / argmin (ties: first index), cumsum (forward, reverse), cumprod, cummax, cummin on int32, sort with NaN and -0, sortKeyVal, a 2-key sort',
    fn: (a, n, k2) => {
      const [sk, sv] = lax.sortKeyVal(a, np.multiply(a, 10), 0);
      const [m0, m1] = lax.sort([k2, n], { dimension: 0, numKeys: 2 }) as Array[];
      return [lax.argmax(a, 1), lax.argmin(a, 0), lax.cumsum(a, 1), lax.cumsum(a, 0, true), lax.cumprod(np.add(np.multiply(a, 0.1), 1), 1), lax.cummax(a, 1), lax.cummin(n, 0), lax.sort(np.divide(a, np.subtract(a, 0.25)), { dimension: 1 }), lax.sort(np.log(a), { dimension: 0 }), sk, sv, m0, m1];
    },
    args: [np.array(Float32Array.from([0.5, -1, 2, 2, 0.25, 3, -0, 0, 1, 0.25, 0.5, -2])).reshape([3, 4]), np.array(Int32Array.from([5, -3, 9, 5, 0, -7])), np.array(Int32Array.from([2, 1, 2, 1, 2, 1]))],
    tol: F32,
  });
  out.push({
    name: 'chlo_ops',
    note: 'ops JAX lowers to CHLO: erf, erfc, erf_inv, lgamma, digamma, sinh, cosh, asin, acos, atan, asinh, acosh, atanh, nextafter',
    fn: (a, b) => [lax.erf(a), lax.erfc(a), lax.erfInv(np.multiply(a, 0.3)), lax.lgamma(b), lax.digamma(b), lax.sinh(a), lax.cosh(a), lax.asin(np.multiply(a, 0.3)), lax.acos(np.multiply(a, 0.3)), lax.atan(a), lax.asinh(a), lax.acosh(b), lax.atanh(np.multiply(a, 0.3)), lax.nextafter(a, b)],
    args: [np.array(Float32Array.from({ length: 12 }, (_, i) => (i - 5.5) / 2.2)).reshape([3, 4]), np.array(Float32Array.from({ length: 12 }, (_, i) => 1.25 + i * 0.7)).reshape([3, 4])],
    tol: { atol: 2e-6, rtol: 2e-5 },
  });
  out.push({
    name: 'random_in_jit',
    note: 'jax.random inside jit (threefry2x32 expanded into uint32 ops): bits, split, uniform, normal, randint from a key argument',
    fn: (key) => {
      const [k1, k2] = random.splitKeys(key);
      return [random.bits(key, [5]), random.split(key, 3), random.uniform(k1, [3, 4], { minval: -1, maxval: 2 }), random.normal(k2, [6]), random.randint(key, [7], 0, 10)];
    },
    args: [random.key(42)],
    tol: { atol: 1e-6, rtol: 1e-6 },
  });
  out.push({
    name: 'control_flow',
    note: 'while_loop, scan (forward and reverse, closing over an array), cond on a predicate, switch with 3 branches and an out-of-range index, and the gradient of a scanned tanh RNN (a transposed scan)',
    fn: (x, w, seq, k) => {
      const [, y] = lax.whileLoop((c: Array[]) => np.less(c[0], 5), (c: Array[]) => [np.add(c[0], 1), np.add(np.multiply(c[1], 1.5), c[0])], [np.array(0, 'int32'), x]) as Array[];
      const [h, hs] = lax.scan((c: Array, r: Array) => [np.tanh(np.add(np.matmul(c, w, { precision: 'highest' }), r)), np.multiply(c, 2)], np.zeros([3]), seq) as [Array, Array];
      const [hr, hsr] = lax.scan((c: Array, r: Array) => [np.add(c, r), c], np.zeros([3]), seq, { reverse: true }) as [Array, Array];
      const c1 = lax.cond(np.greater(np.sum(x), 0), (a: Array) => np.sin(a), (a: Array) => np.cos(a), x);
      const c2 = lax.switch(k, [(a: Array) => np.add(a, 1), (a: Array) => np.multiply(a, 3), (a: Array) => np.negative(a)], x);
      const rnnLoss = (ww: Array) => np.sum(np.square((lax.scan((c: Array, r: Array) => [np.tanh(np.add(np.matmul(c, ww, { precision: 'highest' }), r)), c], np.zeros([3]), seq) as [Array, Array])[0]));
      const [lv, gw] = valueAndGrad(rnnLoss)(w) as unknown as [Array, Array];
      return [y, h, hs, hr, hsr, c1, c2, lv, gw];
    },
    args: [rnd(22, [3]), rnd(23, [3, 3], 0.5), rnd(24, [4, 3]), np.array(7, 'int32')],
    tol: { atol: 2e-5, rtol: 2e-5 },
  });
  const q = rnd(10, [2, 5, 4, 8]);
  const k = rnd(11, [2, 7, 2, 8]);
  const v = rnd(12, [2, 7, 2, 8]);
  out.push({
    name: 'attention_fwd',
    note: 'nn.dotProductAttention (fused on systolic; exported expanded), causal, grouped-query heads (N=4, K=2), T != S',
    fn: (a, b, c) => nn.dotProductAttention(a, b, c, { isCausal: true }),
    args: [q, k, v],
    tol: { atol: 2e-2, rtol: 2e-2 },
  });
  out.push({
    name: 'attention_grad',
    note: 'value and gradient (dq, dk, dv) of sum(attention * w): the fused backward, expanded',
    fn: (a, b, c, w) => {
      const [val, g] = valueAndGrad((x: Array[]) => np.sum(np.multiply(nn.dotProductAttention(x[0], x[1], x[2], { isCausal: true }), w)))([a, b, c]) as unknown as [Array, Array[]];
      return [val, ...g];
    },
    args: [q, k, v, rnd(13, [2, 5, 4, 8])],
    tol: { atol: 3e-2, rtol: 3e-2 },
  });
  const dims = { V: 16, D: 8, H: 2, F: 16, T: 6, B: 2 };
  const params = tinyTransformerParams(dims);
  const names = Object.keys(params).sort();
  const loss = tinyTransformerLoss(dims, (x, g) => np.multiply(np.multiply(x, np.reciprocal(np.sqrt(np.add(np.mean(np.square(x), { axis: -1, keepdims: true }), 1e-6)))), g));
  out.push({
    name: 'tiny_transformer_step',
    note: 'value and gradient of the tiny transformer loss (xla-lite/test/tinyTransformer.ts, RMSNorm): embedding gather, attention, gelu MLP, tied log-softmax',
    fn: (...xs) => {
      const tokens = xs[names.length];
      const targets = xs[names.length + 1];
      const [val, g] = valueAndGrad((p: Record<string, Array>) => loss(p, tokens, targets))(Object.fromEntries(names.map((n, i) => [n, xs[i]]))) as unknown as [Array, Record<string, Array>];
      return [val, ...names.map((n) => g[n])];
    },
    args: [...names.map((n) => params[n]), tinyTokens(dims, 1), tinyTokens(dims, 2)],
    // Default-precision dots: tpukit rounds operands to bf16; XLA (CPU) multiplies in f32.
    tol: { atol: 1e-3, rtol: 1e-2 },
  });
  if (opts.sharded === false) return out;
  // Sharded (GSPMD) modules: mhlo.sharding on arguments / results, mhlo.num_partitions.
  setCpuDeviceCount(8);
  const m2 = makeMesh([2], ['x']);
  const m42 = makeMesh([4, 2], ['x', 'y']);
  const S = (m: ReturnType<typeof makeMesh>, ...spec: (string | null)[]) => new NamedSharding(m, P(...spec));
  out.push({
    name: 'sharded_matmul_2',
    note: 'Megatron pair on 2 devices: x replicated, w1 column-split, w2 row-split, result replicated',
    fn: (x, w1, w2) => np.matmul(np.maximum(np.matmul(x, w1, { precision: 'highest' }), 0), w2, { precision: 'highest' }),
    args: [rnd(14, [4, 8]), rnd(15, [8, 16]), rnd(16, [16, 8])],
    shardings: { in: [S(m2, null, null), S(m2, null, 'x'), S(m2, 'x', null)], out: S(m2, null, null) },
    partitions: 2,
    tol: F32,
  });
  out.push({
    name: 'sharded_mlp_8',
    note: 'data x model parallel on a 4x2 mesh: batch on x, hidden on y; tanh MLP with a mean loss',
    fn: (x, w1, w2) => {
      const y = np.matmul(np.tanh(np.matmul(x, w1, { precision: 'highest' })), w2, { precision: 'highest' });
      return [y, np.mean(np.square(y))];
    },
    args: [rnd(17, [8, 6]), rnd(18, [6, 4]), rnd(19, [4, 6])],
    shardings: { in: [S(m42, 'x', null), S(m42, null, 'y'), S(m42, 'y', null)], out: [S(m42, 'x', null), S(m42)] },
    partitions: 8,
    tol: F32,
  });
  return out;
}


/**
 * The call wrappers and top_k, which were `tpukit.*` custom calls until 2026-11-26 (helper
 * exportwrap): checked on CPU only (jax 0.10.2 on the development machine, FIDELITY.md), so
 * they are kept apart from `cases()`, whose fixture holds GPU and CPU results.
 */
export function wrapperCases(): Case[] {
  const F32 = { atol: 1e-5, rtol: 1e-5 };
  // A nested jit with two outputs, called twice (the second time on its own outputs).
  const inner = jit((a: Array, b: Array) => [np.tanh(np.add(np.matmul(a, b, { precision: 'highest' }), 1)), np.multiply(np.sum(a, { axis: 0 }), 2)]);
  const scaled = jit((a: Array) => np.multiply(np.sin(a), 3));
  const block = (w: Array, x: Array) => np.sum(np.square(np.tanh(np.matmul(np.tanh(np.matmul(x, w, { precision: 'highest' })), w, { precision: 'highest' }))));
  // Softplus with a hand-written derivative (JAX's docs example), and a clipped-gradient identity.
  const softplus = customJvp((x: Array) => np.log1p(np.exp(x)));
  softplus.defjvp(([x]: [Array], [t]: [Array]) => [softplus(x), np.multiply(t, np.divide(1, np.add(1, np.exp(np.negative(x)))))]);
  const clipGrad = customVjp((x: Array, y: Array) => np.multiply(np.sin(x), y));
  clipGrad.defvjp(
    (x: Array, y: Array) => [np.multiply(np.sin(x), y), [x, y]],
    ([x, y]: Array[], ct: Array) => [np.clip(np.multiply(np.multiply(np.cos(x), y), ct), -0.5, 0.5), np.multiply(np.sin(x), ct)],
  );
  const nanTies = np.array(Float32Array.from([0.5, Number.NaN, 2, 2, -0, 0, -1, 0.5, 3, Number.NaN, -Infinity, 0.25, 7, 7, 7, 7, 7, 7, -2, 1, Number.NaN, Number.NaN, 1, -2])).reshape([4, 6]);
  return [
    {
      name: 'top_k',
      note: 'lax.topK along the last axis with NaNs (largest), ties and -0 / 0 (lower index first), on float32 rows, a 3-d int32 operand, and k = 0 / k = n',
      fn: (x, n) => [...lax.topK(x, 3), ...lax.topK(n, 2), ...lax.topK(x, 6), lax.topK(x, 0)[0]],
      args: [nanTies, np.array(Int32Array.from({ length: 24 }, (_, i) => ((i * 5) % 7) - 3)).reshape([2, 3, 4])],
      tol: F32,
    },
    {
      name: 'nested_jit',
      note: 'a jit inside the exported jit (pjit), called twice, with two outputs; a one-output jit inside a scan body',
      fn: (a, b) => {
        const [t, s] = inner(a, b) as Array[];
        const [t2] = inner(t, np.ones([4, 4])) as Array[];
        const [c] = lax.scan((c: Array, r: Array) => [np.add(c, scaled(r) as Array), c], np.zeros([4]), t2) as [Array, Array];
        return [t, s, t2, c];
      },
      args: [rnd(30, [3, 4]), rnd(31, [4, 4], 0.5)],
      tol: F32,
    },
    {
      name: 'remat',
      note: "checkpoint (remat) forward, and the gradient of a checkpointed block with the default policy and with 'dots_saveable'",
      fn: (w, x) => [
        checkpoint(block)(w, x),
        grad(checkpoint(block))(w, x),
        grad((ww: Array) => checkpoint(block, { policy: 'dots_saveable' })(ww, x))(w),
      ],
      args: [rnd(32, [5, 5], 0.5), rnd(33, [3, 5])],
      tol: { atol: 2e-5, rtol: 2e-5 },
    },
    {
      name: 'custom_derivatives',
      note: 'customJvp softplus and a customVjp with a clipped cotangent: their primal values (custom_jvp_call / custom_vjp_call) and gradients (the rules)',
      fn: (x, y) => [
        softplus(x),
        clipGrad(x, y),
        grad((a: Array) => np.sum(softplus(a)))(x),
        ...(grad((a: Array, b: Array) => np.sum(clipGrad(a, b)), { argnums: [0, 1] })(x, y) as Array[]),
      ],
      args: [rnd(34, [7], 3), rnd(35, [7], 2)],
      tol: F32,
    },
  ];
}

/**
 * `{ "<case>.<low|opt>": sha256 of the module text }` for every module the fidelity check
 * exports (cases() and wrapperCases()); a module the export refuses is "refused: <message>".
 * Under the 'default' matmul precision, as the export script runs.
 */
export function moduleDigests(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const c of [...cases(), ...wrapperCases()]) {
    for (const { kind, text } of caseModules(c)) {
      let digest: string;
      try {
        digest = createHash('sha256').update(text()).digest('hex');
      } catch (e) {
        digest = `refused: ${String(e).slice(0, 200)}`;
      }
      out[`${c.name}.${kind}`] = digest;
    }
  }
  return out;
}
