/**
 * The fused attention's results stored in place by the products that end them
 * (`resultSettings.direct`): P V writes the forward's O and dS K the backward's dQ straight into
 * the result's rows, a block's 4 rows at a time where all 4 are real; the last query head's last
 * `transGemm` writes dK and dV for keys 0..floor4(S); the rows left are unstaged from the
 * scratch as before. Held bit for bit against the build that unstages everything, with every
 * result in place in the backend's arena (NaN-filled first, so a row nobody writes shows) between
 * guard words that must stay untouched, over head dims that take the direct path (multiples of 8)
 * and others, T and S not multiples of 4, more than one chunk of query rows, grouped heads, masks,
 * P kept or recomputed, 1 and 2 threads.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { onBackend } from '../../../test/backend';
import { type ArenaHost, getBackend } from '../../backend';
import type { AttentionParams } from '../../lax/attention';
import { setNumThreads } from '../../threads';
import { wasmFeatures } from '../../wasm/features';
import { attentionBwdSystolic, attentionFwdSystolic, attentionStats } from './attention';
import { QB, resultSettings } from './attentionModule';

onBackend('systolic');

const relaxed = wasmFeatures().relaxedSimd;
const ceil = (x: number, m: number): number => Math.ceil(x / m) * m;
/** Guard words before and after each result region. */
const GUARD = 16;
const SENTINEL = 0x7fa5a5a5; // (a NaN no kernel writes)

function prng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

/** `f()` with the module build setting `direct` (modules built meanwhile have it), on `threads` threads, then back. */
function build<T>(direct: boolean, threads: number, f: () => T): T {
  const was = resultSettings.direct;
  resultSettings.direct = direct;
  setNumThreads(threads);
  try {
    return f();
  } finally {
    resultSettings.direct = was;
    setNumThreads(null);
  }
}

const av = (shape: number[]) => ({ shape, dtype: 'float32' as const, weakType: false });
const hostArr = (data: Float32Array | Uint8Array, shape: number[], dtype: 'float32' | 'bool' = 'float32') => ({ data, shape, dtype });
const bits = (x: ArrayLike<number>): number[] => [...new Uint32Array(Float32Array.from(x).buffer)];

interface Case {
  B: number;
  T: number;
  S: number;
  K: number;
  G: number;
  H: number;
  causal: boolean;
  masked: boolean;
  keep: boolean;
  threads: number;
  seed: number;
}

const caseArb: fc.Arbitrary<Case> = fc.record({
  B: fc.integer({ min: 1, max: 2 }),
  // (mostly short; sometimes past one chunk of QB query rows)
  T: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 14 }) }, { weight: 1, arbitrary: fc.integer({ min: QB - 3, max: QB + 6 }) }),
  S: fc.integer({ min: 1, max: 14 }),
  K: fc.integer({ min: 1, max: 2 }),
  G: fc.integer({ min: 1, max: 3 }),
  // (multiples of 8 take the direct path; the others do not)
  H: fc.constantFrom(8, 16, 24, 32, 5, 12),
  causal: fc.boolean(),
  masked: fc.boolean(),
  keep: fc.boolean(),
  threads: fc.integer({ min: 1, max: 2 }),
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
});

/**
 * Forward then backward of case `c`: results in fresh storage, or, with `host`, every result in
 * place in one reserved region of the arena, NaN-filled, with SENTINEL guard words around each
 * (checked here). Returns the results' bits: out, lse, [probs,] dq, dk, dv.
 */
function run(c: Case, host: ArenaHost | null): number[][] {
  const { B, T, S, K, G, H, causal, masked, keep } = c;
  const N = K * G;
  const r = prng(c.seed);
  const qs = [B, T, N, H];
  const ks = [B, S, K, H];
  const vals = (n: number): Float32Array => Float32Array.from({ length: n }, () => (r() * 2 - 1) * 2);
  const [q, k, v, d] = [vals(B * T * N * H), vals(B * S * K * H), vals(B * S * K * H), vals(B * T * N * H)];
  // a mask over [B, N, T, S] with some rows seeing no key
  const mask = masked ? Uint8Array.from({ length: B * N * T * S }, () => (r() < 0.7 ? 1 : 0)) : null;
  if (mask) for (let row = 0; row < B * N * T; row++) if (r() < 0.15) mask.fill(0, row * S, row * S + S);
  const params = { scale: 1 / Math.sqrt(H), isCausal: causal, ...(keep ? { saveProbs: true } : {}) } as AttentionParams;
  const sizes = [q.length, B * N * T, ...(keep ? [B * N * T * S] : []), q.length, k.length, v.length];
  let outs: Float32Array[] | undefined;
  let addr = -1;
  if (host) {
    addr = host.reserve(4 * sizes.reduce((n, x) => n + ceil(x + 2 * GUARD, 16), 0));
    let at = addr;
    outs = sizes.map((n) => {
      new Uint32Array(host.buffer(), at, GUARD).fill(SENTINEL);
      new Uint32Array(host.buffer(), at + 4 * (GUARD + n), GUARD).fill(SENTINEL);
      const x = new Float32Array(host.buffer(), at + 4 * GUARD, n).fill(Number.NaN);
      at += 4 * ceil(n + 2 * GUARD, 16);
      return x;
    });
  }
  try {
    const ins = [hostArr(q, qs), hostArr(k, ks), hostArr(v, ks), ...(mask ? [hostArr(mask, [B, N, T, S], 'bool')] : [])];
    const fo = outs?.slice(0, keep ? 3 : 2);
    const fwd = attentionFwdSystolic(ins as never, params, [av(qs), av([B, N, T]), ...(keep ? [av([B, N, T, S])] : [])], relaxed, fo, host) as Float32Array[];
    const res = (i: number, s: number[]) => hostArr(fwd[i], s);
    const bins = [ins[0], ins[1], ins[2], res(1, [B, N, T]), hostArr(d, qs), ...(mask ? [ins[3]] : []), ...(keep ? [res(2, [B, N, T, S])] : [])];
    const bwd = attentionBwdSystolic(bins as never, params, [av(qs), av(ks), av(ks)], relaxed, outs?.slice(keep ? 3 : 2), host) as Float32Array[];
    const all = [...fwd, ...bwd];
    if (host) {
      for (const x of outs!) {
        const lo = new Uint32Array(x.buffer, x.byteOffset - 4 * GUARD, GUARD);
        const hi = new Uint32Array(x.buffer, x.byteOffset + x.byteLength, GUARD);
        expect([...lo, ...hi].every((w) => w === SENTINEL), `guard words around a result of ${x.length} floats`).toBe(true);
      }
    }
    return all.map(bits);
  } finally {
    if (host) host.release(addr);
  }
}

describe('fused attention results stored in place by their last product', () => {
  it('law: in place in the arena (NaN-filled, guarded) or fresh, the direct build gives the unstaging build\'s bits: forward (out, lse, P) and backward (dq, dk, dv), T and S not multiples of 4, more than one chunk, GQA, masks, P kept or not, 1 and 2 threads', () => {
    const host = getBackend().arenaHost?.() ?? null;
    let direct = 0;
    fc.assert(
      fc.property(caseArb, (c) => {
        const what = JSON.stringify(c);
        const want = build(false, c.threads, () => run(c, null));
        const s0 = attentionStats();
        const got = build(true, c.threads, () => run(c, host));
        // (every result in place, and the backward's lse or kept P: the forward's result)
        const { B, T, S, K, G, H, keep } = c;
        const resultFloats = 2 * B * T * K * G * H + B * K * G * T + (keep ? B * K * G * T * S : 0) + 2 * B * S * K * H;
        if (host) expect(attentionStats().inPlaceBytes - s0.inPlaceBytes, `bytes in place: ${what}`).toBe(4 * (resultFloats + (keep ? B * K * G * T * S : B * K * G * T)));
        expect(got.length, what).toBe(want.length);
        got.forEach((g, i) => expect(g, `result ${i} of ${what}`).toEqual(want[i]));
        if (c.H % 8 === 0) direct++;
      }),
      { numRuns: 60 },
    );
    expect(direct, 'cases whose head dim takes the direct path').toBeGreaterThan(20);
  });
});
