/**
 * Where the GEMM's operand packing spends its time (issue 14, pack16): for the packing calls
 * of the GPT step's products, times the SIMD packing kernel on a source that is hot (just
 * packed, in L1/L2), cold (L2 evicted, as an arena operand written long before), cold after the
 * `touch_rows` sweep (as the engine does), the sweep alone, and a plain SIMD copy of the same
 * source bytes (cold), the memory bound; then the one-pass and two-pass float32 kernels
 * (`TPUKIT_GEMM_PACK_NAN_PASS`) interleaved, hot and cold (the decomposition runs the engine's
 * kernels: two-pass unless TPUKIT_GEMM_PACK_NAN_PASS=0). `npx tsx bench/packCost.ts`.
 * Environment: PACK_COST_REPS=n calls per measurement (default 40); PACK_COST_EVICT_MB=n the
 * eviction copy's size (default 16: out of L2; 600 reaches DRAM); PACK_COST_KB=n packs each 'rc'
 * case in calls of n k values (the decomposition only; default 0: one call).
 */
import { loadavg } from 'node:os';
import { GEMM_SHAPE_5X8, buildGemmModule } from '../packages/core/src/backends/systolic/gemmModule';
import { GemmEngine } from '../packages/core/src/backends/systolic/gemmEngine';
import { ModuleBuilder, OP, SIMD } from '../packages/core/src/wasm/assembler';
import { WA } from '../packages/core/src/wasm/webassemblyTypes';

const engine = new GemmEngine({ relaxed: false, shape: GEMM_SHAPE_5X8 });
const REPS = Number(process.env.PACK_COST_REPS ?? 40);
const MiB = 1 << 20;
const arena = engine.reserve(192 * MiB);
const evictBytes = Number(process.env.PACK_COST_EVICT_MB ?? 16) * MiB;
const evictAt = arena + 160 * MiB;
engine.ensure(Math.max(engine.floor + 64 * MiB, evictAt + 2 * evictBytes + MiB));
const u32 = () => new Uint32Array(engine.memory.buffer);

// A copy kernel (v128 loads and stores, 64 bytes a turn) and an L2 eviction sweep.
const mb = new ModuleBuilder();
mb.importMemory('env', 'mem', { initial: 1, maximum: engine.maxPages, shared: engine.shared });
mb.addFunction('copy', ['i32', 'i32', 'i32'], [], (f) => {
  const [src, dst, n] = [0, 1, 2];
  const end = f.local('i32');
  f.get(src).get(n).op(OP.i32_add).set(end);
  f.loop();
  for (let i = 0; i < 4; i++) f.get(dst).get(src).simdMem(SIMD.v128_load, 16 * i, 16).simdMem(SIMD.v128_store, 16 * i, 16);
  f.get(dst).i32Const(64).op(OP.i32_add).set(dst);
  f.get(src).i32Const(64).op(OP.i32_add).tee(src).get(end).op(OP.i32_lt_u).brIf(0);
  f.end();
});
const helper = new WA.Instance(new WA.Module(mb.toBytes()), { env: { mem: engine.memory } }).exports as unknown as {
  copy(src: number, dst: number, n: number): void;
};

function evict(): void {
  // copy a 16 MiB region (L2 is 2 MiB per core): the operand drops out of L1/L2 (stays in L3);
  // PACK_COST_EVICT_MB=600 pushes it out of this machine's 480 MiB L3 as well
  helper.copy(evictAt, evictAt + evictBytes, evictBytes);
}

interface Case {
  name: string;
  fn: string;
  /** The packing kernel's arguments (the source at a fixed arena address). */
  rs: number;
  ks: number;
  panels: number;
  k: number;
  kp: number;
  R: number;
  /** Calls per 1t GPT step. */
  times: number;
}

// The step's packing calls (f32 sources; A: R = 5, B: R = 8), one per operand role.
const cases: Case[] = [
  // fwd/dX A: activations [2048,128] / [2048,512], k contiguous; R=5, 409 panels (2045 rows)
  { name: 'A kc [2048,128] R5', fn: 'pack_kc_5_f32', rs: 128, ks: 1, panels: 409, k: 128, kp: 128, R: 5, times: 41 },
  { name: 'A kc [2048,512] R5', fn: 'pack_kc_5_f32', rs: 512, ks: 1, panels: 409, k: 512, kp: 512, R: 5, times: 8 },
  // B 'kc' (weights W^T in dX: [128,128]/[128,512])
  { name: 'B kc [128,128] R8', fn: 'pack_kc_8_f32', rs: 128, ks: 1, panels: 16, k: 128, kp: 128, R: 8, times: 16 },
  // dW: A = X^T (rows contiguous) one K block of 256 of [2048,128]: 25 panels x 256 k
  { name: 'A rc X^T [256 of 2048,128] R5', fn: 'pack_rc_5_f32', rs: 1, ks: 128, panels: 25, k: 256, kp: 256, R: 5, times: 8 * 20 },
  { name: 'A rc X^T [256 of 2048,512] R5', fn: 'pack_rc_5_f32', rs: 1, ks: 512, panels: 102, k: 256, kp: 256, R: 5, times: 8 * 4 },
  { name: 'B rc dY [256 of 2048,128] R8', fn: 'pack_rc_8_f32', rs: 1, ks: 128, panels: 16, k: 256, kp: 256, R: 8, times: 8 * 20 },
  { name: 'B rc dY [256 of 2048,512] R8', fn: 'pack_rc_8_f32', rs: 1, ks: 512, panels: 64, k: 256, kp: 256, R: 8, times: 8 * 4 },
];

const fill = u32();
for (let i = arena / 4, e = (arena + 64 * MiB) / 4; i < e; i++) fill[i] = (Math.imul(i, 2654435761) >>> 9) | 0x3f000000;
const dst = engine.floor + 8 * MiB;

function median(x: number[]): number {
  const s = [...x].sort((a, b) => a - b);
  return s[s.length >> 1];
}

const t = performance.now.bind(performance);
console.log(`load ${loadavg().map((x) => x.toFixed(2)).join(' ')}, reps ${REPS}`);
console.log('case'.padEnd(34) + 'MB/call  hot     cold    touch+cold  touch   copy(cold) copy(hot)   us per call; x/step ms: cold touch+cold');
for (const c of cases) {
  const src = arena + 4 * MiB;
  const srcBytesRead = c.rs === 1 ? c.k * c.ks * 4 : c.panels * c.R * c.k * 4;
  const rowBytes = c.rs === 1 ? c.panels * c.R * 4 : c.k * 4;
  const stride = c.rs === 1 ? c.ks * 4 : c.rs * 4;
  const nrows = c.rs === 1 ? c.k : c.panels * c.R;
  const r: Record<string, number[]> = { hot: [], cold: [], touchCold: [], touch: [], copy: [], copyHot: [] };
  const KB = Number(process.env.PACK_COST_KB ?? 0);
  const run = () => {
    if (c.rs !== 1 || KB === 0) return engine.runPackKernel(c.fn, src, c.rs, c.ks, c.panels, c.k, c.kp, dst);
    for (let k0 = 0; k0 < c.k; k0 += KB) engine.runPackKernel(c.fn, src + k0 * c.ks * 4, c.rs, c.ks, c.panels, Math.min(KB, c.k - k0), c.kp, dst + k0 * c.R * 4);
  };
  for (let i = 0; i < REPS; i++) {
    evict();
    let t0 = t();
    run();
    r.cold.push(t() - t0);
    t0 = t();
    run();
    r.hot.push(t() - t0);
    evict();
    t0 = t();
    engine.exports.touch_rows(src, rowBytes, stride, nrows);
    run();
    r.touchCold.push(t() - t0);
    evict();
    t0 = t();
    engine.exports.touch_rows(src, rowBytes, stride, nrows);
    r.touch.push(t() - t0);
    evict();
    t0 = t();
    helper.copy(src, dst, srcBytesRead);
    r.copy.push(t() - t0);
    t0 = t();
    helper.copy(src, dst, srcBytesRead);
    r.copyHot.push(t() - t0);
  }
  const us = (k: string) => (1000 * median(r[k])).toFixed(1).padStart(7);
  console.log(
    `${c.name.padEnd(34)}${(srcBytesRead / MiB).toFixed(2).padStart(5)}  ${us('hot')} ${us('cold')} ${us('touchCold')}    ${us('touch')} ${us('copy')}   ${us('copyHot')}     ${(median(r.cold) * c.times).toFixed(2)} ${(median(r.touchCold) * c.times).toFixed(2)}`,
  );
}

// Kernel variants on the same memory, interleaved: hot and cold per variant.
type PackFn = (src: number, rs: number, ks: number, panels: number, k: number, kp: number, dst: number) => void;
const variants = [false, true].map((nanPass) => {
  const name = nanPass ? 'two-pass' : 'one-pass';
  const wasmBytes = buildGemmModule({ shape: GEMM_SHAPE_5X8, relaxed: false, shared: engine.shared, maxPages: engine.maxPages, packNanPass: nanPass });
  const ex = new WA.Instance(new WA.Module(wasmBytes), { env: { mem: engine.memory } }).exports as unknown as Record<string, PackFn>;
  return { name, ex };
});
console.log(`\nvariants (load ${loadavg().map((x) => x.toFixed(2)).join(' ')}): hot and cold us per call (min / median of ${REPS})`);
for (const c of cases) {
  const src = arena + 4 * MiB;
  const res = variants.map(() => ({ hot: [] as number[], cold: [] as number[] }));
  for (let i = 0; i < REPS; i++) {
    variants.forEach((v, j) => {
      const fn = v.ex[c.fn];
      evict();
      let t0 = t();
      fn(src, c.rs, c.ks, c.panels, c.k, c.kp, dst);
      res[j].cold.push(t() - t0);
      t0 = t();
      fn(src, c.rs, c.ks, c.panels, c.k, c.kp, dst);
      res[j].hot.push(t() - t0);
    });
  }
  const f = (x: number[]) => `${(1000 * Math.min(...x)).toFixed(1)}/${(1000 * median(x)).toFixed(1)}`;
  console.log(`${c.name.padEnd(34)}` + variants.map((v, j) => `${v.name}: hot ${f(res[j].hot)} cold ${f(res[j].cold)}`).join('  '));
}
