/**
 * `train(options)`: train a small decoder-only transformer on the embedded corpus.
 *
 * - grain-ts: byte-level tokenization, a seeded shuffle reseeded per epoch, first-fit packing into
 *   fixed rows with segment ids, batching; the iterator's state is checkpointed.
 * - core: the model in jax.numpy-style ops on the systolic backend (TPU MXU numerics: bf16
 *   operands, f32 accumulation), gradients from `valueAndGrad`, AdamW on pytrees, parameters
 *   initialised with JAX-compatible random numbers.
 * - xla-lite: `jit` compiles loss + gradient once into fused kernels.
 * - orbax-ts: async checkpoints of {params, optimizer state} plus the data iterator every
 *   `checkpointEvery` steps; at the end the run is resumed from the latest checkpoint with a fresh
 *   manager and pipeline and checked to continue exactly as the uninterrupted run did.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Array, np, random, setBackend, valueAndGrad } from '@tpukit/core';
import { ByteTokenizer, MapDataset } from '@tpukit/grain-ts';
import { CheckpointManager, args } from '@tpukit/orbax-ts';
import { jit } from '@tpukit/xla-lite';
import { CORPUS } from './corpus';
import { type ModelConfig, type Params, forward, initParams, loss } from './model';
import { type AdamState, type AdamWConfig, adamInit, adamUpdate } from './optimizer';

export interface TrainOptions {
  steps: number;
  model: ModelConfig;
  batchSize: number;
  checkpointEvery: number;
  /** Checkpoint directory; a temporary one (deleted at the end) when omitted. */
  checkpointDir?: string;
  backend: string;
  peakLr: number;
  seed: number;
  log: (line: string) => void;
}

export const DEFAULTS: TrainOptions = {
  steps: 200,
  model: { vocab: 256, dModel: 64, heads: 4, layers: 2, mlp: 128, context: 64 },
  batchSize: 8,
  checkpointEvery: 50,
  backend: 'systolic',
  peakLr: 3e-3,
  seed: 0,
  log: (line) => console.log(line),
};

export interface TrainResult {
  losses: number[];
  resumedFrom: number | null;
  /** Largest |loss difference| between the resumed replay and the uninterrupted run. */
  resumeMaxDiff: number;
  tokensPerSecond: number;
  sample: string;
}

type Batch = { tokens: Array; segmentIds: Array };
type TrainState = { params: Params; opt: AdamState<Params> };

export async function train(options: Partial<TrainOptions> = {}): Promise<TrainResult> {
  const o: TrainOptions = { ...DEFAULTS, ...options };
  const cfg = o.model;
  if (!Number.isInteger(o.steps) || o.steps < 2) throw new RangeError(`train: steps must be an integer >= 2; got ${o.steps}`);
  if (!Number.isInteger(o.checkpointEvery) || o.checkpointEvery < 1) throw new RangeError(`train: checkpointEvery must be a positive integer; got ${o.checkpointEvery}`);
  setBackend(o.backend);
  const opt: AdamWConfig = { peakLr: o.peakLr, warmupSteps: Math.max(1, Math.floor(o.steps / 4)), totalSteps: o.steps, b1: 0.9, b2: 0.99, eps: 1e-8, weightDecay: 1e-4 };

  const tokenizer = new ByteTokenizer();
  const pipeline = MapDataset.source([...CORPUS])
    .shuffle({ seed: o.seed })
    .repeat()
    .map((text: string) => tokenizer.encode(text))
    .toIterDataset()
    .pack({ length: cfg.context + 1, numBins: 4, overflow: 'split' })
    .batch({ batchSize: o.batchSize, dropRemainder: true });

  // One compiled program per abstract signature: xla-lite traces loss + gradient once, fuses it and
  // reuses the executable every step (a recompile would be counted in compileStats()).
  const lossAndGrad = jit(valueAndGrad((p: Params, b: Batch) => loss(p, b, cfg)));
  const trainStep = (state: TrainState, batch: Batch, step: number): [TrainState, number] => {
    const [value, grads] = lossAndGrad(state.params, batch) as [Array, Params];
    const [params, optState] = adamUpdate(state.params, grads, state.opt, step, opt);
    return [{ params, opt: optState }, value.item() as number];
  };

  const ownDir = o.checkpointDir === undefined;
  const dir = o.checkpointDir ?? mkdtempSync(join(tmpdir(), 'tpukit-train-'));
  const manager = new CheckpointManager(dir, { saveIntervalSteps: o.checkpointEvery, maxToKeep: 2 });
  try {
    o.log(`tpukit: training a ${cfg.layers}-layer transformer (d_model ${cfg.dModel}, ${cfg.heads} heads, context ${cfg.context}, batch ${o.batchSize}) for ${o.steps} steps on the ${o.backend} backend`);
    const params = initParams(cfg, random.key(o.seed));
    let state: TrainState = { params, opt: adamInit(params) };
    const it = pipeline.iterator();
    const t0 = performance.now();
    const losses: number[] = [];
    for (let step = 0; step < o.steps; step++) {
      if (manager.shouldSave(step)) {
        await manager.save(step, args.Composite({ state: args.StandardSave(state), data: args.JsonSave(it.getState()) }));
      }
      let value: number;
      [state, value] = trainStep(state, it.next().value as Batch, step);
      losses.push(value);
      if (step % 10 === 0 || step === o.steps - 1) {
        const secs = (performance.now() - t0) / 1000;
        o.log(`step ${String(step).padStart(4)}  loss ${value.toFixed(4)}  ${(((step + 1) * o.batchSize * cfg.context) / secs).toFixed(0)} tokens/s`);
      }
    }
    const tokensPerSecond = (o.steps * o.batchSize * cfg.context) / ((performance.now() - t0) / 1000);
    await manager.waitUntilFinished();
    const resumedFrom = manager.latestStep();
    o.log(`checkpoints on disk: steps ${manager.allSteps().join(', ')}`);
    const stats = lossAndGrad.compileStats();
    o.log(`jit: ${stats.misses} compile(s), ${stats.hits} cache hits, ${stats.recompiles} recompiles`);

    // Resume from the latest checkpoint with a fresh manager and pipeline, replay to the end, and
    // compare the loss curve with the uninterrupted run.
    let resumeMaxDiff = 0;
    if (resumedFrom !== null) {
      const fresh = new CheckpointManager(dir, { readOnly: true }); // `manager` still holds the writer lock
      const restored = (await fresh.restore(resumedFrom)) as { state: TrainState; data: unknown };
      const it2 = pipeline.iterator();
      it2.setState(restored.data as never);
      let s2 = restored.state;
      for (let step = resumedFrom; step < o.steps; step++) {
        let value: number;
        [s2, value] = trainStep(s2, it2.next().value as Batch, step);
        resumeMaxDiff = Math.max(resumeMaxDiff, Math.abs(value - losses[step]));
      }
      await fresh.close();
      o.log(`resumed from step ${resumedFrom}: ${o.steps - resumedFrom} steps replayed; max |loss difference| vs the uninterrupted run = ${resumeMaxDiff}`);
    }

    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    const k = Math.min(5, Math.floor(o.steps / 2));
    o.log(`mean loss: first ${k} steps ${mean(losses.slice(0, k)).toFixed(4)}, last ${k} steps ${mean(losses.slice(-k)).toFixed(4)}`);
    const sample = greedyDecode(state.params, 'A checkpoint ', 32, cfg, tokenizer);
    o.log(`sample: ${JSON.stringify(sample)}`);
    return { losses, resumedFrom, resumeMaxDiff, tokensPerSecond, sample };
  } finally {
    await manager.close();
    if (ownDir) rmSync(dir, { recursive: true, force: true });
  }
}

function greedyDecode(params: Params, prompt: string, n: number, cfg: ModelConfig, tokenizer: ByteTokenizer): string {
  const ids = [...tokenizer.encode(prompt)];
  for (let i = 0; i < n; i++) {
    const tokens = np.array([ids.slice(-cfg.context)], 'int32');
    const logits = forward(params, tokens, np.onesLike(tokens), cfg);
    ids.push(np.argmax(logits.get(0, -1)).item() as number);
  }
  return tokenizer.decode(ids);
}
