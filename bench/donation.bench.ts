/**
 * `pnpm bench:donation`: an optimizer-style update `params = step(params, grads)` through
 * xla-lite's jit, with and without `donateArgnums: 0`, timed in interleaved rounds in the same
 * run. With donation the update's loop fusion writes straight into the donated parameter
 * buffers (no allocation per step, one buffer per leaf for the whole loop); without it every
 * step allocates fresh outputs. Reports the per-step medians, their ratio (the median of
 * per-round ratios) and the donation plan's in-place writes. Env: DONATION_BENCH_N (elements
 * per leaf, default 2^20), DONATION_BENCH_LEAVES (default 4), DONATION_BENCH_ROUNDS (default 9).
 */
import { type Array, np, toStorage } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import { median } from './timing';

const N = Number(process.env.DONATION_BENCH_N ?? 1 << 20);
const LEAVES = Number(process.env.DONATION_BENCH_LEAVES ?? 4);
const ROUNDS = Number(process.env.DONATION_BENCH_ROUNDS ?? 9);
const STEPS = 10;

type Params = Array[];
const fill = (v: number): Array => np.array(new Float32Array(N).fill(v), 'float32');

/** SGD with momentum-free weight decay: one fused elementwise loop per leaf. */
const update = (params: Params, grads: Params): Params => params.map((p, i) => np.subtract(np.multiply(p, 0.999), np.multiply(grads[i], 1e-3)));

const donated = jit(update, { donateArgnums: 0 });
const plain = jit(update);
const grads = globalThis.Array.from({ length: LEAVES }, () => fill(0.5));
let pd: Params = globalThis.Array.from({ length: LEAVES }, () => fill(1));
let pp: Params = globalThis.Array.from({ length: LEAVES }, () => fill(1));
const first = toStorage(pd[0]);

const time = (fn: () => void): number => {
  const t0 = performance.now();
  for (let s = 0; s < STEPS; s++) fn();
  return (performance.now() - t0) / STEPS;
};
for (let w = 0; w < 3; w++) {
  pd = donated(pd, grads) as Params;
  pp = plain(pp, grads) as Params;
}
const tDonated: number[] = [];
const tPlain: number[] = [];
const ratios: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const a = time(() => (pp = plain(pp, grads) as Params));
  const b = time(() => (pd = donated(pd, grads) as Params));
  tPlain.push(a);
  tDonated.push(b);
  ratios.push(a / b);
}
const same = pd.every((p, i) => {
  const x = p.dataSync();
  const y = pp[i].dataSync();
  return x.every((v, k) => v === y[k]);
});
const c = donated.lower(pd, grads).compile();
console.log(`donation bench: ${LEAVES} leaves x ${N} float32 (${((LEAVES * N * 4) / 2 ** 20).toFixed(0)} MiB of params), ${ROUNDS} rounds x ${STEPS} steps`);
console.log(`  without donation: ${median(tPlain).toFixed(2)} ms/step (median)`);
console.log(`  with donation:    ${median(tDonated).toFixed(2)} ms/step (median)`);
console.log(`  plain / donated:  ${median(ratios).toFixed(2)}x (median of per-round ratios)`);
console.log(`  donated results equal undonated: ${same}; leaf 0 still in its first buffer: ${toStorage(pd[0]) === first}`);
console.log(`  plan: ${c.donation.outputToParam.size} outputs in donated buffers, ${c.donation.inPlace.size} written in place by fusions`);
