/**
 * `pnpm bench:elementwise`: core's eager elementwise kernels and sort on 2^20 float32 elements
 * against TensorFlow.js's CPU backend doing the same op in the same run: same-shape binary ops,
 * a scalar and a row operand (jnp broadcasting), unary math, `where`, a bfloat16 add (tfjs has
 * no bfloat16, so its float32 add is the peer) and sort / argsort (tfjs has no sort: its
 * `topk` with k = n, which sorts descending, is the nearest peer). Both sides read the result
 * back; the ratio is tpukit's median time over tfjs's (below 1 means tpukit is faster).
 */
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { np } from '@tpukit/core';
import { medianMs } from './timing';

await tf.setBackend('cpu');
tf.enableProdMode();

const ROWS = 1024;
const COLS = 1024;
const N = ROWS * COLS;

function fill(seed: number): Float32Array {
  const v = new Float32Array(N);
  let x = seed * 7919 + 17;
  for (let i = 0; i < N; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    v[i] = (x / 2147483648) * 8 - 4;
  }
  return v;
}

const xs = fill(1);
const ys = fill(2);
const x = np.array(xs).reshape([ROWS, COLS]);
const y = np.array(ys).reshape([ROWS, COLS]);
const row = np.array(ys.slice(0, COLS));
const cond = np.greater(x, 0);
const xb = x.astype('bfloat16');
const yb = y.astype('bfloat16');
const flat = np.array(xs);

const tx = tf.tensor2d(xs, [ROWS, COLS]);
const ty = tf.tensor2d(ys, [ROWS, COLS]);
const tRow = tf.tensor1d(ys.slice(0, COLS));
const tCond = tf.greater(tx, 0);
const tScalar = tf.scalar(2.5);
const tFlat = tf.tensor1d(xs);

function tfRun(f: () => tf.Tensor | tf.Tensor[]): () => void {
  return () => {
    const r = f();
    const ts = Array.isArray(r) ? r : [r];
    for (const t of ts) t.dataSync();
    for (const t of ts) t.dispose();
  };
}

const cases: [string, () => void, () => void][] = [
  ['add same shape', () => np.add(x, y).dataSync(), tfRun(() => tf.add(tx, ty))],
  ['mul same shape', () => np.multiply(x, y).dataSync(), tfRun(() => tf.mul(tx, ty))],
  ['add scalar', () => np.add(x, 2.5).dataSync(), tfRun(() => tf.add(tx, tScalar))],
  ['add row [1024] to [1024,1024]', () => np.add(x, row).dataSync(), tfRun(() => tf.add(tx, tRow))],
  ['maximum same shape', () => np.maximum(x, y).dataSync(), tfRun(() => tf.maximum(tx, ty))],
  ['exp', () => np.exp(x).dataSync(), tfRun(() => tf.exp(tx))],
  ['tanh', () => np.tanh(x).dataSync(), tfRun(() => tf.tanh(tx))],
  ['greater (-> bool)', () => np.greater(x, y).dataSync(), tfRun(() => tf.greater(tx, ty))],
  ['where(cond, x, y)', () => np.where(cond, x, y).dataSync(), tfRun(() => tf.where(tCond, tx, ty))],
  ['astype float32 -> int32', () => x.astype('int32').dataSync(), tfRun(() => tf.cast(tx, 'int32'))],
  ['add bfloat16 (tfjs: float32)', () => np.add(xb, yb).dataSync(), tfRun(() => tf.add(tx, ty))],
  ['sort 2^20 (tfjs: topk k=n)', () => np.sort(flat).dataSync(), tfRun(() => tf.topk(tFlat, N, true).values)],
  ['argsort 2^20 (tfjs: topk k=n)', () => np.argsort(flat).dataSync(), tfRun(() => tf.topk(tFlat, N, true).indices)],
  ['sort rows [1024,1024] axis -1', () => np.sort(x).dataSync(), tfRun(() => tf.topk(tx, COLS, true).values)],
];

const only = process.argv[2];
console.log(`elementwise on ${N} float32 values (median ms of 9 runs; ratio = tpukit / tfjs-cpu; shared 2-core machine, numbers are noisy)`);
for (const [name, mine, peer] of cases) {
  if (only !== undefined && !name.includes(only)) continue;
  const a = medianMs(mine, { warmup: 2, runs: 9 });
  const b = medianMs(peer, { warmup: 2, runs: 9 });
  console.log(`${name.padEnd(32)} tpukit ${a.toFixed(2).padStart(8)} ms   tfjs ${b.toFixed(2).padStart(8)} ms   ratio ${(a / b).toFixed(2)}`);
}
