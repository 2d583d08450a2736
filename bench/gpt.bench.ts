/**
 * `pnpm bench:gpt`: training throughput of the reference GPT from issue 14, tpukit against
 * jax-js (and PyTorch when it is installed) in the same run.
 *
 * The model: GPT decoder, byte vocabulary V=256, d=128, L=4 layers, H=4 heads of 32, MLP 512 with
 * tanh-GELU, context T=128, batch B=16, pre-LayerNorm with bias, learned positional embedding, LM
 * head tied to the token embedding, causal softmax attention, every linear layer with a bias, f32
 * parameters, Adam (lr 3e-4, b1 .9, b2 .999, eps 1e-8). The embedding and the loss are one-hot
 * matmuls so every framework does the same FLOPs. Batches are random 129-byte windows of a text
 * corpus (a fixed synthetic one, or GPT_BENCH_CORPUS=file), the same batches and the same initial
 * parameters for every framework.
 *
 * tpukit is written as a new user would: `jit(valueAndGrad(loss))` plus a jitted Adam update on
 * the systolic backend (TPU numerics: bf16 operands, f32 accumulation) through xla-lite. jax-js
 * 0.1.25 (wasm backend, `jit(valueAndGrad(loss))` plus a jitted Adam) trains the same model in
 * f32. jax-js has no threads in Node (its wasm backend spawns Web Workers, which Node lacks), so
 * its one-thread number is its number for both columns. PyTorch (`/usr/bin/python3` or `python3`
 * with torch) runs `gpt_torch.py`, the same model in eager f32, at 1 and 2 threads.
 *
 * Checked in code before timing: the parameter count (842,496), the matmul FLOPs per token
 * counted from tpukit's compiled program (every dot_general, 2·M·N·K, one-hot matmuls included:
 * xla-lite runs them as row gathers / segment sums that keep the dot's FLOPs as `nominal_flops`;
 * TPUKIT_ONEHOT=0 keeps the dots, for A/B runs)
 * against the hand count 5,832,704 = 3·F(fwd) − 2·V·d, and the issue's 6N+12LTd = 5,743,104
 * (BENCHMARKS.md explains the difference). Effective GFLOP/s use the counted matmul FLOPs.
 *
 * Env: GPT_BENCH_CORPUS=file trains on that text instead of the fixed synthetic corpus;
 * GPT_BENCH_ROUNDS (default 5) interleaved rounds of GPT_BENCH_STEPS (default 3) steps per
 * framework and thread count (0: only the checks; before each timed round, untimed, a tpukit
 * trainer sets its thread count and wakes the GEMM's workers: switching from 1 to 2 threads
 * costs the next threaded matmul ~5-10 ms, which a training run never pays); GPT_BENCH_TORCH=0 skips PyTorch; GPT_BENCH_HLO=file
 * writes tpukit's optimised loss-and-gradient HLO there (GPT_BENCH_STABLEHLO=file: as StableHLO; GPT_BENCH_STEP_HLO=file: the
 * one-executable step's, Adam included); TPUKIT_PROFILE=1 prints xla-lite's
 * per-instruction profile of one tpukit step per thread count after the timed rounds (and the
 * operand bytes staged / read in place / copied out of the arena in it, its CPU time by thread
 * group and the garbage-collection pauses that fell inside it; each trainer runs one untimed
 * step before its profiled one, GPT_BENCH_PROFILE_WARM=0 profiles the first step after switching;
 * GPT_BENCH_PROFILE_STEPS=n profiles n steps in a row and sums them, which evens out a single
 * step's outliers: a late worker or a compile on the second core; GPT_BENCH_PROFILE_TOP=n lists the n most
 * expensive instructions, 25 by default; with TPUKIT_GEMM_PHASES=1 also the GEMM's packing / kernel / sink ms per step by
 * product shape, core's phase timer); GPT_BENCH_COPIES=1 adds
 * "tpukit Nt copies" peers built with zero-copy dots off (xla-lite's `setZeroCopyDots`);
 * GPT_BENCH_LOOPS_AB=1 adds "tpukit Nt step loops-off" peers compiled with horizontal loop fusion off and
 * tanh's 'call' walks (the loop kernels as before BENCHMARKS.md's "loops17"), for an in-process A/B.
 * GPT_BENCH_BANDED=1 adds "tpukit Nt banded" peers whose dot epilogues run per finished band of
 * the dot's rows instead of as a second pass after the product (xla-lite's `setEpilogueBands`).
 * GPT_BENCH_DONATE_ADAM=1 jits the two-program trainers' Adam with its state donated
 * (`jit(tAdam, { donateArgnums: [0, 1, 2] })`, as the one-executable step donates it): p, m, v
 * then stay in the Adam's arena between steps instead of being copied in and out (default: not
 * donated, the issue's plain `jit(tAdam)`).
 * GPT_BENCH_MEMORY=1 prints the one-executable step's `memoryAnalysis()` (temp and peak bytes) with
 * xla-lite's horizontal column-sum merges on and off (`horizontalSums`).
 * GPT_BENCH_ATTENTION picks tpukit's attention: unset or 'auto' `nn.dotProductAttention(q, k, v,
 * { isCausal: true })` (the fused kernels on the systolic backend), 'xla' its composite, 'manual'
 * the hand-written matmul / mask / softmax / matmul the bench used before (for A/B runs).
 * On Linux the bench prints each trainer's CPU time per step by thread group (threadTimes.ts);
 * TPUKIT_POOL_TIMES=1 adds the calling thread's wall time inside worker-pool jobs.
 * GPT_BENCH_WARMUP (default 2) sets the untimed warm-up steps per trainer.
 * GPT_BENCH_WINDOWS=1 prints each timed round's CLOCK_MONOTONIC window (ns), to cut a `perf record -k mono`
 * profile or V8's `--trace-opt` / `--trace-deopt` lines to the timed steps (BENCHMARKS.md, bg15).
 * GPT_BENCH_SIZE=tiny runs the same model at V=16 d=8 L=4 H=2 T=8 B=2: the per-call overhead of a
 * step (with GPT_BENCH_STEPS in the hundreds; ms CPU per step is its number).
 * GPT_BENCH_GC=1 adds, per trainer, the calling thread's GC pauses per step (gcTimes.ts) and each
 * round's background CPU per step in order (a falling series is V8 still optimising JavaScript).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { type Array, nn, np, systolic, tree, valueAndGrad, withBackend } from '@tpukit/core';
import { arenaTraffic, epilogueBandsEnabled, getKernelThreads, jit, profile, setEpilogueBands, setPipelineOptions, setZeroCopyDots, zeroCopyDotsEnabled } from '@tpukit/xla-lite';
import { dotGroupJoinsOf, dotGroupsOf, type HloComputation, type HloInstruction, nominalFlopsOf, setTanhWalks } from '@tpukit/xla-lite/internal';
import { layerNorm, rand } from './fixtures';
import { envNumber, gemmKernelChoice, wasm } from '@tpukit/core/internal';
import { gcKind, gcRecorder, type GcWindow } from './gcTimes';
import { threadSnapshot, threadTimesAvailable, threadTimesSince, type ThreadGroupTimes } from './threadTimes';
import { median } from './timing';

/**
 * GPT_BENCH_SIZE=tiny: the same model and step at V=16 d=8 L=4 H=2 T=8 B=2 (the same program,
 * the same instructions and leaves): every kernel takes microseconds, so a step measures the
 * per-call work around them (jit's signature, the executable's dispatch, arguments and
 * results). Tokens are the corpus bytes modulo V; the issue's size checks are skipped.
 */
const SIZE = process.env.GPT_BENCH_SIZE ?? 'issue';
if (SIZE !== 'issue' && SIZE !== 'tiny') throw new Error(`bench:gpt: GPT_BENCH_SIZE must be issue or tiny; got ${JSON.stringify(SIZE)}`);
const TINY = SIZE === 'tiny';
/** Digits of the per-step milliseconds printed (tiny steps take about a millisecond). */
const MS_DIGITS = TINY ? 3 : 0;
const V = TINY ? 16 : 256;
const D = TINY ? 8 : 128;
const L = 4;
const H = TINY ? 2 : 4;
const DH = D / H;
const F = 4 * D;
const T = TINY ? 8 : 128;
const B = TINY ? 2 : 16;
const LR = 3e-4;
const B1 = 0.9;
const B2 = 0.999;
const EPS = 1e-8;
/** A count from the environment: an integer >= `min` (core's envNumber: a bad value stops the bench naming the variable and value). */
const envCount = (name: string, dflt: number, min: number): number => envNumber(name, min, 2 ** 52) ?? dflt;
const ROUNDS = envCount('GPT_BENCH_ROUNDS', 5, 0);
const STEPS = envCount('GPT_BENCH_STEPS', 3, 1);
// Untimed warm-up steps per trainer (compile + 2 by default). V8 keeps optimising the step's
// JavaScript for some 30-60 steps (background CPU; GPT_BENCH_GC=1 shows it per round), so a
// larger value measures the steady state of a long training run.
const WARMUP = envCount('GPT_BENCH_WARMUP', 2, 0);
/** Zero-copy dots as the environment sets them (TPUKIT_ZERO_COPY=0: off); GPT_BENCH_COPIES=1 adds peers with them off. */
const ZERO_COPY = zeroCopyDotsEnabled();
/** Banded dot epilogues as the environment sets them (TPUKIT_EPILOGUE_BANDS=1: on); GPT_BENCH_BANDED=1 adds peers with them on. */
const BANDS = epilogueBandsEnabled();
const DONATE_ADAM = process.env.GPT_BENCH_DONATE_ADAM === '1';
const TOKENS = B * T;
/** GPT_BENCH_WINDOWS=1: prints each timed round's CLOCK_MONOTONIC window in ns (`window <trainer>|<round>|<t0>|<t1>`), to cut a `perf record -k mono` profile to the timed steps. */
const WINDOWS = process.env.GPT_BENCH_WINDOWS === '1';

/** Parameter count and FLOPs per token, from the configuration. */
export const PARAMS = V * D + T * D + L * (4 * D + 4 * (D * D + D) + D * F + F + F * D + D) + 2 * D;
/** Forward matmul FLOPs per token: embedding one-hot, q/k/v/o, MLP, scores and weighted sum over all T keys, LM head. */
const FWD = 2 * V * D + L * (2 * 4 * D * D + 2 * 2 * D * F + 2 * 2 * T * D) + 2 * D * V;
/** fwd + 2·fwd backward, less the input gradient of the one-hot embedding matmul (no one needs it). */
export const FLOPS_PER_TOKEN = 3 * FWD - 2 * V * D;
/** The issue's count: 6·(parameters without the positional embedding) + 12·L·T·d. */
export const FORMULA_FLOPS_PER_TOKEN = 6 * (PARAMS - T * D) + 12 * L * T * D;

const LAYER_KEYS = ['ln1g', 'ln1b', 'wq', 'bq', 'wk', 'bk', 'wv', 'bv', 'wo', 'bo', 'ln2g', 'ln2b', 'w1', 'b1', 'w2', 'b2'] as const;
type LayerKey = (typeof LAYER_KEYS)[number];

/** Initial parameters as plain Float32Arrays, so every framework starts from the same numbers. */
function initHost(): { shapes: Record<string, number[]>; values: Record<string, Float32Array> } {
  const shapes: Record<string, number[]> = { wte: [V, D], wpe: [T, D], lnfg: [D], lnfb: [D] };
  const per: Record<LayerKey, number[]> = { ln1g: [D], ln1b: [D], wq: [D, D], bq: [D], wk: [D, D], bk: [D], wv: [D, D], bv: [D], wo: [D, D], bo: [D], ln2g: [D], ln2b: [D], w1: [D, F], b1: [F], w2: [F, D], b2: [D] };
  for (let l = 0; l < L; l++) for (const k of LAYER_KEYS) shapes[`h${l}.${k}`] = per[k];
  const values: Record<string, Float32Array> = {};
  let seed = 1;
  for (const [name, shape] of Object.entries(shapes)) {
    const key = name.split('.').pop()!;
    const n = shape.reduce((a, b) => a * b, 1);
    if (/^ln.g$|^lnfg$/.test(key)) values[name] = new Float32Array(n).fill(1);
    else if (shape.length === 1) values[name] = new Float32Array(n);
    else values[name] = rand(shape, seed++, key === 'w2' || key === 'wo' ? 0.02 / Math.sqrt(2 * L) : 0.02).dataSync() as Float32Array;
  }
  return { shapes, values };
}

/**
 * The training text: GPT_BENCH_CORPUS=file, or by default ~256 KB of sentences from a small fixed
 * grammar, generated from a fixed seed: the same bytes in every checkout. (The repository's
 * markdown files served until 2026-11-26; every doc edit then moved the printed losses.)
 */
function corpus(): Buffer {
  const file = process.env.GPT_BENCH_CORPUS;
  if (file) {
    let text: Buffer;
    try {
      text = readFileSync(file);
    } catch (e) {
      throw new Error(`bench:gpt: GPT_BENCH_CORPUS=${file} cannot be read: ${(e as Error).message}`);
    }
    if (text.length < T + 2) throw new Error(`bench:gpt: GPT_BENCH_CORPUS=${file} has ${text.length} bytes; a training window needs at least ${T + 2}`);
    return text;
  }
  const words = [
    ['the compiler', 'a worker thread', 'the optimizer', 'each kernel', 'the mesh', 'a checkpoint', 'the input pipeline', 'every shard', 'the trainer'],
    ['fuses', 'packs', 'reads', 'writes', 'splits', 'restores', 'shuffles', 'counts', 'rounds'],
    ['the matmul', 'two buffers', 'a batch of tokens', 'the gradients', 'its state', 'eight rows', 'the attention scores', 'one array', 'the loss'],
    ['before the step', 'in bf16', 'on two cores', 'without a copy', 'after the barrier', 'at step 42', 'and then waits', 'twice', 'in order'],
  ];
  let r = 2026;
  const pick = (xs: string[]): string => xs[(r = (r * 1103515245 + 12345) % 2147483648) % xs.length];
  const out: string[] = [];
  for (let n = 0; n < 256 * 1024; ) {
    const first = pick(words[0]);
    const line = `${first[0].toUpperCase()}${first.slice(1)} ${pick(words[1])} ${pick(words[2])} ${pick(words[3])}.${r % 5 === 0 ? '\n' : ' '}`;
    out.push(line);
    n += line.length;
  }
  return Buffer.from(out.join(''), 'latin1');
}

/** Random (T+1)-byte windows of the corpus, as [B, T] inputs and targets. */
function batches(count: number): { x: Int32Array; y: Int32Array }[] {
  const text = corpus();
  let s = 12345;
  const next = () => (s = (s * 1103515245 + 12345) % 2147483648);
  return globalThis.Array.from({ length: count }, () => {
    const x = new Int32Array(TOKENS);
    const y = new Int32Array(TOKENS);
    for (let b = 0; b < B; b++) {
      const at = next() % (text.length - T - 1);
      for (let t = 0; t < T; t++) {
        x[b * T + t] = text[at + t] % V;
        y[b * T + t] = text[at + t + 1] % V;
      }
    }
    return { x, y };
  });
}

// ---------------------------------------------------------------- tpukit

type TParams = Record<string, Array>;

/**
 * Attention in tpukit's model: GPT_BENCH_ATTENTION unset (or 'auto') calls `nn.dotProductAttention`
 * with `isCausal` and its default implementation (the fused kernels on the systolic backend);
 * 'xla' forces its composite; 'manual' is the hand-written matmul / mask / softmax / matmul.
 */
const ATTENTION = process.env.GPT_BENCH_ATTENTION ?? 'auto';
if (!['auto', 'xla', 'manual'].includes(ATTENTION)) throw new Error(`bench:gpt: GPT_BENCH_ATTENTION must be auto, xla or manual; got ${JSON.stringify(ATTENTION)}`);

/** Causal self-attention of q, k, v [B, T, D] (heads of DH): [B, T, D]. */
function tAttention(q: Array, k: Array, v: Array): Array {
  if (ATTENTION !== 'manual') {
    const split = (a: Array) => a.reshape([B, T, H, DH]);
    return nn.dotProductAttention(split(q), split(k), split(v), { isCausal: true, implementation: ATTENTION === 'xla' ? 'xla' : undefined }).reshape([B, T, D]);
  }
  const heads = (a: Array) => np.transpose(a.reshape([B, T, H, DH]), [0, 2, 1, 3]);
  const mask = np.tri(T, T, 0, 'bool');
  const s = np.multiply(np.matmul(heads(q), np.swapaxes(heads(k), -1, -2)), 1 / Math.sqrt(DH));
  const att = np.matmul(nn.softmax(np.where(mask, s, -1e9), { axis: -1 }), heads(v));
  return np.transpose(att, [0, 2, 1, 3]).reshape([B, T, D]);
}

function tLoss(p: TParams, x: Array, y: Array): Array {
  const dense = (a: Array, w: string, bias: string) => np.add(np.matmul(a, p[w]), p[bias]);
  let h = np.add(np.matmul(nn.oneHot(x, V), p.wte), p.wpe);
  for (let l = 0; l < L; l++) {
    const k = (s: LayerKey) => `h${l}.${s}`;
    const a = layerNorm(h, p[k('ln1g')], p[k('ln1b')]);
    const att = tAttention(dense(a, k('wq'), k('bq')), dense(a, k('wk'), k('bk')), dense(a, k('wv'), k('bv')));
    h = np.add(h, dense(att, k('wo'), k('bo')));
    const m = layerNorm(h, p[k('ln2g')], p[k('ln2b')]);
    h = np.add(h, dense(nn.gelu(dense(m, k('w1'), k('b1')), { approximate: true }), k('w2'), k('b2')));
  }
  const logits = np.matmul(layerNorm(h, p.lnfg, p.lnfb), np.transpose(p.wte));
  const logp = nn.logSoftmax(logits, { axis: -1 });
  return np.negative(np.mean(np.sum(np.multiply(logp, nn.oneHot(y, V)), { axis: -1 })));
}

/** Adam with the bias corrections folded into the step size (`lrt`, a traced scalar: no recompiles). */
function tAdam(p: TParams, m: TParams, v: TParams, g: TParams, lrt: Array): [TParams, TParams, TParams] {
  const m2 = tree.map((a: Array, b: Array) => np.add(np.multiply(a, B1), np.multiply(b, 1 - B1)), m, g) as TParams;
  const v2 = tree.map((a: Array, b: Array) => np.add(np.multiply(a, B2), np.multiply(np.square(b), 1 - B2)), v, g) as TParams;
  const p2 = tree.map((w: Array, a: Array, b: Array) => np.subtract(w, np.multiply(lrt, np.divide(a, np.add(np.sqrt(b), EPS)))), p, m2, v2) as TParams;
  return [p2, m2, v2];
}

/** Step size of Adam step `t` (from 1) with both bias corrections folded in. */
const stepSize = (t: number) => (LR * Math.sqrt(1 - B2 ** t)) / (1 - B1 ** t);

/**
 * Sum of 2·|out|·K over every dot_general in a compiled computation (fusion bodies included); a
 * fused attention counts as the matmuls it replaces (QK^T and PV forward; dP, dV, dQ, dK backward,
 * each 2·B·N·T·S·H, the causal half included as in the composite), so the count is the same;
 * a one-hot dot that xla-lite runs as a gather or segment sum counts the FLOPs of the dot it
 * replaced (its `nominalFlops`).
 */
function dotFlops(c: HloComputation): number {
  let f = 0;
  for (const i of c.instructions) {
    for (const sub of i.called) f += dotFlops(sub);
    f += nominalFlopsOf(i) ?? 0;
    const name = i.prim?.name;
    if (name === 'dot_product_attention' || name === 'dot_product_attention_fwd' || name === 'dot_product_attention_bwd') {
      const [b, t, n, h] = i.operands[0].shape.shape;
      f += (name === 'dot_product_attention_bwd' ? 4 : 2) * 2 * b * n * t * i.operands[1].shape.shape[1] * h;
    }
    if (name !== 'dot_general') continue;
    const [[lc]] = (i.params as { dimensionNumbers: [[number[], number[]], [number[], number[]]] }).dimensionNumbers;
    const k = lc.reduce((a, d) => a * i.operands[0].shape.shape[d], 1);
    f += 2 * i.shape.shape.reduce((a, b) => a * b, 1) * k;
  }
  return f;
}

interface Trainer {
  name: string;
  /**
   * Untimed: makes the process ready for this trainer's steps (tpukit: its thread count, with
   * the workers woken by one threaded matmul). The bench alternates 1- and 2-thread trainers
   * every round; a training run never switches, so the switch is kept out of the timings.
   */
  prepare?(): void;
  /** Runs `n` steps over `data` from `from`; returns the last loss. */
  steps(from: number, n: number): Promise<number>;
}

/** Adam's moments. */
interface TOpt {
  m: TParams;
  v: TParams;
}

/**
 * The whole training step as a JAX user writes it: loss, gradients and the Adam update in one
 * function, jitted once with the parameters and the optimizer state donated (their storage is
 * reused for the updated state).
 */
function tStep(p: TParams, opt: TOpt, batch: { x: Array; y: Array }, lrt: Array): [Array, TParams, TOpt] {
  const [l, g] = valueAndGrad(tLoss)(p, batch.x, batch.y) as [Array, TParams];
  const [p2, m2, v2] = tAdam(p, opt.m, opt.v, g, lrt);
  return [l, p2, { m: m2, v: v2 }];
}

/**
 * tpukit's trainer. `fused`: the step is one jitted function (`tStep`, donated state); otherwise
 * `jit(valueAndGrad(loss))` plus a jitted Adam, two programs per step.
 */
function tpukitTrainer(host: ReturnType<typeof initHost>, data: ReturnType<typeof batches>, threads: number, fused: boolean, copies = false, banded = false, loopsOff = false): Trainer {
  return withBackend('systolic', () => {
    let p: TParams = {};
    for (const [k, v] of Object.entries(host.values)) p[k] = np.array(v.slice()).reshape(host.shapes[k]);
    let opt: TOpt = { m: tree.map((a: Array) => np.zerosLike(a), p) as TParams, v: tree.map((a: Array) => np.zerosLike(a), p) as TParams };
    const vg = jit(valueAndGrad(tLoss));
    const adam = jit(tAdam, DONATE_ADAM ? { donateArgnums: [0, 1, 2] } : {});
    const step = jit(tStep, { donateArgnums: [0, 1] });
    const xs = data.map((d) => np.array(d.x).reshape([B, T]));
    // A matmul large enough for the GEMM's threads (see `prepare`).
    const warm = np.ones([256, 512]);
    const ys = data.map((d) => np.array(d.y).reshape([B, T]));
    let t = 0;
    const trainer: Trainer = {
      name: `tpukit ${threads}t${fused ? ' step' : ''}${copies ? ' copies' : ''}${banded ? ' banded' : ''}${loopsOff ? ' loops-off' : ''}`,
      prepare() {
        systolic.setNumThreads(threads);
        withBackend('systolic', () => np.matmul(warm, np.transpose(warm)).dataSync());
      },
      async steps(from, n) {
        systolic.setNumThreads(threads);
        // (Read when the programs compile, at the first call.)
        setZeroCopyDots(!copies && ZERO_COPY);
        setEpilogueBands(banded || BANDS);
        if (loopsOff) {
          setPipelineOptions({ horizontalLoops: false });
          setTanhWalks('call');
        }
        let loss = NaN;
        try {
          withBackend('systolic', () => {
            for (let s = 0; s < n; s++) {
              const x = xs[(from + s) % xs.length];
              const y = ys[(from + s) % ys.length];
              let l: Array;
              if (fused) [l, p, opt] = step(p, opt, { x, y }, np.array(stepSize(++t)));
              else {
                let g: TParams;
                [l, g] = vg(p, x, y) as [Array, TParams];
                const [p2, m2, v2] = adam(p, opt.m, opt.v, g, np.array(stepSize(++t)));
                p = p2;
                opt = { m: m2, v: v2 };
              }
              loss = l.item() as number;
            }
          });
        } finally {
          if (loopsOff) {
            setPipelineOptions({});
            setTanhWalks(null);
          }
        }
        return loss;
      },
    };
    return trainer;
  });
}

/** Checks the model size and counts the matmul FLOPs of tpukit's compiled step; throws on a mismatch. */
function checkModel(host: ReturnType<typeof initHost>, data: ReturnType<typeof batches>): void {
  const n = Object.values(host.values).reduce((a, v) => a + v.length, 0);
  if (n !== PARAMS || (!TINY && PARAMS !== 842_496)) throw new Error(`bench:gpt: the model has ${n} parameters (configured ${PARAMS}); the issue's model has 842,496`);
  withBackend('systolic', () => {
    const p: TParams = {};
    for (const [k, v] of Object.entries(host.values)) p[k] = np.array(v).reshape(host.shapes[k]);
    const x = np.array(data[0].x).reshape([B, T]);
    const compiled = jit(valueAndGrad(tLoss)).lower(p, x, x).compile();
    if (process.env.GPT_BENCH_HLO) writeFileSync(process.env.GPT_BENCH_HLO, compiled.asText());
    if (process.env.GPT_BENCH_STEP_HLO) {
      const opt: TOpt = { m: tree.map((a: Array) => np.zerosLike(a), p) as TParams, v: tree.map((a: Array) => np.zerosLike(a), p) as TParams };
      const stepCompiled = jit(tStep, { donateArgnums: [0, 1] }).lower(p, opt, { x, y: x }, np.array(stepSize(1))).compile();
      writeFileSync(process.env.GPT_BENCH_STEP_HLO, stepCompiled.asText());
      // (the text is the module before horizontal loop fusion, which only the executable sees)
      console.log(`  step: ${stepCompiled.passStats.horizontalLoops} horizontal loop merges, ${stepCompiled.module.entry.instructions.filter((i) => i.opcode === 'fusion' && (i.params as { kind?: string }).kind === 'kLoop').length} loop fusions run`);
    }
    if (process.env.GPT_BENCH_STABLEHLO) writeFileSync(process.env.GPT_BENCH_STABLEHLO, compiled.asStableHlo());
    if (process.env.GPT_BENCH_TRAFFIC === '1') {
      const shape = (i: HloInstruction): string => `${i.operands.map((o) => `[${o.shape.shape.join(',')}]`).join('x')}->[${i.shape.shape.join(',')}]`;
      console.log(`  dot groups in jit(valueAndGrad(loss)) (passes/dotGroups.ts): ${compiled.passStats.dotGroups} dots in ${dotGroupsOf(compiled.module.entry).length} groups: ${dotGroupsOf(compiled.module.entry).map((g) => g.map(shape).join(' + ')).join('; ')}`);
      // Each group's window (dotGroupJoinsOf): the instructions it may run beside; the executable keeps those that run on the calling thread alone.
      const order = compiled.module.entry.instructions;
      const ends = dotGroupJoinsOf(compiled.module.entry);
      const windows = dotGroupsOf(compiled.module.entry).map((g, q) => {
        const w = ends[q];
        if (!w) return '-';
        const from = order.indexOf(g[g.length - 1]) + 1;
        return order.slice(from, order.indexOf(w) + 1).filter((i) => i.opcode === 'fusion').map((i) => `${(i.params as { kind: string }).kind}->${i.shapes.map((sh) => `[${sh.shape.join(',')}]`).join('')}${i.called[0].instructions.some((m) => m.opcode === 'reduce') ? '(reduce)' : ''}`).join(' ');
      });
      console.log(`  async windows: ${compiled.stats.asyncGroups} groups started before ${compiled.stats.asyncWindowSteps} steps (all), per group: ${windows.join(' | ')}`);
    }
    if (process.env.GPT_BENCH_MEMORY === '1') {
      // The one-executable step's buffer assignment with and without horizontal column-sum merges (xla-lite `horizontalSums`).
      const opt: TOpt = { m: tree.map((a: Array) => np.zerosLike(a), p) as TParams, v: tree.map((a: Array) => np.zerosLike(a), p) as TParams };
      const lowered = jit(tStep, { donateArgnums: [0, 1] }).lower(p, opt, { x, y: x }, np.array(stepSize(1)));
      const MiB = (b: number): string => (b / 2 ** 20).toFixed(2);
      for (const horizontalSums of [true, false]) {
        const m = lowered.compile({ horizontalSums }).memoryAnalysis();
        console.log(`  step memoryAnalysis, horizontalSums ${horizontalSums}: temp ${MiB(m.tempBytes)} MiB (${m.tempBytes} B), peak ${MiB(m.peakBytes)} MiB (${m.peakBytes} B), args ${MiB(m.argumentBytes)} MiB, out ${MiB(m.outputBytes)} MiB, aliased ${MiB(m.aliasBytes)} MiB`);
      }
    }
    const counted = dotFlops(compiled.module.entry) / TOKENS;
    if (counted !== FLOPS_PER_TOKEN) throw new Error(`bench:gpt: the compiled step does ${counted} matmul FLOP per token; the hand count is ${FLOPS_PER_TOKEN}`);
  });
}

// ---------------------------------------------------------------- jax-js

// jax-js's arrays are reference counted: every function consumes its array arguments, and
// `.ref` adds a reference for a value used again. The functions below follow that rule.
type JArr = {
  ref: JArr;
  shape: number[];
  add(o: JArr | number): JArr;
  sub(o: JArr | number): JArr;
  mul(o: JArr | number): JArr;
  div(o: JArr | number): JArr;
  reshape(s: number[]): JArr;
  transpose(p: number[]): JArr;
  mean(axis: number, o?: { keepdims?: boolean }): JArr;
  sum(axis?: number): JArr;
  data(): Promise<Float32Array>;
  dispose(): void;
};
interface JaxJs {
  init(...d: string[]): Promise<string[]>;
  defaultDevice(d: string): void;
  jit<F>(f: F): F;
  valueAndGrad<F>(f: F): (...a: unknown[]) => [JArr, Record<string, JArr>];
  blockUntilReady(x: unknown): Promise<unknown>;
  tree: { map(f: (...a: JArr[]) => JArr, t: object, ...r: object[]): Record<string, JArr> };
  numpy: {
    array(x: Float32Array | Int32Array, o?: { dtype?: unknown }): JArr;
    int32: unknown;
    bool: unknown;
    matmul(a: JArr, b: JArr): JArr;
    sqrt(a: JArr): JArr;
    square(a: JArr): JArr;
    reciprocal(a: JArr): JArr;
    where(c: JArr, a: JArr, b: JArr | number): JArr;
    tri(n: number, m: number, k: number, o: { dtype: unknown }): JArr;
    swapaxes(a: JArr, i: number, j: number): JArr;
    transpose(a: JArr, p?: number[]): JArr;
  };
  nn: { gelu(a: JArr, o: { approximate: boolean }): JArr; softmax(a: JArr, axis: number): JArr; logSoftmax(a: JArr, axis: number): JArr; oneHot(a: JArr, n: number): JArr };
}

async function jaxjsTrainer(host: ReturnType<typeof initHost>, data: ReturnType<typeof batches>): Promise<Trainer | null> {
  let jax: JaxJs;
  try {
    const g = globalThis as { navigator?: object };
    g.navigator ??= { hardwareConcurrency: 1, userAgent: 'node' };
    jax = (await import('@jax-js/jax')) as unknown as JaxJs;
    if (!(await jax.init('wasm')).includes('wasm')) return null;
    jax.defaultDevice('wasm');
  } catch (e) {
    console.log(`jax-js could not run: ${(e as Error).message}`);
    return null;
  }
  const jnp = jax.numpy;
  const ln = (x: JArr, g: JArr, b: JArr): JArr => {
    const xc = x.ref.sub(x.mean(-1, { keepdims: true }));
    const v = jnp.square(xc.ref).mean(-1, { keepdims: true });
    return xc.mul(jnp.reciprocal(jnp.sqrt(v.add(1e-5)))).mul(g).add(b);
  };
  const heads = (a: JArr) => a.reshape([B, T, H, DH]).transpose([0, 2, 1, 3]);
  const loss = (p: Record<string, JArr>, x: JArr, y: JArr): JArr => {
    const dense = (a: JArr, w: string, bias: string) => jnp.matmul(a, p[w]).add(p[bias]);
    const mask = jnp.tri(T, T, 0, { dtype: jnp.bool });
    let h = jnp.matmul(jax.nn.oneHot(x, V), p.wte.ref).add(p.wpe);
    for (let l = 0; l < L; l++) {
      const k = (s: LayerKey) => `h${l}.${s}`;
      const a = ln(h.ref, p[k('ln1g')], p[k('ln1b')]);
      const q = heads(dense(a.ref, k('wq'), k('bq')));
      const kk = heads(dense(a.ref, k('wk'), k('bk')));
      const v = heads(dense(a, k('wv'), k('bv')));
      const s = jnp.matmul(q, jnp.swapaxes(kk, -1, -2)).mul(1 / Math.sqrt(DH));
      const att = jnp.matmul(jax.nn.softmax(jnp.where(mask.ref, s, -1e9), -1), v);
      h = h.add(dense(att.transpose([0, 2, 1, 3]).reshape([B, T, D]), k('wo'), k('bo')));
      const m = ln(h.ref, p[k('ln2g')], p[k('ln2b')]);
      h = h.add(dense(jax.nn.gelu(dense(m, k('w1'), k('b1')), { approximate: true }), k('w2'), k('b2')));
    }
    mask.dispose();
    const logits = jnp.matmul(ln(h, p.lnfg, p.lnfb), jnp.transpose(p.wte));
    return jax.nn.logSoftmax(logits, -1).mul(jax.nn.oneHot(y, V)).sum(-1).mean(0).mean(0).mul(-1);
  };
  const adam = (p: Record<string, JArr>, m: Record<string, JArr>, v: Record<string, JArr>, g: Record<string, JArr>, lrt: JArr) => {
    const m2 = jax.tree.map((a, b) => a.mul(B1).add(b.ref.mul(1 - B1)), m, g);
    const v2 = jax.tree.map((a, b) => a.mul(B2).add(jnp.square(b).mul(1 - B2)), v, g);
    const keys = Object.keys(p);
    const p2: Record<string, JArr> = {};
    for (const k of keys) p2[k] = p[k].sub(lrt.ref.mul(m2[k].ref.div(jnp.sqrt(v2[k].ref).add(EPS))));
    lrt.dispose();
    return [p2, m2, v2];
  };
  const vg = jax.jit(jax.valueAndGrad(loss));
  const jadam = jax.jit(adam) as unknown as (...a: unknown[]) => [Record<string, JArr>, Record<string, JArr>, Record<string, JArr>];
  let p: Record<string, JArr> = {};
  let m: Record<string, JArr> = {};
  let v: Record<string, JArr> = {};
  for (const [k, a] of Object.entries(host.values)) {
    p[k] = jnp.array(a.slice()).reshape(host.shapes[k]);
    m[k] = jnp.array(new Float32Array(a.length)).reshape(host.shapes[k]);
    v[k] = jnp.array(new Float32Array(a.length)).reshape(host.shapes[k]);
  }
  let t = 0;
  return {
    name: 'jax-js 1t',
    async steps(from, n) {
      let loss = NaN;
      for (let s = 0; s < n; s++) {
        const d = data[(from + s) % data.length];
        const x = jnp.array(d.x, { dtype: jnp.int32 }).reshape([B, T]);
        const y = jnp.array(d.y, { dtype: jnp.int32 }).reshape([B, T]);
        const pr: Record<string, JArr> = {};
        for (const k of Object.keys(p)) pr[k] = p[k].ref;
        const [l, g] = vg(pr, x, y);
        [p, m, v] = jadam(p, m, v, g, jnp.array(new Float32Array([stepSize(++t)])).reshape([]));
        loss = (await l.data())[0];
        await jax.blockUntilReady(p);
      }
      return loss;
    },
  };
}

// ---------------------------------------------------------------- PyTorch

/** The PyTorch peer's tokens per second and per CPU-second at `threads`, or the reason it was skipped. */
function torchPeer(threads: number, steps: number): { tps: number; cpu: number } | string {
  if (process.env.GPT_BENCH_TORCH === '0') return 'skipped (GPT_BENCH_TORCH=0)';
  const script = join(dirname(fileURLToPath(import.meta.url)), 'gpt_torch.py');
  for (const py of ['/usr/bin/python3', 'python3']) {
    const probe = spawnSync(py, ['-c', 'import torch'], { encoding: 'utf8' });
    if (probe.status !== 0) continue;
    const env = { ...process.env, OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: String(threads), MKL_NUM_THREADS: String(threads) };
    const r = spawnSync(py, [script, String(threads), String(steps)], { encoding: 'utf8', env });
    if (r.status !== 0) return `failed: ${r.stderr.trim().split('\n').pop()}`;
    const j = JSON.parse(r.stdout.trim().split('\n').pop()!) as { tokensPerSecond: number; tokensPerCpuSecond: number };
    return { tps: j.tokensPerSecond, cpu: j.tokensPerCpuSecond };
  }
  return 'skipped (no python3 with torch: apt-get install python3-torch libopenblas0-pthread; without OpenBLAS Debian torch runs the reference BLAS at ~2.6 GFLOP/s)';
}

// ---------------------------------------------------------------- main


/** The GEMM micro-kernel the systolic engine uses, and how it was chosen (core gemmTune.ts). */
function kernelLabel(): string {
  const { shape } = systolic.backend.engine;
  const c = gemmKernelChoice(systolic.backend.usesRelaxedSimd);
  return `${shape.mr}x${shape.nv * 4} (${c.by === 'env' ? 'TPUKIT_GEMM_KERNEL' : `measured: 5x8 / 4x8 ${c.gain!.toFixed(2)}`})`;
}

async function main(): Promise<void> {
  const host = initHost();
  const data = batches(64);
  checkModel(host, data);
  if (ROUNDS === 0) return;
  const cores = systolic.getNumThreads();
  console.log(`bench:gpt: GPT V=${V} d=${D} L=${L} H=${H} MLP ${F} T=${T} B=${B}, ${PARAMS.toLocaleString('en')} params; ${(FLOPS_PER_TOKEN / 1e6).toFixed(3)} MFLOP/token counted in the compiled step (one-hot matmuls run as gathers count the dots they replace; issue's 6N+12LTd: ${(FORMULA_FLOPS_PER_TOKEN / 1e6).toFixed(3)}); ${ROUNDS} rounds x ${STEPS} steps; ${cores} cores; tpukit ${systolic.backend.usesRelaxedSimd ? 'relaxed-SIMD FMA' : 'plain SIMD'}, GEMM kernel ${kernelLabel()}, attention ${ATTENTION}; load ${loadavg().map((x) => x.toFixed(1)).join(' ')}; ${new Date().toISOString()}`);
  // GPT_BENCH_ONLY (comma-separated names, e.g. "tpukit 1t,tpukit 1t step") keeps only those
  // trainers: quick interleaved A/B runs of one configuration.
  const only = process.env.GPT_BENCH_ONLY?.split(',').map((x) => x.trim());
  const keep = (name: string) => !only || only.includes(name);
  const trainers: Trainer[] = [];
  for (const th of cores >= 2 ? [1, 2] : [1]) for (const fused of [false, true]) if (keep(`tpukit ${th}t${fused ? ' step' : ''}`)) trainers.push(tpukitTrainer(host, data, th, fused));
  // GPT_BENCH_COPIES=1 adds peers with zero-copy dots off (arena copies; issue 14's A/B).
  if (process.env.GPT_BENCH_COPIES === '1') for (const th of cores >= 2 ? [1, 2] : [1]) if (keep(`tpukit ${th}t`)) trainers.push(tpukitTrainer(host, data, th, false, true));
  // GPT_BENCH_BANDED=1 adds peers whose dot epilogues run per finished band of rows (issue 14's A/B of banded epilogues).
  // GPT_BENCH_LOOPS_AB=1 adds one-executable step peers compiled without loops17's changes (horizontal loop fusion off, tanh's 'call' walks).
  if (process.env.GPT_BENCH_LOOPS_AB === '1') for (const th of cores >= 2 ? [1, 2] : [1]) if (keep(`tpukit ${th}t step`)) trainers.push(tpukitTrainer(host, data, th, true, false, false, true));
  if (process.env.GPT_BENCH_BANDED === '1') for (const th of cores >= 2 ? [1, 2] : [1]) for (const fused of [false, true]) if (keep(`tpukit ${th}t${fused ? ' step' : ''}`)) trainers.push(tpukitTrainer(host, data, th, fused, false, true));
  const jx = keep('jax-js 1t') ? await jaxjsTrainer(host, data) : null;
  if (jx) trainers.push(jx);
  // Warm-up: compile and run two steps each (same data), and show that the losses agree.
  const first: string[] = [];
  for (const tr of trainers) {
    const t0 = performance.now();
    const l = await tr.steps(0, WARMUP);
    first.push(`${tr.name} loss ${l.toFixed(4)} (compile + ${WARMUP} steps ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  }
  console.log(`  after ${WARMUP} steps: ${first.join('; ')}`);
  const tps = trainers.map((): number[] => []);
  // Tokens per second of this process's CPU time (user + system, all threads): on a shared
  // machine a one-thread run's CPU time does not count the time other processes held the core.
  const cpuTps = trainers.map((): number[] => []);
  // CPU-seconds per wall-second (all threads): how busy the threads kept the cores.
  const cpuPerWall = trainers.map((): number[] => []);
  // Per round, each thread group's CPU and wait time (threadTimes.ts): who used the cores.
  const groups = trainers.map((): ThreadGroupTimes[] => []);
  // With TPUKIT_POOL_TIMES=1: per round, the calling thread's wall ms inside pool jobs and waiting in them.
  const jobs = trainers.map((): { n: number; ms: number; wait: number; wall: number; switches: number; pools: Record<string, wasm.PoolJobCounts> }[] => []);
  // With GPT_BENCH_GC=1: per round, each trainer's timed window (GC pauses are read after the rounds).
  const gc = process.env.GPT_BENCH_GC === '1' ? gcRecorder() : null;
  const windows = trainers.map((): [number, number][] => []);
  let at = WARMUP;
  const losses = trainers.map(() => NaN);
  // Per-round ratios of named trainers (wall and CPU time), medians reported below.
  const pairs: [string, string][] = [['tpukit 1t', 'jax-js 1t'], ['tpukit 1t step', 'jax-js 1t'], ['tpukit 1t step', 'tpukit 1t'], ['tpukit 2t', 'tpukit 1t'], ['tpukit 2t step', 'tpukit 1t step'], ['tpukit 2t', 'jax-js 1t'], ['tpukit 2t step', 'jax-js 1t'], ['tpukit 1t', 'tpukit 1t copies'], ['tpukit 2t', 'tpukit 2t copies'], ['tpukit 1t banded', 'tpukit 1t'], ['tpukit 2t banded', 'tpukit 2t'], ['tpukit 1t step banded', 'tpukit 1t step'], ['tpukit 2t step banded', 'tpukit 2t step']];
  const idx = (name: string) => trainers.findIndex((t) => t.name === name);
  const ratios = new Map(pairs.filter(([x, y]) => idx(x) >= 0 && idx(y) >= 0).map(([x, y]) => [`${x} / ${y}`, { x: idx(x), y: idx(y), wall: [] as number[], cpu: [] as number[] }]));
  for (let r = 0; r < ROUNDS; r++) {
    const round: number[] = [];
    const roundCpu: number[] = [];
    for (let k = 0; k < trainers.length; k++) {
      trainers[k].prepare?.();
      const th0 = threadSnapshot();
      const pj0 = structuredClone(wasm.poolJobTimes);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const h0 = WINDOWS ? process.hrtime.bigint() : 0n;
      losses[k] = await trainers[k].steps(at, STEPS);
      const h1 = WINDOWS ? process.hrtime.bigint() : 0n;
      // (Time and CPU first: reading /proc and the pool counters is not the trainer's work.)
      const ms = performance.now() - t0;
      const cpu = process.cpuUsage(c0);
      groups[k].push(threadTimesSince(th0));
      if (WINDOWS) console.log(`  window ${trainers[k].name}|${r}|${h0}|${h1}`);
      windows[k].push([t0, t0 + ms]);
      const pj = wasm.poolJobTimes;
      const pools: Record<string, wasm.PoolJobCounts> = {};
      for (const [name, p] of Object.entries(pj.byPool)) {
        const b = pj0.byPool[name];
        pools[name] = b ? (Object.fromEntries(Object.entries(p).map(([key, v]) => [key, v - b[key as keyof wasm.PoolJobCounts]])) as unknown as wasm.PoolJobCounts) : { ...p };
      }
      jobs[k].push({ n: pj.jobs - pj0.jobs, ms: pj.ms - pj0.ms, wait: pj.waitMs - pj0.waitMs, wall: ms, switches: pj.switches - pj0.switches, pools });
      round.push((STEPS * TOKENS) / (ms / 1000));
      roundCpu.push((STEPS * TOKENS) / ((cpu.user + cpu.system) / 1e6));
      tps[k].push(round[k]);
      cpuTps[k].push(roundCpu[k]);
      cpuPerWall[k].push((cpu.user + cpu.system) / 1000 / ms);
    }
    at += STEPS;
    for (const q of ratios.values()) {
      q.wall.push(round[q.x] / round[q.y]);
      q.cpu.push(roundCpu[q.x] / roundCpu[q.y]);
    }
  }
  systolic.setNumThreads(cores);
  // GPT_BENCH_TRAFFIC=1: the GEMM engine's path counters over the whole run (warm-up included), e.g. its group jobs (passes/dotGroups.ts).
  if (process.env.GPT_BENCH_TRAFFIC === '1') console.log(`  GEMM traffic (whole run, ${WARMUP + ROUNDS * STEPS} steps per trainer): ${JSON.stringify(systolic.backend.engine.traffic)}`);
  const torch = [1, 2].map((n) => torchPeer(n, Math.max(10, ROUNDS * STEPS)));
  console.log(`  tokens/s (median of ${ROUNDS} rounds; effective GFLOP/s = tokens/s x ${(FLOPS_PER_TOKEN / 1e6).toFixed(3)} MFLOP):`);
  trainers.forEach((tr, k) => {
    const x = median(tps[k]);
    const cpu = median(cpuTps[k]);
    console.log(`    ${tr.name.padEnd(14)} ${x.toFixed(0).padStart(6)} tok/s  ${((x * FLOPS_PER_TOKEN) / 1e9).toFixed(1).padStart(5)} GFLOP/s  ${((TOKENS / x) * 1000).toFixed(MS_DIGITS)} ms/step  per CPU-second ${cpu.toFixed(0).padStart(6)} tok (${((TOKENS / cpu) * 1000).toFixed(MS_DIGITS)} ms CPU/step)  CPU-s per wall-s ${median(cpuPerWall[k]).toFixed(2)}  loss after ${at} steps ${losses[k].toFixed(4)}`);
  });
  if (threadTimesAvailable) {
    console.log('  CPU ms per step by thread (median over rounds; waiting for a CPU in brackets): main | worker pools (GEMM, kernels, attention) | V8 and libuv background (concurrent GC, compiler)');
    trainers.forEach((tr, k) => {
      const m = (f: (g: ThreadGroupTimes) => number): string => (median(groups[k].map(f)) / STEPS).toFixed(MS_DIGITS);
      console.log(`    ${tr.name.padEnd(14)} ${m((g) => g.run.main)} (${m((g) => g.wait.main)}) | ${m((g) => g.run.workers)} (${m((g) => g.wait.workers)}) | ${m((g) => g.run.background)} (${m((g) => g.wait.background)})`);
    });
  }
  if (gc) {
    await gc.settle();
    console.log('  GC pauses of the calling thread per step (median over rounds: count by kind, ms) and background CPU ms per step by round, in order');
    trainers.forEach((tr, k) => {
      const w: GcWindow[] = windows[k].map(([t0, t1]) => gc.within(t0, t1));
      const kinds = [...new Set(w.flatMap((x) => Object.keys(x.count)))].sort();
      const per = (xs: number[]): string => (median(xs) / STEPS).toFixed(2);
      console.log(`    ${tr.name.padEnd(14)} ${kinds.map((n) => `${n} ${per(w.map((x) => x.count[n] ?? 0))}`).join(', ') || 'none'}; ${per(w.map((x) => x.ms))} ms; background ${threadTimesAvailable ? groups[k].map((g) => (g.run.background / STEPS).toFixed(0)).join(' ') : 'not available (no per-thread times here)'}`);
    });
    gc.stop();
  }
  if (wasm.poolJobTimes.enabled) {
    console.log('  pool jobs per step (GEMM, kernel and attention pools; median over rounds): jobs, wall ms from wake-up to done (of which waiting for workers), wall ms outside them');
    trainers.forEach((tr, k) => {
      const m = (f: (j: (typeof jobs)[number][number]) => number): string => (median(jobs[k].map(f)) / STEPS).toFixed(0);
      console.log(`    ${tr.name.padEnd(14)} ${m((j) => j.n)} jobs, ${m((j) => j.ms)} ms (${m((j) => j.wait)}), outside ${m((j) => j.wall - j.ms)} ms`);
    });
    console.log('  per pool (median over rounds, per step): jobs, ms in them (waiting), mean wake-up of the first worker in us, jobs done before any worker woke, jobs a worker joined, times the calling thread slept waiting for workers and ms asleep, mean us from the last worker leaving a job to the calling thread running again (closes after a sleep); switches = jobs on another pool than the job before');
    trainers.forEach((tr, k) => {
      const names = [...new Set(jobs[k].flatMap((j) => Object.keys(j.pools)))].filter((n) => jobs[k].some((j) => (j.pools[n]?.jobs ?? 0) > 0));
      const per = (f: (j: (typeof jobs)[number][number]) => number, digits = 0): string => (median(jobs[k].map(f)) / STEPS).toFixed(digits);
      const pool = (n: string): string => {
        const p = (f: (c: wasm.PoolJobCounts) => number, d = 0): string => per((j) => (j.pools[n] ? f(j.pools[n]) : 0), d);
        const wake = median(jobs[k].map((j) => (j.pools[n]?.wakes ? (1000 * j.pools[n].wakeMs) / j.pools[n].wakes : 0)));
        const closes = jobs[k].filter((j) => (j.pools[n]?.lateCloses ?? 0) > 0);
        const late = closes.length > 0 ? `${median(closes.map((j) => (1000 * j.pools[n].lateMs) / j.pools[n].lateCloses)).toFixed(0)} us` : '- (no close after a sleep)';
        return `${n} ${p((c) => c.jobs)} jobs ${p((c) => c.ms, 1)} ms (${p((c) => c.waitMs, 1)}), wake ${wake.toFixed(0)} us, unwoken ${p((c) => c.unwoken)}, joined ${p((c) => c.joined)}, slept ${p((c) => c.sleeps)}x ${p((c) => c.sleptMs, 1)} ms, woken ${late} after the last worker left`;
      };
      if (names.length > 0) console.log(`    ${tr.name.padEnd(14)} switches ${per((j) => j.switches)}; ${names.map(pool).join('; ')}`);
    });
  }
  torch.forEach((x, k) => console.log(`    torch ${k + 1}t       ${typeof x === 'string' ? x : `${x.tps.toFixed(0).padStart(6)} tok/s  ${((x.tps * FLOPS_PER_TOKEN) / 1e9).toFixed(1).padStart(5)} GFLOP/s  ${((TOKENS / x.tps) * 1000).toFixed(0)} ms/step  per CPU-second ${x.cpu.toFixed(0).padStart(6)} tok (one run of ${Math.max(10, ROUNDS * STEPS)} steps)`}`));
  const bs = systolic.batchedStats;
  console.log(`  batched dots (attention's per-head products) item by item: ${bs.jobs} dots, ${bs.pooled} on the thread pool; worker threads computed ${((100 * bs.workerItems) / Math.max(1, bs.pooledItems)).toFixed(0)}% of the pooled items`);
  const note: Record<string, string> = { 'tpukit 1t / jax-js 1t': 'target >= 3', 'tpukit 1t step / jax-js 1t': 'target >= 3', 'tpukit 2t / tpukit 1t': `target >= 1.8; kernel threads ${getKernelThreads()}`, 'tpukit 2t step / tpukit 1t step': 'target >= 1.8', 'tpukit 2t / jax-js 1t': 'jax-js has no threads in Node' };
  for (const [name, q] of ratios) {
    const oneThread = !name.includes('2t');
    console.log(`  ${name.padEnd(32)} ${median(q.wall).toFixed(2)}x (median per-round ratio${note[name] ? `; ${note[name]}` : ''})${oneThread ? `; by CPU time ${median(q.cpu).toFixed(2)}x` : ''}`);
  }
  const [t1, t2] = torch;
  const i1 = idx('tpukit 1t');
  const i2 = idx('tpukit 2t');
  if (typeof t1 !== 'string' && i1 >= 0) console.log(`  tpukit 1t / torch 1t             ${(median(tps[i1]) / t1.tps).toFixed(2)}x; by CPU time ${(median(cpuTps[i1]) / t1.cpu).toFixed(2)}x (torch not interleaved: it runs after the rounds)`);
  if (typeof t2 !== 'string' && i2 >= 0) console.log(`  tpukit 2t / torch 2t             ${(median(tps[i2]) / t2.tps).toFixed(2)}x (target >= 1)`);
  if (process.env.TPUKIT_PROFILE === '1') {
    // Garbage collections during each profiled step (their pauses land inside some instruction's time).
    const gcs: PerformanceEntry[] = [];
    const gcObserver = new PerformanceObserver((list) => gcs.push(...list.getEntries()));
    gcObserver.observe({ entryTypes: ['gc'] });
    for (const tr of trainers) {
      if (!tr.name.startsWith('tpukit')) continue;
      tr.prepare?.();
      // One untimed step first: the first step after switching trainers pays for the previous
      // trainer's garbage (V8's concurrent marking on the second core) and cold caches, which a
      // training run pays once; the profiled step is a steady-state one.
      if (process.env.GPT_BENCH_PROFILE_WARM !== '0') await tr.steps(at++, 1);
      profile.reset();
      systolic.resetGemmPhases();
      const profiled = envCount('GPT_BENCH_PROFILE_STEPS', 1, 1);
      const e0 = { ...systolic.backend.engine.traffic };
      const a0 = arenaTraffic();
      // (Entries arrive asynchronously: let those of earlier work in before the step starts.)
      await new Promise((r) => setTimeout(r, 0));
      gcs.length = 0;
      const th0 = threadSnapshot();
      const t0 = performance.now();
      await tr.steps(at, profiled);
      at += profiled;
      const t1 = performance.now();
      const th = threadTimesSince(th0);
      const e1 = systolic.backend.engine.traffic;
      const a1 = arenaTraffic();
      await new Promise((r) => setTimeout(r, 0));
      const mib = (b: number): string => (b / 2 ** 20).toFixed(1);
      console.log(`\n  profile of ${profiled === 1 ? 'one' : `${profiled} (summed)`} ${tr.name} step${profiled === 1 ? '' : 's'}:\n${profile.report({ top: envCount('GPT_BENCH_PROFILE_TOP', 25, 1), by: tr.name.includes(' 1t') ? 'cpu' : 'wall' })}`);
      if (systolic.gemmPhases.enabled) {
        const ph = systolic.gemmPhases;
        const per = (ms: number): string => (ms / profiled).toFixed(2);
        console.log(`  GEMM phases per step (TPUKIT_GEMM_PHASES=1; one-thread products by shape, ms): products ${(ph.products / profiled).toFixed(0)}, pack ${per(ph.pack)} (stage ${per(ph.stage)}), gemm ${per(ph.gemm)}, sink ${per(ph.sink)}`);
        for (const [k, v] of [...ph.byShape].sort((a, b) => b[1].call - a[1].call)) console.log(`    ${k.padEnd(34)} ${(v.calls / profiled).toFixed(1)}/step: call ${per(v.call)} packA ${per(v.packA)} packB ${per(v.packB)} edges ${per(v.edges)} gemm ${per(v.gemm)} sink ${per(v.sink)}`);
      }
      const inStep = gcs.filter((g) => g.startTime < t1 && g.startTime + g.duration > t0);
      console.log(`  ${profiled === 1 ? 'that step' : `those ${profiled} steps`}: ${(t1 - t0).toFixed(1)} ms wall; CPU ms main ${th.run.main.toFixed(1)} | workers ${th.run.workers.toFixed(1)} | background ${th.run.background.toFixed(1)}; GC pauses in it: ${inStep.map((g) => `${gcKind(g)} ${g.duration.toFixed(1)} ms at +${(g.startTime - t0).toFixed(1)}`).join(', ') || 'none'}`);
      console.log(`  operand traffic of ${profiled === 1 ? 'that step' : `those ${profiled} steps`}: staged into the GEMM ${mib(e1.stagedBytes - e0.stagedBytes)} MiB, read in place ${mib(e1.inPlaceBytes - e0.inPlaceBytes)} MiB; copied into the arena ${mib(a1.copiedInBytes - a0.copiedInBytes)} MiB, out of it ${mib(a1.copiedOutBytes - a0.copiedOutBytes)} MiB, handed on as views ${mib(a1.viewBytes - a0.viewBytes)} MiB, donated outputs kept in it ${mib(a1.residentBytes - a0.residentBytes)} MiB (moved out for a caller keeping them ${mib(a1.evacuatedBytes - a0.evacuatedBytes)} MiB); results written in place by the GEMM ${mib(e1.resultInPlaceBytes - e0.resultInPlaceBytes)} MiB; arenas reserved in the GEMM memory ${mib(systolic.backend.engine.floor)} MiB`);
    }
    gcObserver.disconnect();
  }
}

await main();
