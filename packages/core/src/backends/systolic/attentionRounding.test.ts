/**
 * The fused attention's staging kernels (`stageRows`, `stageCols`): raw f32 rows rounded to bf16
 * as the MXU's operand conversion does (nearest even, a NaN quieted) into the kernels' padded
 * layouts. They round in two passes (a NaN-free first pass that sums its source, the exact one
 * again when the sum is NaN), so they are held bit for bit against the exact conversion, with and
 * without NaN at every position class of a call (each row, each element of a row: whole vectors,
 * the overlapping last vector, one-by-one elements; `stageCols`' groups of 4 rows and the rows
 * after them), with NaN payloads that the first pass alone would get wrong. The whole attention
 * with such NaNs in q, k, v or dO gives the one-pass kernels' bits on 1 to 3 threads.
 *
 * The backward's gradient rows round dS = P (dP - D) scale without NaN handling unless a row's D
 * or dS scale is NaN (then no NaN with a payload can reach dS): held against the build that always
 * handles NaN, with NaNs of any payload in a kept P (the backward's operand), in the dS scale, and
 * infinities in dO and v (canonical NaNs from inf - inf).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { onBackend } from '../../../test/backend';
import { setNumThreads } from '../../threads';
import { wasmFeatures } from '../../wasm/features';
import { WA } from '../../wasm/webassemblyTypes';
import type { AttentionParams } from '../../lax/attention';
import { attentionBwdSystolic, attentionFwdSystolic } from './attention';
import { type AttentionKernels, attentionModule, gradRowSettings, stagingSettings } from './attentionModule';

onBackend('systolic');

const ceil = (x: number, m: number): number => Math.ceil(x / m) * m;
const relaxed = wasmFeatures().relaxedSimd;

/** `f()` with `settings[key]` set to `value` (a module build setting: the modules built meanwhile have it), then back. */
function withSetting<S extends object, K extends keyof S, T>(settings: S, key: K, value: S[K], f: () => T): T {
  const was = settings[key];
  settings[key] = value;
  try {
    return f();
  } finally {
    settings[key] = was;
  }
}

/** `f()` with the staging kernels built in two passes (`nanPass`) or one. */
const withNanPass = <T>(nanPass: boolean, f: () => T): T => withSetting(stagingSettings, 'nanPass', nanPass, f);

/** `f()` with the gradient rows' dS rounding plain where no NaN payload can reach it (`dsPlain`) or always exact. */
const withDsPlain = <T>(dsPlain: boolean, f: () => T): T => withSetting(gradRowSettings, 'dsPlain', dsPlain, f);

/** `f()` on `n` threads, then back to the default. */
function onThreads<T>(n: number, f: () => T): T {
  setNumThreads(n);
  try {
    return f();
  } finally {
    setNumThreads(null);
  }
}

/** The exact conversion of f32 bits u to bf16 (as f32 bits): nearest even, a NaN quieted. */
const exactBits = (u: number): number => ((u & 0x7fffffff) > 0x7f800000 ? (u | 0x400000) & 0xffff0000 : (u + 0x7fff + ((u >>> 16) & 1)) & 0xffff0000) >>> 0;
/** The first pass's rounding (no NaN handling). */
const fastBits = (u: number): number => ((u + 0x7fff + ((u >>> 16) & 1)) & 0xffff0000) >>> 0;

/** A tiny seeded generator (values per run from fast-check's seed). */
const prng = (seed: number) => {
  let s = seed >>> 0 || 1;
  return (): number => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
};

/**
 * f32 bits of a source value: ties and near-ties (carries into the exponent), the largest finite
 * values (rounding to infinity), subnormals, ±0, +infinity (one sign per call: opposite
 * infinities meeting in the sum send the call through the second pass, which is allowed but not
 * what the NaN-free check is about), ordinary values.
 */
function valueBits(r: () => number): number {
  const sign = r() < 0.5 ? 0 : 0x80000000;
  const k = Math.floor(r() * 8);
  const low = Math.floor(r() * 0x10000);
  switch (k) {
    case 0: return (sign | (Math.floor(r() * 0xff) << 23) | (Math.floor(r() * 0x80) << 16) | 0x8000) >>> 0; // a tie
    case 1: return (sign | 0x3f7f8000 | low) >>> 0; // carries into the exponent
    case 2: return (sign | 0x7f7f0000 | low) >>> 0; // the largest finite values
    case 3: return (sign | Math.floor(r() * 0x7fffff)) >>> 0; // subnormal or 0
    case 4: return sign;
    case 5: return 0x7f800000; // +inf
    default: return (sign | ((0x70 + Math.floor(r() * 0x10)) << 23) | Math.floor(r() * 0x7fffff)) >>> 0;
  }
}

/** Bits of a NaN that the first pass would round wrongly (asserted): signalling, any sign, a payload in the low 22 bits. */
function nanBits(r: () => number): number {
  const u = ((r() < 0.5 ? 0 : 0x80000000) | 0x7f800000 | (1 + Math.floor(r() * 0x3ffffe))) >>> 0;
  expect(fastBits(u), `NaN 0x${u.toString(16)}: the first pass alone rounds it right, so it would test nothing`).not.toBe(exactBits(u));
  return u;
}

/** The kernels of a module for head dim H and padded key count sp, one or two passes, in a memory of their own (`bytes` of it). */
function kernels(H: number, sp: number, nanPass: boolean, bytes: number): { kx: AttentionKernels; u32: Uint32Array } {
  const mod = withNanPass(nanPass, () => attentionModule(H, sp, relaxed, false, false));
  const memory = new WA.Memory({ initial: Math.ceil(bytes / 65536) + 1 });
  return { kx: new WA.Instance(mod.module, { env: { mem: memory } }).exports as unknown as AttentionKernels, u32: new Uint32Array(memory.buffer) };
}

const POISON = 0x7fc0dead;

describe('the fused attention\'s staging kernels', () => {
  it('law: stageRows and stageCols give the exact bf16 conversion\'s bits in both builds, with no NaN and with one NaN at each row and at each element of a row (payloads the first pass alone gets wrong)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 37 }), fc.integer({ min: 1, max: 41 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 7 }), fc.integer({ min: 1, max: 2 ** 31 - 1 }), (H, rows, padRows, padStride, seed) => {
        const r = prng(seed);
        const hp = ceil(H, 8);
        const sp = ceil(rows, 8) + 8 * (padRows >> 1);
        const rp = ceil(rows, 4) + 4 * (padRows & 1);
        const stride = H + padStride;
        const SRC = 64;
        const DST = ceil(SRC + rows * stride * 4 + 64, 64);
        const dstBytes = Math.max(rp, sp) * hp * 4;
        const src = Array.from({ length: rows * stride }, () => valueBits(r));
        const builds = [false, true].map((nanPass) => ({ nanPass, ...kernels(H, sp, nanPass, DST + dstBytes) }));
        /** Runs both kernels in both builds on `vals` and checks the staged bytes against the exact conversion. */
        const check = (vals: number[], where: string): void => {
          const want = vals.map(exactBits);
          const rowsWant = new Array<number>(rp * hp).fill(0);
          const colsWant = new Array<number>(sp * hp).fill(0);
          for (let i = 0; i < rows; i++)
            for (let h = 0; h < H; h++) {
              rowsWant[i * hp + h] = want[i * stride + h];
              colsWant[(i >> 3) * hp * 8 + h * 8 + (i & 7)] = want[i * stride + h];
            }
          for (const { nanPass, kx, u32 } of builds) {
            u32.set(vals, SRC >> 2);
            u32.fill(POISON, DST >> 2, (DST + dstBytes) >> 2);
            kx.stageRows(SRC, stride * 4, rows, DST, rp);
            expect([...u32.subarray(DST >> 2, (DST >> 2) + rp * hp)], `stageRows ${where}, ${nanPass ? 'two passes' : 'one pass'}: H ${H}, rows ${rows} of ${rp}, stride ${stride}`).toEqual(rowsWant);
            u32.fill(POISON, DST >> 2, (DST + dstBytes) >> 2);
            kx.stageCols(SRC, stride * 4, rows, DST);
            expect([...u32.subarray(DST >> 2, (DST >> 2) + sp * hp)], `stageCols ${where}, ${nanPass ? 'two passes' : 'one pass'}: H ${H}, rows ${rows} of ${sp}, stride ${stride}`).toEqual(colsWant);
          }
        };
        check(src, 'without NaN');
        const withNaN = (i: number, h: number, where: string): void => {
          const vals = src.slice();
          vals[i * stride + h] = nanBits(r);
          check(vals, `${where} (row ${i}, element ${h})`);
        };
        for (let i = 0; i < rows; i++) withNaN(i, Math.floor(r() * H), 'one NaN in each row');
        for (let h = 0; h < H; h++) withNaN(Math.floor(r() * rows), h, 'one NaN at each element');
      }),
      { numRuns: 60 },
    );
  });
});

/** Host arrays of f32 bits, and the results' avals. */
const host = (bits: Uint32Array, shape: number[]) => ({ data: new Float32Array(bits.buffer.slice(0)), shape, dtype: 'float32' as const });
const av = (shape: number[]) => ({ shape, dtype: 'float32' as const, weakType: false });
const bitsOf = (xs: ArrayLike<number>[]): number[][] => xs.map((x) => [...new Uint32Array(Float32Array.from(x).buffer)]);

describe('the fused attention with NaN operands', () => {
  it('law: forward (P kept or not) and backward give the one-pass staging\'s bits with a NaN in q, k, v or dO, causal or not, T not a multiple of the block, on 1 to 3 threads', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 14 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 12 }), fc.boolean(), fc.boolean(), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 2 ** 31 - 1 }), (B, T, N, H, causal, keep, which, threads, seed) => {
        const r = prng(seed);
        const shape = [B, T, N, H];
        const len = B * T * N * H;
        const ops = [0, 1, 2, 3].map(() => Uint32Array.from({ length: len }, () => {
          const x = new Float32Array([(r() * 2 - 1) * 2]);
          return new Uint32Array(x.buffer)[0];
        }));
        ops[which][Math.floor(r() * len)] = nanBits(r);
        const params = { scale: 1 / Math.sqrt(H), isCausal: causal, ...(keep ? { saveProbs: true } : {}) } as AttentionParams;
        const run = (nanPass: boolean): number[][] =>
          withNanPass(nanPass, () =>
            onThreads(threads, () => {
              const [q, k, v, d] = ops.map((o) => host(o, shape));
              const fwd = attentionFwdSystolic([q, k, v], params, [av(shape), av([B, N, T]), ...(keep ? [av([B, N, T, T])] : [])], relaxed);
              const res = (i: number, s: number[]) => ({ data: fwd[i] as Float32Array, shape: s, dtype: 'float32' as const });
              const bwdIns = [q, k, v, res(1, [B, N, T]), d, ...(keep ? [res(2, [B, N, T, T])] : [])];
              const bwd = attentionBwdSystolic(bwdIns, params, [av(shape), av(shape), av(shape)], relaxed);
              return bitsOf([...fwd, ...bwd] as Float32Array[]);
            }),
          );
        expect(run(true), `B ${B} T ${T} N ${N} H ${H} causal ${causal} keep ${keep}, NaN in ${['q', 'k', 'v', 'dO'][which]}, ${threads} threads`).toEqual(run(false));
      }),
      { numRuns: 40 },
    );
  });
});

/** A NaN of any payload (f32 bits): quiet or signalling, low 16 bits not all 0 (the plain rounding would change them). */
function anyNaNBits(r: () => number): number {
  return ((r() < 0.5 ? 0 : 0x80000000) | 0x7f800000 | (r() < 0.5 ? 0x400000 : 0) | (1 + Math.floor(r() * 0xfffe)) | (Math.floor(r() * 0x40) << 16)) >>> 0;
}

describe('the gradient rows\' dS rounding', () => {
  it('law: the backward (P kept or recomputed) gives the always-exact build\'s bits with NaNs of any payload in the kept P or the dS scale, and infinities in dO and v, causal or not, on 1 and 2 threads', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 14 }), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 12 }), fc.boolean(), fc.boolean(), fc.constantFrom('P', 'scale', 'inf', 'none'), fc.integer({ min: 1, max: 2 }), fc.integer({ min: 1, max: 2 ** 31 - 1 }), (B, T, N, H, causal, keepIn, poison, threads, seed) => {
        const r = prng(seed);
        const shape = [B, T, N, H];
        const len = B * T * N * H;
        // (a poisoned P is read only when kept)
        const keep = keepIn || poison === 'P';
        const f32bits = (x: number): number => new Uint32Array(new Float32Array([x]).buffer)[0];
        const [q, k, v, d] = [0, 1, 2, 3].map(() => Uint32Array.from({ length: len }, () => f32bits((r() * 2 - 1) * 2)));
        const lse = Uint32Array.from({ length: B * N * T }, () => f32bits(r() * 2));
        // a kept P: each row's visible keys a random distribution-like row, hidden keys 0
        const probs = new Uint32Array(B * N * T * T);
        for (let row = 0; row < B * N * T; row++) for (let j = 0; j < T; j++) if (!causal || j <= row % T) probs[row * T + j] = f32bits(r() / (1 + (row % T)));
        let scale = 1 / Math.sqrt(H);
        // (about a third of the rows, each row of a block of 4 alike)
        if (poison === 'P') for (let row = 0; row < B * N * T; row++) if (r() < 0.35) probs[row * T + Math.floor(r() * (causal ? (row % T) + 1 : T))] = anyNaNBits(r);
        if (poison === 'scale') {
          // (a float64 NaN whose payload survives the conversion to f32 with low bits set)
          const x = new Float64Array(1);
          new BigUint64Array(x.buffer)[0] = 0x7ff0000000000000n | (BigInt(1 + Math.floor(r() * 0x3ffffe)) << 29n);
          scale = x[0];
        }
        if (poison === 'inf') for (const a of [d, v]) a[Math.floor(r() * len)] = r() < 0.5 ? 0x7f800000 : 0xff800000;
        const params = { scale, isCausal: causal, ...(keep ? { saveProbs: true } : {}) } as AttentionParams;
        const run = (dsPlain: boolean): number[][] =>
          withDsPlain(dsPlain, () =>
            onThreads(threads, () => {
              const ins = [host(q, shape), host(k, shape), host(v, shape), host(lse, [B, N, T]), host(d, shape), ...(keep ? [host(probs, [B, N, T, T])] : [])];
              return bitsOf(attentionBwdSystolic(ins, params, [av(shape), av(shape), av(shape)], relaxed) as Float32Array[]);
            }),
          );
        expect(run(true), `B ${B} T ${T} N ${N} H ${H} causal ${causal} keep ${keep}, ${poison}, ${threads} threads`).toEqual(run(false));
      }),
      { numRuns: 60 },
    );
  });
});
