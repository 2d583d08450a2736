import { type Array, np, systolic, withBackend } from '@tpukit/core';
import { jit, profile, setKernelThreads } from '@tpukit/xla-lite';
const normal = (n: number, s: number, seed: number): Float32Array => {
  let u = seed * 2654435761 >>> 0;
  const next = (): number => ((u = (Math.imul(u, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  return Float32Array.from({ length: n }, () => Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next()) * s);
};
const geluParts = (h: Array, b: Array, w: Array): Array[] => {
  const a = np.add(h, b);
  const t = np.tanh(np.multiply(np.add(a, np.multiply(np.multiply(np.multiply(a, a), a), 0.044715)), 0.7978845608));
  return [np.matmul(np.multiply(np.multiply(a, 0.5), np.add(t, 1)), w), np.matmul(t, w)];
};
withBackend('systolic', () => {
  systolic.setNumThreads(1);
  setKernelThreads(1);
  const variants = (process.env.VARIANTS ?? 'x').split(',');
  const stds = (process.env.STDS ?? '0.25').split(',').map(Number);
  const b = np.array(normal(512, 0.02, 2));
  const w = np.array(normal(2048, 1, 4)).reshape([512, 4]);
  const exes = variants.flatMap((v) => stds.map((s) => {
    
    const h = np.array(normal(1 << 20, s, 1)).reshape([16, 128, 512]);
    return { name: `${v} std ${s}`, exe: jit(geluParts).lower(h, b, w).compile(), h, t: [] as number[] };
  }));
  profile.enable(true);
  for (let r = 0; r < 8; r++) for (const e of exes) {
    profile.reset();
    for (let k = 0; k < 15; k++) e.exe.call([e.h, b, w]);
    const ms = profile.records().filter((q) => q.category === 'fusion kLoop').reduce((a, q) => a + q.cpuMs, 0);
    if (r > 0) e.t.push((ms * 1e6) / 15 / (1 << 20));
  }
  for (const e of exes) console.log(e.name.padEnd(22), e.t.sort((a, c) => a - c)[Math.floor(e.t.length / 2)].toFixed(3), 'ns/elem CPU (median)', e.t.map((x) => x.toFixed(2)).join(' '));
});
