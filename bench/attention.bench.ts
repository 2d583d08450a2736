/**
 * `pnpm --filter @tpukit/bench attention`: the fused attention (`nn.dotProductAttention`,
 * implementation 'fused': core's systolic wasm kernels) against the composite ('xla': batched
 * dots, mask, softmax) in the same run, each jitted by xla-lite, on 1 and 2 threads, in
 * interleaved rounds: the forward alone (`jit(attention)`) and a forward + backward step
 * (`jit(grad(sum(attention * w)))`). Per call: median wall ms, median process CPU ms (the fair
 * measure on a loaded machine at one thread) and CPU-s per wall-s (how busy the threads kept
 * the cores: about 2 when both threads work through a 2-thread call). Prints the ratios
 * composite / fused (CPU, 1 thread) and fused 1t / 2t (wall). Env: ATTN_BENCH_SHAPE (B,T,N,H;
 * default the GPT's 16,128,4,32), ATTN_BENCH_CAUSAL (default 1), ATTN_BENCH_ROUNDS (default 5),
 * ATTN_BENCH_CALLS (per round, default 20).
 */
import { type Array, grad, nn, np, random, setBackend, setNumThreads } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import { attentionShape, positiveEnv } from './attentionHarness';
import { cpuWall, loadAndTime, median } from './timing';

const { B, T, N, H, causal } = attentionShape('attention');
const ROUNDS = positiveEnv('attention', 'ATTN_BENCH_ROUNDS', 5);
const CALLS = positiveEnv('attention', 'ATTN_BENCH_CALLS', 20);
setBackend('systolic');
const [q, k, v, w] = [1, 2, 3, 4].map((i) => random.normal(random.key(i), [B, T, N, H]));

interface Variant {
  name: string;
  impl: 'fused' | 'xla';
  threads: number;
  run: () => void;
  wall: number[];
  cpu: number[];
}
const variants: Variant[] = [];
for (const what of ['forward', 'fwd+bwd'] as const)
  for (const impl of ['fused', 'xla'] as const) {
    const attend = (a: Array, b: Array, c: Array): Array => nn.dotProductAttention(a, b, c, { isCausal: causal, implementation: impl });
    const f = what === 'forward' ? jit(attend) : jit(grad((a: Array, b: Array, c: Array) => np.sum(np.multiply(attend(a, b, c), w)), { argnums: [0, 1, 2] }));
    const run = (): void => {
      const r = f(q, k, v) as Array | Array[];
      (globalThis.Array.isArray(r) ? r[0] : r).dataSync();
    };
    for (const threads of [1, 2]) variants.push({ name: `${what} ${impl} ${threads}t`, impl, threads, run, wall: [], cpu: [] });
  }

const measure = (x: Variant, record: boolean): void => {
  setNumThreads(x.threads);
  const { wall, cpu } = cpuWall(() => {
    for (let i = 0; i < CALLS; i++) x.run();
  });
  if (!record) return;
  x.wall.push(wall / CALLS);
  x.cpu.push(cpu / CALLS);
};
for (const x of variants) measure(x, false);
for (let r = 0; r < ROUNDS; r++) for (const x of r % 2 === 0 ? variants : [...variants].reverse()) measure(x, true);
setNumThreads(null);

const by = (name: string): Variant => variants.find((x) => x.name === name)!;
console.log(`bench:attention: [${B}, ${T}, ${N}, ${H}]${causal ? ' causal' : ''}, ${ROUNDS} rounds x ${CALLS} calls, jitted; ${loadAndTime()}`);
for (const x of variants) {
  const ratio = x.cpu.reduce((a, b) => a + b, 0) / x.wall.reduce((a, b) => a + b, 0);
  console.log(`  ${x.name.padEnd(20)} ${median(x.wall).toFixed(2).padStart(7)} ms wall  ${median(x.cpu).toFixed(2).padStart(7)} ms CPU  CPU-s per wall-s ${ratio.toFixed(2)}`);
}
for (const what of ['forward', 'fwd+bwd']) {
  const [f1, f2, x1] = [by(`${what} fused 1t`), by(`${what} fused 2t`), by(`${what} xla 1t`)];
  console.log(`  ${what.padEnd(8)} composite / fused ${(median(x1.cpu) / median(f1.cpu)).toFixed(2)}x (CPU, 1 thread); fused 1t / 2t ${(median(f1.wall) / median(f2.wall)).toFixed(2)}x (wall)`);
}
