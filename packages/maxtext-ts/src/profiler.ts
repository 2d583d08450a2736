/**
 * A Chrome-trace / Perfetto JSON profile (`profiler: trace`): complete events ("ph": "X") with
 * microsecond timestamps for the compile, data, step and checkpoint spans of a window of steps
 * (`skip_first_n_steps_for_profiler`, then `profiler_steps`), written as `trace.json` when the
 * window closes. Open it in chrome://tracing or ui.perfetto.dev.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TraceEvent {
  name: string;
  cat: string;
  ph: 'X';
  ts: number;
  dur: number;
  pid: number;
  tid: number;
  args?: Record<string, unknown>;
}

export class StepProfiler {
  readonly events: TraceEvent[] = [];
  readonly #origin = performance.now();
  #written: string | null = null;

  constructor(
    readonly dir: string | null,
    readonly firstStep: number,
    readonly numSteps: number,
  ) {}

  /** Whether spans of `step` are recorded. */
  active(step: number): boolean {
    return this.dir !== null && this.#written === null && step >= this.firstStep && step < this.firstStep + this.numSteps;
  }

  /** Records a span that started at `start` (performance.now()) and ends now. */
  span(step: number, name: 'compile' | 'data' | 'step' | 'checkpoint' | 'log', start: number, args?: Record<string, unknown>): void {
    if (!this.active(step) && name !== 'compile') return;
    const end = performance.now();
    this.events.push({ name, cat: name, ph: 'X', ts: Math.round((start - this.#origin) * 1000), dur: Math.max(0, Math.round((end - start) * 1000)), pid: 1, tid: name === 'checkpoint' ? 2 : 1, args: { step, ...args } });
  }

  /** Writes the trace when the window is over (or at the end of the run); returns its path. */
  maybeWrite(step: number, force = false): string | null {
    if (this.dir === null || this.#written !== null) return this.#written;
    if (!force && step < this.firstStep + this.numSteps - 1) return null;
    mkdirSync(this.dir, { recursive: true });
    const path = join(this.dir, 'trace.json');
    writeFileSync(path, JSON.stringify({ traceEvents: this.events, displayTimeUnit: 'ms' }));
    this.#written = path;
    return path;
  }
}
