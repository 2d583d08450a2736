/**
 * MXU numerics of the systolic backend's dot_general, fuzzed against an oracle computed here in
 * float64 from the same inputs. Stated bounds (u = 2^-24, S = sum_k |a_mk * b_kn|):
 *   precision 'default' (and any bf16 input): |out - exact(bf16(a) . bf16(b))| <= (K+1) u S
 *     (f32 accumulation of exact products), plus one rounding to the output dtype;
 *   'high' (bf16_3x) vs the exact f32 product:   <= (2^-15 + (3K+2) u) S;
 *   'highest' (bf16_6x) vs the exact f32 product: <= (6K+8) u S.
 * A bf16 accumulator would miss the default bound by orders of magnitude (its u is 2^-9).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type DType, lax, np, registerBackend, systolic, withBackend, bf16, f16 } from '../../index';
import { evalPrimitiveInto } from '../../internal';
import { dotGeneralP } from '../../lax/dot';
import { transposeP } from '../../lax/structural';
import { SystolicBackend } from './backend';

const plain = new SystolicBackend('systolic-plain-simd', { relaxedSimd: false });
registerBackend(plain);

/** Deterministic pseudo-random floats in [-1, 1) with varied magnitudes. */
function randomData(n: number, seed: number, wide = false): Float32Array {
  let s = seed >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    const u = (s >>> 0) / 2 ** 32;
    out[i] = (u * 2 - 1) * (wide ? 2 ** (((s >>> 8) % 16) - 8) : 1);
  }
  return out;
}

function rounded(x: Float32Array, dtype: DType): Float32Array {
  if (dtype === 'bfloat16') return bf16.decode(bf16.encode(x));
  if (dtype === 'float16') return f16.decode(f16.encode(x));
  return x;
}

interface Case {
  b: number;
  m: number;
  k: number;
  n: number;
  lhsT: boolean;
  rhsT: boolean;
  precision: 'default' | 'high' | 'highest';
  dtype: 'float32' | 'bfloat16' | 'float16';
  f32out: boolean;
  seed: number;
}

function runCase(c: Case, backend = 'systolic'): void {
  const { b: B, m: M, k: K, n: N } = c;
  const batched = B > 1;
  // Values as the inputs' dtype holds them.
  const av = rounded(randomData(B * M * K, c.seed, true), c.dtype);
  const bv = rounded(randomData(B * K * N, c.seed + 7919, true), c.dtype);
  // Physical layouts: lhs [B?, M, K] or [B?, K, M]; rhs [B?, K, N] or [B?, N, K].
  const lshape = c.lhsT ? [K, M] : [M, K];
  const rshape = c.rhsT ? [N, K] : [K, N];
  const lphys = new Float32Array(B * M * K);
  const rphys = new Float32Array(B * K * N);
  for (let bi = 0; bi < B; bi++) {
    for (let i = 0; i < M; i++) for (let k = 0; k < K; k++) lphys[bi * M * K + (c.lhsT ? k * M + i : i * K + k)] = av[bi * M * K + i * K + k];
    for (let k = 0; k < K; k++) for (let j = 0; j < N; j++) rphys[bi * K * N + (c.rhsT ? j * K + k : k * N + j)] = bv[bi * K * N + k * N + j];
  }
  const off = batched ? 1 : 0;
  const lhs = np.array(lphys, c.dtype).reshape(batched ? [B, ...lshape] : lshape);
  const rhs = np.array(rphys, c.dtype).reshape(batched ? [B, ...rshape] : rshape);
  const lc = (c.lhsT ? 0 : 1) + off;
  const rc = (c.rhsT ? 1 : 0) + off;
  const bd = batched ? [0] : [];
  const out = withBackend(backend, () =>
    lax.dotGeneral(lhs, rhs, [[[lc], [rc]], [bd, bd]], { precision: c.precision, preferredElementType: c.f32out ? 'float32' : null }),
  );
  expect(out.shape).toEqual(batched ? [B, M, N] : [M, N]);
  expect(out.dtype).toBe(c.f32out ? 'float32' : c.dtype);
  const got = out.dataSync();
  // Oracle.
  const onePass = c.dtype === 'bfloat16' || c.precision === 'default';
  const ao = onePass ? rounded(av, 'bfloat16') : av;
  const bo = onePass ? rounded(bv, 'bfloat16') : bv;
  const u = 2 ** -24;
  const outU = c.f32out || c.dtype === 'float32' ? 0 : c.dtype === 'bfloat16' ? 2 ** -8 : 2 ** -11;
  for (let bi = 0; bi < B; bi++) {
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let exact = 0;
        let S = 0;
        for (let k = 0; k < K; k++) {
          const p = ao[bi * M * K + i * K + k] * bo[bi * K * N + k * N + j];
          exact += p;
          S += Math.abs(p);
        }
        const accBound = onePass ? (K + 1) * u * S : c.precision === 'high' ? (2 ** -15 + (3 * K + 2) * u) * S : (6 * K + 8) * u * S;
        // Output rounding: relative, plus half the subnormal spacing of the output dtype.
        const outAbs = c.f32out || c.dtype === 'float32' ? 2 ** -150 : c.dtype === 'bfloat16' ? 2 ** -134 : 2 ** -25;
        const bound = accBound * (1 + outU) + outU * Math.abs(exact) + outAbs;
        const g = got[(bi * M + i) * N + j];
        if (!(Math.abs(g - exact) <= bound)) {
          expect.fail(`${JSON.stringify(c)}: out[${bi},${i},${j}] = ${g}, exact ${exact}, |err| ${Math.abs(g - exact)} > bound ${bound}`);
        }
      }
    }
  }
}

describe('systolic dot_general: MXU numerics', () => {
  it('fuzzed agreement over shapes 1..300, transposes, batch dims, precisions and float dtypes', () => {
    const dim = fc.integer({ min: 1, max: 300 });
    fc.assert(
      fc.property(
        fc.record({
          b: fc.integer({ min: 1, max: 3 }),
          m: dim,
          k: dim,
          n: dim,
          lhsT: fc.boolean(),
          rhsT: fc.boolean(),
          precision: fc.constantFrom('default' as const, 'high' as const, 'highest' as const),
          dtype: fc.constantFrom('float32' as const, 'bfloat16' as const, 'float16' as const),
          f32out: fc.boolean(),
          seed: fc.integer({ min: 1, max: 1 << 30 }),
        }).filter((c) => c.b * c.m * c.k * c.n <= 1_500_000),
        (c) => runCase(c),
      ),
      { numRuns: 40 },
    );
  });

  it('rounds float32 operands to bf16 at default precision, not at highest', () => {
    const a = np.array([[1 + 2 ** -10, 3]], 'float32');
    const b = np.array([[1], [0]], 'float32');
    withBackend('systolic', () => {
      expect(np.matmul(a, b).dataSync()[0]).toBe(1);
      expect(np.matmul(a, b, { precision: 'high' }).dataSync()[0]).toBe(1 + 2 ** -10);
      expect(np.matmul(a, b, { precision: 'highest' }).dataSync()[0]).toBe(1 + 2 ** -10);
    });
  });

  it('np.einsum (batched, transposed) goes through the MXU path and honours precision', () => {
    const x = randomData(3 * 5 * 7, 31);
    x[0] = 1 + 2 ** -10; // rounds to 1 in bf16
    const a = np.array(x, 'float32').reshape([3, 5, 7]);
    const b = np.array(randomData(3 * 4 * 7, 32), 'float32').reshape([3, 4, 7]);
    withBackend('systolic', () => {
      const d = np.einsum('bik,bjk->bij', a, b).dataSync();
      const m = np.matmul(a, b.transpose([0, 2, 1])).dataSync();
      expect(Array.from(d)).toEqual(Array.from(m));
      const hi = np.einsum('bik,bjk->bij', a, b, { precision: 'highest' }).dataSync();
      expect(Array.from(hi)).not.toEqual(Array.from(d));
    });
  });

  it('handles several contracting and batch dims in any order (groups that need a copy included)', () => {
    const a = np.array(randomData(3 * 4 * 5 * 2, 41), 'bfloat16').reshape([3, 4, 5, 2]);
    const b = np.array(randomData(5 * 2 * 3 * 7, 42), 'bfloat16').reshape([5, 7, 3, 2]);
    // batch a0/b2, contract a2,a3 with b0,b3 (b's contracting dims are not adjacent).
    const dn = [[[2, 3], [0, 3]], [[0], [2]]] as const;
    const opts = { preferredElementType: 'float32' as const };
    const s = withBackend('systolic', () => lax.dotGeneral(a, b, dn, opts));
    const r = withBackend('reference', () => lax.dotGeneral(a, b, dn, opts));
    expect(s.shape).toEqual([3, 4, 7]);
    // bf16 inputs are exact in both; only the f32 accumulation order differs (K = 10).
    const sd = s.dataSync();
    const rd = r.dataSync();
    for (let i = 0; i < sd.length; i++) expect(Math.abs(sd[i] - rd[i])).toBeLessThanOrEqual(11 * 2 ** -24 * 10);
  });

  it('accumulates in float32: 1 + 256 * 2^-9 is 1.5 (a bf16 accumulator would stay at 1)', () => {
    const K = 257;
    const x = new Float32Array(K).fill(2 ** -9);
    x[0] = 1;
    const a = np.array(x, 'bfloat16').reshape([1, K]);
    const b = np.ones([K, 1], 'bfloat16');
    const out = withBackend('systolic', () => lax.dot(a, b, { preferredElementType: 'float32' }));
    expect(out.dtype).toBe('float32');
    expect(out.dataSync()[0]).toBe(1.5);
    // bf16 output: the f32 accumulator rounded once.
    expect(withBackend('systolic', () => lax.dot(a, b)).dataSync()[0]).toBe(1.5);
  });

  it('precision does not change bf16 inputs', () => {
    const a = np.array(randomData(40 * 33, 3), 'bfloat16').reshape([40, 33]);
    const b = np.array(randomData(33 * 20, 4), 'bfloat16').reshape([33, 20]);
    withBackend('systolic', () => {
      const d = np.matmul(a, b).dataSync();
      expect(np.matmul(a, b, { precision: 'highest' }).dataSync()).toEqual(d);
      // The bf16 result is the f32 accumulator rounded once (RNE), SIMD columns and tail alike.
      const acc = np.matmul(a, b, { preferredElementType: 'float32' }).dataSync() as Float32Array;
      expect(Array.from(np.matmul(a, b)._storage())).toEqual(Array.from(bf16.encode(acc)));
    });
  });

  it('relaxed SIMD (FMA) and plain SIMD give identical results (products of bf16 values are exact)', () => {
    expect(systolic.backend.usesRelaxedSimd).toBe(true);
    expect(plain.usesRelaxedSimd).toBe(false);
    for (const precision of ['default', 'highest'] as const) {
      const a = np.array(randomData(67 * 301, 11, true), 'float32').reshape([67, 301]);
      const b = np.array(randomData(301 * 45, 12, true), 'float32').reshape([301, 45]);
      const r = withBackend('systolic', () => np.matmul(a, b, { precision })).dataSync();
      const p = withBackend(plain.name, () => np.matmul(a, b, { precision })).dataSync();
      expect(p).toEqual(r);
    }
  });

  it('flushSubnormals reproduces the TPU conversion (subnormal operands become zero)', () => {
    const tiny = 2 ** -130; // subnormal in f32 and bf16
    const a = np.array([[tiny, 1]], 'float32');
    const b = np.array([[2 ** 100], [0]], 'float32');
    const flushing = new SystolicBackend('systolic-flush', { flushSubnormals: true });
    registerBackend(flushing);
    expect(withBackend('systolic', () => np.matmul(a, b)).dataSync()[0]).toBe(2 ** -30);
    expect(withBackend(flushing.name, () => np.matmul(a, b)).dataSync()[0]).toBe(0);
    expect(withBackend(flushing.name, () => np.array([tiny], 'float32').astype('bfloat16')).dataSync()[0]).toBe(0);
    // Larger operands in both layouts (SIMD packing kernels): flushing equals zeroing subnormals first.
    for (const transpose of [false, true]) {
      const x = randomData(37 * 41, 21);
      const y = randomData(41 * 19, 22);
      for (let i = 0; i < x.length; i += 3) x[i] *= 2 ** -128;
      for (let i = 0; i < 41; i++) x[i] *= 2 ** -128; // row 0 all subnormal: its outputs vanish only when flushed
      for (let i = 1; i < y.length; i += 5) y[i] = -(2 ** -140);
      const zero = (v: Float32Array): Float32Array => v.map((t) => (Math.abs(t) < 2 ** -126 ? 0 : t));
      const tr = (v: Float32Array, r: number, c: number): Float32Array => Float32Array.from({ length: r * c }, (_, i) => v[(i % r) * c + Math.floor(i / r)]);
      // transpose: lhs stored [K,M] and rhs stored [N,K], contracted through dimension numbers.
      const prod = (xv: Float32Array, yv: Float32Array) => () =>
        transpose
          ? lax.dotGeneral(np.array(tr(xv, 37, 41), 'float32').reshape([41, 37]), np.array(tr(yv, 41, 19), 'float32').reshape([19, 41]), [[[0], [1]], [[], []]]).dataSync()
          : np.matmul(np.array(xv, 'float32').reshape([37, 41]), np.array(yv, 'float32').reshape([41, 19])).dataSync();
      const f = withBackend(flushing.name, prod(x, y));
      const z = withBackend('systolic', prod(zero(x), zero(y)));
      const nf = withBackend('systolic', prod(x, y));
      expect(f).toEqual(z);
      expect(nf).not.toEqual(z);
    }
  });

  it('runs every other primitive on the same backend (results equal the reference kernels)', () => {
    const x = np.array(randomData(64, 5), 'bfloat16').reshape([8, 8]);
    const f = (): number[] => {
      const y = np.exp(x).sum({ axis: 1 });
      const z = np.tanh(x.T).mul(2).max({ axis: 0 });
      return [...y.dataSync(), ...z.dataSync()];
    };
    const s = withBackend('systolic', f);
    const r = withBackend('reference', f);
    expect(s).toEqual(r);
    const xs = withBackend('systolic', () => np.exp(x));
    expect(xs._backend?.name).toBe('systolic');
    expect(xs._storage()).toBeInstanceOf(Uint16Array); // bf16 stays 2 bytes per element
  });

  it('integer dots stay exact', () => {
    const a = np.array([[100000, 3], [7, -2]], 'int32');
    const b = np.array([[30000], [1]], 'int32');
    const s = withBackend('systolic', () => np.matmul(a, b).dataSync());
    expect(Array.from(s)).toEqual([(100000 * 30000 + 3) | 0, 7 * 30000 - 2]);
  });

  it('writes a float32 result into caller storage (evalPrimitiveInto) bit-identical to a fresh result', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 70 }), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 70 }), fc.integer({ min: 1, max: 1000 }), (B, M, K, N, seed) => {
        const a = np.array(randomData(B * M * K, seed), 'float32').reshape([B, M, K]);
        const b = np.array(randomData(B * K * N, seed + 1), 'float32').reshape([B, K, N]);
        const params = { dimensionNumbers: [[[2], [1]], [[0], [0]]], precision: null, preferredElementType: null };
        const fresh = withBackend('systolic', () => lax.dotGeneral(a, b, [[[2], [1]], [[0], [0]]])).dataSync();
        // Stale values in the destination must not leak into the result.
        const dest = new Float32Array(B * M * N).fill(Number.NaN);
        const got = withBackend('systolic', () => evalPrimitiveInto(dotGeneralP, [a, b], params, dest));
        expect(got).not.toBeNull();
        expect(got!.shape).toEqual([B, M, N]);
        expect(got!._storage()).toBe(dest);
        expect(dest).toEqual(fresh);
      }),
      { numRuns: 25 },
    );
  });

  it('one params object reused across operand shapes (a call site whose cached plan must follow the shapes) gives fresh results', () => {
    // A compiled program's dot passes the same params object at every call; the backend keeps
    // the operands' geometry per params object (mxuDot.ts, `plans`) and must remake it when the
    // shapes change: batch counts, free sizes and contraction sizes all vary here, and the
    // contracting groups of the second operand sometimes need a copy (non-mergeable dims).
    const params = { dimensionNumbers: [[[2], [1]], [[0], [0]]], precision: null, preferredElementType: null };
    const split = { dimensionNumbers: [[[1, 3], [2, 0]], [[], []]], precision: null, preferredElementType: null };
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 24 }), fc.integer({ min: 1, max: 40 })), { minLength: 2, maxLength: 5 }), fc.integer({ min: 1, max: 1000 }), (dims, seed) => {
        for (const [B, M, K, N] of dims) {
          const a = np.array(randomData(B * M * K, seed), 'float32').reshape([B, M, K]);
          const b = np.array(randomData(B * K * N, seed + 1), 'float32').reshape([B, K, N]);
          const fresh = withBackend('systolic', () => lax.dotGeneral(a, b, [[[2], [1]], [[0], [0]]])).dataSync();
          const dest = new Float32Array(B * M * N).fill(Number.NaN);
          expect(withBackend('systolic', () => evalPrimitiveInto(dotGeneralP, [a, b], params, dest))).not.toBeNull();
          expect(dest).toEqual(fresh);
          // lhs [M, B, N', K] . rhs [K, M', B, ...]: contracting (1, 3) x (2, 0), free groups that need copies.
          const x = np.array(randomData(M * B * 2 * K, seed + 2), 'float32').reshape([M, B, 2, K]);
          const y = np.array(randomData(K * 3 * B * N, seed + 3), 'float32').reshape([K, 3, B, N]);
          const want = withBackend('systolic', () => lax.dotGeneral(x, y, [[[1, 3], [2, 0]], [[], []]])).dataSync();
          const out = new Float32Array(M * 2 * 3 * N).fill(Number.NaN);
          expect(withBackend('systolic', () => evalPrimitiveInto(dotGeneralP, [x, y], split, out))).not.toBeNull();
          expect(out).toEqual(want);
        }
      }),
      { numRuns: 15 },
    );
  });

  it('a params object given new dimension numbers (same operand shapes) is planned again', () => {
    // The cached plan is keyed by the params object and checks its dimension numbers: [4,4]x[4,4]
    // contracted as a @ b and then as a^T @ b gives two different products.
    const a = np.array(randomData(16, 5), 'float32').reshape([4, 4]);
    const b = np.array(randomData(16, 6), 'float32').reshape([4, 4]);
    const params: { dimensionNumbers: unknown; precision: null; preferredElementType: null } = { dimensionNumbers: [[[1], [0]], [[], []]], precision: null, preferredElementType: null };
    for (const dn of [[[[1], [0]], [[], []]], [[[0], [0]], [[], []]]]) {
      params.dimensionNumbers = dn;
      const want = withBackend('systolic', () => lax.dotGeneral(a, b, dn as never)).dataSync();
      const dest = new Float32Array(16).fill(Number.NaN);
      expect(withBackend('systolic', () => evalPrimitiveInto(dotGeneralP, [a, b], params as never, dest))).not.toBeNull();
      expect(dest).toEqual(want);
    }
  });

  it('evalPrimitiveInto: null where the backend cannot write into caller storage, a clear error on a wrong size', () => {
    const a = np.ones([4, 8], 'float32');
    const b = np.ones([8, 3], 'float32');
    const params = { dimensionNumbers: [[[1], [0]], [[], []]], precision: null, preferredElementType: null };
    expect(withBackend('reference', () => evalPrimitiveInto(dotGeneralP, [a, b], params, new Float32Array(12)))).toBeNull();
    const ai = np.ones([4, 8], 'int32');
    const bi = np.ones([8, 3], 'int32');
    expect(withBackend('systolic', () => evalPrimitiveInto(dotGeneralP, [ai, bi], params, new Int32Array(12)))).toBeNull();
    expect(() => withBackend('systolic', () => evalPrimitiveInto(dotGeneralP, [a, b], params, new Float32Array(11)))).toThrow(/evalPrimitiveInto\(dot_general\): the result has 12 elements \(float32\[4,3\]\) but the destination holds 11/);
  });

  it('evalPrimitiveInto runs a transpose into caller storage on host backends (its implInto), equal to np.transpose', () => {
    const x = np.array(randomData(2 * 3 * 4 * 5, 3), 'float32').reshape([2, 3, 4, 5]);
    const perm = [0, 2, 1, 3];
    const want = np.transpose(x, perm).dataSync();
    for (const name of ['reference', 'systolic']) {
      const dest = new Float32Array(120).fill(Number.NaN);
      const got = withBackend(name, () => evalPrimitiveInto(transposeP, [x], { permutation: perm }, dest));
      expect(got!.shape).toEqual([2, 4, 3, 5]);
      expect(dest).toEqual(want);
      // A destination of another storage type is refused, not misused.
      expect(withBackend(name, () => evalPrimitiveInto(transposeP, [x], { permutation: perm }, new Int32Array(120)))).toBeNull();
    }
  });

  it('names the operation and shapes on bad input', () => {
    const a = np.ones([8, 128], 'float32');
    const b = np.ones([64, 32], 'float32');
    expect(() => withBackend('systolic', () => np.matmul(a, b))).toThrow(/matmul: contracting dims differ: lhs \[8,128\] \(k=128\) vs rhs \[64,32\] \(k=64\)/);
  });
});
