/**
 * `pnpm bench:maxtext`: one training step of maxtext-ts's `tiny` config two ways, timed in
 * interleaved rounds in the same run: (a) the trainer's step, forward + backward + clipping +
 * AdamW in one jitted program with the state donated; (b) the previous main job's structure, only
 * `valueAndGrad` jitted and the same optimizer chain run eagerly op by op. Same model, same
 * batches, same optimizer. Prints per-step medians, their ratio (median of per-round ratios), and
 * tokens/s. Env: MAXTEXT_BENCH_ROUNDS (default 7), MAXTEXT_BENCH_STEPS (per round, default 5),
 * MAXTEXT_BENCH_CONFIG (default tiny).
 */
import { type Array, np, setBackend, tree, valueAndGrad } from '@tpukit/core';
import { loadConfig, lossSum, makeDataIterator, makeTrainStep, type Params, type TrainState } from '@tpukit/maxtext-ts';
import { applyUpdates } from '@tpukit/maxtext-ts/optim';
import { jit } from '@tpukit/xla-lite';

const ROUNDS = Number(process.env.MAXTEXT_BENCH_ROUNDS ?? 7);
const STEPS = Number(process.env.MAXTEXT_BENCH_STEPS ?? 5);
const config = loadConfig(process.env.MAXTEXT_BENCH_CONFIG ?? 'tiny', ['measure_mfu=false']);
setBackend(config.backend);
const ts = makeTrainStep(config);
const data = makeDataIterator(config);
const batches = globalThis.Array.from({ length: 4 }, () => data.next());

const grads = jit(valueAndGrad((p: Params, b: (typeof batches)[0]) => lossSum(p, b, ts.model), { hasAux: true }));
const eagerStep = (s: TrainState, b: (typeof batches)[0]): [TrainState, number] => {
  const [[sum, w], g] = grads(s.params, b) as [[Array, Array], Params];
  const denom = np.maximum(w, 1);
  const scaled = tree.map((x: Array) => np.divide(x, denom), g);
  const [updates, optState] = ts.optimizer.update(scaled, s.optState as unknown[], s.params);
  return [{ params: applyUpdates(s.params, updates), optState, step: np.add(s.step, 1) }, np.divide(sum, denom).item() as number];
};

let sa = ts.init();
let sb = ts.init();
const runA = (): void => {
  for (let i = 0; i < STEPS; i++) {
    const [n, m] = ts.jitted(sa, batches[i % 4]);
    sa = n;
    m.loss.item();
  }
};
const runB = (): void => {
  for (let i = 0; i < STEPS; i++) [sb] = eagerStep(sb, batches[i % 4]);
};
runA();
runB();
const ta: number[] = [];
const tb: number[] = [];
const ratios: number[] = [];
const time = (f: () => void): number => {
  const t = performance.now();
  f();
  return (performance.now() - t) / STEPS;
};
for (let r = 0; r < ROUNDS; r++) {
  const a = time(runA);
  const b = time(runB);
  ta.push(a);
  tb.push(b);
  ratios.push(b / a);
}
const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const tokens = config.global_batch_size_to_load * config.max_target_length;
console.log(`maxtext ${config.source.split('/').pop()}: ${tokens} tokens/step, ${ROUNDS} rounds x ${STEPS} steps`);
console.log(`  whole step jitted (donated):     ${median(ta).toFixed(1)} ms/step  ${(tokens / (median(ta) / 1000)).toFixed(0)} tokens/s`);
console.log(`  jit(valueAndGrad) + eager AdamW: ${median(tb).toFixed(1)} ms/step  ${(tokens / (median(tb) / 1000)).toFixed(0)} tokens/s`);
console.log(`  ratio eager-optimizer / whole-step: ${median(ratios).toFixed(2)}x (median of per-round ratios)`);
console.log(`  compiles: whole step ${ts.jitted.compileStats().misses}, valueAndGrad ${grads.compileStats().misses}`);
