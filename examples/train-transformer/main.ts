/**
 * The main job (`pnpm start`). Until the transformations land (grad), this trains a softmax
 * classifier with a hand-derived gradient on a synthetic, deterministic dataset, on the
 * reference backend, with bf16 parameters and f32 maths, and prints the loss curve.
 */
import { nn, np } from '@tpukit/core';

const classes = 4;
const features = 16;
const n = 512;

// Deterministic synthetic data: class c has a mean vector m_c = sin((c+1) * (j+1)); points wobble around it.
const labels = np.remainder(np.arange(n), classes);
const j = np.arange(features);
const means = np.sin(np.multiply(np.add(np.arange(classes).reshape([classes, 1]), 1), np.add(j, 1).reshape([1, features])));
const noise = np.multiply(np.cos(np.multiply(np.arange(n * features).reshape([n, features]), 0.7)), 0.6);
const x = np.add(np.matmul(nn.oneHot(labels, classes), means), noise);
const y = nn.oneHot(labels, classes);

let w = np.zeros([features, classes], 'bfloat16');
let b = np.zeros([classes], 'float32');
const lr = 0.5;
for (let step = 0; step <= 60; step++) {
  const logits = np.add(np.matmul(x, w, { preferredElementType: 'float32' }), b);
  const logp = nn.logSoftmax(logits);
  const loss = np.negative(np.mean(np.sum(np.multiply(y, logp), { axis: -1 })));
  // d loss / d logits = (softmax - onehot) / n
  const dlogits = np.divide(np.subtract(np.exp(logp), y), n);
  const dw = np.matmul(x.T, dlogits);
  const db = np.sum(dlogits, { axis: 0 });
  w = np.subtract(w, np.multiply(dw, lr)).astype('bfloat16');
  b = np.subtract(b, np.multiply(db, lr));
  if (step % 10 === 0) {
    const acc = np.mean(np.equal(np.argmax(logits, { axis: -1 }), labels));
    console.log(`step ${String(step).padStart(3)}  loss ${(loss.item() as number).toFixed(4)}  accuracy ${(acc.item() as number).toFixed(3)}`);
  }
}
