/**
 * End-to-end gradients of small models: an MLP and a transformer block (causal multi-head
 * attention, RMSNorm, SwiGLU) whose valueAndGrad matches central finite differences of the
 * loss, on the reference backend and on the systolic backend (MXU numerics; matmuls at
 * 'highest' precision so finite differences are meaningful).
 */
import { describe, expect, test } from 'vitest';
import { type Array, listBackends, nn, np, tree, valueAndGrad, withBackend, jit } from '../src/index';
import type { Precision } from '../src/lax/index';
import { expectAllclose } from './matchers';
import { onBackend } from './backend';

/** Deterministic pseudo-random float32 values in [-s, s]. */
function rand(shape: number[], seed: number, s = 0.5): Array {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n);
  let x = seed * 7919 + 17;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    v[i] = ((x / 2147483648) * 2 - 1) * s;
  }
  return np.array(v).reshape(shape);
}

type Params = Record<string, Array>;

function mlpLoss(p: Params, x: Array, y: Array): Array {
  const h = np.tanh(np.add(np.matmul(x, p.w1), p.b1));
  const out = np.add(np.matmul(h, p.w2), p.b2);
  return np.mean(np.square(np.subtract(out, y)));
}

const D = 8;
const H = 2;
const T = 4;
const F = 12;

function rmsNorm(x: Array, g: Array): Array {
  const ms = np.mean(np.square(x), { axis: -1, keepdims: true });
  return np.multiply(np.multiply(x, np.reciprocal(np.sqrt(np.add(ms, 1e-6)))), g);
}

function block(p: Params, x: Array, precision: Precision): Array {
  const mm = (a: Array, b: Array) => np.matmul(a, b, { precision });
  const [b] = x.shape;
  const dh = D / H;
  const h = rmsNorm(x, p.g1);
  const heads = (w: Array) => np.transpose(mm(h, w).reshape([b, T, H, dh]), [0, 2, 1, 3]);
  const q = heads(p.wq);
  const k = heads(p.wk);
  const v = heads(p.wv);
  const scores = np.multiply(mm(q, np.swapaxes(k, -1, -2)), 1 / Math.sqrt(dh));
  const causal = np.tri(T, T, 0, 'bool');
  const masked = np.where(causal, scores, -1e9);
  const att = mm(nn.softmax(masked, { axis: -1 }), v);
  const merged = np.transpose(att, [0, 2, 1, 3]).reshape([b, T, D]);
  const x1 = np.add(x, mm(merged, p.wo));
  const h2 = rmsNorm(x1, p.g2);
  const ff = mm(np.multiply(nn.silu(mm(h2, p.w1)), mm(h2, p.w3)), p.w2);
  return np.add(x1, ff);
}

function transformerLoss(p: Params, x: Array, precision: Precision): Array {
  return np.mean(np.square(block(p, x, precision)));
}

/** Checks valueAndGrad against central differences on a few entries of every parameter. */
function checkFd(loss: (p: Params) => Array, p: Params, { h = 2e-3, rtol = 2e-2, atol = 2e-4, per = 4 } = {}): void {
  const [value, grads] = valueAndGrad(loss)(p) as [Array, Params];
  expectAllclose(value, loss(p), { rtol: 1e-6 });
  expect(Object.keys(grads).sort()).toEqual(Object.keys(p).sort());
  for (const name of Object.keys(p)) {
    const base = p[name].dataSync() as Float32Array;
    const g = grads[name].dataSync();
    expect(grads[name].shape).toEqual(p[name].shape);
    for (let j = 0; j < per; j++) {
      const i = (j * 7 + name.length * 3) % base.length;
      const bump = (d: number) => {
        const v = base.slice();
        v[i] += d;
        return { ...p, [name]: np.array(v).reshape(p[name].shape) };
      };
      const fd = ((loss(bump(h)).item() as number) - (loss(bump(-h)).item() as number)) / (2 * h);
      if (!(Math.abs(g[i] - fd) <= atol + rtol * Math.abs(fd))) {
        expect.fail(`${name}[${i}]: grad ${g[i]} vs finite difference ${fd}`);
      }
    }
  }
}

describe('MLP', () => {
  onBackend('reference'); // finite differences need exact float32 matmuls
  test('valueAndGrad matches finite differences', () => {
    const p = { w1: rand([3, 5], 1), b1: rand([5], 2), w2: rand([5, 2], 3), b2: rand([2], 4) };
    const x = rand([6, 3], 5, 1);
    const y = rand([6, 2], 6, 1);
    checkFd((q) => mlpLoss(q, x, y), p);
  });
});

const transformerParams = (): Params => ({
  g1: np.add(rand([D], 10, 0.1), 1),
  g2: np.add(rand([D], 11, 0.1), 1),
  wq: rand([D, D], 12),
  wk: rand([D, D], 13),
  wv: rand([D, D], 14),
  wo: rand([D, D], 15),
  w1: rand([D, F], 16),
  w3: rand([D, F], 17),
  w2: rand([F, D], 18),
});

const backends = ['reference', 'systolic'];

describe.each(backends)('transformer block on %s', (backend) => {
  test.runIf(listBackends().includes(backend))('valueAndGrad matches finite differences', () => {
    withBackend(backend, () => {
      const p = transformerParams();
      const x = rand([2, T, D], 20, 1);
      checkFd((q) => transformerLoss(q, x, 'highest'), p);
      // The jitted gradient is the same program run op by op.
      const [v1, g1] = valueAndGrad((q: Params) => transformerLoss(q, x, 'highest'))(p) as [Array, Params];
      const [v2, g2] = jit(valueAndGrad((q: Params) => transformerLoss(q, x, 'highest')))(p) as [Array, Params];
      expectAllclose(v2, v1, { rtol: 1e-6 });
      tree.map((a: Array, b: Array) => expectAllclose(a, b, { rtol: 1e-5, atol: 1e-7 }), g2, g1);
    });
  });
});
