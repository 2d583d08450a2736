/**
 * `pnpm bench:indexing`: the reference kernels behind indexing and shape manipulation (gather,
 * strided slice, scatter-add, concatenate, top-k) against TensorFlow.js's CPU backend doing the
 * same work in the same run. Both run synchronously on the main thread; the ratio is tpukit's
 * median time over tfjs's (below 1 means tpukit is faster).
 */
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { lax, np } from '@tpukit/core';
import { medianMs } from './timing';

await tf.setBackend('cpu');
tf.enableProdMode();

const R = 4096;
const C = 256;
const vals = new Float32Array(R * C);
for (let i = 0; i < vals.length; i++) vals[i] = Math.sin(i * 12.9898) * 43758.5453 % 1;
const rows = new Int32Array(2048);
for (let i = 0; i < rows.length; i++) rows[i] = (i * 2654435761) % R >>> 0;
const upd = new Float32Array(rows.length * C).fill(1);

const x = np.asarray(vals).reshape([R, C]);
const idx = np.asarray(rows);
const u = np.asarray(upd).reshape([rows.length, C]);
const tx = tf.tensor2d(vals, [R, C]);
const tidx = tf.tensor1d(rows, 'int32');
const tidx2 = tf.tensor2d(rows, [rows.length, 1], 'int32');
const tu = tf.tensor2d(upd, [rows.length, C]);

function tfRun(f: () => tf.Tensor): () => void {
  return () => {
    const t = f();
    t.dataSync();
    t.dispose();
  };
}

const cases: [string, () => void, () => void][] = [
  ['take 2048 of 4096 rows (gather)', () => np.take(x, idx, { axis: 0 }).dataSync(), tfRun(() => tf.gather(tx, tidx, 0))],
  ["x.get('::2', '1:-1') (strided slice)", () => x.get('::2', '1:-1').dataSync(), tfRun(() => tf.stridedSlice(tx, [0, 1], [R, C - 1], [2, 1]))],
  ['x.at(rows).add(u) (scatter-add)', () => x.at(idx).add(u).dataSync(), tfRun(() => tf.add(tx, tf.scatterND(tidx2, tu, [R, C])))],
  ['concatenate([x, x], 1)', () => np.concatenate([x, x], 1).dataSync(), tfRun(() => tf.concat([tx, tx], 1))],
  ['top_k(x, 16) per row', () => lax.topK(x, 16)[0].dataSync(), tfRun(() => tf.topk(tx, 16).values)],
];

console.log(`indexing and shape manipulation, float32 [${R}, ${C}] (median ms of 15 runs; ratio = tpukit / tfjs-cpu)`);
for (const [name, mine, peer] of cases) {
  const a = medianMs(mine);
  const b = medianMs(peer);
  console.log(`  ${name.padEnd(40)} tpukit ${a.toFixed(2).padStart(8)} ms   tfjs-cpu ${b.toFixed(2).padStart(8)} ms   ratio ${(a / b).toFixed(2)}`);
}
