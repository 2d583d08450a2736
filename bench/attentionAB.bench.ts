/**
 * `pnpm --filter @tpukit/bench attention:ab`: two versions of the fused attention's kernels
 * (core sources ATTN_AB_A and ATTN_AB_B, e.g. a checkout of main and this one) in one process,
 * timed on the same calls as a training step makes them, steps alternating between the two: L
 * layers' forward calls, then their backward calls in reverse, P kept (ATTN_AB_KEEP=0:
 * recomputed), each layer's operands and results in regions of one arena host's memory (as
 * xla-lite hands them over; the layers' operands distinct, 16 MiB at the GPT's shape, so that
 * they are not all in the cache), an 8 MiB pass over other memory before each call. Both
 * versions read the same operands (seeded: the same in every run); at the end their results
 * (out, lse, P, dq, dk, dv of every layer) are compared byte for byte, and a version that
 * copied any operand or result (not in place) fails the run. Prints median (min) process CPU
 * and wall ms per call.
 *
 * In-process pairs are the A/B to trust on a loaded machine: both versions see the same load,
 * turn about. With 2 threads (ATTN_AB_THREADS=2) each version starts its own worker, and wall
 * times need a second core that is free.
 *
 * Env: ATTN_AB_A, ATTN_AB_B (core src folders; B defaults to this checkout's), ATTN_AB_THREADS
 * (default 1), ATTN_AB_KEEP (default 1), ATTN_BENCH_SHAPE, ATTN_BENCH_CAUSAL, ATTN_BENCH_RUNS
 * (steps per version, default 30).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ArenaHost } from '../packages/core/src/backend';
import { attentionShape, coreSrc, positiveEnv, stepLayers } from './attentionHarness';
import { cpuWall, loadAndTime, median } from './timing';

type Core = {
  attn: typeof import('../packages/core/src/backends/systolic/attention');
  threads: typeof import('../packages/core/src/threads');
  features: typeof import('../packages/core/src/wasm/features');
  wa: typeof import('../packages/core/src/wasm/webassemblyTypes');
};
const load = async (src: string): Promise<Core> => {
  const at = (rel: string) => import(pathToFileURL(resolve(src, rel)).href);
  return { attn: await at('backends/systolic/attention.ts'), threads: await at('threads.ts'), features: await at('wasm/features.ts'), wa: await at('wasm/webassemblyTypes.ts') };
};
if (process.env.ATTN_AB_A === undefined) throw new Error('bench:attention:ab: set ATTN_AB_A to the core sources to compare with (e.g. a checkout of main: <dir>/packages/core/src)');
const srcs = [resolve(process.env.ATTN_AB_A), resolve(process.env.ATTN_AB_B ?? coreSrc)];
const cores = [await load(srcs[0]), await load(srcs[1])];
const dims = attentionShape('attention:ab');
const { B, T, N, H, causal } = dims;
const RUNS = positiveEnv('attention:ab', 'ATTN_BENCH_RUNS', 30);
const THREADS = positiveEnv('attention:ab', 'ATTN_AB_THREADS', 1);
const KEEP = process.env.ATTN_AB_KEEP !== '0';
for (const c of cores) c.threads.setNumThreads(THREADS);

/**
 * A bump-allocating arena host (the GEMM engine's role in a compiled step), shared by both
 * versions. Like the engine, it holds a view by its byte range in a reserved region, over any
 * buffer `buffer()` handed out: a view taken before the memory grew (a new buffer object over
 * the same bytes) is still read in place, so that growth cannot make both versions copy.
 */
const memory = new cores[0].wa.WA.Memory({ initial: 4096, maximum: 16384, shared: true });
const buffers = new WeakSet<ArrayBufferLike>();
const held: [number, number][] = [];
let top = 64;
const arena: ArenaHost & { holds(v: ArrayBufferView): boolean } = {
  memory,
  maxPages: 16384,
  reserve(bytes: number): number {
    const at = Math.ceil(top / 64) * 64;
    if (at + bytes > memory.buffer.byteLength) memory.grow(Math.ceil((at + bytes - memory.buffer.byteLength) / 65536));
    held.push([at, bytes]);
    top = at + bytes;
    return at;
  },
  release(addr: number): void {
    held.splice(
      held.findIndex(([a]) => a === addr),
      1,
    );
    top = held.length ? held[held.length - 1][0] + held[held.length - 1][1] : 64;
  },
  buffer(): ArrayBufferLike {
    const b = memory.buffer;
    buffers.add(b);
    return b;
  },
  holds: (v: ArrayBufferView) => buffers.has(v.buffer) && held.some(([a, n]) => v.byteOffset >= a && v.byteOffset + v.byteLength <= a + n),
} as never;
const regions: Float32Array[][] = [[], []];
const region =
  (v: number) =>
  (n: number): Float32Array => {
    const at = arena.reserve(n * 4);
    const r = new Float32Array(arena.buffer(), at, n);
    regions[v].push(r);
    return r;
  };
const L = 4;
/** Uniform floats in [-1, 1) from a seeded 32-bit stream (mulberry32): the same operands in every run. */
const seeded = (seed: number): (() => number) => {
  let x = seed >>> 0;
  return () => {
    x = (x + 0x6d2b79f5) >>> 0;
    let t = Math.imul(x ^ (x >>> 15), x | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) / 2 ** 32) * 2 - 1;
  };
};
const operands = Array.from({ length: 4 * L }, (_, j) => {
  const at = arena.reserve(B * T * N * H * 4);
  const r = new Float32Array(arena.buffer(), at, B * T * N * H);
  const next = seeded(0x41b0 + j);
  for (let i = 0; i < r.length; i++) r[i] = next();
  return r;
});
const relaxed = cores[0].features.wasmFeatures().relaxedSimd;
const layers = cores.map((c, v) => {
  let next = 0;
  return stepLayers({ attn: c.attn, shape: dims, relaxed, arena, region: region(v), operand: () => operands[next++], L });
});

const times: [number, number, number, number][][] = [[], []];
const step = (v: number, record: boolean): void => {
  const ms = { fwd: [0, 0], bwd: [0, 0] };
  layers[v].step(KEEP, (dir, call) => {
    const t = cpuWall(call);
    ms[dir][0] += t.cpu;
    ms[dir][1] += t.wall;
  });
  if (record) times[v].push([ms.fwd[0] / L, ms.bwd[0] / L, ms.fwd[1] / L, ms.bwd[1] / L]);
};
for (let i = 0; i < 5; i++) [0, 1].forEach((v) => step(v, false));
for (let i = 0; i < RUNS; i++) for (const v of i % 2 ? [0, 1] : [1, 0]) step(v, true);
for (const c of cores) c.threads.setNumThreads(null);

// (the regions of each version in the same order: per layer out, lse, P, dq, dk, dv; then its 8 MiB of other memory)
let differ = 0;
regions[0].forEach((r, i) => {
  const [a, b] = [new Uint8Array(r.buffer, r.byteOffset, r.byteLength), new Uint8Array(regions[1][i].buffer, regions[1][i].byteOffset, regions[1][i].byteLength)];
  if (i < regions[0].length - 1 && !a.every((x, j) => x === b[j])) differ++;
});

console.log(`bench:attention:ab: [${B}, ${T}, ${N}, ${H}]${causal ? ' causal' : ''}, P ${KEEP ? 'kept' : 'recomputed'}, ${L} layers' calls as in a step, ${THREADS} thread${THREADS > 1 ? 's' : ''}, ${RUNS} steps per version, alternating; median (min) ms per call; ${loadAndTime()}`);
const f = (xs: number[]): string => `${median(xs).toFixed(3)} (${Math.min(...xs).toFixed(3)})`;
for (const v of [0, 1]) {
  const t = times[v];
  console.log(`  ${v ? 'B' : 'A'} ${srcs[v]}\n      fwd CPU ${f(t.map((x) => x[0]))}  wall ${f(t.map((x) => x[2]))}   bwd CPU ${f(t.map((x) => x[1]))}  wall ${f(t.map((x) => x[3]))}`);
}
const d = (j: number): string => (median(times[1].map((x) => x[j])) - median(times[0].map((x) => x[j]))).toFixed(3);
console.log(`  B - A (medians): fwd CPU ${d(0)} wall ${d(2)}, bwd CPU ${d(1)} wall ${d(3)}; results: ${differ === 0 ? 'the same bytes' : `${differ} of ${regions[0].length - 1} regions differ`}`);
// (every operand and result is in the arena: a version that copied any was not timed in place)
const copied = cores.map((c) => c.attn.attentionStats().copiedBytes);
if (copied.some((n) => n > 0)) console.log(`  bytes copied in or out (none expected): A ${copied[0]}, B ${copied[1]}`);
// (a scripted A/B must not miss a difference in results, nor a version that copied)
if (differ > 0 || copied.some((n) => n > 0)) process.exitCode = 1;
