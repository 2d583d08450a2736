// tpukit against results a real XLA computed (jax/jaxlib 0.11.2 on an NVIDIA H200 and on CPU,
// FIDELITY.md): each single-device case of tools/stablehloCases.ts was exported to StableHLO,
// compiled and run by XLA; fixtures/xla_outputs.json holds XLA's outputs (made by
// tools/xla_outputs_to_json.py from the device run). Here tpukit's jit computes the same
// functions on the same inputs, and must agree within each case's stated tolerance (integers,
// booleans and random bits exactly). A change to tpukit's numerics that moves it away from XLA
// fails here, without JAX installed. fixtures/xla_wrappers.json holds XLA's outputs of
// tools' wrapperCases() (nested jit, remat, custom derivatives, top_k), run on CPU only (jax
// 0.10.2 on the development machine).
import { setDefaultMatmulPrecision, type Array } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Case, cases, wrapperCases } from '../tools/stablehloCases';

interface Out {
  index: number;
  dtype: string;
  shape: number[];
  values: (number | string)[];
}
interface Fixture {
  jax: string;
  platforms: Record<string, Record<string, Out[]>>;
}
const load = (file: string): Fixture => JSON.parse(readFileSync(new URL(`./fixtures/${file}`, import.meta.url), 'utf8')) as Fixture;

const num = (v: number | string): number => (typeof v === 'number' ? v : v === 'nan' ? Number.NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : Number(v));

let previous: ReturnType<typeof setDefaultMatmulPrecision>;
beforeAll(() => {
  previous = setDefaultMatmulPrecision('default');
});
afterAll(() => {
  setDefaultMatmulPrecision(previous ?? 'default');
});

const suites: { what: string; fixture: Fixture; all: Case[]; platforms: readonly ('gpu' | 'cpu')[] }[] = [
  { what: 'the fidelity cases', fixture: load('xla_outputs.json'), all: cases({ sharded: false }), platforms: ['gpu', 'cpu'] },
  { what: 'the call wrappers and top_k', fixture: load('xla_wrappers.json'), all: wrapperCases(), platforms: ['cpu'] },
];

describe.each(suites)('tpukit vs XLA on $what', ({ fixture, all, platforms }) => {
  it('the fixture covers every single-device case', () => {
    for (const platform of platforms) expect(Object.keys(fixture.platforms[platform]).filter((n) => !n.startsWith('sharded')).sort()).toEqual(all.map((c) => c.name).sort());
  });

  it.each(all.map((c) => [c.name, c] as const))('%s', (_, c) => {
    const res = jit(c.fn as (...xs: Array[]) => Array)(...c.args) as Array | Array[];
    const outs = globalThis.Array.isArray(res) ? res : [res];
    for (const platform of platforms) {
      const want = fixture.platforms[platform][c.name];
      const tol = platform === 'gpu' ? (c.gpuTol ?? c.tol) : c.tol;
      expect(outs.length, `${platform} output count`).toBe(want.length);
      outs.forEach((o, k) => {
        const w = want[k];
        const where = `${c.name} out${k} vs XLA ${platform} (jax ${fixture.jax})`;
        expect(o.shape, where).toEqual(w.shape);
        const got = globalThis.Array.from(o.dataSync() as ArrayLike<number>, Number);
        const exact = !w.dtype.startsWith('float') && w.dtype !== 'bfloat16';
        if (exact) {
          expect(got, where).toEqual(w.values.map(num));
          return;
        }
        let worst = 0;
        got.forEach((g, j) => {
          const x = num(w.values[j]);
          if (Object.is(g, x) || g === x || (Number.isNaN(g) && Number.isNaN(x))) return;
          worst = Math.max(worst, Math.abs(g - x) / (tol.atol + tol.rtol * (Number.isFinite(x) ? Math.abs(x) : 0)));
        });
        expect(worst, `${where}: worst |diff| / (atol + rtol |xla|)`).toBeLessThanOrEqual(1);
      });
    }
  });
});
