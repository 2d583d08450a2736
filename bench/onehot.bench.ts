/**
 * bench:onehot: the GPT's token embedding alone, `matmul(oneHot(x, 256), wte)` forward and its
 * weight gradient (B=16, T=128, V=256, d=128, as bench:gpt), compiled with xla-lite's one-hot
 * pass (gather + segment sum) and without it (the two dots and the one-hot kernel), run in
 * interleaved rounds and compared by process CPU time (the machine is shared: wall time is
 * not trusted). Checks first that both give the same loss and bit-identical gradients.
 */
import { type Array, nn, np, valueAndGrad, withBackend } from '@tpukit/core';
import { loadavg } from 'node:os';
import { jit } from '@tpukit/xla-lite';
import { median } from './timing';

withBackend('systolic', () => {
  const [B, T, V, D] = [16, 128, 256, 128];
  const wte = np.array(Float32Array.from({ length: V * D }, (_, i) => Math.sin(i * 0.01) * 0.02)).reshape([V, D]);
  const x = np.array(Int32Array.from({ length: B * T }, (_, i) => (i * 7919) % V), 'int32').reshape([B, T]);
  const g = np.array(Float32Array.from({ length: B * T * D }, (_, i) => Math.cos(i * 0.003))).reshape([B, T, D]);
  const f = (w: Array, x: Array, g: Array) => np.sum(np.multiply(np.matmul(nn.oneHot(x, V), w), g));
  const on = jit(valueAndGrad(f)).lower(wte, x, g).compile();
  const off = jit(valueAndGrad(f)).lower(wte, x, g).compile({ oneHot: false });
  const [lo, go] = on.call([wte, x, g]) as [Array, Array];
  const [lf, gf] = off.call([wte, x, g]) as [Array, Array];
  const a = go.dataSync(), b = gf.dataSync();
  let same = 0;
  for (let i = 0; i < a.length; i++) if (Object.is(a[i], b[i])) same++;
  console.log(`bench:onehot: loss on ${lo.dataSync()[0]} off ${lf.dataSync()[0]}; gradient elements bit-identical ${same} / ${a.length}; load ${loadavg().map((v) => v.toFixed(1)).join(' ')}; ${new Date().toISOString()}`);
  if (lo.dataSync()[0] !== lf.dataSync()[0] || same !== a.length) throw new Error('bench:onehot: the rewritten program differs from the dots');
  /** CPU ms per call over n calls. */
  const cpu = (c: typeof on, n: number): number => {
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) c.call([wte, x, g]);
    const u = process.cpuUsage(c0);
    return (u.user + u.system) / 1000 / n;
  };
  for (let w = 0; w < 5; w++) {
    cpu(on, 3);
    cpu(off, 3);
  }
  const ons: number[] = [];
  const offs: number[] = [];
  for (let r = 0; r < 7; r++) {
    ons.push(cpu(on, 10));
    offs.push(cpu(off, 10));
  }
  console.log(`embedding fwd+bwd CPU ms per call (median of 7 interleaved rounds of 10): on ${median(ons).toFixed(2)}  off ${median(offs).toFixed(2)}  saved ${(median(offs) - median(ons)).toFixed(2)}`);
});
