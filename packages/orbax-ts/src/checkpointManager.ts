/**
 * CheckpointManager (orbax.checkpoint.CheckpointManager): saves numbered steps of one or more
 * named items into a directory, decides when to save (`saveIntervalSteps`, preemption), keeps
 * the steps the retention policy asks for (retention.ts), and restores them. Async by default:
 * `save` copies the state (snapshot.ts) and hands the bytes to the background writer
 * (backgroundWriter.ts); the step becomes visible to `latestStep()` only once it is committed
 * on disk (writer.ts). Errors of a background save are kept and thrown by the next call.
 *
 * One writer per directory: a manager takes the directory's writer lock (lock.ts) before it
 * cleans up anything, so a second writer is refused before it could delete the first one's save
 * in progress; `readOnly` managers take no lock, never write or delete, and can restore while
 * another process saves. Cleanup and retention deletions that fail are warnings: a step that
 * cannot be deleted never blocks opening the directory or restoring the good steps.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Composite, JsonRestore, JsonSave, type RestoreArg, type SaveArg, StandardRestore, StandardSave, isRestoreArg, isSaveArg } from './args';
import { BackgroundWriter } from './backgroundWriter';
import {
  CHECKPOINT_METADATA, COMMIT_MARKER, DEFAULT_ITEM, DELETING_SUFFIX, JSON_HANDLER, METRICS_FILE, METRICS_ITEM, STANDARD_HANDLER, TMP_SUFFIX,
  parseStepDirName, safeComponent, stepDirName,
} from './layout';
import { preemptionSignal } from './preemption';
import { StepReader, restoreJson, restoreStandard } from './reader';
import { type Metrics, stepsToKeep } from './retention';
import { type Defer, jsonBytes, planItem } from './snapshot';
import { SnapshotPool } from './snapshotPool';
import { type LockOptions, WriterLock, liveWriter } from './lock';
import { type FaultPoint, type FileToWrite, type WriteJob, type WriteResult, removeTree, tryDeleteStepDir, writeCheckpoint } from './writer';

export interface CheckpointManagerOptions {
  /** Save when `step % saveIntervalSteps === 0` (default 1). */
  saveIntervalSteps?: number;
  /** Keep at most this many steps (plus those kept by `keepPeriod`); unset keeps all. */
  maxToKeep?: number;
  /** Never delete steps divisible by this. */
  keepPeriod?: number;
  /** Score of a step's metrics; with it, `maxToKeep` keeps the best steps instead of the newest. */
  bestFn?: (metrics: Metrics) => number;
  bestMode?: 'max' | 'min';
  /** With `bestFn`: keep steps saved without metrics (default true). */
  keepCheckpointsWithoutMetrics?: boolean;
  /** Write in a background worker thread (default true). */
  enableAsyncCheckpointing?: boolean;
  /** Create the directory when missing (default true). */
  createIfMissing?: boolean;
  /** fsync files and directories (default true). Turning it off loses durability, not atomicity. */
  fsync?: boolean;
  /**
   * Async saves: keep the host buffers of one save's copy for the next save (default true), so
   * the copy in `save` writes into memory that is already mapped. Costs host memory equal to
   * the saved arrays between saves; `false` lets them be garbage-collected after each save.
   */
  keepSnapshotBuffers?: boolean;
  /**
   * Async saves: post the job to the writer before copying, so that it checksums and writes each
   * file as soon as its copy is done (default true). `false` copies everything first and then
   * writes (Orbax's order): `save` blocks about 20-30% less, since the writer no longer competes
   * with the copy for memory bandwidth, but the step commits later (see the README's benchmarks).
   */
  writeWhileCopying?: boolean;
  /**
   * Open to restore only (default false): no writer lock, no cleanup, `save` and `delete`
   * refused. Several read-only managers may share a directory with one writer.
   */
  readOnly?: boolean;
  /** The writer lock: when a lock written on another host counts as stale (see lock.ts). */
  lock?: LockOptions;
  /** @internal Crash tests: kill the process at this point of the `faultAtSave`-th save. */
  _fault?: { at: FaultPoint; save: number };
  /** @internal Tests: removing a path whose base name matches this regex fails with EACCES. */
  _failRemove?: string;
}

/** Reports a cleanup or retention problem that does not stop the manager. */
function warn(message: string): void {
  process.emitWarning(message, { code: 'TPUKIT_ORBAX_CLEANUP' });
}

export interface SaveOptions {
  metrics?: Metrics;
  /** Save even when `shouldSave(step)` is false. */
  force?: boolean;
}

type Items<A> = Record<string, A>;

function itemsOf<A>(x: unknown, isArg: (v: unknown) => v is A, op: string, what: string): { items: Items<A>; single: boolean } {
  if (isArg(x)) return { items: { [DEFAULT_ITEM]: x }, single: true };
  const rec = x instanceof Composite ? x.items : x;
  if (typeof rec !== 'object' || rec === null || Array.isArray(rec)) throw new Error(`${op}: args must be ${what} or args.Composite({ name: ${what}, ... }); got ${String(x)}`);
  const items: Items<A> = {};
  for (const [k, v] of Object.entries(rec)) {
    safeComponent(k, `${op}: item name`);
    if (k === METRICS_ITEM) throw new Error(`${op}: item name "${METRICS_ITEM}" is reserved for save(..., { metrics })`);
    if (!isArg(v)) throw new Error(`${op}: item "${k}" must be ${what}; got ${String(v)}`);
    items[k] = v;
  }
  if (Object.keys(items).length === 0) throw new Error(`${op}: no items given`);
  return { items, single: false };
}

export class CheckpointManager {
  readonly directory: string;
  readonly options: Readonly<CheckpointManagerOptions>;
  #steps = new Map<number, Metrics | undefined>();
  #writer: BackgroundWriter | null = null;
  #pool: SnapshotPool | null = null;
  #inflight: Promise<void> | null = null;
  #error: Error | null = null;
  #inflightStep: number | null = null;
  #saves = 0;
  #closed = false;
  #lock: WriterLock | null = null;

  constructor(directory: string, options: CheckpointManagerOptions = {}) {
    const op = 'CheckpointManager';
    for (const k of ['saveIntervalSteps', 'maxToKeep', 'keepPeriod'] as const) {
      const v = options[k];
      if (v !== undefined && !(Number.isInteger(v) && v >= (k === 'maxToKeep' ? 1 : 1))) throw new Error(`${op}: ${k} must be a positive integer; got ${v}`);
    }
    if (options.bestMode !== undefined && options.bestMode !== 'max' && options.bestMode !== 'min') throw new Error(`${op}: bestMode must be 'max' or 'min'; got ${JSON.stringify(options.bestMode)}`);
    this.directory = path.resolve(directory);
    this.options = { ...options };
    if (!fs.existsSync(this.directory)) {
      if (options.createIfMissing === false || options.readOnly) throw new Error(`${op}: directory ${this.directory} does not exist (${options.readOnly ? 'a read-only manager does not create it' : 'createIfMissing is false'})`);
      fs.mkdirSync(this.directory, { recursive: true });
    } else if (!fs.statSync(this.directory).isDirectory()) throw new Error(`${op}: ${this.directory} is not a directory`);
    if (options.readOnly) {
      this.reload();
      return;
    }
    // The lock comes first: a refused second writer must not clean up the first one's save.
    this.#lock = WriterLock.acquire(this.directory, op, options.lock);
    try {
      this.#cleanup();
      this.reload();
    } catch (e) {
      this.#lock.release();
      throw e;
    }
    if (options.enableAsyncCheckpointing !== false) {
      // Start the writer thread off the first save's critical path (after the constructor returns).
      const writer = (this.#writer = new BackgroundWriter());
      setImmediate(() => {
        if (this.#writer === writer) writer.warmUp();
      }).unref();
    }
  }

  /**
   * Removes what interrupted saves and deletions left behind: tmp directories and unmarked steps.
   * What cannot be removed is reported with a warning and left alone: it is outside the step
   * namespace (or not a complete step), so it never hides or breaks a good step.
   */
  #cleanup(): void {
    for (const name of fs.readdirSync(this.directory)) {
      const full = path.join(this.directory, name);
      try {
        if (name.endsWith(TMP_SUFFIX) || name.endsWith(DELETING_SUFFIX)) {
          if (parseStepDirName(name.slice(0, name.indexOf('.'))) !== null) removeTree(full, this.options._failRemove);
          continue;
        }
        const step = parseStepDirName(name);
        if (step === null || fs.existsSync(path.join(full, COMMIT_MARKER))) continue;
        if (!fs.lstatSync(full).isDirectory()) continue;
        if (writtenByOrbax(full)) continue; // finalized by Python Orbax (atomic rename, no marker): not ours to delete
        removeTree(full, this.options._failRemove);
      } catch (e) {
        warn(`CheckpointManager: could not remove the leftover ${full} (${(e as Error).message}); ignoring it, the complete steps in ${this.directory} are unaffected`);
      }
    }
  }

  /** Whether this manager was opened with `readOnly` (no lock, no save or delete). */
  get readOnly(): boolean {
    return this.options.readOnly === true;
  }

  #checkWritable(op: string): void {
    if (this.options.readOnly) throw new Error(`${op}: the CheckpointManager for ${this.directory} was opened with { readOnly: true }`);
  }

  /** Re-reads the step list from disk. */
  reload(): void {
    this.#steps.clear();
    for (const name of fs.readdirSync(this.directory)) {
      const step = parseStepDirName(name);
      if (step === null || !fs.existsSync(path.join(this.directory, name, COMMIT_MARKER))) continue;
      let metrics: Metrics | undefined;
      try {
        const m = JSON.parse(fs.readFileSync(path.join(this.directory, name, CHECKPOINT_METADATA), 'utf8')).metrics;
        metrics = m && typeof m === 'object' && Object.keys(m).length > 0 ? m : undefined;
      } catch {
        metrics = undefined; // verified on restore; a damaged metadata file must not hide the step
      }
      this.#steps.set(step, metrics);
    }
  }

  #check(op: string): void {
    if (this.#closed) throw new Error(`${op}: the CheckpointManager for ${this.directory} is closed`);
    this.checkForErrors();
  }

  /** Throws (once) the error of a background save that failed since the last call. */
  checkForErrors(): void {
    const e = this.#error;
    if (e) {
      this.#error = null;
      throw new Error(`a background save failed: ${e.message}`, { cause: e });
    }
  }

  allSteps(): number[] {
    return [...this.#steps.keys()].sort((a, b) => a - b);
  }

  latestStep(): number | null {
    const s = this.allSteps();
    return s.length ? s[s.length - 1] : null;
  }

  /** The step with the best metrics under `bestFn` (the latest step without a `bestFn`). */
  bestStep(): number | null {
    const { bestFn, bestMode = 'max' } = this.options;
    if (!bestFn) return this.latestStep();
    let best: number | null = null;
    let score = 0;
    for (const s of this.allSteps()) {
      const m = this.#steps.get(s);
      if (m === undefined) continue;
      const v = bestFn(m);
      if (best === null || (bestMode === 'max' ? v >= score : v <= score)) [best, score] = [s, v];
    }
    return best;
  }

  metrics(step: number): Metrics | undefined {
    return this.#steps.get(step);
  }

  isSavingInProgress(): boolean {
    return this.#inflight !== null;
  }

  /** Whether `save(step)` would save: newer than the latest step, and on the interval or preempted. */
  shouldSave(step: number): boolean {
    const latest = this.latestStep();
    if (latest !== null && step <= latest) return false;
    if (preemptionSignal() !== null) return true;
    return step % (this.options.saveIntervalSteps ?? 1) === 0;
  }

  /** True once a preemption signal arrived (see `installPreemptionHandler`): save now and exit. */
  reachedPreemption(_step: number): boolean {
    return preemptionSignal() !== null;
  }

  /**
   * Saves `args` as step `step` and returns whether it saved. In async mode it resolves once the
   * state is copied; the write continues in the background (a later save waits for it).
   */
  async save(step: number, args: SaveArg | Composite<SaveArg> | Items<SaveArg>, opts: SaveOptions = {}): Promise<boolean> {
    const op = 'save';
    this.#check(op);
    this.#checkWritable(op);
    if (!Number.isSafeInteger(step) || step < 0) throw new Error(`${op}: step must be a non-negative integer; got ${step}`);
    const { items } = itemsOf(args, isSaveArg, op, 'args.StandardSave(...) or args.JsonSave(...)');
    if (!opts.force && !this.shouldSave(step)) return false;
    await this.#wait();
    if (this.#steps.has(step)) throw new Error(`${op}: step ${step} already exists in ${this.directory}`);
    const isAsync = this.options.enableAsyncCheckpointing !== false;
    const pool = isAsync ? (this.#pool ??= new SnapshotPool()) : null;
    const keepBuffers = this.options.keepSnapshotBuffers !== false;
    const files: FileToWrite[] = [];
    const handlers: Record<string, string> = {};
    // Async: the copies are queued while planning and run below (after the job is posted, unless
    // `writeWhileCopying` is false, so the writer starts on the first files while later ones are copied).
    const copies: (() => void)[] = [];
    const defer: Defer | null = pool ? (copy) => copies.push(copy) : null;
    try {
      for (const [name, arg] of Object.entries(items)) {
        for (const f of planItem(arg, `${op}: item "${name}"`, pool ? pool.take : null, defer)) files.push({ rel: `${name}/${f.rel}`, data: f.data, ready: f.ready });
        handlers[name] = arg instanceof StandardSave ? STANDARD_HANDLER : JSON_HANDLER;
      }
      if (opts.metrics !== undefined) files.push({ rel: `${METRICS_ITEM}/${METRICS_FILE}`, data: jsonBytes(opts.metrics) });
    } catch (e) {
      pool?.recycle(keepBuffers); // nothing was submitted: the buffers are free again
      throw e;
    }
    const fresh = pool?.endPlan() ?? [];
    const metrics = opts.metrics && Object.keys(opts.metrics).length > 0 ? opts.metrics : undefined;
    const all = new Map(this.#steps);
    all.set(step, metrics);
    const keep = new Set(stepsToKeep([...all.keys()], all, this.options));
    const deleteSteps = [...this.#steps.keys()].filter((s) => !keep.has(s));
    this.#saves++;
    const fault = this.options._fault && this.options._fault.save === this.#saves ? this.options._fault.at : undefined;
    const job: WriteJob = {
      root: this.directory,
      step,
      files,
      checkpointMetadata: {
        item_handlers: handlers,
        metrics: opts.metrics ?? {},
        performance_metrics: {},
        init_timestamp_nsecs: Date.now() * 1e6,
        custom_metadata: {},
      },
      deleteSteps,
      fsync: this.options.fsync ?? true,
      progress: pool ? new Int32Array(new SharedArrayBuffer(4)) : undefined,
      fault,
      failRemove: this.options._failRemove,
    };
    const commit = (r: WriteResult): void => {
      this.#steps.set(step, metrics);
      for (const s of r.deleted) this.#steps.delete(s);
      for (const w of r.warnings) warn(`save(${step}): the step is saved, but ${w}`);
    };
    if (!pool) {
      commit(await writeCheckpoint(job));
      return true;
    }
    // The blocking part: copy the state. The writer waits on `progress` for each file's copy.
    const progress = job.progress!;
    const copyAll = (): void => {
      try {
        for (let i = 0; i < copies.length; i++) {
          copies[i]();
          Atomics.store(progress, 0, i + 1);
          Atomics.notify(progress, 0);
        }
      } catch (e) {
        Atomics.store(progress, 0, -1); // a writer already started abandons the step
        Atomics.notify(progress, 0);
        throw e;
      }
    };
    const overlap = this.options.writeWhileCopying !== false;
    this.#writer ??= new BackgroundWriter();
    this.#writer.prefault(fresh); // the writer thread faults in new buffers from the back while we copy from the front
    if (!overlap) {
      try {
        copyAll();
      } catch (e) {
        pool.recycle(keepBuffers);
        throw e;
      }
    }
    this.#inflightStep = step;
    this.#inflight = this.#writer.submit(job).then(commit, (e: Error) => {
      this.#error = e;
    }).finally(() => {
      pool.recycle(keepBuffers); // the writer is done with them (committed or failed)
      this.#inflight = null;
      this.#inflightStep = null;
    });
    // Synchronous, so the `finally` above cannot recycle a buffer before its copy is done.
    if (overlap) copyAll();
    return true;
  }

  async #wait(): Promise<void> {
    while (this.#inflight) await this.#inflight;
    this.checkForErrors();
  }

  /** Waits for a background save; throws its error if it failed. */
  async waitUntilFinished(): Promise<void> {
    await this.#wait();
  }

  /**
   * Restores step `step` (default: the latest). `args` names the items and how to restore them;
   * without it every item is restored as saved. A single unnamed item comes back as is, several
   * as an object keyed by item name.
   */
  async restore(step?: number | null, args?: RestoreArg | Composite<RestoreArg> | Items<RestoreArg>): Promise<any> {
    const op = 'restore';
    this.#check(op);
    if (step != null && step === this.#inflightStep) await this.#wait(); // our own save of it: wait for the commit
    // Committed since (by another process)? A reader asked for the latest step looks again too.
    if (step != null ? !this.#steps.has(step) : this.options.readOnly) this.reload();
    const s = step ?? this.latestStep();
    if (s === null) throw new Error(`${op}: no complete checkpoint in ${this.directory}`);
    if (!this.#steps.has(s)) this.#notComplete(op, s);
    const r = new StepReader(this.directory, s);
    const handlers = r.itemHandlers();
    let items: Items<RestoreArg | undefined>;
    let single: boolean;
    if (args === undefined) {
      items = {};
      for (const name of handlers.keys()) items[name] = undefined;
      single = handlers.size === 1 && handlers.has(DEFAULT_ITEM);
    } else ({ items, single } = itemsOf(args, isRestoreArg, op, 'args.StandardRestore(...) or args.JsonRestore(...)'));
    const out: Record<string, unknown> = {};
    for (const [name, arg] of Object.entries(items)) {
      const h = handlers.get(name);
      if (h === undefined) throw new Error(`${op}: step ${s} has no item "${name}"; it has: ${[...handlers.keys()].join(', ')}`);
      const isJson = h === JSON_HANDLER;
      if (arg instanceof StandardRestore && isJson) throw new Error(`${op}: item "${name}" of step ${s} was saved with JsonSave; use args.JsonRestore()`);
      if (arg instanceof JsonRestore && !isJson) throw new Error(`${op}: item "${name}" of step ${s} was saved with StandardSave; use args.StandardRestore()`);
      out[name] = isJson ? restoreJson(r, name, arg as JsonRestore | undefined) : await restoreStandard(r, name, arg as StandardRestore | undefined);
    }
    return single ? out[DEFAULT_ITEM] : out;
  }

  /** Why step `s` cannot be restored: still being written (by whom), or not there. */
  #notComplete(op: string, s: number): never {
    const available = `available: [${this.allSteps().join(', ')}]`;
    if (fs.existsSync(path.join(this.directory, stepDirName(s) + TMP_SUFFIX))) {
      const w = liveWriter(this.directory, this.options.lock);
      if (w) {
        throw new Error(`${op}: step ${s} in ${this.directory} is still being written by pid ${w.pid} on host ${w.host}; wait until it commits (it then appears in reload() / allSteps()); ${available}`);
      }
      throw new Error(`${op}: step ${s} in ${this.directory} was never committed: only the temporary ${stepDirName(s)}${TMP_SUFFIX} of an interrupted save is there (no live writer); ${available}`);
    }
    throw new Error(`${op}: step ${s} is not a complete checkpoint in ${this.directory}; ${available}`);
  }

  /** Deletes a step (waits for a save in flight first). */
  async delete(step: number): Promise<void> {
    this.#check('delete');
    this.#checkWritable('delete');
    await this.#wait();
    const r = tryDeleteStepDir(this.directory, step, this.options.fsync ?? true, { failRemove: this.options._failRemove });
    if (r.gone) this.#steps.delete(step);
    if (r.error === null) return;
    if (!r.gone) throw new Error(`delete: ${r.error}`);
    warn(`delete(${step}): ${r.error}; the next open retries`);
  }

  /** Waits for the last save, stops the background writer; throws a pending background error. */
  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.#wait();
    } finally {
      this.#closed = true;
      this.#lock?.release();
      this.#lock = null;
      await this.#writer?.close();
      this.#writer = null;
      this.#pool = null;
    }
  }
}

/** A step directory Python Orbax finalized by atomic rename: commit timestamp set, no tpukit manifest. */
function writtenByOrbax(dir: string): boolean {
  try {
    const meta = JSON.parse(fs.readFileSync(path.join(dir, CHECKPOINT_METADATA), 'utf8'));
    return typeof meta?.commit_timestamp_nsecs === 'number' && !fs.existsSync(path.join(dir, '_CHECKSUMS'));
  } catch {
    return false;
  }
}

