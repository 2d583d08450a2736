// maxtext-ts against a JAX implementation of the same decoder (FIDELITY.md, "maxtext-ts"):
// tools/check_maxtext.py restored maxtext-ts's checkpoints with Orbax and ran the decoder in JAX
// (jax.nn.dot_product_attention, optax's adamw) on a device and on CPU; fixtures/jax_maxtext.json
// holds what it computed (sampled: 256 logits, 32 elements and the norm of every gradient leaf,
// of every parameter leaf and Adam moment after one step, and the greedy tokens). Every check runs
// on parameters the test rebuilds exactly as JAX received them: the init (step 0) and one train
// step from it (step 1, also the decode check's parameters). Here tpukit recomputes each case
// (tools/fidelityCases.ts, the same seeds, batch and configs) and must agree within the tolerances
// the device run used. A change to the model, the optimizer (b1 / b2 through the moments), the
// decoder or their numerics that moves maxtext-ts away from this JAX decoder fails here, without
// JAX installed. The JAX decoder follows maxtext-ts's definitions (FIDELITY.md section 4), not
// MaxText's code.
import type { Array } from '@tpukit/core';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CASES, type CaseResult, pathKey, runCase } from '../tools/fidelityCases';
import { tree } from '@tpukit/core';
import type { Params } from '../src/index';

interface Sample {
  size: number;
  values: number[];
  norm: number;
}
interface PlatformRef {
  loss: number;
  step_raw_grad_norm: number;
  logits: Sample;
  grads: Record<string, Sample>;
  params_after_step: Record<string, Sample>;
  mu_after_step: Record<string, Sample>;
  nu_after_step: Record<string, Sample>;
  decode_tokens: number[][];
  decode_top2_gap: number[][];
}
interface Tol {
  logits_atol: number;
  logits_rtol: number;
  loss_rtol: number;
  raw_norm_rel: number;
  grad_rel: number;
  e2e_param_atol: number;
  e2e_param_frac: number;
  decode_margin: number;
}
interface Fixture {
  runs: { jax: string; device: string; platform: string }[];
  tolerances: Record<'f32' | 'bf16', Tol>;
  cases: Record<string, Record<string, PlatformRef>>;
}

const fixture = JSON.parse(readFileSync(new URL('./fixtures/jax_maxtext.json', import.meta.url), 'utf8')) as Fixture;

/** The elements check_maxtext.py sampled: (i * (size - 1)) // (n - 1). */
function pick(a: Array, s: Sample): number[] {
  const data = a.dataSync() as Float32Array;
  expect(data.length).toBe(s.size);
  const n = s.values.length;
  return s.values.map((_, i) => data[Math.floor((i * (s.size - 1)) / Math.max(n - 1, 1))]);
}
const norm = (v: ArrayLike<number>): number => Math.sqrt(globalThis.Array.from(v).reduce((a, x) => a + x * x, 0));
const relErr = (a: number[], b: number[]): number => norm(a.map((x, i) => x - b[i])) / Math.max(norm(b), 1e-30);

const results = new Map<string, CaseResult>();
const resultOf = (name: string): CaseResult => {
  let r = results.get(name);
  if (!r) {
    const c = CASES.find((x) => x.name === name);
    if (!c) throw new Error(`fixture case ${name} is not in tools/fidelityCases.ts`);
    r = runCase(c);
    results.set(name, r);
  }
  return r;
};

describe('maxtext-ts against JAX (fixtures/jax_maxtext.json)', () => {
  it('covers every fidelity case', () => {
    expect(Object.keys(fixture.cases).sort()).toEqual(CASES.map((c) => c.name).sort());
  });
  for (const [name, platforms] of Object.entries(fixture.cases)) {
    for (const [platform, ref] of Object.entries(platforms)) {
      it(`${name} [${platform}]: logits, loss, gradient, one train step, greedy decode`, () => {
        const r = resultOf(name);
        const t = fixture.tolerances[r.config.dtype === 'bfloat16' ? 'bf16' : 'f32'];
        // logits
        const got = pick(r.logits, ref.logits);
        got.forEach((g, i) => {
          const want = ref.logits.values[i];
          expect(Math.abs(g - want), `logit sample ${i}`).toBeLessThanOrEqual(t.logits_atol + t.logits_rtol * Math.abs(want));
        });
        // loss (mean) and the train step's raw gradient norm
        expect(Math.abs((r.loss.item() as number) - ref.loss) / Math.abs(ref.loss), 'mean loss').toBeLessThanOrEqual(t.loss_rtol);
        const rn = r.metrics.rawGradNorm.item() as number;
        expect(Math.abs(rn - ref.step_raw_grad_norm) / ref.step_raw_grad_norm, 'raw gradient norm').toBeLessThanOrEqual(t.raw_norm_rel);
        // gradient of the mean loss: every leaf's norm and sampled elements
        expect([...r.grads.keys()].sort()).toEqual(Object.keys(ref.grads).sort());
        for (const [k, s] of Object.entries(ref.grads)) {
          const g = r.grads.get(k) as Array;
          expect(Math.abs(norm(g.dataSync() as Float32Array) - s.norm) / s.norm, `gradient norm ${k}`).toBeLessThanOrEqual(t.grad_rel);
          expect(relErr(pick(g, s), s.values), `gradient sample ${k}`).toBeLessThanOrEqual(t.grad_rel);
        }
        // parameters after one train step (JAX's gradient through optax): a near-zero gradient
        // whose sign differs moves an element by up to 2 lr, hence the allowed fraction
        const p1 = new Map(tree.flattenWithPath<Array>(r.state1.params)[0].map(([p, x]) => [pathKey(p), x] as const));
        let beyond = 0;
        let total = 0;
        for (const [k, s] of Object.entries(ref.params_after_step)) {
          const v = pick(p1.get(k) as Array, s);
          v.forEach((x, i) => (beyond += Math.abs(x - s.values[i]) > t.e2e_param_atol ? 1 : 0));
          total += v.length;
        }
        expect(beyond, `${beyond}/${total} sampled parameters beyond ${t.e2e_param_atol}`).toBeLessThanOrEqual(Math.max(1, Math.ceil(t.e2e_param_frac * total)));
        // Adam's moments after the step (JAX's from its own gradient): mu = (1 - b1) g and
        // nu = (1 - b2) g^2 carry b1 and b2, which the first update does not depend on; nu's
        // relative error is twice the gradient's
        const opt = (r.state1.optState as unknown as [unknown, [{ mu: Params; nu: Params }]])[1][0];
        for (const [which, moments, refs, tol] of [['mu', opt.mu, ref.mu_after_step, t.grad_rel], ['nu', opt.nu, ref.nu_after_step, 2 * t.grad_rel]] as const) {
          const got = new Map(tree.flattenWithPath<Array>(moments)[0].map(([p, x]) => [pathKey(p), x] as const));
          expect([...got.keys()].sort(), `${which} leaves`).toEqual(Object.keys(refs).sort());
          for (const [k, s] of Object.entries(refs)) {
            const m = got.get(k) as Array;
            expect(Math.abs(norm(m.dataSync() as Float32Array) - s.norm) / s.norm, `${which} norm ${k}`).toBeLessThanOrEqual(tol);
            expect(relErr(pick(m, s), s.values), `${which} sample ${k}`).toBeLessThanOrEqual(tol);
          }
        }
        // greedy decode from the step-1 parameters (state1, the ones JAX decoded with): equal to
        // JAX's up to the first near tie (JAX's top-2 gap <= the margin)
        ref.decode_tokens.forEach((want, b) => {
          for (let i = 0; i < want.length; i++) {
            if (ref.decode_top2_gap[b][i] <= t.decode_margin) break;
            expect(r.decodeTokens[b][i], `slot ${b} token ${i}`).toBe(want[i]);
          }
        });
      });
    }
  }
});
