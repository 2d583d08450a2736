/**
 * `pnpm --filter @tpukit/bench attention:staging`: the fused attention's staging kernels
 * (`stageRows`, `stageCols`: raw f32 operand rows rounded to bf16 into the kernels' padded
 * layouts) of two core source trees (ATTN_AB_A and ATTN_AB_B, e.g. main and this checkout) in
 * one process, on the same operands, each kernel timed as one call's items call it (every item's
 * K^T, V, Q: the forward's; K, V^T, Q, dO: the backward's with P kept), the versions
 * alternating per round. Also with one NaN in the operands (ATTN_STAGE_NAN=1: the first item's
 * first row), which sends a two-pass kernel through its second pass. Each version's staged bytes
 * are compared after every round (they must be the same). Prints min / median process CPU us per
 * call of the items' staging.
 *
 * The operands (1 MiB each at the GPT's shape) are read from L2 or L3 (4 MiB in all); with
 * ATTN_STAGE_HOT=1 every item's call stages item 0's rows instead, from L1: the instructions' cost.
 *
 * Env: ATTN_AB_A (required), ATTN_AB_B (default this checkout's), ATTN_BENCH_SHAPE,
 * ATTN_BENCH_RUNS (rounds, default 40), ATTN_STAGE_NAN, ATTN_STAGE_HOT.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { attentionShape, coreSrc, positiveEnv } from './attentionHarness';
import { cpuWall, loadAndTime, median } from './timing';

type ModMod = typeof import('../packages/core/src/backends/systolic/attentionModule');
type Kernels = import('../packages/core/src/backends/systolic/attentionModule').AttentionKernels;
if (process.env.ATTN_AB_A === undefined) throw new Error('bench:attention:staging: set ATTN_AB_A to the core sources to compare with (e.g. a checkout of main: <dir>/packages/core/src)');
const srcs = [resolve(process.env.ATTN_AB_A), resolve(process.env.ATTN_AB_B ?? coreSrc)];
const at = async <T>(src: string, rel: string): Promise<T> => (await import(pathToFileURL(resolve(src, rel)).href)) as T;
const mods = [await at<ModMod>(srcs[0], 'backends/systolic/attentionModule.ts'), await at<ModMod>(srcs[1], 'backends/systolic/attentionModule.ts')];
const { wasmFeatures } = await at<typeof import('../packages/core/src/wasm/features')>(srcs[1], 'wasm/features.ts');
const { WA } = await at<typeof import('../packages/core/src/wasm/webassemblyTypes')>(srcs[1], 'wasm/webassemblyTypes.ts');

const { B, T, N, H, S } = attentionShape('attention:staging');
const RUNS = positiveEnv('attention:staging', 'ATTN_BENCH_RUNS', 40);
const withNaN = process.env.ATTN_STAGE_NAN === '1';
// ATTN_STAGE_HOT=1: every item's call stages item 0's rows (its source stays in L1: the kernels' instructions alone)
const hot = process.env.ATTN_STAGE_HOT === '1';
const ceil = (x: number, m: number): number => Math.ceil(x / m) * m;
const [tp, hp, sp] = [ceil(T, 4), ceil(H, 8), ceil(S, 8)];
const items = B * N;
const len = B * T * N * H;
const QSTRIDE = N * H * 4;
const itemOff = (it: number): number => (hot ? 0 : (Math.floor(it / N) * T * N + (it % N)) * H * 4);

// raw q, k, v, dO (seeded), then the staged K^T, K, V, V^T, Q, dO of one item
let seed = 12345;
const rnd = (): number => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
const raws = [0, 1, 2, 3].map(() => Float32Array.from({ length: len }, rnd));
if (withNaN) for (const r of raws) r[0] = NaN;
const RAW = 1 << 16;
const rawAt = (i: number): number => RAW + i * ceil(len * 4, 64);
const OUT = rawAt(4);
const outAt = (i: number): number => OUT + i * ceil(Math.max(sp, tp) * hp * 4, 64);
const end = outAt(6);
const setups = mods.map((m) => {
  const memory = new WA.Memory({ initial: Math.ceil(end / 65536) + 1 });
  const kx = new WA.Instance(m.attentionModule(H, sp, wasmFeatures().relaxedSimd, false, false).module, { env: { mem: memory } }).exports as unknown as Kernels;
  const f32 = new Float32Array(memory.buffer);
  raws.forEach((x, i) => f32.set(x, rawAt(i) >> 2));
  return { kx, bytes: new Uint8Array(memory.buffer, OUT, end - OUT) };
});

const kernels: [string, (kx: Kernels) => void][] = [
  ['fwd: K^T (cols)', (kx) => { for (let it = 0; it < items; it++) kx.stageCols(rawAt(1) + itemOff(it), QSTRIDE, S, outAt(0)); }],
  ['fwd: V (rows)', (kx) => { for (let it = 0; it < items; it++) kx.stageRows(rawAt(2) + itemOff(it), QSTRIDE, S, outAt(2), sp); }],
  ['fwd/bwd: Q (rows)', (kx) => { for (let it = 0; it < items; it++) kx.stageRows(rawAt(0) + itemOff(it), QSTRIDE, T, outAt(4), tp); }],
  ['bwd: K (rows)', (kx) => { for (let it = 0; it < items; it++) kx.stageRows(rawAt(1) + itemOff(it), QSTRIDE, S, outAt(1), sp); }],
  ['bwd: V^T (cols)', (kx) => { for (let it = 0; it < items; it++) kx.stageCols(rawAt(2) + itemOff(it), QSTRIDE, S, outAt(3)); }],
  ['bwd: dO (rows)', (kx) => { for (let it = 0; it < items; it++) kx.stageRows(rawAt(3) + itemOff(it), QSTRIDE, T, outAt(5), tp); }],
];
const times = kernels.map(() => [[], []] as number[][]);
for (let i = 0; i < 20; i++) for (const { kx } of setups) for (const [, run] of kernels) run(kx);
for (let round = 0; round < RUNS; round++) {
  for (const v of round % 2 ? [1, 0] : [0, 1]) kernels.forEach(([, run], j) => times[j][v].push(cpuWall(() => run(setups[v].kx)).cpu * 1000));
  // (the last item's staged rows, every kernel's region)
  const [a, b] = setups.map((s) => s.bytes);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) throw new Error(`bench:attention:staging: the versions' staged bytes differ at byte ${i} of the staged regions`);
}
const fmt = (xs: number[]): string => `${Math.min(...xs).toFixed(1)} / ${median(xs).toFixed(1)}`;
console.log(`bench:attention:staging: [${B}, ${T}, ${N}, ${H}], ${items} items per call${withNaN ? ', one NaN per operand' : ''}${hot ? ', every call on item 0 (source in L1)' : ''}; A ${srcs[0]}, B ${srcs[1]}; min / median CPU us per call of ${RUNS} rounds; ${loadAndTime()}`);
let sums = [[0, 0], [0, 0]];
kernels.forEach(([name], j) => {
  const [a, b] = times[j];
  const fwd = name.startsWith('fwd') ? 1 : 0;
  const bwd = name.includes('bwd') ? 1 : 0;
  sums = sums.map((s, v) => [s[0] + fwd * median(times[j][v]), s[1] + bwd * median(times[j][v])]);
  console.log(`  ${name.padEnd(20)} A ${fmt(a).padStart(15)}   B ${fmt(b).padStart(15)}   B/A (medians) ${(median(b) / median(a)).toFixed(3)}`);
});
console.log(`  sums of medians: fwd A ${sums[0][0].toFixed(1)} B ${sums[1][0].toFixed(1)} us; bwd (P kept) A ${sums[0][1].toFixed(1)} B ${sums[1][1].toFixed(1)} us; the staged bytes the same in every round`);
