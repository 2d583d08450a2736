/**
 * `pnpm bench:random`: sampling 2^20 values with @tpukit/core's `random` (JAX's Threefry-2x32
 * streams, bit-for-bit) against TensorFlow.js's CPU backend sampling the same count in the same
 * run (`tf.randomNormal`, `tf.truncatedNormal`, `tf.randomUniform`, `tf.randomUniformInt`,
 * `tf.multinomial`, `tf.util.shuffle`; tfjs has no bfloat16, so bfloat16 normal is compared with
 * its float32 one). The generators differ (tfjs uses seedrandom's Alea), so this compares the
 * cost of a sample, not the samples. Both run synchronously on the main thread, reading the
 * values back; the ratio is tpukit's median time over tfjs's (below 1 means tpukit is faster).
 */
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { np, random } from '@tpukit/core';
import { medianMs } from './timing';

await tf.setBackend('cpu');
tf.enableProdMode();

const N = 1 << 20;
const CATS = 16;
const key = random.key(0);
const logits = np.zeros([N / CATS, CATS]);
const tLogits = tf.zeros([N / CATS, CATS]);
const iota = new Int32Array(N).map((_, i) => i);

function tfRun(f: () => tf.Tensor): () => void {
  return () => {
    const t = f();
    t.dataSync();
    t.dispose();
  };
}

const cases: [string, () => void, (() => void) | null][] = [
  ['normal float32', () => random.normal(key, [N]).dataSync(), tfRun(() => tf.randomNormal([N], 0, 1, 'float32', 1))],
  ['normal bfloat16 (tfjs: float32)', () => random.normal(key, [N], { dtype: 'bfloat16' }).dataSync(), tfRun(() => tf.randomNormal([N], 0, 1, 'float32', 1))],
  ['truncatedNormal float32 [-2, 2]', () => random.truncatedNormal(key, -2, 2, [N]).dataSync(), tfRun(() => tf.truncatedNormal([N], 0, 1, 'float32', 1))],
  ['uniform float32 [0, 1)', () => random.uniform(key, [N]).dataSync(), tfRun(() => tf.randomUniform([N], 0, 1, 'float32', 1))],
  ['uniform float32 [-3, 5)', () => random.uniform(key, [N], { minval: -3, maxval: 5 }).dataSync(), tfRun(() => tf.randomUniform([N], -3, 5, 'float32', 1))],
  ['randint int32 [0, 1000)', () => random.randint(key, [N], 0, 1000).dataSync(), tfRun(() => tf.randomUniformInt([N], 0, 1000, 1))],
  [`categorical ${N / CATS} x ${CATS} logits`, () => random.categorical(key, logits).dataSync(), tfRun(() => tf.multinomial(tLogits as tf.Tensor2D, 1, 1))],
  ['permutation of 2^20', () => random.permutation(key, N).dataSync(), () => tf.util.shuffle(iota)],
  ['bits uint32 (no tfjs peer)', () => random.bits(key, [N]).dataSync(), null],
  ['split into 2^19 keys (no tfjs peer)', () => random.split(key, N / 2).dataSync(), null],
];

console.log(`random sampling, ${N} values (median ms of 9 runs; ratio = tpukit / tfjs-cpu; shared machine, numbers are noisy)`);
for (const [name, mine, peer] of cases) {
  const a = medianMs(mine, { warmup: 2, runs: 9 });
  if (peer === null) {
    console.log(`${name.padEnd(34)} tpukit ${a.toFixed(1).padStart(7)} ms`);
    continue;
  }
  const b = medianMs(peer, { warmup: 2, runs: 9 });
  console.log(`${name.padEnd(34)} tpukit ${a.toFixed(1).padStart(7)} ms   tfjs ${b.toFixed(1).padStart(7)} ms   ratio ${(a / b).toFixed(2)}`);
}
