/**
 * A runtime profiler for compiled executables: wall time per executed instruction of the entry
 * computation (a fusion's generated kernel, a dot, a kOutput dot with its epilogue, every other
 * core primitive), summed over calls, plus each executable's whole call. Off by default; on with
 * `profile.enable()` or env `TPUKIT_PROFILE=1` at import. When off, an executable checks one
 * boolean per call and runs its plain loop (no timers, no records touched), so it costs nothing.
 *
 * Records are keyed by executable name and instruction, made when an executable is built (one
 * per step, allocated once); timing a call only adds to them. `profile.report()` prints the
 * breakdown by category (dot, fusion kinds, primitives) and the most expensive instructions.
 */
import { envSwitch } from '@tpukit/core/internal';
import type { HloInstruction } from './hlo';

export interface ProfileRecord {
  /** The executable's name (`jit_loss`, ...). */
  executable: string;
  /** The instruction (`fusion.123`, `dot_general.45`) or `(call)` for the executable's whole call. */
  instruction: string;
  /** What ran: `dot`, `dot (batched)` (a dot with batch dims, such as attention's per-head products), `dot+epilogue`, `fusion kLoop`, `fusion kInput`, `fusion kRow`, a primitive's name, `(call)`. */
  category: string;
  /** Shapes and, for fusions, the ops inside: `f32[2048,128] x f32[128,512] -> f32[2048,512]`. */
  detail: string;
  calls: number;
  /** Wall-clock milliseconds. */
  ms: number;
  /**
   * Milliseconds of this process's CPU time (user + system, every thread: with kernel threads it
   * counts the workers' time too). On a shared machine a one-thread run's CPU time leaves out the
   * time other processes held the core, which wall time includes.
   */
  cpuMs: number;
}

const proc = typeof process !== 'undefined' && typeof process.cpuUsage === 'function' ? process : null;

/** This process's CPU time in milliseconds (0 where the host cannot tell). */
export function cpuNow(): number {
  if (!proc) return 0;
  const u = proc.cpuUsage();
  return (u.user + u.system) / 1000;
}

const envOn = envSwitch('TPUKIT_PROFILE', false);
let on = envOn;
const records: ProfileRecord[] = [];

const shapeText = (i: HloInstruction): string => i.shapes.map((s) => `${s.dtype === 'float32' ? 'f32' : s.dtype}[${s.shape.join(',')}]`).join(',');

/** Category and detail of one entry instruction (also the pool-job trace's step labels, `executable.ts`). */
export function describe(i: HloInstruction): { category: string; detail: string } {
  const ins = i.operands.map(shapeText).join(' x ');
  if (i.opcode === 'fusion') {
    const kind = (i.params as { kind: string }).kind;
    const body = i.called[0].instructions.filter((m) => m.opcode !== 'parameter');
    const ops = [...new Set(body.map((m) => m.opcode))];
    const dot = body.find((m) => m.prim?.name === 'dot_general');
    const category = kind === 'kOutput' ? 'dot+epilogue' : `fusion ${kind}`;
    const what = dot ? `${dot.operands.map(shapeText).join(' x ')} + ${ops.filter((o) => o !== dot.opcode).join(',')}` : `${body.length} ops (${ops.slice(0, 6).join(',')}${ops.length > 6 ? ',...' : ''})`;
    return { category, detail: `${what} -> ${shapeText(i)}` };
  }
  // (only dot_general's dimensionNumbers are [contracting, batch]; gather's and scatter's differ)
  const isDot = i.prim?.name === 'dot_general';
  const batched = isDot && (i.params as { dimensionNumbers: readonly [unknown, readonly [readonly number[], unknown]] }).dimensionNumbers[1][0].length > 0;
  const category = isDot ? (batched ? 'dot (batched)' : 'dot') : (i.prim?.name ?? i.opcode);
  return { category, detail: `${ins} -> ${shapeText(i)}` };
}

/** A record for `inst` of `executable` (or the executable's whole call when `inst` is null). */
export function profileRecord(executable: string, inst: HloInstruction | null): ProfileRecord {
  const d = inst ? describe(inst) : { category: '(call)', detail: '' };
  const r: ProfileRecord = { executable, instruction: inst ? `${inst.opcode}.${inst.id}` : '(call)', ...d, calls: 0, ms: 0, cpuMs: 0 };
  records.push(r);
  return r;
}

/** Whether executables time their instructions now. */
export function profiling(): boolean {
  return on;
}

const pad = (s: string, n: number) => (s.length >= n ? s : s + ' '.repeat(n - s.length));
const fmt = (ms: number) => ms.toFixed(2).padStart(9);

export const profile = {
  /** Turns the profiler on (default for `TPUKIT_PROFILE=1`) or off; applies from the next call. */
  enable(enabled = true): void {
    on = enabled;
  },
  enabled: profiling,
  /** Zeroes every record (keeps them, so executables built earlier keep recording). */
  reset(): void {
    for (const r of records) {
      r.calls = 0;
      r.ms = 0;
      r.cpuMs = 0;
    }
  },
  /** The records that ran since the last reset, most expensive (wall or CPU time) first. */
  records(by: 'wall' | 'cpu' = 'wall'): ProfileRecord[] {
    const key = by === 'cpu' ? 'cpuMs' : 'ms';
    return records.filter((r) => r.calls > 0).sort((a, b) => b[key] - a[key]);
  },
  /** Milliseconds (wall and CPU) per category (summed over executables; `(call)` rows excluded), most expensive first. */
  byCategory(by: 'wall' | 'cpu' = 'wall'): { category: string; calls: number; ms: number; cpuMs: number }[] {
    const m = new Map<string, { category: string; calls: number; ms: number; cpuMs: number }>();
    for (const r of records) {
      if (r.calls === 0 || r.category === '(call)') continue;
      const e = m.get(r.category) ?? { category: r.category, calls: 0, ms: 0, cpuMs: 0 };
      e.calls += r.calls;
      e.ms += r.ms;
      e.cpuMs += r.cpuMs;
      m.set(r.category, e);
    }
    const key = by === 'cpu' ? 'cpuMs' : 'ms';
    return [...m.values()].sort((a, b) => b[key] - a[key]);
  },
  /** A text table: each executable's calls, the time per category, and the `top` most expensive instructions (`by` wall or CPU time). */
  report({ top = 20, by = 'wall' }: { top?: number; by?: 'wall' | 'cpu' } = {}): string {
    const rs = profile.records(by);
    const calls = rs.filter((r) => r.category === '(call)');
    const inst = rs.filter((r) => r.category !== '(call)');
    const total = inst.reduce((s, r) => s + r.ms, 0);
    const lines: string[] = [];
    for (const c of calls) {
      const inside = inst.filter((r) => r.executable === c.executable).reduce((s, r) => s + r.ms, 0);
      lines.push(`  ${pad(c.executable, 28)} ${c.calls} call(s) ${fmt(c.ms)} ms wall, ${c.cpuMs.toFixed(2)} ms CPU (instructions ${inside.toFixed(2)} ms wall; the rest is argument/result handling)`);
    }
    const cpuTotal = inst.reduce((s, r) => s + r.cpuMs, 0);
    lines.push(`  ${pad('category', 28)} ${'wall ms'.padStart(9)}   share ${'CPU ms'.padStart(9)}   share  count`);
    for (const c of profile.byCategory(by)) lines.push(`  ${pad(c.category, 28)} ${fmt(c.ms)} ${((100 * c.ms) / total).toFixed(1).padStart(6)}% ${fmt(c.cpuMs)} ${((100 * c.cpuMs) / (cpuTotal || 1)).toFixed(1).padStart(6)}%  ${c.calls}`);
    lines.push(`  top instructions (by ${by} time):`);
    for (const r of inst.slice(0, top)) lines.push(`  ${fmt(r.ms)} ms ${fmt(r.cpuMs)} CPU ${String(r.calls).padStart(4)}x ${pad(r.category, 14)} ${pad(r.instruction, 18)} ${r.detail}  [${r.executable}]`);
    return lines.join('\n');
  },
};
