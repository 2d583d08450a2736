/**
 * `pnpm --filter @tpukit/bench attention:phases`: where one call of the fused attention's
 * kernels (core's `dot_product_attention_fwd` / `_bwd` on the systolic backend, one thread)
 * spends its time, phase by phase. Each phase is timed alone: the module's exported kernels are
 * called in a loop with the same arguments, in the same order, as the item drivers call them
 * for every item of one call (own wasm memory, operands laid out as the drivers see them), so
 * a phase's time is its kernels' time without the others. Also timed: one whole call as the
 * backend runs it (`attentionFwdSystolic` / `attentionBwdSystolic`: copies in and out, driver,
 * logsumexp), the same call with operands and results in place in an arena host's memory (as
 * in a compiled step, where xla-lite hands the kernels arena views: no copies, but the operands
 * and results are read and written where they lie, cache-cold lines included), that call with P
 * kept (`saveProbs`: the forward writes probs, the backward reads it), and the copies alone. Prints median CPU ms per call of each.
 * Last, P kept against recomputed over 4 layers' calls as a training step makes them (forwards,
 * then backwards in reverse, other memory touched in between), alternating.
 *
 * (The backward's row phases write the block's rows where the driver does: from attn11 on, the
 * rows of the chunks [QB, sp] of P and dS that transGemm then reads; kernels from before attn11
 * use a 4-row scratch and also time their transposes of dS and P into the transposed chunks.
 * The forward's softmax is one softmaxBlock call per block from attn12 on, 4 softmaxRow calls before.)
 *
 * Env: ATTN_BENCH_SHAPE (B,T,N,H; default the GPT's 16,128,4,32), ATTN_BENCH_CAUSAL (default
 * 1), ATTN_BENCH_RUNS (default 30), ATTN_CORE_SRC (the core sources to load, default this
 * checkout's; e.g. /work/main/packages/core/src for main's kernels in an A/B).
 */
import { attentionShape, aval as av, coreSrc, hostArray as host, layerCalls, loadCore, positiveEnv, stepLayers } from './attentionHarness';
import { cpuWall, loadAndTime, median } from './timing';

const modMod = await loadCore<typeof import('../packages/core/src/backends/systolic/attentionModule')>('backends/systolic/attentionModule.ts');
const attnMod = await loadCore<typeof import('../packages/core/src/backends/systolic/attention')>('backends/systolic/attention.ts');
const { wasmFeatures } = await loadCore<typeof import('../packages/core/src/wasm/features')>('wasm/features.ts');
const { setNumThreads } = await loadCore<typeof import('../packages/core/src/threads')>('threads.ts');
const { WA } = await loadCore<typeof import('../packages/core/src/wasm/webassemblyTypes')>('wasm/webassemblyTypes.ts');

const dims = attentionShape('attention:phases');
const { B, T, N, H, S, causal, scale, shape } = dims;
const RUNS = positiveEnv('attention:phases', 'ATTN_BENCH_RUNS', 30);
const WARMUP = 20;
const relaxed = wasmFeatures().relaxedSimd;
setNumThreads(1);

const ceil = (x: number, m: number): number => Math.ceil(x / m) * m;
const [tp, hp, sp] = [ceil(T, 4), ceil(H, 8), ceil(S, 8)];
const items = B * N;

/** Median process CPU ms of `fn` over RUNS runs after WARMUP warm-up runs (enough for V8 to optimise the calls' JavaScript and tier the kernels up). */
function cpuMs(fn: () => void): number {
  for (let i = 0; i < WARMUP; i++) fn();
  const xs: number[] = [];
  for (let i = 0; i < RUNS; i++) xs.push(cpuWall(fn).cpu);
  return median(xs);
}

// --- whole calls, as the backend runs them ---
const rnd = (n: number): Float32Array => Float32Array.from({ length: n }, () => Math.random() * 2 - 1);
const [q, k, v, dO] = [rnd(B * T * N * H), rnd(B * T * N * H), rnd(B * T * N * H), rnd(B * T * N * H)];
const params = { isCausal: causal, scale } as never;
const fwdOuts = [new Float32Array(q.length), new Float32Array(B * N * T)];
const bwdOuts = [new Float32Array(q.length), new Float32Array(q.length), new Float32Array(q.length)];
const fwdCall = (): void => {
  attnMod.attentionFwdSystolic([host(q, shape), host(k, shape), host(v, shape)], params, [av(shape), av([B, N, T])], relaxed, fwdOuts as never);
};
fwdCall();
const lse = fwdOuts[1].slice();
const bwdCall = (): void => {
  attnMod.attentionBwdSystolic([host(q, shape), host(k, shape), host(v, shape), host(lse, [B, N, T]), host(dO, shape)], params, [av(shape), av(shape), av(shape)], relaxed, bwdOuts as never);
};

// --- whole calls with operands and results in place: in an arena host's memory, as in a compiled step ---
/** A bump-allocating arena host (the GEMM engine's role in a compiled step): regions from 64 on, released in reverse order. */
function benchHost(): import('../packages/core/src/backend').ArenaHost & { region(n: number): Float32Array } {
  const maxPages = 16384;
  const memory = new WA.Memory({ initial: 4096, maximum: maxPages, shared: true });
  let top = 64;
  const held: [number, number][] = [];
  const reserve = (bytes: number): number => {
    const at = ceil(top, 64);
    if (at + bytes > memory.buffer.byteLength) memory.grow(Math.ceil((at + bytes - memory.buffer.byteLength) / 65536));
    held.push([at, bytes]);
    top = at + bytes;
    return at;
  };
  return {
    memory,
    maxPages,
    reserve,
    release(addr: number) {
      const i = held.findIndex(([a]) => a === addr);
      held.splice(i, 1);
      top = held.length ? held[held.length - 1][0] + held[held.length - 1][1] : 64;
    },
    buffer: () => memory.buffer,
    holds: (v: ArrayBufferView) => v.buffer === memory.buffer && held.some(([a, n]) => v.byteOffset >= a && v.byteOffset + v.byteLength <= a + n),
    region(n: number): Float32Array {
      const at = reserve(n * 4);
      return new Float32Array(memory.buffer, at, n);
    },
  };
}
const arena = benchHost();
/** A region of the arena holding a copy of `x`. */
const inArena = (x: Float32Array): Float32Array => {
  const r = arena.region(x.length);
  r.set(x);
  return r;
};
// (in place: operands and results in the arena, as a compiled step has them; kept: the forward also
// writes P [B, N, T, S], the backward reads it instead of recomputing P)
const layer = layerCalls({ attn: attnMod, shape: dims, relaxed, arena, ins: [q, k, v, dO].map(inArena), fo: [arena.region(q.length), arena.region(B * N * T), arena.region(B * N * T * S)], bo: [0, 1, 2].map(() => arena.region(q.length)) });
const fwdInPlace = (): void => layer.fwd(false);
fwdInPlace();
const bwdInPlace = (): void => layer.bwd(false);
const fwdKept = (): void => layer.fwd(true);
fwdKept();
const bwdKept = (): void => layer.bwd(true);

// --- the kernels alone, in a memory of our own ---
const mod = modMod.attentionModule(H, sp, relaxed, false, false);
const rawBytes = q.length * 4;
// raw q, k, v, dO | out, dq, dk, dv | ml; then the scratch
const RAW = 1 << 16;
const rawAt = (i: number): number => RAW + i * ceil(rawBytes, 64);
const ML = rawAt(8);
const SCR = ceil(ML + B * N * T * 8, 64);
const off: Record<string, number> = {};
{
  const sizes: Record<string, number> = { q: tp * hp, do: tp * hp, kt: hp * sp, kb: sp * hp, v: sp * hp, o: tp * hp, dk: sp * hp, dv: sp * hp, s: 4 * sp, p: 4 * sp, ml: 2 * tp, dsT: sp * modMod.QB, pT: sp * modMod.QB, dsc: sp * modMod.QB, pc: sp * modMod.QB };
  let at = SCR;
  for (const name of modMod.SCRATCH) {
    off[name] = at;
    at += ceil(sizes[name], 16) * 4;
  }
  off.end = at;
}
const memory = new WA.Memory({ initial: Math.ceil(off.end / 65536) + 1 });
const kx = new WA.Instance(mod.module, { env: { mem: memory } }).exports as unknown as import('../packages/core/src/backends/systolic/attentionModule').AttentionKernels;
const f32 = new Float32Array(memory.buffer);
[q, k, v, dO].forEach((x, i) => f32.set(x, rawAt(i) >> 2));
const QSTRIDE = N * H * 4;
const itemOff = (it: number): number => (Math.floor(it / N) * T * N + (it % N)) * H * 4;
const colsOf = (t0: number): number => (causal ? ceil(Math.max(1, Math.min(S, t0 + 4)), 8) : sp);
const lim = (t: number): number => (t >= T ? 0 : causal ? Math.min(S, t + 1) : S);
const NEG = -0.7 * 3.4028234663852886e38;

// Fill the scratch once with a real item's staged operands, P and dS, so the kernels see real data.
kx.stageCols(rawAt(1), QSTRIDE, S, off.kt);
kx.stageRows(rawAt(1), QSTRIDE, S, off.kb, sp);
kx.stageRows(rawAt(2), QSTRIDE, S, off.v, sp);
kx.stageRows(rawAt(0), QSTRIDE, T, off.q, tp);
kx.stageRows(rawAt(3), QSTRIDE, T, off.do, tp);

const lseJs = new Float32Array(items * T);
// Kernels before attn11 transposed the backward's dS and P rows into chunks [sp, QB] (transposeBlock) for transGemm; from attn11 on the blocks' rows are kept in chunks [QB, sp], which transGemm reads as they are.
const transposed = 'transposeBlock' in kx;
const old = kx as unknown as { transposeBlock(src: number, dst: number, cols: number, total: number): void };
const [dsChunk, pChunk] = transposed ? [off.dsT, off.pT] : [off.dsc, off.pc];
// The backward block's rows of S then P (sRows) and of dP then dS (pRows), as the driver places them: the 4-row scratch
// (kernels that transpose), else the block's rows of the P and dS chunks, so transGemm reads what the phases before wrote.
const sRows = (t0: number): number => (transposed ? off.s : off.pc + (t0 & (modMod.QB - 1)) * sp * 4);
const pRows = (t0: number): number => (transposed ? off.p : off.dsc + (t0 & (modMod.QB - 1)) * sp * 4);
const rowSoftmax = !('softmaxBlock' in kx);
// From attn18 on (resultSettings.direct, H a multiple of 8) P V and dS K store a block's 4 rows of O or dQ in the
// result's rows (when all 4 are real rows) and the last transGemm dK and dV for keys 0..floor4(S); only the rows
// past floor4(T) and floor4(S) are unstaged. The phases call the kernels that way here too.
const direct = (modMod as { resultSettings?: { direct: boolean } }).resultSettings?.direct === true && H % 8 === 0;
/** rowsTimes' out and row stride for block t0 of item it, the result's rows at raw slot i (direct) or the scratch's. */
const resultRows = (i: number, it: number, t0: number): [number, number] =>
  direct && t0 + 4 <= T ? [rawAt(i) + itemOff(it) + t0 * QSTRIDE, QSTRIDE] : [off.o + t0 * hp * 4, hp * 4];
/** unstageRows of a result's n rows from scratch src into raw slot i: with `direct` only those past floor4(n). */
const unstage = (src: number, n: number, i: number, it: number): void => {
  const from = direct ? n & ~3 : 0;
  kx.unstageRows(src + from * hp * 4, n - from, rawAt(i) + itemOff(it) + from * QSTRIDE, QSTRIDE);
};
const oldRow = kx as unknown as { softmaxRow(s: number, p: number, c: number, n: number, scale: number, mlOut: number, bf16: number, mrow: number, neg: number, keep: number): void };
const eachBlock = (fn: (t0: number, cols: number, it: number) => void): void => {
  for (let it = 0; it < items; it++) for (let t0 = 0; t0 < tp; t0 += 4) fn(t0, colsOf(t0), it);
};
const bwdScores = (t0: number, cols: number): void => {
  kx.scores(off.q + t0 * hp * 4, off.kt, sRows(t0), cols >> 3);
  kx.scores(off.do + t0 * hp * 4, off.v, pRows(t0), cols >> 3);
};
// (a phase's optional 4th element names a phase timed before it whose time it includes and which is
// subtracted: the grad rows overwrite their logits and dP with P and dS in place, so each block's
// runs after its 2 scores, or every item and run after the first would take the last one's P and dS
// as its logits and dP, whose values shrink into subnormals)
const phases: [string, 'fwd' | 'bwd', () => void, string?][] = [
  ['stage K^T, V (rows), Q', 'fwd', () => {
    for (let it = 0; it < items; it++) {
      kx.stageCols(rawAt(1) + itemOff(it), QSTRIDE, S, off.kt);
      kx.stageRows(rawAt(2) + itemOff(it), QSTRIDE, S, off.v, sp);
      kx.stageRows(rawAt(0) + itemOff(it), QSTRIDE, T, off.q, tp);
    }
  }],
  ['Q K^T (scores)', 'fwd', () => eachBlock((t0, cols) => kx.scores(off.q + t0 * hp * 4, off.kt, off.s, cols >> 3))],
  ['softmax rows (3 passes, exp)', 'fwd', () => eachBlock((t0, cols) => {
    // (kernels before attn12 took one row per call: softmaxRow)
    if (!rowSoftmax) kx.softmaxBlock(off.s, off.p, cols, scale, off.ml + t0 * 8, 0, 0, lim(t0), lim(t0 + 1), lim(t0 + 2), lim(t0 + 3), 0, 0, 0, 0, NEG, NEG, NEG, NEG);
    else for (let r = 0; r < 4; r++) oldRow.softmaxRow(off.s + r * sp * 4, off.p + r * sp * 4, lim(t0 + r), cols, scale, off.ml + (t0 + r) * 8, 0, 0, NEG, 0);
  })],
  ['logsumexp (lseRows)', 'fwd', () => {
    // (main's kernels before attn1t formed it in JS: a loop with Math.log, timed the same way)
    if (kx.lseRows) for (let it = 0; it < items; it++) kx.lseRows(off.ml, ML + it * T * 4, T);
    else for (let i = 0, m = ML >> 2; i < items * T; i++, m += 2) lseJs[i] = f32[m] + Math.log(f32[m + 1]);
  }],
  ['P V (rowsTimes)', 'fwd', () => eachBlock((t0, cols, it) => kx.rowsTimes(off.p, off.v, resultRows(4, it, t0)[0], cols, resultRows(4, it, t0)[1]))],
  ['unstage O', 'fwd', () => {
    for (let it = 0; it < items; it++) unstage(off.o, T, 4, it);
  }],
  ['stage K^T, K, V^T, Q, dO', 'bwd', () => {
    for (let it = 0; it < items; it++) {
      kx.stageCols(rawAt(1) + itemOff(it), QSTRIDE, S, off.kt);
      kx.stageRows(rawAt(1) + itemOff(it), QSTRIDE, S, off.kb, sp);
      kx.stageCols(rawAt(2) + itemOff(it), QSTRIDE, S, off.v);
      kx.stageRows(rawAt(0) + itemOff(it), QSTRIDE, T, off.q, tp);
      kx.stageRows(rawAt(3) + itemOff(it), QSTRIDE, T, off.do, tp);
    }
  }],
  ['Q K^T + dO V^T (2 scores)', 'bwd', () => eachBlock(bwdScores)],
  ['grad rows (exp, D, dS)', 'bwd', () => eachBlock((t0, cols) => {
    bwdScores(t0, cols);
    for (let r = 0; r < 4; r++) kx.gradRow(sRows(t0) + r * sp * 4, pRows(t0) + r * sp * 4, lim(t0 + r), cols, scale, 1.5, 0, 0, NEG);
  }), 'Q K^T + dO V^T (2 scores)'],
  ['dS K (rowsTimes)', 'bwd', () => eachBlock((t0, cols, it) => kx.rowsTimes(pRows(t0), off.kb, resultRows(5, it, t0)[0], cols, resultRows(5, it, t0)[1]))],
  ...(transposed
    ? ([['transpose dS, P', 'bwd', () => eachBlock((t0, cols) => {
        old.transposeBlock(off.p, off.dsT + (t0 & (modMod.QB - 1)) * 4, cols, cols);
        old.transposeBlock(off.s, off.pT + (t0 & (modMod.QB - 1)) * 4, cols, cols);
      })]] as [string, 'bwd', () => void][])
    : []),
  ['dS^T Q, P^T dO (transGemm)', 'bwd', () => {
    for (let it = 0; it < items; it++)
      for (let c0 = 0; c0 < tp; c0 += modMod.QB) {
        const rows = Math.min(modMod.QB, tp - c0);
        // (direct: the last chunk stores keys 0..floor4(S) in dK's and dV's rows)
        const dkeys = direct && c0 + modMod.QB >= tp ? S & ~3 : 0;
        kx.transGemm(dsChunk, off.q, off.dk, causal ? 1 : 0, c0, rows, c0 === 0 ? 1 : 0, rawAt(6) + itemOff(it), dkeys, QSTRIDE);
        kx.transGemm(pChunk, off.do, off.dv, causal ? 1 : 0, c0, rows, c0 === 0 ? 1 : 0, rawAt(7) + itemOff(it), dkeys, QSTRIDE);
      }
  }],
  ['unstage dQ, dK, dV', 'bwd', () => {
    for (let it = 0; it < items; it++) {
      unstage(off.o, T, 5, it);
      unstage(off.dk, S, 6, it);
      unstage(off.dv, S, 7, it);
    }
  }],
];
const copy = (n: number): (() => void) => {
  const big = new Float32Array(memory.buffer, RAW, q.length * 8);
  return () => {
    for (let i = 0; i < n; i++) big.set(q, i * q.length);
  };
};

console.log(`bench:attention:phases: [${B}, ${T}, ${N}, ${H}]${causal ? ' causal' : ''}, 1 thread, ${relaxed ? 'relaxed' : 'plain'} SIMD, median CPU ms per call of ${RUNS}; sources ${coreSrc}; ${loadAndTime()}`);
for (const dir of ['fwd', 'bwd'] as const) {
  const whole = cpuMs(dir === 'fwd' ? fwdCall : bwdCall);
  const inPlace = cpuMs(dir === 'fwd' ? fwdInPlace : bwdInPlace);
  // (older sources without saveProbs: their forward returns 2 results and the backward ignores probs)
  const kept = cpuMs(dir === 'fwd' ? fwdKept : bwdKept);
  const copies = cpuMs(copy(dir === 'fwd' ? 4 : 8));
  // (the copies wrote q over the raw operands: back to q, k, v, dO, or the phases would stage dO = q and V = K)
  [q, k, v, dO].forEach((x, i) => f32.set(x, rawAt(i) >> 2));
  let sum = 0;
  const rows: string[] = [];
  const took: Record<string, number> = {};
  for (const [name, d, fn, less] of phases) {
    if (d !== dir) continue;
    const ms = cpuMs(fn) - (less === undefined ? 0 : took[less]);
    took[name] = ms;
    sum += ms;
    rows.push(`    ${name.padEnd(34)} ${ms.toFixed(3).padStart(7)} ms`);
  }
  console.log(`  ${dir}: whole call ${whole.toFixed(3)} ms; ${dir === 'fwd' ? 4 : 8} operand/result copies of ${(rawBytes / 2 ** 20).toFixed(2)} MiB ${copies.toFixed(3)} ms; kernels alone:`);
  for (const r of rows) console.log(r);
  console.log(`    ${'sum of the kernel phases'.padEnd(34)} ${sum.toFixed(3).padStart(7)} ms; whole - copies - phases ${(whole - copies - sum).toFixed(3)} ms (driver, logsumexp, caches)`);
  console.log(`    ${'whole call in place (arena host)'.padEnd(34)} ${inPlace.toFixed(3).padStart(7)} ms; in place - phases ${(inPlace - sum).toFixed(3)} ms`);
  console.log(`    ${'the same with P kept (saveProbs)'.padEnd(34)} ${kept.toFixed(3).padStart(7)} ms; kept / not ${(kept / inPlace).toFixed(3)}`);
}

// --- P kept vs recomputed as a step has them: L layers' forward calls, then their backward calls in
// reverse, with a 8 MiB pass over other memory before each call (the step's other ops between), so
// probs is written and read back cache-cold; interleaved, the order alternating per step ---
{
  const operands = [q, k, v, dO];
  const layers = stepLayers({ attn: attnMod, shape: dims, relaxed, arena, region: (n) => arena.region(n), operand: (i) => inArena(operands[i]) });
  const L = layers.L;
  const step = (kept: boolean): [number, number] => {
    const ms = { fwd: 0, bwd: 0 };
    layers.step(kept, (dir, call) => {
      ms[dir] += cpuWall(call).cpu;
    });
    return [ms.fwd / L, ms.bwd / L];
  };
  for (let i = 0; i < 3; i++) [false, true].forEach(step);
  const res: Record<'kept' | 'not', [number, number][]> = { kept: [], not: [] };
  for (let i = 0; i < RUNS; i++) for (const kept of i % 2 ? [false, true] : [true, false]) res[kept ? 'kept' : 'not'].push(step(kept));
  const m = (xs: [number, number][], j: 0 | 1): number => median(xs.map((x) => x[j]));
  console.log(`  P kept vs recomputed, ${L} layers' calls as in a step (probs written and read cache-cold), median CPU ms per call of ${RUNS} steps: fwd ${m(res.not, 0).toFixed(3)} -> ${m(res.kept, 0).toFixed(3)}, bwd ${m(res.not, 1).toFixed(3)} -> ${m(res.kept, 1).toFixed(3)}, pair ${(m(res.not, 0) + m(res.not, 1)).toFixed(3)} -> ${(m(res.kept, 0) + m(res.kept, 1)).toFixed(3)}`);
}
