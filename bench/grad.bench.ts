/**
 * `pnpm bench:grad`: the cost of transformation. Times, in the same run, the eager forward pass
 * of a small transformer's loss and its eager `valueAndGrad` (jvp + partial evaluation +
 * transposition, all op by op), and prints the ratio (target: at most 3.5x). Also reports the
 * jitted (op-by-op, no compiler) valueAndGrad. Runs on the reference backend, and on the
 * systolic backend when it is registered.
 */
import { type Array, jit, listBackends, nn, np, valueAndGrad, withBackend } from '@tpukit/core';
import { medianMs } from './timing';
import { attentionSublayer, rand, rmsNorm } from './fixtures';

const B = 4;
const T = 32;
const D = 64;
const H = 4;
const F = 128;
const LAYERS = 2;

type Layer = Record<'g1' | 'g2' | 'wq' | 'wk' | 'wv' | 'wo' | 'w1' | 'w3' | 'w2', Array>;

function block(p: Layer, x: Array): Array {
  const x1 = attentionSublayer(p, x, H);
  const h2 = rmsNorm(x1, p.g2);
  return np.add(x1, np.matmul(np.multiply(nn.silu(np.matmul(h2, p.w1)), np.matmul(h2, p.w3)), p.w2));
}

function loss(params: Layer[], x: Array, y: Array): Array {
  let h = x;
  for (const p of params) h = block(p, h);
  return np.mean(np.square(np.subtract(h, y)));
}

function run(backend: string): void {
  withBackend(backend, () => {
    const params: Layer[] = globalThis.Array.from({ length: LAYERS }, (_, l) => ({
      g1: np.ones([D]),
      g2: np.ones([D]),
      wq: rand([D, D], 10 * l + 1, 0.1),
      wk: rand([D, D], 10 * l + 2, 0.1),
      wv: rand([D, D], 10 * l + 3, 0.1),
      wo: rand([D, D], 10 * l + 4, 0.1),
      w1: rand([D, F], 10 * l + 5, 0.1),
      w3: rand([D, F], 10 * l + 6, 0.1),
      w2: rand([F, D], 10 * l + 7, 0.1),
    }));
    const x = rand([B, T, D], 99, 1);
    const y = rand([B, T, D], 98, 1);
    const vg = valueAndGrad(loss);
    const jvg = jit(valueAndGrad(loss));
    const sync = (a: Array) => a.dataSync();
    // The machine is shared and noisy: time forward and valueAndGrad back to back in each round
    // and report medians of the times and of the per-round ratios.
    const fwd = () => sync(loss(params, x, y));
    const grd = () => sync((vg(params, x, y) as [Array, Layer[]])[1][0].wq);
    const jgrd = () => sync((jvg(params, x, y) as [Array, Layer[]])[1][0].wq);
    const rounds = 11;
    const tf: number[] = [];
    const tg: number[] = [];
    const tj: number[] = [];
    const rg: number[] = [];
    const rj: number[] = [];
    for (let r = -2; r < rounds; r++) {
      const a = medianMs(fwd, { warmup: 0, runs: 1 });
      const b = medianMs(grd, { warmup: 0, runs: 1 });
      const c = medianMs(jgrd, { warmup: 0, runs: 1 });
      if (r < 0) continue; // warm-up rounds
      tf.push(a);
      tg.push(b);
      tj.push(c);
      rg.push(b / a);
      rj.push(c / a);
    }
    const med = (v: number[]) => v.slice().sort((p, q) => p - q)[Math.floor(v.length / 2)];
    console.log(
      `${backend.padEnd(10)} forward ${med(tf).toFixed(1)} ms | valueAndGrad ${med(tg).toFixed(1)} ms (${med(rg).toFixed(2)}x forward) | jit(valueAndGrad) op-by-op ${med(tj).toFixed(1)} ms (${med(rj).toFixed(2)}x)`,
    );
  });
}

console.log(`transformer loss: ${LAYERS} layers, batch ${B}, seq ${T}, d_model ${D}, heads ${H}, ffn ${F} (SwiGLU), float32; medians of 11 interleaved rounds (time and per-round ratio)`);
for (const b of ['reference', 'systolic']) if (listBackends().includes(b)) run(b);
