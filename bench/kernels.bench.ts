/**
 * `pnpm bench:kernels` (helper vm10, issue 14): the GPT step's elementwise kernels alone, ns per
 * element (xla-lite's profiler records of the fusion instructions, wall and CPU, one thread), at
 * the step's shapes: the GELU forward kernel (two outputs; data of the step's spread, std 0.25,
 * where tanh takes its small-argument polynomial, and std 1.5), a kernel moving the same bytes
 * with two multiplies, row max and row sum over the loss's logits, and the loss's two row
 * kernels (forward and backward); then hand-written minimal WebAssembly loops of the same math
 * (`kernelsMinimal.ts`) for what the generated code could cost. Env: KERNELS_BENCH_ROUNDS
 * (default 9), KERNELS_BENCH_CALLS (calls per round, default 20), KERNELS_BENCH_ONLY
 * (comma-separated parts of case names).
 */
import { type Array, nn, np, systolic, valueAndGrad, withBackend } from '@tpukit/core';
import { wasm } from '@tpukit/core/internal';
import { jit, profile, setKernelThreads } from '@tpukit/xla-lite';
import { minimalLoops } from './kernelsMinimal';
import { median } from './timing';

const ROUNDS = Number(process.env.KERNELS_BENCH_ROUNDS ?? 9);
const CALLS = Number(process.env.KERNELS_BENCH_CALLS ?? 20);
const ONLY = process.env.KERNELS_BENCH_ONLY?.split(',');

/** Normal(0, s) float32 values, deterministic. */
const normal = (n: number, s: number, seed: number): Float32Array => {
  let u = seed * 2654435761 >>> 0;
  const next = (): number => ((u = (Math.imul(u, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  return Float32Array.from({ length: n }, () => Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next()) * s);
};
const arr = (shape: number[], s: number, seed: number): Array => np.array(normal(shape.reduce((a, b) => a * b, 1), s, seed)).reshape(shape);

const geluParts = (h: Array, b: Array): Array[] => {
  const a = np.add(h, b);
  const t = np.tanh(np.multiply(np.add(a, np.multiply(np.multiply(np.multiply(a, a), a), 0.044715)), 0.7978845608));
  return [np.multiply(np.multiply(a, 0.5), np.add(t, 1)), t];
};
// Each kernel's full outputs are read by a small dot inside the executable (as in the step), not
// returned: a returned array is fresh memory on every call, and its page faults (~1000 per
// 4 MiB) would cost more than the kernel (measured: 400-1700 minor faults per call).
const readBy = (w: Array, xs: Array[]): Array[] => xs.map((x) => np.matmul(x, w));
const sameBytes = (h: Array, b: Array, w: Array): Array[] => {
  const a = np.add(h, b);
  return readBy(w, [np.multiply(a, 0.5), np.multiply(a, 3)]);
};
const lossOf = (logits: Array, y: Array): Array => np.negative(np.mean(np.sum(np.multiply(nn.logSoftmax(logits, { axis: -1 }), nn.oneHot(y, 256)), { axis: -1 })));

interface Case {
  name: string;
  f: (...a: Array[]) => Array[] | Array;
  args: Array[];
  /** Elements per call of the kernel measured (for ns per element). */
  n: number;
  /** Which profile records to sum (fusion kinds). */
  pick: (category: string, detail: string) => boolean;
}
const ROWS = 2048;
const fusionOnly = (c: string) => c.startsWith('fusion');
const kRow = (c: string) => c === 'fusion kRow';
const labelsOf = (b: number, t: number): Array => np.array(Int32Array.from({ length: b * t }, (_, i) => (i * 37) % 256), 'int32').reshape([b, t]);
const cases: Case[] = [];
for (const s of (process.env.KERNELS_BENCH_STDS ?? "0.25,1.5").split(",").map(Number)) {
  cases.push({ name: `gelu fwd parts [16,128,512] std ${s}`, f: (h, b, w) => readBy(w, geluParts(h, b)), args: [arr([16, 128, 512], s, 1), arr([512], 0.02, 2), arr([512, 4], 1, 4)], n: ROWS * 512, pick: fusionOnly });
}
cases.push({ name: 'same bytes, 2 muls [16,128,512]', f: sameBytes, args: [arr([16, 128, 512], 0.25, 1), arr([512], 0.02, 2), arr([512, 4], 1, 4)], n: ROWS * 512, pick: fusionOnly });
for (const [name, f] of [
  ['row max [2048,256]', (x: Array) => np.max(x, { axis: -1 })],
  ['row sum [2048,256]', (x: Array) => np.sum(x, { axis: -1 })],
] as const) cases.push({ name, f, args: [arr([2048, 256], 1, 3)], n: ROWS * 256, pick: fusionOnly });
cases.push({
  name: 'loss fwd+bwd [16,128,256] kRow',
  f: (l, y, w) => {
    const [v, g] = valueAndGrad((x: Array) => lossOf(x, y))(l) as [Array, Array];
    return [v, np.matmul(g, w)];
  },
  args: [arr([16, 128, 256], 1, 3), labelsOf(16, 128), arr([256, 4], 1, 4)],
  n: ROWS * 256,
  pick: kRow,
});

withBackend('systolic', () => {
systolic.setNumThreads(1);
setKernelThreads(1);
profile.enable();
console.log(`kernels bench: ${ROUNDS} rounds x ${CALLS} calls, 1 thread; ns per element (median of rounds), wall (CPU)`);
const compiled = cases.filter((c) => !ONLY || ONLY.some((o) => c.name.includes(o))).map((c) => ({ c, exe: jit(c.f).lower(...c.args).compile() }));
for (const { c, exe } of compiled) if (exe.stats.wasmKernels < 1) throw new Error(`kernels bench: ${c.name}: no wasm kernel`);
const per = new Map<string, { wall: number[]; cpu: number[]; faults: number[]; detail: Map<string, number[]> }>();
for (let r = 0; r < ROUNDS + 1; r++) {
  for (const { c, exe } of compiled) {
    const calls = CALLS;
    profile.reset();
    const pf0 = process.resourceUsage().minorPageFault;
    for (let k = 0; k < calls; k++) exe.call(c.args);
    const faults = (process.resourceUsage().minorPageFault - pf0) / calls;
    if (r === 0) continue;
    let wall = 0;
    let cpu = 0;
    const e = per.get(c.name) ?? { wall: [], cpu: [], faults: [], detail: new Map<string, number[]>() };
    e.faults.push(faults);
    for (const rec of profile.records()) {
      if (rec.instruction === '(call)' || !c.pick(rec.category, rec.detail)) continue;
      wall += rec.ms;
      cpu += rec.cpuMs;
      const d = `${rec.category}: ${rec.detail}`;
      e.detail.set(d, [...(e.detail.get(d) ?? []), (rec.ms * 1e6) / calls / c.n]);
    }
    e.wall.push((wall * 1e6) / calls / c.n);
    e.cpu.push((cpu * 1e6) / calls / c.n);
    per.set(c.name, e);
  }
}
for (const [name, e] of per) {
  console.log(`${name.padEnd(44)} ${median(e.wall).toFixed(3)} (${median(e.cpu).toFixed(3)}) ns/element, ${median(e.faults).toFixed(0)} page faults per call`);
  for (const [d, ns] of e.detail) console.log(`    ${median(ns).toFixed(3)} ${d}`);
}
});

// The hand-written minimal loops (kernelsMinimal.ts) over fresh buffers of the same layout.
{
  const pages = 1024; // 64 MiB
  const memory = new wasm.WA.Memory({ initial: pages, maximum: pages, shared: true });
  const MB = 1 << 20;
  const at = { h: 0, b: 4 * MB + 65536, out0: 8 * MB + 65536, out1: 16 * MB };
  const f32 = new Float32Array(memory.buffer);
  for (const s of [0.25]) {
    f32.set(normal(ROWS * 512, s, 1), at.h / 4);
    f32.set(normal(512, 0.02, 2), at.b / 4);
    const loops = minimalLoops(memory, pages, at);
    for (const [name, fn] of [['minimal loop: gelu small path', loops.gelu], ['minimal loop: 2 muls', loops.twoMuls]] as const) {
      for (const [rows, calls] of [[ROWS, CALLS], [16, CALLS * 128]] as const) {
        const ns: number[] = [];
        for (let r = 0; r < ROUNDS + 1; r++) {
          const t0 = performance.now();
          for (let k = 0; k < calls; k++) fn(rows);
          if (r > 0) ns.push(((performance.now() - t0) * 1e6) / calls / (rows * 512));
        }
        console.log(`${`${name} [${rows},512] std ${s}`.padEnd(44)} ${median(ns).toFixed(3)} ns/element (wall)`);
      }
    }
  }
}
