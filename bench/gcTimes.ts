/**
 * Garbage collections in timed windows of a benchmark (bench:gpt's GPT_BENCH_GC=1): V8 reports
 * each pause of the calling thread's isolate as a `gc` performance entry (minor = Scavenge, major
 * = Mark-Compact's final pause, incremental = a marking step). Entries arrive asynchronously, so
 * windows are read after the timed work (`settle()` waits one macrotask for late entries); the
 * concurrent part of a collection (marking, sweeping on V8's platform threads) shows in
 * threadTimes.ts's background group, not here.
 */
import { PerformanceObserver, constants, type PerformanceEntry } from 'node:perf_hooks';

export interface GcWindow {
  /** Pauses by kind (minor, major, incremental, weak callbacks). */
  count: Record<string, number>;
  /** Milliseconds of all pauses. */
  ms: number;
}

const kinds: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};

/** A gc entry's kind as a word (Node's `perf_hooks.constants.NODE_PERFORMANCE_GC_*`). */
export function gcKind(e: PerformanceEntry): string {
  return kinds[(e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? 0] ?? 'gc';
}

/** Collects gc entries from now on; `stop()` ends it. */
export function gcRecorder(): { settle(): Promise<void>; within(t0: number, t1: number): GcWindow; stop(): void } {
  const entries: PerformanceEntry[] = [];
  const observer = new PerformanceObserver((list) => entries.push(...list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return {
    settle: () => new Promise((r) => setTimeout(r, 0)),
    within(t0, t1) {
      const w: GcWindow = { count: {}, ms: 0 };
      for (const e of entries) {
        if (e.startTime < t0 || e.startTime >= t1) continue;
        const kind = gcKind(e);
        w.count[kind] = (w.count[kind] ?? 0) + 1;
        w.ms += e.duration;
      }
      return w;
    },
    stop() {
      observer.disconnect();
    },
  };
}
