/**
 * `pnpm bench:donation`: an optimizer-style update `params = step(params, grads)` through
 * xla-lite's jit, with and without `donateArgnums: 0`, timed in interleaved rounds in the same
 * run. With donation the update's loop fusion writes straight into the donated parameter
 * buffers (no allocation per step, one buffer per leaf for the whole loop); without it every
 * step allocates fresh outputs. On the systolic backend (zero-copy dots) the donated outputs
 * stay in the program's wasm arena between steps (xla-lite's resident donated state); a third
 * peer is the same donated update compiled with that off (`setResidentDonation(false)`: outputs
 * copied out of the arena into the donated buffers, arguments copied in). Reports the per-step
 * medians, their ratios (the median of per-round ratios) and the donation plan's in-place writes. Env: DONATION_BENCH_N (elements
 * per leaf, default 2^20), DONATION_BENCH_LEAVES (default 4), DONATION_BENCH_ROUNDS (default 9).
 */
import { type Array, np, toStorage } from '@tpukit/core';
import { arenaTraffic, jit } from '@tpukit/xla-lite';
import { setResidentDonation } from '@tpukit/xla-lite/internal';
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
const copying = jit(update, { donateArgnums: 0 });
const plain = jit(update);
const grads = globalThis.Array.from({ length: LEAVES }, () => fill(0.5));
let pd: Params = globalThis.Array.from({ length: LEAVES }, () => fill(1));
let pp: Params = globalThis.Array.from({ length: LEAVES }, () => fill(1));
let pc: Params = globalThis.Array.from({ length: LEAVES }, () => fill(1));

const time = (fn: () => void): number => {
  const t0 = performance.now();
  for (let s = 0; s < STEPS; s++) fn();
  return (performance.now() - t0) / STEPS;
};
pd = donated(pd, grads) as Params;
setResidentDonation(false); // (read when `copying` compiles, at its first call)
pc = copying(pc, grads) as Params;
setResidentDonation(true);
pp = plain(pp, grads) as Params;
// Where leaf 0 lives after the first donated step: it should stay there.
const first = toStorage(pd[0]);
const firstCopying = toStorage(pc[0]);
for (let w = 0; w < 2; w++) {
  pd = donated(pd, grads) as Params;
  pc = copying(pc, grads) as Params;
  pp = plain(pp, grads) as Params;
}
const tDonated: number[] = [];
const tCopying: number[] = [];
const tPlain: number[] = [];
const ratios: number[] = [];
const residentRatios: number[] = [];
const resident0 = arenaTraffic().residentBytes;
for (let r = 0; r < ROUNDS; r++) {
  // (Alternating which donated peer runs first.)
  const a = time(() => (pp = plain(pp, grads) as Params));
  const c = r % 2 ? time(() => (pc = copying(pc, grads) as Params)) : 0;
  const b = time(() => (pd = donated(pd, grads) as Params));
  const c2 = r % 2 ? c : time(() => (pc = copying(pc, grads) as Params));
  tPlain.push(a);
  tDonated.push(b);
  tCopying.push(c2);
  ratios.push(a / b);
  residentRatios.push(c2 / b);
}
const residentMiB = (arenaTraffic().residentBytes - resident0) / 2 ** 20;
const equal = (xs: Params, ys: Params) =>
  xs.every((p, i) => {
    const x = p.dataSync();
    const y = ys[i].dataSync();
    return x.every((v, k) => v === y[k]);
  });
const same = equal(pd, pp) && equal(pc, pp);
const c = donated.lower(pd, grads).compile();
console.log(`donation bench: ${LEAVES} leaves x ${N} float32 (${((LEAVES * N * 4) / 2 ** 20).toFixed(0)} MiB of params), ${ROUNDS} rounds x ${STEPS} steps`);
console.log(`  without donation: ${median(tPlain).toFixed(2)} ms/step (median)`);
console.log(`  with donation:    ${median(tDonated).toFixed(2)} ms/step (median); outputs kept in the arena: ${residentMiB.toFixed(0)} MiB over the timed steps`);
console.log(`  donation, resident state off (copied in and out of the arena): ${median(tCopying).toFixed(2)} ms/step (median)`);
console.log(`  plain / donated:  ${median(ratios).toFixed(2)}x; copying / resident: ${median(residentRatios).toFixed(2)}x (medians of per-round ratios)`);
console.log(`  donated results (both) equal undonated: ${same}; leaf 0 in one buffer from the first step on: ${toStorage(pd[0]) === first} (copying: ${toStorage(pc[0]) === firstCopying})`);
console.log(`  plan: ${c.donation.outputToParam.size} outputs in donated buffers, ${c.donation.inPlace.size} written in place by fusions`);
