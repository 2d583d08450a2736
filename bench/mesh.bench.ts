/**
 * `pnpm bench:mesh`: a data-parallel training step of MaxText's decoder (@tpukit/maxtext-ts, the
 * `tiny` config widened to d_model 128) on 1 vs 2 CPU devices of @tpukit/mesh.
 *
 * 1. The way a JAX user writes it: one `jit` of the whole step (loss, gradient, AdamW), the batch
 *    placed with `P('data')`, parameters and optimizer state replicated, the state donated. On 2
 *    devices xla-lite partitions the step (GSPMD) and each device runs its compiled program on its
 *    own worker thread; the gradient all-reduce meets worker to worker in shared memory. On 1
 *    device it is the same jit on the calling thread.
 * 2. The shardMap variant: a jitted loss + grad per device, `pmean` of the gradients, AdamW on
 *    the host (`shardMap(...).onDevices`).
 * 3. Pure compute, no communication: the same two work items on one device and on two.
 *
 * Configurations run in the same process, interleaved round by round; a speed-up is the median
 * of per-round ratios. Tokens/s counts the global batch (batch x context) per step. On a loaded
 * machine the speed-up cannot show: CPU-seconds per wall-second (process CPU time over wall time,
 * ~1 for one device and ~2 when two devices compute at once) and the per-device timeline of one
 * step check the mechanism instead.
 */
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { type Array, getNumThreads, jit, np, random, setBackend, setNumThreads, tree, valueAndGrad } from '@tpukit/core';
import { type CpuDevice, NamedSharding, P, devicePut, devices, makeMesh, pmean, runOnDevices, setCpuDeviceCount, shardMap } from '@tpukit/mesh';
import { type Batch, type Params, initParams, loadConfig, loss, modelConfig } from '@tpukit/maxtext-ts';
import { adamw, applyUpdates } from '@tpukit/maxtext-ts/optim';

const CONTEXT = 64;
const cfg = modelConfig(loadConfig('tiny', ['base_emb_dim=128', 'base_mlp_dim=384', 'head_dim=32', `max_target_length=${CONTEXT}`]));
const BATCH = 16;
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const STEPS_PER_ROUND = 3;
const module = fileURLToPath(new URL('./meshStep.cjs', import.meta.url));
const chain = { module, exportName: 'matmulChain' };
const optimizer = adamw({ learningRate: 1e-3, b2: 0.99, weightDecay: 1e-4 });
type OptState = ReturnType<typeof optimizer.init>;

type State = { params: Params; opt: OptState };

const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const tokensPerStep = BATCH * CONTEXT;

/** CPU seconds (all threads of the process) and wall seconds of `f`. */
async function measured(f: () => Promise<void> | void): Promise<{ wall: number; cpu: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await f();
  const c = process.cpuUsage(c0);
  return { wall: (performance.now() - t0) / 1000, cpu: (c.user + c.system) / 1e6 };
}

/** One line per device: '#' where its thread ran a partitioned call, over `width` columns spanning [t0, t1]. */
function timeline(devs: CpuDevice[], t0: number, t1: number, width = 72): string[] {
  const span = t1 - t0;
  return devs.map((d) => {
    const row = new globalThis.Array(width).fill('.');
    for (const e of d.worker.spmd.timeline) {
      const a = Math.max(0, Math.floor(((e.start - t0) / span) * width));
      const b = Math.min(width, Math.ceil(((e.end - t0) / span) * width));
      for (let k = a; k < b; k++) row[k] = '#';
    }
    return `  device ${d.id} |${row.join('')}|`;
  });
}

/** Of [t0, t1], the fraction during which every device's thread was busy. */
function overlap(devs: CpuDevice[], t0: number, t1: number): number {
  const N = 2000;
  let both = 0;
  for (let k = 0; k < N; k++) {
    const t = t0 + ((k + 0.5) / N) * (t1 - t0);
    if (devs.every((d) => d.worker.spmd.timeline.some((e) => e.start <= t && t < e.end))) both++;
  }
  return both / N;
}

async function main(): Promise<void> {
  setBackend('systolic');
  setCpuDeviceCount(2);
  const all = devices();
  const key = random.key(0);
  const params = initParams(cfg, key);
  const tokens = random.randint(random.foldIn(key, 1), [BATCH, CONTEXT + 1], 0, cfg.vocabSize);
  const seg = np.ones([BATCH, CONTEXT + 1], 'int32');
  const pos = np.broadcastTo(np.arange(0, CONTEXT + 1, 1, 'int32'), [BATCH, CONTEXT + 1]);
  const configs = [all.slice(0, 1), all.slice(0, 2)];
  // A device is one core's worth of the machine: each device worker runs its kernels on
  // max(1, cores / devices) threads (1 here), and the 1-device baseline of the sharded jit, which
  // runs on the calling thread, gets the same. A third row runs 1 device with every core.
  const cores = getNumThreads();
  console.log(`bench:mesh  ${cfg.numLayers}-layer MaxText decoder (d_model ${cfg.embDim}, mlp ${cfg.mlpDim}, context ${CONTEXT}), global batch ${BATCH}; ${availableParallelism()} cores, load average ${loadavg()[0].toFixed(1)}`);

  // 1. One jit of the whole step; the batch split over 'data', the state replicated and donated.
  const trainStep = jit(
    (s: State, b: Batch): [State, Array] => {
      const [l, g] = valueAndGrad((p: Params) => loss(p, b, cfg))(s.params) as [Array, Params];
      const [updates, opt] = optimizer.update(g, s.opt, s.params);
      return [{ params: applyUpdates(s.params, updates), opt }, l];
    },
    { donateArgnums: [0] },
  );
  const setups = [...configs, configs[0]].map((devs) => {
    const batch: Batch = { tokens, segmentIds: seg, positions: pos };
    const state: State = { params, opt: optimizer.init(params) };
    if (devs.length === 1) return { devs, state: tree.map((x: Array) => np.array(x), state) as unknown as State, batch };
    const mesh = makeMesh([devs.length], ['data'], { devices: devs });
    return { devs, state: devicePut(state, new NamedSharding(mesh, P())), batch: devicePut(batch, new NamedSharding(mesh, P('data'))) };
  });
  const threadsOf = [1, 1, cores];
  const run = (c: number): number => {
    const st = setups[c];
    setNumThreads(threadsOf[c]);
    try {
      const [next, l] = trainStep(st.state, st.batch);
      st.state = next;
      return l.item() as number;
    } finally {
      setNumThreads(null);
    }
  };
  // Warm-up (compiles; on 2 devices each worker compiles its program), and 1 vs 2 devices agree.
  const first = [0, 1, 2].map((c) => {
    run(c);
    return run(c);
  });
  console.log(`sharded jit (the JAX way: P('data') batch, replicated state, one jit of the step); loss after 2 steps: 1 device ${first[0].toFixed(5)}, 2 devices ${first[1].toFixed(5)}, 1 device on ${cores} threads ${first[2].toFixed(5)}`);
  const times: number[][] = [[], [], []];
  const cpuPerWall: number[][] = [[], [], []];
  const ratios: number[] = [];
  const ratiosAll: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (let c = 0; c < 3; c++) {
      const m = await measured(() => {
        for (let i = 0; i < STEPS_PER_ROUND; i++) run(c);
      });
      times[c].push((m.wall * 1000) / STEPS_PER_ROUND);
      cpuPerWall[c].push(m.cpu / m.wall);
    }
    ratios.push(times[0][r] / times[1][r]);
    ratiosAll.push(times[2][r] / times[1][r]);
  }
  const label = ['1 device  (1 kernel thread)', '2 devices (1 kernel thread each)', `1 device  (${cores} kernel threads)`];
  for (let c = 0; c < 3; c++) {
    const ms = median(times[c]);
    console.log(`${label[c]}: ${ms.toFixed(1)} ms/step  ${((tokensPerStep / ms) * 1000).toFixed(0)} tokens/s  CPU-s per wall-s ${median(cpuPerWall[c]).toFixed(2)}`);
  }
  console.log(`speed-up 2 vs 1 device: ${median(ratios).toFixed(2)}x (median of ${ROUNDS} per-round ratios; load average now ${loadavg()[0].toFixed(1)})`);
  console.log(`2 devices vs 1 device with all ${cores} cores as kernel threads: ${median(ratiosAll).toFixed(2)}x`);
  // The per-device timeline of three steps on 2 devices.
  const two = configs[1];
  for (const d of two) {
    d.worker.spmd.timeline.length = 0;
    d.worker.spmd.recordTimeline = true;
  }
  const t0 = performance.timeOrigin + performance.now();
  for (let i = 0; i < 3; i++) run(1);
  const t1 = performance.timeOrigin + performance.now();
  for (const d of two) d.worker.spmd.recordTimeline = false;
  console.log(`timeline of 3 steps on 2 devices (${(t1 - t0).toFixed(0)} ms; '#' = the device's thread runs its program; both busy ${(overlap(two, t0, t1) * 100).toFixed(0)}% of the time):`);
  for (const line of timeline(two, t0, t1)) console.log(line);

  // 2. The shardMap variant: a jitted loss + grad per device, pmean of every gradient leaf, AdamW on the host.
  const lossAndGrad = jit(valueAndGrad((p: Params, b: Batch) => loss(p, b, cfg)));
  const dpSteps = configs.map((devs) =>
    shardMap(
      (p: Params, tok: Array, sg: Array, ps: Array) => {
        const [l, g] = lossAndGrad(p, { tokens: tok, segmentIds: sg, positions: ps }) as [Array, Params];
        return { loss: pmean(l, 'd'), grads: tree.map((x: Array) => pmean(x, 'd'), g) as unknown as Params };
      },
      { mesh: makeMesh([devs.length], ['d'], { devices: devs }), inSpecs: [P(), P('d'), P('d'), P('d')], outSpecs: P() },
    ),
  );
  const update = jit((s: State, grads: Params): State => {
    const [updates, opt] = optimizer.update(grads, s.opt, s.params);
    return { params: applyUpdates(s.params, updates), opt };
  });
  const smStates: State[] = configs.map(() => ({ params, opt: optimizer.init(params) }));
  const smStep = async (c: number) => {
    const s = smStates[c];
    const out = await dpSteps[c].onDevices(s.params, tokens, seg, pos);
    smStates[c] = update(s, out.grads) as State;
    return out.loss.item() as number;
  };
  const smFirst = [];
  for (let c = 0; c < configs.length; c++) {
    await smStep(c);
    smFirst.push(await smStep(c));
  }
  const smTimes: number[][] = configs.map(() => []);
  const smCpu: number[][] = configs.map(() => []);
  const smRatios: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (let c = 0; c < configs.length; c++) {
      const m = await measured(async () => {
        for (let i = 0; i < STEPS_PER_ROUND; i++) await smStep(c);
      });
      smTimes[c].push((m.wall * 1000) / STEPS_PER_ROUND);
      smCpu[c].push(m.cpu / m.wall);
    }
    smRatios.push(smTimes[0][r] / smTimes[1][r]);
  }
  console.log(`shardMap(...).onDevices step (loss after 2 steps: ${smFirst.map((l) => l.toFixed(5)).join(' / ')}):`);
  for (let c = 0; c < configs.length; c++) {
    const ms = median(smTimes[c]);
    console.log(`${c + 1} device${c ? 's' : ' '}: ${ms.toFixed(1)} ms/step  ${((tokensPerStep / ms) * 1000).toFixed(0)} tokens/s  CPU-s per wall-s ${median(smCpu[c]).toFixed(2)}`);
  }
  console.log(`speed-up 2 vs 1 device: ${median(smRatios).toFixed(2)}x`);

  // 3. Pure compute, no communication: the same two work items on one device (one after the
  // other) and on two devices (at once).
  // (Its program is a CommonJS module: the workers restart in their CommonJS build.)
  for (const d of all) await d.close();
  const x = np.multiply(random.normal(random.foldIn(key, 2), [256, 256]), 1 / 16);
  const work = [[x, 24], [x, 24]];
  await runOnDevices(chain, configs[1], work);
  const chainRatios: number[] = [];
  const chainMs: number[][] = [[], []];
  for (let r = 0; r < ROUNDS; r++) {
    let t0 = performance.now();
    for (const w of work) await runOnDevices(chain, configs[0], [w]);
    chainMs[0].push(performance.now() - t0);
    t0 = performance.now();
    await runOnDevices(chain, configs[1], work);
    chainMs[1].push(performance.now() - t0);
    chainRatios.push(chainMs[0][r] / chainMs[1][r]);
  }
  console.log(`matmul chain (2 x 24 matmuls of [256,256]): 1 device ${median(chainMs[0]).toFixed(1)} ms, 2 devices ${median(chainMs[1]).toFixed(1)} ms, speed-up ${median(chainRatios).toFixed(2)}x`);
  for (const d of all) await d.close();
}

await main();
