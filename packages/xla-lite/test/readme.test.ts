// The README example runs and prints what the README shows (instruction numbers aside).
import { debug, nn, np, type Array as TArray } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { jit } from '../src/index';

const strip = (s: string): string => s.replace(/\.\d+/g, '.N');

describe('README example', () => {
  it('lowers, compiles to one input fusion, and reports the documented analyses', () => {
    const f = (x: any, b: any) => np.sum(np.tanh(np.add(np.multiply(x, 2), b)), { axis: -1 });
    const lowered = jit(f).lower(np.ones([2, 3]), np.ones([3]));
    const text = strip(lowered.asText());
    expect(text).toContain('%broadcast.N = f32[2,3]{1,0} broadcast(%Arg_1.N), dimensions={1}');
    expect(text).toContain('%reduce.N = f32[2]{0} reduce(%tanh.N), dimensions={1}, to_apply=%sum');
    const compiled = lowered.compile();
    expect(strip(compiled.asText())).toContain('%fusion.N = f32[2]{0} fusion(%constant.N, %Arg_0.N, %Arg_1.N), kind=kInput, calls=%fused_computation.N');
    expect(compiled.costAnalysis()).toMatchObject({ flops: 24, transcendentals: 6, bytesAccessed: 44, mxuSeconds: 0, preset: 'v5e' });
    expect(compiled.memoryAnalysis()).toEqual({ argumentBytes: 36, outputBytes: 8, tempBytes: 8, tempBytesNoReuse: 8, aliasBytes: 0, peakBytes: 44 });
    expect(lowered.asStableHlo()).toMatch(/^module @jit_f \{\n {2}func\.func public @main\(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>\)/);
    expect(Array.from(jit(f)(np.ones([2, 3]), np.ones([3])).dataSync())).toEqual(Array.from(f(np.ones([2, 3]), np.ones([3])).dataSync()));
  });

  it('the one-hot example (pipeline step 3b) gathers rows and reports the dot\'s FLOPs', () => {
    const wte = np.ones([256, 128]);
    const x = np.array([[1, 2, 300]], 'int32');
    const embed = (w: any, x: any) => np.matmul(nn.oneHot(x, 256), w);
    const c = jit(embed).lower(wte, x).compile();
    expect(c.passStats.oneHot).toBe(1);
    expect(strip(c.asText())).toMatch(/onehot_gather\(%Arg_0\.N, %reshape\.N\), classes=256, precision=null, dtype="float32", nominal_flops=196608/);
    expect(c.costAnalysis().flops).toBe(196611);
    const hlo = c.asStableHlo();
    for (const op of ['iota', 'compare', 'convert', 'dot_general']) expect(hlo).toContain(`"stablehlo.${op}"`);
    const out = c.call([wte, x])[0].dataSync();
    expect(Array.from(out.slice(0, 256))).toEqual(new Array(256).fill(1));
    expect(Array.from(out.slice(256))).toEqual(new Array(128).fill(0));
    expect(jit(embed).lower(wte, x).compile({ oneHot: false }).passStats.oneHot).toBe(0);
  });

  it('the sibling fusion example (pipeline step 5b) reads dy once for dgamma and dbeta, with the same bits', () => {
    const dy = np.ones([2048, 128]);
    const xhat = np.ones([2048, 128]);
    const lnGrads = (dy: any, xhat: any) => [np.sum(np.multiply(dy, xhat), { axis: 0 }), np.sum(dy, { axis: 0 })];
    const c = jit(lnGrads).lower(dy, xhat).compile();
    expect(c.passStats.siblingFusion).toBe(1);
    expect(strip(c.asText())).toMatch(/\(f32\[128\]\{0\}, f32\[128\]\{0\}\) fusion\(%Arg_0\.N, %Arg_1\.N\), kind=kInput/);
    const apart = jit(lnGrads).lower(dy, xhat).compile({ siblingFusion: false });
    expect(apart.costAnalysis().bytesAccessed - c.costAnalysis().bytesAccessed).toBe(1048576);
    const [a, b] = [c.call([dy, xhat]), apart.call([dy, xhat])];
    for (let i = 0; i < 2; i++) expect(Array.from(a[i].dataSync())).toEqual(Array.from(b[i].dataSync()));
  });

  it('the Debugging example prints at run time and donates params', () => {
    const printed = debug.capturePrints();
    try {
      const step = jit(function step(params: TArray, grads: TArray) {
        debug.print('loss-ish {x:.3f}, grads {}', grads, { x: np.sum(np.square(grads)) });
        return np.subtract(params, np.multiply(grads, 0.1));
      }, { donateArgnums: 0 });
      const p0 = np.array([1, 2, 3], 'float32');
      const params = step(p0, np.array([0.5, 0.5, 0.5], 'float32')) as TArray;
      expect(printed.lines).toEqual(['loss-ish 0.750, grads [0.5 0.5 0.5]']);
      expect(Array.from(params.dataSync())).toEqual([0.95, 1.95, 2.95].map(Math.fround));
      expect(p0.isDeleted()).toBe(true);
    } finally {
      printed.restore();
    }
  });
});
