/**
 * `pnpm --filter @tpukit/bench attention:rows`: the fused attention's row kernels (the forward's
 * `softmaxBlock`, the P-kept backward's `gradRowsP`) of this checkout's core (ATTN_CORE_SRC), built
 * in variants of its module settings, in one process on the same
 * rows, each timed as one call's items call it (every block of every item, GPT shape causal by
 * default), the variants alternating per round in both orders. The rows are one item's real
 * logits (scores of staged q and k) and P / dP, restored before each item's blocks (the kernels
 * write in place), the restore's time measured alone and subtracted. Results compared across
 * variants after every round (they must be the same bytes). Prints min / median CPU us per call.
 *
 * Env: ATTN_ROWS_VARIANTS ('name:key=0|1,key=0|1;...', keys of the module's settings objects
 * (`gradRowSettings`, `stagingSettings`, `resultSettings`); default 'exact:dsPlain=0;default:', the
 * gradient rows' always-exact dS rounding against the default), ATTN_BENCH_SHAPE,
 * ATTN_BENCH_CAUSAL, ATTN_BENCH_RUNS (rounds, default 40).
 */
import { attentionShape, loadCore, positiveEnv } from './attentionHarness';
import { cpuWall, loadAndTime, median } from './timing';

const modMod = await loadCore<typeof import('../packages/core/src/backends/systolic/attentionModule')>('backends/systolic/attentionModule.ts');
const { wasmFeatures } = await loadCore<typeof import('../packages/core/src/wasm/features')>('wasm/features.ts');
const { WA } = await loadCore<typeof import('../packages/core/src/wasm/webassemblyTypes')>('wasm/webassemblyTypes.ts');
type Kernels = import('../packages/core/src/backends/systolic/attentionModule').AttentionKernels;

const { B, T, N, H, S, causal, scale } = attentionShape('attention:rows');
const RUNS = positiveEnv('attention:rows', 'ATTN_BENCH_RUNS', 40);
const ceil = (x: number, m: number): number => Math.ceil(x / m) * m;
const [tp, hp, sp] = [ceil(T, 4), ceil(H, 8), ceil(S, 8)];
const items = B * N;
const relaxed = wasmFeatures().relaxedSimd;
const settings = modMod as unknown as Record<string, Record<string, boolean>>;
const spec = process.env.ATTN_ROWS_VARIANTS ?? 'exact:dsPlain=0;default:';
const variants = spec.split(';').map((v) => {
  const [name, rest = ''] = v.split(':');
  const patch = rest.split(',').filter(Boolean).map((kv) => kv.split('=') as [string, string]);
  return { name, patch };
});
const colsOf = (t0: number): number => (causal ? ceil(Math.max(1, Math.min(S, t0 + 4)), 8) : sp);
const lim = (t: number): number => (t >= T ? 0 : causal ? Math.min(S, t + 1) : S);
const NEG = -0.7 * 3.4028234663852886e38;

// memory: [S rows tp x sp] [P rows tp x sp] | pristine copies of both | ml | scratch 4 rows s, p
const rowsBytes = tp * sp * 4;
const [SR, PR, S0, P0, ML, SS, PS] = [0, 1, 2, 3, 4, 5, 6].map((i) => 65536 + i * ceil(rowsBytes, 4096));
let seed = 777;
const rnd = (): number => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
const setups = variants.map(({ name, patch }) => {
  const saved: [Record<string, boolean>, string, boolean][] = [];
  for (const [k, v] of patch) {
    const obj = [settings.gradRowSettings, settings.stagingSettings, settings.resultSettings].find((o) => o && k in o);
    if (!obj) throw new Error(`attention:rows: unknown setting ${k}`);
    saved.push([obj, k, obj[k]]);
    obj[k] = v === '1';
  }
  const mod = modMod.attentionModule(H, sp, relaxed, false, false);
  for (const [o, k, v] of saved) o[k] = v;
  const memory = new WA.Memory({ initial: Math.ceil((PS + rowsBytes) / 65536) + 1 });
  const kx = new WA.Instance(mod.module, { env: { mem: memory } }).exports as unknown as Kernels;
  const f32 = new Float32Array(memory.buffer);
  seed = 777;
  // logits (scores of values in [-1, 1) over H), P: a causal softmax-like row, dP
  for (let i = 0; i < tp * sp; i++) f32[(S0 >> 2) + i] = rnd() * Math.sqrt(H);
  for (let t = 0; t < tp; t++) {
    const c = lim(t);
    let sum = 0;
    for (let j = 0; j < c; j++) sum += f32[(SR >> 2) + t * sp + j] = Math.exp(rnd());
    for (let j = 0; j < sp; j++) f32[(SR >> 2) + t * sp + j] = j < c ? f32[(SR >> 2) + t * sp + j] / sum : 0;
  }
  f32.copyWithin(P0 >> 2, SR >> 2, (SR >> 2) + tp * sp); // (pristine P at P0; dP below at PR)
  for (let i = 0; i < tp * sp; i++) f32[(PR >> 2) + i] = rnd();
  return { name, kx, f32, u8: new Uint8Array(memory.buffer) };
});
const kernels: [string, (s: (typeof setups)[number]) => void][] = [
  ['restore (subtracted)', ({ f32 }) => {
    for (let it = 0; it < items; it++) f32.copyWithin(SS >> 2, S0 >> 2, (S0 >> 2) + 4 * sp);
  }],
  ['softmaxBlock', ({ kx, f32 }) => {
    for (let it = 0; it < items; it++)
      for (let t0 = 0; t0 < tp; t0 += 4) {
        f32.copyWithin(SS >> 2, (S0 >> 2) + t0 * sp, (S0 >> 2) + (t0 + 4) * sp);
        kx.softmaxBlock(SS, PS, colsOf(t0), scale, ML + t0 * 8, 0, 1, lim(t0), lim(t0 + 1), lim(t0 + 2), lim(t0 + 3), 0, 0, 0, 0, NEG, NEG, NEG, NEG);
      }
  }],
  ['restore 4 rows x blocks (subtracted)', ({ f32 }) => {
    for (let it = 0; it < items; it++) for (let t0 = 0; t0 < tp; t0 += 4) f32.copyWithin(SS >> 2, (S0 >> 2) + t0 * sp, (S0 >> 2) + (t0 + 4) * sp);
  }],
  ['gradRowsP', ({ kx, f32 }) => {
    for (let it = 0; it < items; it++)
      for (let t0 = 0; t0 < tp; t0 += 4) {
        f32.copyWithin(PS >> 2, (PR >> 2) + t0 * sp, (PR >> 2) + (t0 + 4) * sp);
        kx.gradRowsP(P0 + t0 * sp * 4, SS, PS, colsOf(t0), 0, scale, scale, scale, scale);
      }
  }],
];
const times = kernels.map(() => setups.map(() => [] as number[]));
for (let i = 0; i < 20; i++) for (const s of setups) for (const [, run] of kernels) run(s);
for (let round = 0; round < RUNS; round++) {
  const order = setups.map((_, i) => i);
  if (round % 2) order.reverse();
  for (const v of order) kernels.forEach(([, run], j) => times[j][v].push(cpuWall(() => run(setups[v])).cpu * 1000));
  const a = setups[0].u8;
  for (const s of setups.slice(1)) for (let i = ML; i < PS + rowsBytes; i++) if (a[i] !== s.u8[i]) throw new Error(`attention:rows: variant ${s.name} differs from ${setups[0].name} at byte ${i}`);
}
console.log(`bench:attention:rows: [${B}, ${T}, ${N}, ${H}]${causal ? ' causal' : ''}, ${items} items, ${relaxed ? 'relaxed' : 'plain'} SIMD; min / median CPU us per call of ${RUNS} rounds (restores subtracted); ${loadAndTime()}`);
const restoreBlocks = setups.map((_, v) => median(times[2][v]));
for (const [j, [name]] of kernels.entries()) {
  if (name.startsWith('restore')) continue;
  const line = setups.map((s, v) => {
    const xs = times[j][v].map((x) => x - restoreBlocks[v]);
    return `${s.name} ${Math.min(...xs).toFixed(1)} / ${median(xs).toFixed(1)}`;
  });
  console.log(`  ${name.padEnd(14)} ${line.join('   ')}`);
}
