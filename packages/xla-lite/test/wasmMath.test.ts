// The vectorised transcendentals of the WebAssembly kernels (src/wasm/vmath.ts) against
// Math.* rounded to float32, in float32 ulps: the stated bounds over dense sweeps, random
// points (fast-check) and every special value (NaN, ±Inf, ±0, subnormals, overflow,
// underflow). Each function is compiled into a tiny module that maps an array in place.
import { wasm } from '@tpukit/core/internal';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type HostMath, vcos, vexp, vexpm1, vexpNonPositive, vlog, vlog1p, vlogistic, vsin, vtanh, vtanhLarge } from '../src/wasm/vmath';
import { VecBuilder, type E } from '../src/wasm/vecBuilder';

type Fn = (b: VecBuilder, host: HostMath, x: E) => E;
const FNS: Record<string, { fn: Fn; ref: (x: number) => number; ulps: number }> = {
  exp: { fn: (b, _h, x) => vexp(b, x), ref: Math.exp, ulps: 2 },
  log: { fn: (b, _h, x) => vlog(b, x), ref: Math.log, ulps: 2 },
  tanh: { fn: (b, _h, x) => vtanh(b, x), ref: Math.tanh, ulps: 2 },
  logistic: { fn: (b, _h, x) => vlogistic(b, x), ref: (x) => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x))), ulps: 3 },
  log1p: { fn: (b, _h, x) => vlog1p(b, x), ref: Math.log1p, ulps: 3 },
  expm1: { fn: (b, _h, x) => vexpm1(b, x), ref: Math.expm1, ulps: 3 },
  sin: { fn: vsin, ref: Math.sin, ulps: 2 },
  cos: { fn: vcos, ref: Math.cos, ulps: 2 },
};
/** tanh's exp path as vmath.ts had it before `vexpTanh`: the generic `vexp` of 2|x| (no underflow guard). */
const tanhLargeGeneric: Fn = (b, _h, x0) => {
  const x = b.let(x0);
  const s = vexp(b, b.add(b.abs(x), b.abs(x)), false);
  return b.let(b.or(b.sub(b.k(1), b.div(b.k(2), b.add(s, b.k(1)))), b.and(x, b.ki(0x80000000 | 0))));
};
const EXTRA: Record<string, Fn> = { tanhLarge: (b, _h, x) => vtanhLarge(b, x), tanhLargeGeneric, expNonPositive: (b, _h, x) => vexpNonPositive(b, x) };

const PAGES = 64;
const mem = new wasm.WA.Memory({ initial: PAGES });
const kernels: Record<string, (n: number) => void> = {};
{
  const m = new wasm.ModuleBuilder();
  m.importMemory('env', 'mem', { initial: PAGES });
  const host: HostMath = { sin: m.importFunction('env', 'sin', ['f64'], ['f64']), cos: m.importFunction('env', 'cos', ['f64'], ['f64']) };
  for (const [name, fn] of [...Object.entries(FNS).map(([k, v]): [string, Fn] => [k, v.fn]), ...Object.entries(EXTRA)]) {
    m.addFunction(name, ['i32'], [], (f) => {
      const b = new VecBuilder(f);
      const p = f.local('i32');
      f.i32Const(0).set(p);
      f.block().loop();
      f.get(p).get(0).op(wasm.OP.i32_ge_u).brIf(1);
      f.get(p);
      fn(b, host, () => void f.get(p).simdMem(wasm.SIMD.v128_load))();
      f.simdMem(wasm.SIMD.v128_store);
      f.get(p).i32Const(16).op(wasm.OP.i32_add).set(p).br(0);
      f.end().end();
    });
  }
  const inst = new wasm.WA.Instance(new wasm.WA.Module(m.toBytes()), { env: { mem, sin: Math.sin, cos: Math.cos } });
  for (const name of [...Object.keys(FNS), ...Object.keys(EXTRA)]) kernels[name] = (n) => (inst.exports[name] as (b: number) => void)(n * 4);
}

/** Applies the wasm function to every value of `xs`. */
function run(name: string, xs: ArrayLike<number>): Float32Array {
  const n = Math.ceil(xs.length / 4) * 4;
  const v = new Float32Array(mem.buffer, 0, n);
  v.set(xs);
  kernels[name](n);
  return Float32Array.from(v.subarray(0, xs.length));
}

const ord = (x: number): number => {
  const i = new Int32Array(new Float32Array([x]).buffer)[0];
  return i < 0 ? -(i & 0x7fffffff) : i;
};
/** Distance in float32 ulps (0 when both are NaN; Infinity when only one is). */
export function ulps(a: number, b: number): number {
  if (Number.isNaN(a) || Number.isNaN(b)) return Number.isNaN(a) && Number.isNaN(b) ? 0 : Infinity;
  if (a === b) return 0;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return Infinity;
  return Math.abs(ord(a) - ord(b));
}

function worst(name: string, xs: Float32Array): { ulps: number; at: number; got: number; want: number } {
  const got = run(name, xs);
  const ref = FNS[name].ref;
  let w = { ulps: 0, at: NaN, got: NaN, want: NaN };
  for (let i = 0; i < xs.length; i++) {
    const want = Math.fround(ref(xs[i]));
    const u = ulps(got[i], want);
    if (u > w.ulps) w = { ulps: u, at: xs[i], got: got[i], want };
  }
  return w;
}

const sweep = (lo: number, hi: number, n: number): Float32Array => Float32Array.from({ length: n }, (_, i) => lo + ((hi - lo) * i) / (n - 1));
/** Log-spaced magnitudes of both signs, down through the subnormals. */
const logSweep = (n: number): Float32Array => {
  const out = new Float32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const v = Math.fround(Math.pow(2, -149 + (277 * i) / n));
    out[2 * i] = v;
    out[2 * i + 1] = -v;
  }
  return out;
};

const DOMAINS: Record<string, Float32Array[]> = {
  exp: [sweep(-104, 89, 200_003), sweep(-1, 1, 50_001), logSweep(20_000)],
  log: [sweep(0, 10, 100_003), logSweep(20_000).filter((x) => x > 0), sweep(0.5, 2, 50_001)],
  tanh: [sweep(-12, 12, 200_003), logSweep(20_000)],
  logistic: [sweep(-110, 90, 200_003), logSweep(20_000)],
  log1p: [sweep(-0.999, 10, 200_003), logSweep(20_000).filter((x) => x > -1)],
  expm1: [sweep(-20, 89, 200_003), sweep(-1, 1, 50_001), logSweep(20_000)],
  sin: [sweep(-20, 20, 200_003), sweep(-1e5, 1e5, 200_003), logSweep(20_000)],
  cos: [sweep(-20, 20, 200_003), sweep(-1e5, 1e5, 200_003), logSweep(20_000)],
};

const SPECIALS = new Float32Array([NaN, Infinity, -Infinity, 0, -0, 1, -1, 1e-45, -1e-45, 1.1754943508222875e-38, 3.4028234663852886e38, -3.4028234663852886e38, 88.72283935546875, 88.7228469848633, -87.33654022216797, -103.97207641601562, -104, 89, 1e6, -1e6, 1e30, 524288, 524287.96875, 0.625, -0.625, 0.6249999]);

/** Kernel `got` gives kernel `want`'s bits at every x (run in parts: the test module's memory holds 4 MiB); a mismatch names the first x. */
function expectSameBits(got: string, want: string, xs: Float32Array): void {
  const part = (name: string): Uint32Array => {
    const out = new Uint32Array(xs.length);
    for (let at = 0; at < xs.length; at += 1 << 19) out.set(new Uint32Array(run(name, xs.subarray(at, at + (1 << 19))).buffer), at);
    return out;
  };
  const g = part(got);
  const w = part(want);
  for (let i = 0; i < xs.length; i++) if (g[i] !== w[i]) expect(`${g[i].toString(16)} at x = ${xs[i]}`).toBe(`${w[i].toString(16)} at x = ${xs[i]}`);
}

describe('wasm vector math: float32 ulp bounds against Math.*', () => {
  for (const name of Object.keys(FNS)) {
    it(`${name} within ${FNS[name].ulps} ulp`, () => {
      for (const xs of [...DOMAINS[name], SPECIALS]) {
        const w = worst(name, xs);
        if (process.env.ULP_REPORT) console.log(`ULP ${name} ${xs.length} ${JSON.stringify(w)}`);
        expect(w.ulps, `${name}(${w.at}) = ${w.got}, Math gives ${w.want}`).toBeLessThanOrEqual(FNS[name].ulps);
      }
      fc.assert(
        fc.property(fc.float32Array({ minLength: 1, maxLength: 64 }), (xs) => {
          const w = worst(name, xs);
          return w.ulps <= FNS[name].ulps;
        }),
        { numRuns: 200 },
      );
    });
  }
  it('the ulp measure itself', () => {
    expect(ulps(1, Math.fround(1 + 2 ** -23))).toBe(1);
    expect(ulps(-0, 0)).toBe(0);
    expect(ulps(1e-45, -1e-45)).toBe(2);
    expect(ulps(NaN, 1)).toBe(Infinity);
  });
});

describe("tanh's trimmed exp path (vmath.ts `vexpTanh`)", () => {
  it('gives the generic formula, bit for bit, for every float32 exponent, both signs, 4096 mantissas each, and the specials', () => {
    const u = new Uint32Array(256 * 4096 * 2 + SPECIALS.length);
    let k = 0;
    for (let e = 0; e < 256; e++)
      for (let m = 0; m < 4096; m++) {
        // Mantissas: the lowest and highest bits set in turn, spread over the whole range.
        const mant = m === 4095 ? 0x7fffff : (m << 11) | ((m * 2654435761) >>> 21);
        u[k++] = (e << 23) | mant;
        u[k++] = 0x80000000 | (e << 23) | mant;
      }
    u.set(new Uint32Array(SPECIALS.buffer), k);
    const xs = new Float32Array(u.buffer);
    expectSameBits('tanhLarge', 'tanhLargeGeneric', xs);
    // (the comparison sees the exp path's whole range: arguments up to 2|x| = 89 and past it)
    expect(xs.some((x) => Math.abs(x) > 9.015 && Math.abs(x) < 44.5)).toBe(true);
  });
});

describe('exp of a non-positive argument (vmath.ts `vexpNonPositive`)', () => {
  const compare = (xs: Float32Array): void => expectSameBits('expNonPositive', 'exp', xs);

  it("gives vexp's bits for every negative float32 exponent (4096 mantissas each), -0, +0, -inf and NaN", () => {
    const u = new Uint32Array(256 * 4096 + 4);
    let k = 0;
    for (let e = 0; e < 256; e++)
      for (let m = 0; m < 4096; m++) u[k++] = 0x80000000 | (e << 23) | (m === 4095 ? 0x7fffff : (m << 11) | ((m * 2654435761) >>> 21));
    u.set([0, 0x80000000, 0xff800000, 0x7fc00000], k);
    compare(new Float32Array(u.buffer));
  });

  it("gives vexp's bits for every float32 in [-104, -86] (where the result is subnormal and rounds) and a dense sweep of [-1, 0]", () => {
    const lo = new Float32Array([-86])[0];
    const a = new Uint32Array(new Float32Array([lo]).buffer)[0];
    const b = new Uint32Array(new Float32Array([-104]).buffer)[0];
    const u = new Uint32Array(b - a + 1 + (1 << 20));
    for (let i = 0; i <= b - a; i++) u[i] = a + i;
    for (let i = 0; i < 1 << 20; i++) u[b - a + 1 + i] = new Uint32Array(new Float32Array([-i / (1 << 20)]).buffer)[0];
    compare(new Float32Array(u.buffer));
  });
});
