/**
 * `npx tsx loopKernels.ts`: the GPT step's loop kernels alone, variants interleaved in one
 * process (BENCHMARKS.md, "loops17"). 1. The forward tanh-GELU (two outputs, gelu(h) and
 * tanh(u), of h = d + b1 over [16,128,512]) for arguments of three spreads: the GPT's (h of
 * std ~0.13: tanh's exp path almost never taken), ±0.5 (about a third of the vectors take it)
 * and std 2 (nearly all do), per tanh code path (`setTanhWalks`), against a kernel of the same
 * traffic without tanh. CPU ms per call from xla-lite's profiler, min / median over interleaved
 * rounds, 1 thread. 2. The GPT step's Adam update (its 68 parameter tensors, donated p, m, v as
 * in the step) with horizontal loop fusion on, on but every kernel kept on the calling thread
 * ('horiz. 1t'), and off, on 1 and 2 threads: wall and CPU ms of the loop kernels per call, min / median. 3. tanh's exp path alone (vmath.ts `vtanhLarge`, with its
 * trimmed exp) against the same formula over the generic `vexp`, over 1M arguments in [-4, 4],
 * ns per element, min / median.
 * Env: LOOP_BENCH_ROUNDS (default 30), LOOP_BENCH_WALKS (default `inline,call,defer`),
 * LOOP_BENCH_PARTS (default `1,2,3`).
 */
import { type Array, np, systolic, tree, withBackend } from '@tpukit/core';
import { type Compiled, getParallelWork, jit, lower, profile, setKernelThreads, setParallelWork, setPipelineOptions } from '@tpukit/xla-lite';
import { setTanhWalks, type TanhWalks } from '@tpukit/xla-lite/internal';
import { wasm } from '@tpukit/core/internal';
import { type E, VecBuilder } from '../packages/xla-lite/src/wasm/vecBuilder';
import { vexp, vtanhLarge } from '../packages/xla-lite/src/wasm/vmath';
import { loadAndTime, median } from './timing';

const ROUNDS = Number(process.env.LOOP_BENCH_ROUNDS ?? 30);
const WARMUP = 5;

/** Normal-ish values (sum of 4 uniforms, scaled to std `s`) from a fixed LCG stream. */
function normal(n: number, seed: number, s: number): Float32Array {
  const v = new Float32Array(n);
  let x = seed * 7919 + 17;
  const u = (): number => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x / 2147483648 - 0.5;
  };
  for (let i = 0; i < n; i++) v[i] = (u() + u() + u() + u()) * Math.sqrt(3) * s;
  return v;
}

const gelu = (d: Array, b: Array): Array[] => {
  const h = np.add(d, b);
  const t = np.tanh(np.multiply(np.add(h, np.multiply(np.multiply(np.multiply(h, h), h), 0.044715)), 0.7978845608));
  return [np.multiply(np.multiply(h, 0.5), np.add(t, 1)), t];
};

/** Wall and CPU ms of the loop kernels in one call of `run`. */
function loopTimes(run: () => void): { wall: number; cpu: number } {
  profile.reset();
  profile.enable(true);
  run();
  profile.enable(false);
  const recs = profile.records('wall').filter((r) => r.category === 'fusion kLoop');
  return { wall: recs.reduce((s, r) => s + r.ms, 0), cpu: recs.reduce((s, r) => s + r.cpuMs, 0) };
}
const loopCpu = (c: Compiled, args: Array[]): number => loopTimes(() => c.call(args)).cpu;

type Leaves = Record<string, Array>;
/** bench/gpt.bench.ts's Adam (lr a traced scalar). */
const adam = (p: Leaves, m: Leaves, v: Leaves, g: Leaves, lrt: Array): Leaves[] => {
  const m2 = tree.map((a: Array, b: Array) => np.add(np.multiply(a, 0.9), np.multiply(b, 1 - 0.9)), m, g) as Leaves;
  const v2 = tree.map((a: Array, b: Array) => np.add(np.multiply(a, 0.999), np.multiply(np.square(b), 1 - 0.999)), v, g) as Leaves;
  const p2 = tree.map((w: Array, a: Array, b: Array) => np.subtract(w, np.multiply(lrt, np.divide(a, np.add(np.sqrt(b), 1e-8)))), p, m2, v2) as Leaves;
  return [p2, m2, v2];
};
/** The GPT's parameter shapes (V=256, d=128, 4 layers, MLP 512). */
function gptShapes(): Record<string, number[]> {
  const D = 128;
  const F = 512;
  const s: Record<string, number[]> = { wte: [256, D], wpe: [128, D], lnfg: [D], lnfb: [D] };
  const per: Record<string, number[]> = { ln1g: [D], ln1b: [D], wq: [D, D], bq: [D], wk: [D, D], bk: [D], wv: [D, D], bv: [D], wo: [D, D], bo: [D], ln2g: [D], ln2b: [D], w1: [D, F], b1: [F], w2: [F, D], b2: [D] };
  for (let l = 0; l < 4; l++) for (const [k, sh] of Object.entries(per)) s[`h${l}.${k}`] = sh;
  return s;
}

/** Part 3: the exp path of tanh, trimmed against generic, in one module over the same arguments. */
function expPath(): void {
  const PAGES = 160;
  const mem = new wasm.WA.Memory({ initial: PAGES });
  const m = new wasm.ModuleBuilder();
  m.importMemory('env', 'mem', { initial: PAGES });
  const SIGN = 0x80000000 | 0;
  const fns: Record<string, (b: VecBuilder, x: E) => E> = {
    trimmed: (b, x) => vtanhLarge(b, x),
    generic: (b, x0) => {
      const x = b.let(x0);
      const s = vexp(b, b.add(b.abs(x), b.abs(x)), false);
      return b.let(b.or(b.sub(b.k(1), b.div(b.k(2), b.add(s, b.k(1)))), b.and(x, b.ki(SIGN))));
    },
  };
  const n = 1 << 20;
  for (const [name, fn] of Object.entries(fns))
    m.addFunction(name, ['i32'], [], (f) => {
      const b = new VecBuilder(f);
      const p = f.local('i32');
      f.i32Const(0).set(p);
      f.block().loop();
      f.get(p).get(0).op(wasm.OP.i32_ge_u).brIf(1);
      f.get(p);
      fn(b, () => void f.get(p).simdMem(wasm.SIMD.v128_load, 4 * n))();
      f.simdMem(wasm.SIMD.v128_store);
      f.get(p).i32Const(16).op(wasm.OP.i32_add).set(p).br(0);
      f.end().end();
    });
  const inst = new wasm.WA.Instance(new wasm.WA.Module(m.toBytes()), { env: { mem } });
  new Float32Array(mem.buffer, 4 * n, n).set(normal(n, 9, 2));
  const times = new Map<string, number[]>();
  for (let r = -WARMUP; r < ROUNDS; r++)
    for (const name of Object.keys(fns)) {
      const t0 = performance.now();
      (inst.exports[name] as (bytes: number) => void)(4 * n);
      const ns = ((performance.now() - t0) * 1e6) / n;
      if (r >= 0) times.set(name, [...(times.get(name) ?? []), ns]);
    }
  console.log(`3. tanh's exp path over 1M arguments (std 2), 1 thread, ns per element min / median: ${Object.keys(fns).map((k) => `${k} ${summary(times.get(k)!)}`).join('   ')}`);
}

const summary = (xs: number[]): string => `${Math.min(...xs).toFixed(3)} / ${median(xs).toFixed(3)}`;

withBackend('systolic', () => {
  console.log(`loopKernels: ${ROUNDS} rounds; ${loadAndTime()}`);
  setKernelThreads(1);
  const n = 16 * 128 * 512;
  const b1 = np.array(normal(512, 3, 0.02), 'float32');
  const spreads: [string, Array][] = [
    ['gpt (std 0.13)', np.array(normal(n, 1, 0.13), 'float32').reshape([16, 128, 512])],
    ['std 0.5', np.array(normal(n, 5, 0.5), 'float32').reshape([16, 128, 512])],
    ['std 2', np.array(normal(n, 2, 2), 'float32').reshape([16, 128, 512])],
  ];
  const v8 = np.array(normal(512 * 8, 4, 0.1), 'float32').reshape([512, 8]);
  const walks = (process.env.LOOP_BENCH_WALKS ?? 'inline,call,defer').split(',') as TanhWalks[];
  const compiled = walks.map((w): [string, Compiled] => {
    setTanhWalks(w);
    try {
      // Both outputs are read by small dots, so they stay in the arena (as in the step).
      return [w, lower((d: Array, b: Array, v: Array) => gelu(d, b).map((y) => np.matmul(y, v)))(spreads[0][1], b1, v8).compile()];
    } finally {
      setTanhWalks(null);
    }
  });
  // The same traffic (one array in, two out) with no tanh: the kernel's memory floor.
  const copy = lower((d: Array, b: Array, v: Array) => {
    const h = np.add(d, b);
    return [np.multiply(h, 0.5), np.add(h, 1)].map((y) => np.matmul(y, v));
  })(spreads[0][1], b1, v8).compile();
  compiled.push(['no tanh', copy]);
  const parts = process.env.LOOP_BENCH_PARTS ?? '1,2,3';
  if (parts.includes('1')) {
  console.log('1. two-output tanh-GELU over [16,128,512], 1 thread, CPU ms per call min / median:');
  for (const [name, d] of spreads) {
    const times = new Map<string, number[]>();
    for (let r = -WARMUP; r < ROUNDS; r++)
      for (const [w, c] of compiled) {
        const t = loopCpu(c, [d, b1, v8]);
        if (r >= 0) times.set(w, [...(times.get(w) ?? []), t]);
      }
    console.log(`  ${name.padEnd(15)} ${compiled.map(([w]) => `${w} ${summary(times.get(w)!)}`).join('   ')}`);
  }

  }
  if (parts.includes('3')) expPath();
  if (!parts.includes('2')) return;
  // 2. Adam over the GPT's parameters, donated state (p, m, v stay in the arena between calls, as in the step).
  const shapes = gptShapes();
  const leaves = (seed: number, s: number): Leaves => Object.fromEntries(Object.entries(shapes).map(([k, sh], j) => [k, np.array(normal(sh.reduce((a, b) => a * b, 1), seed * 100 + j, s), 'float32').reshape(sh)]));
  const g = leaves(4, 0.01);
  const lrt = np.array(1e-4, 'float32');
  const work = getParallelWork();
  const variants = (['horizontal', 'horiz. 1t', 'per leaf'] as const).map((name) => {
    const f = jit(adam, { donateArgnums: [0, 1, 2] });
    let state = [leaves(1, 0.02), leaves(2, 0.001), tree.map((x: Array) => np.abs(x), leaves(3, 1e-5)) as Leaves];
    // (compiled at the first call: the pass on or off; 'horiz. 1t': merged kernels kept off the pool)
    setPipelineOptions({ horizontalLoops: name !== 'per leaf' });
    if (name === 'horiz. 1t') setParallelWork(2 ** 40);
    state = f(state[0], state[1], state[2], g, lrt) as Leaves[];
    setPipelineOptions({});
    setParallelWork(work);
    return { name, step: () => void (state = f(state[0], state[1], state[2], g, lrt) as Leaves[]) };
  });
  console.log('2. Adam over the GPT parameters (68 tensors, 842,496 values), loop kernels ms per call, wall min / median, CPU min / median:');
  for (const threads of [1, 2]) {
    setKernelThreads(threads);
    systolic.setNumThreads(threads);
    const wall = new Map<string, number[]>();
    const cpu = new Map<string, number[]>();
    for (let r = -WARMUP; r < 4 * ROUNDS; r++)
      for (const v of variants) {
        const t = loopTimes(v.step);
        if (r < 0) continue;
        wall.set(v.name, [...(wall.get(v.name) ?? []), t.wall]);
        cpu.set(v.name, [...(cpu.get(v.name) ?? []), t.cpu]);
      }
    for (const v of variants) console.log(`  ${threads}t ${v.name.padEnd(10)} wall ${summary(wall.get(v.name)!)}  CPU ${summary(cpu.get(v.name)!)}`);
  }
  setKernelThreads(1);
  systolic.setNumThreads(1);
});
