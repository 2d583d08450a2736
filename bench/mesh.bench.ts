/**
 * `pnpm bench:mesh`: a data-parallel training step of MaxText's decoder (@tpukit/maxtext-ts, the
 * `tiny` config widened to d_model 128) on 1 vs 2 CPU devices of @tpukit/mesh. Each device runs the jitted
 * loss + gradient on its rows of the global batch on its own worker thread; the host averages the
 * gradients (the all-reduce) and applies AdamW. Both configurations run in the same process,
 * interleaved round by round; the speed-up is the median of per-round ratios. Tokens/s counts the
 * global batch (batch x context) per step.
 */
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { type Array, jit, np, random, setBackend, tree, valueAndGrad } from '@tpukit/core';
import { type CpuDevice, P, devices, makeMesh, pmean, runOnDevices, setCpuDeviceCount, shardMap } from '@tpukit/mesh';
import { type Batch, type Params, initParams, loadConfig, loss, modelConfig } from '@tpukit/maxtext-ts';
import { adamw, applyUpdates } from '@tpukit/maxtext-ts/optim';

const CONTEXT = 64;
const cfg = modelConfig(loadConfig('tiny', ['base_emb_dim=128', 'base_mlp_dim=384', 'head_dim=32', `max_target_length=${CONTEXT}`]));
const BATCH = 16;
const ROUNDS = Number(process.env.ROUNDS ?? 7);
const STEPS_PER_ROUND = 3;
const module = fileURLToPath(new URL('./meshStep.cjs', import.meta.url));
const program = { module, exportName: 'gradStep' };
const chain = { module, exportName: 'matmulChain' };
const optimizer = adamw({ learningRate: 1e-3, b2: 0.99, weightDecay: 1e-4 });
type OptState = ReturnType<typeof optimizer.init>;

type State = { params: Params; opt: OptState; step: number };

/** AdamW on the host: the same update for both configurations. */
function update(s: State, grads: Params): State {
  const [updates, opt] = optimizer.update(grads, s.opt, s.params);
  return { params: applyUpdates(s.params, updates), opt, step: s.step + 1 };
}

/** Rows [k*n/d, (k+1)*n/d) of a [n, ...] array. */
const rowsOf = (x: Array, k: number, d: number): Array => {
  const per = x.shape[0] / d;
  return x.get(`${k * per}:${(k + 1) * per}`);
};

/** Milliseconds spent waiting for the devices (send, compute, receive), per configuration. */
const deviceMs = new Map<number, number[]>();

async function step(devs: CpuDevice[], s: State, tokens: Array, seg: Array, pos: Array): Promise<[State, number]> {
  const d = devs.length;
  const t0 = performance.now();
  const outs = (await runOnDevices(program, devs, devs.map((_, k) => [s.params, rowsOf(tokens, k, d), rowsOf(seg, k, d), rowsOf(pos, k, d), cfg]))) as { loss: Array; grads: Params }[];
  if (!deviceMs.has(d)) deviceMs.set(d, []);
  deviceMs.get(d)!.push(performance.now() - t0);
  // The all-reduce: every shard holds the same number of rows, so the global gradient is the mean.
  const [first, ...rest] = outs.map((o) => o.grads);
  const grads = tree.map((...gs: Array[]) => np.divide(gs.reduce((a, b) => np.add(a, b)), d), first, ...rest) as unknown as Params;
  const lossValue = outs.reduce((a, o) => a + (o.loss.item() as number), 0) / d;
  return [update(s, grads), lossValue];
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
  const states: State[] = configs.map(() => ({ params, opt: optimizer.init(params), step: 0 }));
  console.log(`bench:mesh  ${cfg.numLayers}-layer MaxText decoder (d_model ${cfg.embDim}, mlp ${cfg.mlpDim}, context ${CONTEXT}), global batch ${BATCH}; ${availableParallelism()} cores, load average ${loadavg()[0].toFixed(1)}`);
  // Warm-up: compile the jitted step in every worker, and check that 1 and 2 devices agree.
  const first: number[] = [];
  for (let c = 0; c < configs.length; c++) {
    let loss = 0;
    for (let i = 0; i < 2; i++) [states[c], loss] = await step(configs[c], states[c], tokens, seg, pos);
    first.push(loss);
  }
  console.log(`loss after 2 steps: 1 device ${first[0].toFixed(5)}, 2 devices ${first[1].toFixed(5)}`);
  const times: number[][] = configs.map(() => []);
  const ratios: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const round: number[] = [];
    for (let c = 0; c < configs.length; c++) {
      const t0 = performance.now();
      for (let i = 0; i < STEPS_PER_ROUND; i++) [states[c]] = await step(configs[c], states[c], tokens, seg, pos);
      const ms = (performance.now() - t0) / STEPS_PER_ROUND;
      times[c].push(ms);
      round.push(ms);
    }
    ratios.push(round[0] / round[1]);
  }
  const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const tokensPerStep = BATCH * CONTEXT;
  for (let c = 0; c < configs.length; c++) {
    const ms = median(times[c]);
    const dev = median(deviceMs.get(c + 1)!.slice(2));
    console.log(`${c + 1} device${c ? 's' : ' '}: ${ms.toFixed(1)} ms/step  ${((tokensPerStep / ms) * 1000).toFixed(0)} tokens/s  (devices ${dev.toFixed(1)} ms, host all-reduce + AdamW ${(ms - dev).toFixed(1)} ms)`);
  }
  console.log(`speed-up 2 vs 1 device: ${median(ratios).toFixed(2)}x (median of ${ROUNDS} per-round ratios; load average now ${loadavg()[0].toFixed(1)})`);

  // The same step written the JAX way: a shardMap body (jitted loss + grad, pmean of every
  // gradient leaf) run on the device workers; the pmean is a rendezvous through the host.
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
  const smStates: State[] = configs.map(() => ({ params, opt: optimizer.init(params), step: 0 }));
  const smStep = async (c: number) => {
    const s = smStates[c];
    const out = await dpSteps[c].onDevices(s.params, tokens, seg, pos);
    smStates[c] = update(s, out.grads);
    return out.loss.item() as number;
  };
  const smFirst = [];
  for (let c = 0; c < configs.length; c++) {
    await smStep(c);
    smFirst.push(await smStep(c));
  }
  const smTimes: number[][] = configs.map(() => []);
  const smRatios: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (let c = 0; c < configs.length; c++) {
      const t0 = performance.now();
      for (let i = 0; i < STEPS_PER_ROUND; i++) await smStep(c);
      smTimes[c].push((performance.now() - t0) / STEPS_PER_ROUND);
    }
    smRatios.push(smTimes[0][r] / smTimes[1][r]);
  }
  console.log(`shardMap(...).onDevices step (loss after 2 steps: ${smFirst.map((l) => l.toFixed(5)).join(' / ')}):`);
  for (let c = 0; c < configs.length; c++) {
    const ms = median(smTimes[c]);
    console.log(`${c + 1} device${c ? 's' : ' '}: ${ms.toFixed(1)} ms/step  ${((tokensPerStep / ms) * 1000).toFixed(0)} tokens/s`);
  }
  console.log(`speed-up 2 vs 1 device: ${median(smRatios).toFixed(2)}x`);

  // Pure compute, no communication: the same two work items on one device (one after the other)
  // and on two devices (at once).
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
