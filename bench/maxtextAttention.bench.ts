/**
 * `pnpm --filter @tpukit/bench maxtext:attention`: maxtext-ts's training step (the `tiny` config of
 * `pnpm start` by default) with `attention=autoselected` (core's fused kernels, segment mask and
 * causal) against `attention=dot_product` (the composite), in interleaved rounds in the same run.
 * Per step: wall time and process CPU time (the fair measure on a loaded machine: compare CPU
 * ms at one thread), medians, the median of per-round CPU ratios, and the losses (both runs start
 * from the same state and see the same batches). Env: MAXTEXT_BENCH_ROUNDS (default 7),
 * MAXTEXT_BENCH_STEPS (per round, default 5), MAXTEXT_BENCH_CONFIG (default tiny),
 * MAXTEXT_BENCH_THREADS (core's thread count; default: the machine's); TPUKIT_PROFILE=1 then
 * prints xla-lite's per-op profile (CPU time) of one step of each.
 */
import { loadavg } from 'node:os';
import { getNumThreads, setBackend, setNumThreads } from '@tpukit/core';
import { loadConfig, makeDataIterator, makeTrainStep, type TrainState } from '@tpukit/maxtext-ts';
import { profile } from '@tpukit/xla-lite';
import { median } from './timing';

const ROUNDS = Number(process.env.MAXTEXT_BENCH_ROUNDS ?? 7);
const STEPS = Number(process.env.MAXTEXT_BENCH_STEPS ?? 5);
const name = process.env.MAXTEXT_BENCH_CONFIG ?? 'tiny';
if (process.env.MAXTEXT_BENCH_THREADS) setNumThreads(Number(process.env.MAXTEXT_BENCH_THREADS));
const variants = ['autoselected', 'dot_product'].map((attention) => {
  const config = loadConfig(name, ['measure_mfu=false', `attention=${attention}`]);
  setBackend(config.backend);
  const ts = makeTrainStep(config);
  return { attention, config, ts, state: ts.init() as TrainState, wall: [] as number[], cpu: [] as number[], losses: [] as number[] };
});
const config = variants[0].config;
const data = makeDataIterator(config);
const batches = globalThis.Array.from({ length: 4 }, () => data.next());

const run = (v: (typeof variants)[0], record: boolean): void => {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < STEPS; i++) {
    const [n, m] = v.ts.jitted(v.state, batches[i % 4]);
    v.state = n;
    const loss = m.loss.item() as number;
    if (record) v.losses.push(loss);
  }
  const c = process.cpuUsage(c0);
  if (!record) return;
  v.wall.push((performance.now() - t0) / STEPS);
  v.cpu.push((c.user + c.system) / 1000 / STEPS);
};
for (const v of variants) run(v, false);
const ratios: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  for (const v of r % 2 === 0 ? variants : [...variants].reverse()) run(v, true);
  ratios.push(variants[1].cpu[r] / variants[0].cpu[r]);
}
const tokens = config.global_batch_size_to_load * config.max_target_length;
console.log(`maxtext ${config.source.split('/').pop()} training step: ${tokens} tokens/step, ${ROUNDS} rounds x ${STEPS} steps, ${getNumThreads()} thread(s), load ${loadavg()[0].toFixed(2)}`);
for (const v of variants) {
  console.log(`  attention=${v.attention.padEnd(12)} ${median(v.cpu).toFixed(1)} CPU ms/step  ${median(v.wall).toFixed(1)} wall ms/step  ${(tokens / (median(v.cpu) / 1000)).toFixed(0)} tokens/CPU-s  losses ${v.losses.slice(0, 3).map((l) => l.toFixed(4)).join(' ')} ... ${v.losses[v.losses.length - 1].toFixed(4)}`);
}
console.log(`  ratio dot_product / autoselected (fused): ${median(ratios).toFixed(2)}x CPU time (median of per-round ratios)`);
console.log(`  compiles: ${variants.map((v) => `${v.attention} ${v.ts.jitted.compileStats().misses}`).join(', ')}`);
if (process.env.TPUKIT_PROFILE === '1') {
  for (const v of variants) {
    profile.reset();
    run(v, false);
    console.log(`\n  profile of ${STEPS} steps, attention=${v.attention}:\n${profile.report({ top: 12, by: 'cpu' })}`);
  }
}
