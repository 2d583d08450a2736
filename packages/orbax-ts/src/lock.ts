/**
 * The writer lock of a checkpoint directory: one `CheckpointManager` that may save and delete
 * steps per directory. The lock is a file `<dir>/.tpukit-writer.lock` created with O_EXCL and
 * holding `{ pid, host, token, since }`; its holder touches it every `heartbeatMs` (an unref'd
 * timer). An existing lock is live when its process runs (same host: `kill(pid, 0)`) or, for a
 * lock written on another host (a shared file system), when it was touched within `staleAfterMs`.
 * A stale lock (its process died without `close()`, e.g. a SIGKILL or a preempted VM) is taken
 * over: renamed aside, checked to still be the stale lock that was examined, then replaced.
 * Read-only managers take no lock. The lock is taken before any cleanup, so a refused second
 * writer never deletes the first one's save in progress.
 */
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const LOCK_FILE = '.tpukit-writer.lock';

export interface LockInfo {
  pid: number;
  host: string;
  token: string;
  /** When the holder took the lock (ms since the epoch). */
  since: number;
}

export interface LockOptions {
  /** A lock from another host is stale when not touched for this long (default 60 s). */
  staleAfterMs?: number;
  /** How often the holder touches the lock file (default 10 s). */
  heartbeatMs?: number;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'; // it exists, owned by someone else
  }
}

function describeHolder(info: LockInfo | null, file: string): string {
  if (!info) return `an unreadable lock file ${file}`;
  return `pid ${info.pid} on host ${info.host} (since ${new Date(info.since).toISOString()}; lock file ${file})`;
}

function parseLock(text: string): LockInfo | null {
  try {
    const j = JSON.parse(text);
    return Number.isSafeInteger(j?.pid) && typeof j.host === 'string' && typeof j.token === 'string' && typeof j.since === 'number' ? j : null;
  } catch {
    return null;
  }
}

function readLock(file: string): { text: string; info: LockInfo | null; mtimeMs: number } | null {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return { text, info: parseLock(text), mtimeMs: fs.statSync(file).mtimeMs };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

/** Who holds the writer lock of `dir` now (null when nobody does or the holder is gone). */
export function liveWriter(dir: string, options: LockOptions = {}): LockInfo | null {
  const cur = readLock(path.join(dir, LOCK_FILE));
  return cur && cur.info && isLive(cur.info, cur.mtimeMs, options) ? cur.info : null;
}

function isLive(info: LockInfo, mtimeMs: number, options: LockOptions): boolean {
  if (info.host === os.hostname()) return pidAlive(info.pid);
  return Date.now() - mtimeMs < (options.staleAfterMs ?? 60_000);
}

export class WriterLock {
  readonly file: string;
  readonly info: LockInfo;
  #timer: NodeJS.Timeout | null = null;
  /** Stale locks this acquisition replaced (for a warning). */
  readonly tookOver: LockInfo[] = [];

  private constructor(file: string, info: LockInfo) {
    this.file = file;
    this.info = info;
  }

  /** Takes the lock of `dir` or throws, naming the live holder. `op` starts the error message. */
  static acquire(dir: string, op: string, options: LockOptions = {}): WriterLock {
    const file = path.join(dir, LOCK_FILE);
    const info: LockInfo = { pid: process.pid, host: os.hostname(), token: randomUUID(), since: Date.now() };
    const text = JSON.stringify(info);
    const tookOver: LockInfo[] = [];
    for (let attempt = 0; attempt < 8; attempt++) {
      try {
        const fd = fs.openSync(file, 'wx');
        try {
          fs.writeSync(fd, text);
          fs.fsyncSync(fd);
        } finally {
          fs.closeSync(fd);
        }
        const lock = new WriterLock(file, info);
        lock.tookOver.push(...tookOver);
        lock.#startHeartbeat(options.heartbeatMs ?? 10_000);
        return lock;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw new Error(`${op}: cannot create the writer lock ${file}: ${(e as Error).message}`, { cause: e });
      }
      const cur = readLock(file);
      if (cur === null) continue; // released meanwhile
      if (cur.info === null && Date.now() - cur.mtimeMs < 2000) {
        // Being written right now by another opener: look again shortly.
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
        continue;
      }
      if (cur.info !== null && isLive(cur.info, cur.mtimeMs, options)) {
        const self = cur.info.pid === process.pid && cur.info.host === info.host ? ' (another CheckpointManager in this process)' : '';
        throw new Error(
          `${op}: ${dir} is already open for writing by ${describeHolder(cur.info, file)}${self}; two writers would delete each other's saves. Close that manager first, or open this one with { readOnly: true } to restore only`,
        );
      }
      // Stale: move it aside, and put it back if what moved is not the lock examined above
      // (another opener replaced it in between).
      const aside = `${file}.takeover-${info.token}`;
      try {
        fs.renameSync(file, aside);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw e;
      }
      const moved = fs.readFileSync(aside, 'utf8');
      if (moved !== cur.text) {
        try {
          fs.linkSync(aside, file);
        } catch {
          // someone holds the name again; their lock stays, ours is dropped
        }
      } else if (cur.info) tookOver.push(cur.info);
      fs.rmSync(aside, { force: true });
    }
    throw new Error(`${op}: could not take the writer lock ${file} after several attempts (openers racing?)`);
  }

  #startHeartbeat(ms: number): void {
    this.#timer = setInterval(() => {
      try {
        const now = new Date();
        fs.utimesSync(this.file, now, now);
      } catch {
        // removed under us: the next acquire by anyone will simply succeed
      }
    }, ms);
    this.#timer.unref();
  }

  /** Removes the lock file if it is still this lock's. */
  release(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    const cur = readLock(this.file);
    if (cur?.info?.token === this.info.token) fs.rmSync(this.file, { force: true });
  }
}
