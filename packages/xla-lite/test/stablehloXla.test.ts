// StableHLO export fixes found by compiling tpukit's modules with a real XLA (FIDELITY.md at the
// repo root): gather / scatter as stablehlo.gather / stablehlo.scatter instead of custom calls
// XLA cannot run, the one-op mappings, closed-over constants embedded instead of left as extra
// arguments, a clear error for a partitioned per-device program, and (helper exportwrap, XLA
// 0.10.2 on CPU) the call wrappers and top_k, which XLA rejected as tpukit.* custom calls. These check the text;
// the numbers were checked against XLA on the device (packages/mesh/tools/check_stablehlo_cases.py).
import { type Array, checkpoint, customJvp, customVjp, grad, lax, makeJaxpr, np, random } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { jit, lowerJaxpr } from '../src/internal';
import { M1, S } from './gridSharding';

const t = np.array(Float32Array.from({ length: 20 }, (_, i) => i / 4)).reshape([5, 4]);
const idx = np.array(Int32Array.from([0, -1, 7, 4, 2, 2]));

/** The ops of a module's text, in order (`stablehlo.add`, ...). */
const ops = (text: string): string[] => [...text.matchAll(/"(stablehlo\.[a-z_]+)"/g)].map((m) => m[1]);

describe('gather and scatter export as StableHLO ops (XLA rejected the tpukit.gather custom call)', () => {
  it("np.take in 'fill' mode: a stablehlo.gather, then the fill value selected where the index is out of bounds", () => {
    const text = jit((x: Array, i: Array) => np.take(x, i, { axis: 0 })).lower(t, idx).asStableHlo();
    expect(text).not.toContain('custom_call');
    expect(text).toMatch(
      /"stablehlo\.gather"\(%arg0, %\d+\) \{dimension_numbers = #stablehlo\.gather<offset_dims = \[1\], collapsed_slice_dims = \[0\], start_index_map = \[0\], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 4>\} : \(tensor<5x4xf32>, tensor<6x1xi32>\) -> tensor<6x4xf32>/,
    );
    // In bounds: 0 <= index <= 5 - 1, reduced with `and` over the index vector.
    expect(text).toMatch(/comparison_direction GE>, compare_type = #stablehlo<comparison_type SIGNED>/);
    expect(text).toContain('value = dense<4> : tensor<1xi32>');
    expect(text).toContain('value = dense<0x7FC00000> : tensor<f32>');
    expect(ops(text).slice(-4)).toEqual(['stablehlo.broadcast_in_dim', 'stablehlo.constant', 'stablehlo.broadcast_in_dim', 'stablehlo.select']);
  });

  it("'clip' gathers are XLA's native clamping (no mask); an explicit fill value is used", () => {
    const clip = jit((x: Array, i: Array) => np.take(x, i, { axis: 1, mode: 'clip' })).lower(t, idx).asStableHlo();
    expect(ops(clip).filter((o) => o === 'stablehlo.select' || o === 'stablehlo.compare')).toEqual([]);
    expect(clip).toMatch(/offset_dims = \[0\], collapsed_slice_dims = \[1\], start_index_map = \[1\], index_vector_dim = 1>/);
    const fill = jit((x: Array, i: Array) => np.take(x, i, { axis: 0, mode: 'fill', fillValue: -7 })).lower(t, idx).asStableHlo();
    expect(fill).toContain('value = dense<-7.0e+0> : tensor<f32>');
  });

  it("the gradient of a gather is a stablehlo.scatter with an add region ('clip' clamps the indices first)", () => {
    const f = (x: Array, i: Array) => np.sum(np.square(np.take(x, i, { axis: 0, mode: 'clip' })));
    const text = jit(grad(f)).lower(t, idx).asStableHlo();
    expect(text).not.toContain('custom_call');
    expect(text).toMatch(
      /"stablehlo\.scatter"\(%\d+, %\d+, %\d+\) \(\{\n\^bb0\(%lhs: tensor<f32>, %rhs: tensor<f32>\):\n {2}%s = "stablehlo\.add"\(%lhs, %rhs\)[^\n]*\n {2}"stablehlo\.return"\(%s\)[^\n]*\n\}\) \{scatter_dimension_numbers = #stablehlo\.scatter<update_window_dims = \[1\], inserted_window_dims = \[0\], scatter_dims_to_operand_dims = \[0\], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false\}/,
    );
    expect(ops(text)).toContain('stablehlo.clamp');
    // The overwriting scatter returns the update.
    const set = jit((x: Array, i: Array, u: Array) => x.at(i).set(u)).lower(t, np.array(Int32Array.from([1, 3])), np.ones([2, 4])).asStableHlo();
    expect(set).toMatch(/\^bb0\(%lhs: tensor<f32>, %rhs: tensor<f32>\):\n {2}"stablehlo\.return"\(%rhs\)/);
  });
});

describe('one-op mappings that were custom calls', () => {
  it('dynamic slices, shifts, rounding, is_finite, exp2 and bitcast', () => {
    const n = np.array(Int32Array.from([5, -7, 1 << 20, -1]));
    const f = (a: Array, k: Array, s: Array) => [
      lax.dynamicSlice(a, [s, s], [2, 3]),
      lax.dynamicUpdateSlice(a, np.ones([2, 2]), [s, s]),
      lax.shiftLeft(k, k),
      lax.shiftRightArithmetic(k, k),
      lax.shiftRightLogical(k, k),
      lax.round(a),
      lax.round(a, 1),
      lax.isFinite(a),
      lax.exp2(a),
      lax.bitcastConvertType(a, 'int32'),
    ];
    const text = jit(f).lower(t, n, np.array(1, 'int32')).asStableHlo();
    expect(text).not.toContain('custom_call');
    expect(text).toContain('"stablehlo.dynamic_slice"(%arg0, %arg2, %arg2) {slice_sizes = array<i64: 2, 3>}');
    for (const op of ['dynamic_update_slice', 'shift_left', 'shift_right_arithmetic', 'shift_right_logical', 'round_nearest_afz', 'round_nearest_even', 'is_finite', 'bitcast_convert']) {
      expect(ops(text), op).toContain(`stablehlo.${op}`);
    }
    // exp2(x) = exp(log(2) x), as JAX lowers it.
    expect(text).toContain('value = dense<6.931471805599453e-1> : tensor<f32>');
  });
});

describe('closed-over constants', () => {
  const c = np.arange(4, undefined, 1, 'float32');
  const f = (x: Array) => np.multiply(np.add(x, c), 2);
  const x = np.ones([4]);

  it('are embedded as stablehlo.constant: the module takes only the function arguments', () => {
    const lowered = jit(f).lower(x);
    for (const text of [lowered.asStableHlo(), jit(f).lower(x).compile().asStableHlo()]) {
      expect(text).toMatch(/func\.func public @main\(%arg0: tensor<4xf32>\) -> \(tensor<4xf32>\)/);
      expect(text).toContain('value = dense<[0.0e+0, 1.0e+0, 2.0e+0, 3.0e+0]> : tensor<4xf32>');
    }
  });

  it('are still the leading inputs of the compiled program (call semantics unchanged)', () => {
    const compiled = jit(f).lower(x).compile();
    expect(globalThis.Array.from(compiled.call([c, x])[0].dataSync() as Float32Array)).toEqual([2, 4, 6, 8]);
  });
});

describe('a partitioned program', () => {
  it('names the collective and points to the pre-partitioning export', () => {
    const g = jit((a: Array, b: Array) => np.matmul(a, b), { inShardings: [S(M1, null, 'x'), S(M1, 'x', null)], outShardings: S(M1, null, null) });
    const lowered = g.lower(np.ones([4, 4]), np.ones([4, 4]));
    expect(lowered.asStableHlo()).toContain('mhlo.sharding = "{devices=[1,2]0,1}"');
    expect(() => lowered.compile().asStableHlo()).toThrow(/xla-lite export: all-reduce\.\d+ \(an instruction of a partitioned per-device program\) has no StableHLO form; export the sharded program before partitioning with lower\(\.\.\.\)\.asStableHlo\(\)/);
  });
});

describe('ops with regions and CHLO ops that were custom calls', () => {
  const a = np.array(Float32Array.from([0.5, -1, 2, 2, 0.25, 3, -0, 0, 1, 0.25, 0.5, -2])).reshape([3, 4]);

  it('argmax is a two-operand reduce over (values, iota) keeping the first of ties; cumsum a reduce_window', () => {
    const text = jit((x: Array) => [lax.argmax(x, 1), lax.cumsum(x, 1, true), lax.cummax(x, 0)]).lower(a).asStableHlo();
    expect(text).not.toContain('custom_call');
    expect(text).toMatch(/%(\d+):2 = "stablehlo\.reduce"\(%arg0, %\d+, %\d+, %\d+\) \(\{\n\^bb0\(%av: tensor<f32>, %ai: tensor<i32>, %bv: tensor<f32>, %bi: tensor<i32>\):/);
    expect(text).toContain('%first = "stablehlo.compare"(%ai, %bi) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>}');
    expect(text).toMatch(/"func\.return"\(%\d+#1, /);
    // reverse: padded behind; forward: in front.
    expect(text).toContain('window_dimensions = array<i64: 1, 4>, padding = dense<[[0, 0], [0, 3]]> : tensor<2x2xi64>');
    expect(text).toContain('window_dimensions = array<i64: 3, 1>, padding = dense<[[2, 0], [0, 0]]> : tensor<2x2xi64>');
  });

  it('sort is a stable stablehlo.sort whose comparator puts NaNs last and orders keys lexicographically', () => {
    const k2 = np.array(Int32Array.from([2, 1, 2]));
    const text = jit((x: Array, k: Array) => [lax.sort(x, { dimension: 1 }), ...(lax.sort([k, k], { dimension: 0, numKeys: 2 }) as Array[])]).lower(a, k2).asStableHlo();
    expect(text).toMatch(/"stablehlo\.sort"\(%arg0\) \(\{\n\^bb0\(%a0: tensor<f32>, %b0: tensor<f32>\):/);
    expect(text).toContain('%lt0yn = "stablehlo.compare"(%b0, %b0) {comparison_direction = #stablehlo<comparison_direction NE>');
    expect(text).toContain('dimension = 1 : i64, is_stable = true');
    expect(text).toMatch(/"stablehlo\.return"\(%lex0\)/);
  });

  it('CHLO ops, and threefry2x32 expanded into uint32 ops (random inside jit)', () => {
    const text = jit((x: Array, k: Array) => [lax.erfInv(np.multiply(x, 0.3)), lax.lgamma(np.add(np.abs(x), 1)), lax.sinh(x), random.bits(k, [3])]).lower(a, random.key(1)).asStableHlo();
    expect(text).not.toContain('custom_call');
    for (const op of ['chlo.erf_inv', 'chlo.lgamma', 'chlo.sinh']) expect(text).toContain(`"${op}"`);
    // 20 rounds: 20 left rotations (shift_left + shift_right_logical + or) per Threefry call.
    expect(ops(text).filter((o) => o === 'stablehlo.shift_left').length).toBe(20);
    expect(text).toContain('value = dense<466688986> : tensor<ui32>'); // the key-schedule parity 0x1BD11BDA
  });
});

describe('control flow exports as regions (it was a custom call)', () => {
  it('while_loop is stablehlo.while, scan a while over dynamic slices of xs, cond a stablehlo.case on the clamped index', () => {
    const x = np.ones([3]);
    const f = (v: Array, k: Array) => {
      const [, y] = lax.whileLoop((c: Array[]) => np.less(c[0], 5), (c: Array[]) => [np.add(c[0], 1), np.multiply(c[1], 2)], [np.array(0, 'int32'), v]) as Array[];
      const [h, hs] = lax.scan((c: Array, r: Array) => [np.add(c, r), c], np.zeros([3]), np.ones([4, 3]), { reverse: true }) as [Array, Array];
      const s = lax.switch(k, [(a: Array) => np.add(a, 1), (a: Array) => np.negative(a)], v);
      return [y, h, hs, s];
    };
    const text = jit(f).lower(x, np.array(1, 'int32')).asStableHlo();
    expect(text).not.toContain('custom_call');
    expect(ops(text).filter((o) => o === 'stablehlo.while').length).toBe(2);
    expect(text).toMatch(/= "stablehlo\.while"\(%\d+, %arg0\) \(\{\n\^bb0\(%wc\d+_0: tensor<i32>, %wc\d+_1: tensor<3xf32>\):/);
    // scan: x_i sliced out at i (reverse: length - 1 - i), y_i written back at the same index.
    expect(text).toContain('"stablehlo.dynamic_slice"');
    expect(text).toContain('"stablehlo.dynamic_update_slice"');
    expect(text).toContain('value = dense<3> : tensor<i32>'); // length - 1 for the reversed scan
    expect(text).toMatch(/"stablehlo\.case"\(%\d+\) \(\{\n/);
    expect(ops(text)).toContain('stablehlo.clamp');
  });
});

describe('call wrappers export inline and top_k as a sort (XLA rejected tpukit.pjit / remat / custom_*_call / top_k)', () => {
  const x = np.array(Float32Array.from([0.5, -1, 2, 0.25]));
  /** The wrapper primitives a function's lowered (unoptimised) HLO module holds. */
  const wrappers = (f: (v: Array) => unknown): string[] =>
    lowerJaxpr(makeJaxpr(f)(x))
      .computations.flatMap((c) => c.instructions)
      .map((i) => i.prim?.name ?? '')
      .filter((n) => ['pjit', 'remat', 'custom_jvp_call', 'custom_vjp_call'].includes(n));
  /** Both exports of jit(f) at x: neither holds a custom call. */
  const texts = (f: (v: Array) => unknown): string[] => {
    const lowered = jit(f as (v: Array) => Array).lower(x);
    const out = [lowered.asStableHlo(), lowered.compile().asStableHlo()];
    for (const t of out) expect(t).not.toContain('custom_call');
    return out;
  };
  const count = (text: string, op: string): number => ops(text).filter((o) => o === op).length;

  it('a nested jit is its body, once per call', () => {
    const inner = jit((a: Array) => np.tanh(np.add(a, 1)));
    const f = (v: Array) => inner(inner(v) as Array);
    expect(wrappers(f)).toEqual(['pjit', 'pjit']);
    const [low] = texts(f);
    expect(count(low, 'stablehlo.tanh')).toBe(2);
  });

  it("remat is its body (forward); its gradients (the remat is resolved by then) export too", () => {
    const body = (v: Array) => np.sum(np.sin(np.multiply(v, v)));
    expect(wrappers(checkpoint(body))).toEqual(['remat']);
    expect(count(texts(checkpoint(body))[0], 'stablehlo.sine')).toBe(1);
    expect(count(texts(grad(checkpoint(body)))[0], 'stablehlo.cosine')).toBeGreaterThan(0);
    texts(grad(checkpoint(body, { policy: 'dots_saveable' })));
  });

  it('a customJvp / customVjp call is its primal function; the rules appear only under grad', () => {
    const softplus = customJvp((v: Array) => np.log1p(np.exp(v)));
    softplus.defjvp(([v]: [Array], [t]: [Array]) => [softplus(v), np.multiply(t, np.divide(1, np.add(1, np.exp(np.negative(v)))))]);
    expect(wrappers(softplus)).toEqual(['custom_jvp_call']);
    const [fwd] = texts(softplus);
    expect(ops(fwd)).toContain('stablehlo.log_plus_one');
    expect(ops(fwd)).not.toContain('stablehlo.negate');
    expect(ops(texts(grad((v: Array) => np.sum(softplus(v))))[0])).toContain('stablehlo.negate');
    const scaled = customVjp((v: Array) => np.sin(v));
    scaled.defvjp((v: Array) => [np.sin(v), v], (v: Array, ct: Array) => [np.multiply(np.cos(v), np.multiply(ct, 4))]);
    expect(wrappers(scaled)).toEqual(['custom_vjp_call']);
    expect(ops(texts(scaled)[0])).not.toContain('stablehlo.cosine');
    expect(ops(texts(grad((v: Array) => np.sum(scaled(v))))[0])).toContain('stablehlo.cosine');
  });

  it('top_k on integers compares with GT only (no NaN terms); k = 0 slices nothing', () => {
    const n = np.array(Int32Array.from([3, 1, 3, 2, 0, 5])).reshape([2, 3]);
    const text = jit((v: Array) => [...lax.topK(v, 2), lax.topK(v, 0)[0]]).lower(n).asStableHlo();
    expect(text).not.toContain('custom_call');
    expect(text).toContain('%gt = "stablehlo.compare"(%a0, %b0) {comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type SIGNED>}');
    expect(text).toMatch(/"stablehlo\.return"\(%gt\)/);
    expect(text).not.toContain('%nan');
    expect(text).toContain('limit_indices = array<i64: 2, 0>');
  });
});
