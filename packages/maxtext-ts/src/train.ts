/**
 * `train(config)`: MaxText's train.py loop. Picks the backend, builds the jitted step and the
 * input pipeline, resumes (an existing checkpoint of this run, else `load_parameters_path`'s
 * parameters, else a fresh init), then runs the steps: the MaxText metrics line every
 * `log_period` steps (and the last), JSONL and TensorBoard scalars, a progress bar on a TTY,
 * orbax-ts checkpoints (items `items` = {params, optState, step} and `iter` = the data
 * iterator's state) every `checkpoint_period` completed steps, a Chrome-trace profile window,
 * and on SIGTERM/SIGINT a checkpoint at the current step and a clean return.
 *
 * Checkpoints are labelled by the number of completed steps (= `state.step`), so a run resumed
 * from checkpoint N runs step N next and replays the uninterrupted run bit for bit: the same
 * parameters, optimizer state, step count and data position, and the same compiled program.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setBackend, systolic } from '@tpukit/core';
import { devices } from '@tpukit/mesh';
import { args, CheckpointManager, installPreemptionHandler, type PreemptionHandle, preemptionSignal, resetPreemption } from '@tpukit/orbax-ts';
import type { CompileStats } from '@tpukit/xla-lite';
import { checkpointDirOf, restoreParams, runDirOf } from './checkpoints';
import type { Config } from './config';
import { makeDataIterator } from './data';
import { calculateTflopsTrainingPerDevice, tokensPerDevicePerStep } from './flops';
import { formatStepLine, measureCpuPeakFlops, progressBar, simulatedCommunicationSeconds, simulatedSeconds, type StepReport } from './metrics';
import { countParams } from './model';
import { StepProfiler } from './profiler';
import { makeTrainMesh } from './sharding';
import { EventFileWriter } from './tensorboard';
import { makeTrainStep, type TrainState } from './trainStep';

export interface TrainOptions {
  /** Where lines go (default console.log). */
  log?: (line: string) => void;
  /** Progress bar: 'auto' (default) draws one when stdout is a TTY. */
  progress?: boolean | 'auto';
  /** Listen for SIGTERM/SIGINT (default true). */
  handleSignals?: boolean;
  /** Stop as a preemption would after this many steps of this process (tests, benchmarks). */
  stopAfterSteps?: number;
}

export interface TrainResult {
  runDir: string;
  /** Where the run's state came from. */
  restoredFrom: 'checkpoint' | 'load_parameters_path' | 'fresh';
  /** The step this process started at (0, or the restored checkpoint's step). */
  startStep: number;
  /** Steps completed when the run returned. */
  endStep: number;
  /** Loss of every step this process ran, in order (losses[i] is step startStep + i). */
  losses: number[];
  /** Per-step report of every logged step. */
  reports: StepReport[];
  /** True when a signal (or stopAfterSteps) ended the run early after a checkpoint. */
  preempted: boolean;
  compileStats: CompileStats;
  cpuPeakFlops: number | null;
  /** Modelled seconds of one step on the simulated TPU (null when not modelled). */
  simulatedStepSeconds: number | null;
  /** The final state (its arrays are live; the run's last state was not donated). */
  state: TrainState;
}

export async function train(c: Config, opts: TrainOptions = {}): Promise<TrainResult> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const tty = opts.progress === 'auto' || opts.progress === undefined ? Boolean(process.stdout.isTTY) && opts.log === undefined : opts.progress;
  if (opts.stopAfterSteps !== undefined && !(Number.isInteger(opts.stopAfterSteps) && opts.stopAfterSteps >= 1)) {
    throw new RangeError(`train: stopAfterSteps must be an integer >= 1; got ${opts.stopAfterSteps}`);
  }
  setBackend(c.backend);
  const runDir = runDirOf(c);
  mkdirSync(runDir, { recursive: true });
  // More than one device: one GSPMD program over the ici_* mesh of @tpukit/mesh's devices.
  const ts = makeTrainStep(c, { mesh: c.num_devices > 1 ? makeTrainMesh(c, devices()) : null });
  const data = makeDataIterator(c);
  const tflops = calculateTflopsTrainingPerDevice(c).total;
  const tokens = tokensPerDevicePerStep(c);

  const manager = c.enable_checkpointing
    ? new CheckpointManager(checkpointDirOf(runDir), {
        saveIntervalSteps: c.checkpoint_period,
        maxToKeep: c.max_num_checkpoints_to_keep === -1 ? undefined : c.max_num_checkpoints_to_keep,
        enableAsyncCheckpointing: c.async_checkpointing,
      })
    : null;
  let signals: PreemptionHandle | null = null;
  try {
    // ---- resume: this run's checkpoint -> load_parameters_path -> fresh init
    let state = ts.init();
    let restoredFrom: TrainResult['restoredFrom'] = 'fresh';
    const latest = manager?.latestStep() ?? null;
    if (manager && latest !== null) {
      const r = (await manager.restore(latest, args.Composite({ items: args.StandardRestore(state), iter: args.JsonRestore(data) }))) as { items: TrainState };
      state = ts.place(r.items);
      restoredFrom = 'checkpoint';
    } else if (c.load_parameters_path !== '') {
      const params = await restoreParams(c, c.load_parameters_path, state.params);
      state = ts.place({ ...state, params, optState: ts.optimizer.init(params) });
      restoredFrom = 'load_parameters_path';
    }
    const startStep = state.step.item() as number;

    // ---- the two MFU denominators, measured once
    const cpuPeakFlops = c.measure_mfu ? measureCpuPeakFlops(c.dtype) : null;
    let simulatedStepSeconds: number | null = null;
    let simulatedCommSeconds: number | null = null;
    if (c.measure_mfu && startStep < c.steps) {
      // One eager step under the cost ledger (its result is dropped; state is not donated eagerly).
      const probe = makeDataIterator(c).next();
      // The probe costs the whole global step; each of the num_devices chips does 1/num_devices of
      // it, matching the per-device TFLOPs it is divided into. A sharded step adds the interconnect
      // time of the collectives its compiled partitioned program runs (no overlap with compute).
      simulatedStepSeconds = simulatedSeconds(() => ts.fn(state, probe), c.tpu_generation) / c.num_devices;
      if (ts.mesh !== null) {
        simulatedCommSeconds = simulatedCommunicationSeconds(ts.jitted.lower(state, ts.placeBatch(probe)).compile(), c.tpu_generation, c.num_devices);
        simulatedStepSeconds += simulatedCommSeconds ?? 0;
      }
    }
    const mfuTpu = simulatedStepSeconds === null ? null : (tflops * 1e12) / (simulatedStepSeconds * peakOf(c));

    log(
      `maxtext: ${c.source} -> ${runDir}: ${c.num_decoder_layers} layers, emb ${c.emb_dim}, ${c.num_query_heads}/${c.num_kv_heads} heads, mlp ${c.mlp_dim}, vocab ${c.vocab_size}, ` +
        `${countParams(state.params).toLocaleString('en-US')} params; batch ${c.global_batch_size_to_load} x ${c.max_target_length}; ${c.steps} steps on the ${c.backend} backend; ` +
        (ts.mesh === null ? '' : `${c.num_devices} devices, mesh ${Object.entries(ts.mesh.shape).map(([k, v]) => `${k}=${v}`).join(' ')}; `) +
        `${restoredFrom === 'fresh' ? 'fresh init' : `restored from ${restoredFrom} at step ${startStep}`}; ${(tflops * 1e3).toFixed(3)} GFLOP/step/device` +
        (cpuPeakFlops === null ? '' : `; CPU matmul peak ${(cpuPeakFlops / 1e9).toFixed(1)} GFLOP/s`) +
        (simulatedStepSeconds === null ? '' : `; simulated ${c.tpu_generation} step ${(simulatedStepSeconds * 1e6).toFixed(1)} us`) +
        (ts.mesh === null || simulatedStepSeconds === null ? '' : simulatedCommSeconds === null ? ` (communication not modelled: no ${c.tpu_generation} interconnect record)` : ` (${(simulatedCommSeconds * 1e6).toFixed(1)} us communication)`),
    );

    const tb = c.enable_tensorboard ? new EventFileWriter(join(runDir, 'tensorboard')) : null;
    const metricsFile = c.metrics_file === '' ? join(runDir, 'metrics.jsonl') : resolve(c.metrics_file);
    const profiler = new StepProfiler(c.profiler === 'trace' ? join(runDir, 'profile') : null, startStep + c.skip_first_n_steps_for_profiler, c.profiler_steps);
    if (opts.handleSignals ?? true) signals = installPreemptionHandler({ signals: ['SIGTERM', 'SIGINT'] });

    const losses: number[] = [];
    const reports: StepReport[] = [];
    let preempted = false;
    let lastSaved = latest ?? -1;
    const save = async (completed: number, force: boolean): Promise<void> => {
      if (!manager || completed === lastSaved) return;
      const t = performance.now();
      const saved = await manager.save(completed, args.Composite({ items: args.StandardSave(state), iter: args.JsonSave(data) }), { force });
      if (saved) lastSaved = completed;
      profiler.span(completed - 1, 'checkpoint', t, { saved });
    };

    for (let step = startStep; step < c.steps; step++) {
      let t = performance.now();
      const batch = ts.placeBatch(data.next());
      profiler.span(step, 'data', t);
      t = performance.now();
      const tracesBefore = ts.jitted.traceCount;
      const [next, m] = ts.jitted(state, batch);
      state = next;
      const loss = m.loss.item() as number;
      const seconds = (performance.now() - t) / 1000;
      const compiled = ts.jitted.traceCount > tracesBefore;
      profiler.span(step, compiled ? 'compile' : 'step', t);
      losses.push(loss);

      const completed = step + 1;
      if (completed % c.log_period === 0 || completed === c.steps || step === startStep) {
        const r: StepReport = {
          step,
          seconds,
          tflopsPerSec: tflops / seconds,
          tokensPerSec: tokens / seconds,
          totalWeights: m.totalWeights.item() as number,
          loss,
          mfuCpu: cpuPeakFlops === null ? null : (tflops * 1e12) / seconds / cpuPeakFlops,
          mfuTpu,
          tpuGeneration: c.tpu_generation,
        };
        reports.push(r);
        const rawNorm = m.rawGradNorm.item() as number;
        const clip = c.gradient_clipping_threshold;
        const scalars: Record<string, number> = {
          'learning/loss': loss,
          'learning/total_weights': r.totalWeights,
          'learning/grad_norm': clip > 0 ? Math.min(rawNorm, clip) : rawNorm,
          'learning/raw_grad_norm': rawNorm,
          'learning/current_learning_rate': m.learningRate.item() as number,
          'perf/step_time_seconds': seconds,
          'perf/per_device_tflops': tflops,
          'perf/per_device_tflops_per_sec': r.tflopsPerSec,
          'perf/per_device_tokens_per_sec': r.tokensPerSec,
          'perf/mfu': r.mfuCpu ?? 0,
          'perf/mfu_simulated_tpu': r.mfuTpu ?? 0,
        };
        if (tty) process.stdout.write('\r\x1b[2K');
        log(formatStepLine(r) + (compiled ? ' (includes compilation)' : ''));
        appendFileSync(metricsFile, `${JSON.stringify({ step, ...scalars })}\n`);
        tb?.scalars(step, scalars);
      }
      if (tty) process.stdout.write(`\r${progressBar(completed, c.steps, loss)}`);

      // Let pending events run (a signal's handler only runs from the event loop, and this loop
      // would otherwise never leave the microtask queue between steps).
      await new Promise<void>((res) => setImmediate(res));
      const stop = preemptionSignal() !== null || (opts.stopAfterSteps !== undefined && losses.length >= opts.stopAfterSteps);
      await save(completed, stop);
      profiler.maybeWrite(step);
      if (stop && completed < c.steps) {
        preempted = true;
        if (tty) process.stdout.write('\n');
        log(`maxtext: ${preemptionSignal() ?? 'stop requested'} after step ${step}: ${manager ? `checkpoint ${completed} saved` : 'checkpointing is off, nothing saved'}; rerun the same command to resume`);
        break;
      }
    }
    if (tty) process.stdout.write('\n');
    const endStep = startStep + losses.length;
    if (!preempted && c.save_checkpoint_on_completion) await save(endStep, true);
    await manager?.waitUntilFinished();
    const trace = profiler.maybeWrite(endStep, true);
    if (trace) log(`maxtext: profile written to ${trace}`);
    const stats = ts.jitted.compileStats();
    log(`maxtext: ${losses.length} steps in this process; jit: ${stats.misses} compile(s), ${stats.recompiles} recompile(s)${stats.explanations.length ? `: ${stats.explanations.join('; ')}` : ''}`);
    return { runDir, restoredFrom, startStep, endStep, losses, reports, preempted, compileStats: stats, cpuPeakFlops, simulatedStepSeconds, state };
  } finally {
    signals?.uninstall();
    resetPreemption();
    await manager?.close();
  }
}

function peakOf(c: Config): number {
  return systolic.presets[c.tpu_generation].peakBf16Flops;
}
