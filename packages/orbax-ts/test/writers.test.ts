// One writer per directory, and failures that must not block restore (issue 15):
// - an old step that cannot be deleted is a warning; opening and restoring good steps still work;
// - a second writer on a directory is refused (lock file with pid/host), before it could clean up
//   the first one's save in progress; read-only managers are allowed; stale locks are taken over;
// - restore(step) of a save in flight waits for it (same manager) or says it is still being written.
// Tests run as root here, where chmod does not stop a delete, so a deletion failure is injected
// with the manager's internal `_failRemove` hook (and checked with real permissions where not root).
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { np } from '@tpukit/core';
import { CheckpointManager, LOCK_FILE, args, liveWriter } from '../src/index';
import { tmpDir } from './helpers';

const here = path.dirname(fileURLToPath(import.meta.url));
const tree = (v: number) => ({ w: np.full([64, 64], v, 'float32'), step: v });
const warnings = () => vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
const messages = (spy: ReturnType<typeof warnings>) => spy.mock.calls.map((c) => String(c[0]));

async function withSteps(dir: string, steps: number[], options = {}): Promise<void> {
  const m = new CheckpointManager(dir, { enableAsyncCheckpointing: false, fsync: false, ...options });
  for (const s of steps) await m.save(s, args.StandardSave(tree(s)));
  await m.close();
}

async function restoredStep(m: CheckpointManager, step?: number): Promise<number> {
  return ((await m.restore(step)) as { step: number }).step;
}

afterEach(() => vi.restoreAllMocks());

describe('cleanup and retention failures are warnings', () => {
  it('a step whose files cannot be deleted does not block later opens or restoring good steps', async () => {
    const dir = tmpDir();
    const spy = warnings();
    // Retention deletes step 1 at the save of step 3; removing its files fails (EACCES).
    const fail = { _failRemove: '^1\\.orbax-checkpoint-tmp-deleting$' };
    const m = new CheckpointManager(dir, { maxToKeep: 2, fsync: false, ...fail });
    for (const s of [1, 2, 3]) await m.save(s, args.StandardSave(tree(s)));
    await m.waitUntilFinished();
    expect(m.allSteps()).toEqual([2, 3]);
    expect(messages(spy)).toEqual([expect.stringMatching(/^save\(3\): the step is saved, but old step 1 in .* was deleted, but its files \(1\.orbax-checkpoint-tmp-deleting\) could not be removed: EACCES/)]);
    await m.close();
    // Every later open retries the leftover, warns, and works.
    for (let i = 0; i < 2; i++) {
      const again = new CheckpointManager(dir, fail);
      expect(again.allSteps()).toEqual([2, 3]);
      expect(await restoredStep(again)).toBe(3);
      expect(await restoredStep(again, 2)).toBe(2);
      await again.close();
    }
    expect(messages(spy).slice(1)).toEqual([
      expect.stringMatching(/^CheckpointManager: could not remove the leftover .*1\.orbax-checkpoint-tmp-deleting \(EACCES.*\); ignoring it/),
      expect.stringMatching(/could not remove the leftover/),
    ]);
    expect(spy.mock.calls[1][1]).toEqual({ code: 'TPUKIT_ORBAX_CLEANUP' });
    // Once the files can go, the next open removes them.
    const ok = new CheckpointManager(dir);
    expect(fs.readdirSync(dir).sort()).toEqual([LOCK_FILE, '2', '3']);
    await ok.close();
  });

  it('a step that cannot be moved out stays listed and restorable; saves go on with a warning', async () => {
    const dir = tmpDir();
    const spy = warnings();
    const m = new CheckpointManager(dir, { maxToKeep: 1, enableAsyncCheckpointing: false, fsync: false, _failRemove: '^1\\.orbax-checkpoint-tmp-deleting$' });
    await m.save(1, args.StandardSave(tree(1)));
    // The stale `.deleting` name cannot be cleared, so step 1 cannot be moved out of the way.
    fs.mkdirSync(path.join(dir, '1.orbax-checkpoint-tmp-deleting'));
    await m.save(2, args.StandardSave(tree(2)));
    expect(m.allSteps()).toEqual([1, 2]);
    expect(messages(spy)).toEqual([expect.stringMatching(/^save\(2\): the step is saved, but could not delete old step 1 in .*: EACCES/)]);
    expect(await restoredStep(m, 1)).toBe(1);
    await expect(m.delete(1)).rejects.toThrow(/^delete: could not delete old step 1 in .*: EACCES/);
    await m.close();
  });

  it.skipIf(process.getuid?.() === 0)('with real permissions: an undeletable leftover only warns (not run as root)', async () => {
    const dir = tmpDir();
    await withSteps(dir, [1, 2]);
    const leftover = path.join(dir, '0.orbax-checkpoint-tmp-deleting');
    fs.mkdirSync(path.join(leftover, 'inner'), { recursive: true });
    fs.writeFileSync(path.join(leftover, 'inner', 'f'), 'x');
    fs.chmodSync(path.join(leftover, 'inner'), 0o500);
    const spy = warnings();
    try {
      const m = new CheckpointManager(dir);
      expect(await restoredStep(m)).toBe(2);
      await m.close();
      expect(messages(spy)).toEqual([expect.stringMatching(/could not remove the leftover .*0\.orbax-checkpoint-tmp-deleting \(EACCES/)]);
    } finally {
      fs.chmodSync(path.join(leftover, 'inner'), 0o700);
    }
  });
});

describe('one writer per directory', () => {
  it('refuses a second writer before it touches anything, names the holder, and allows read-only managers', async () => {
    const dir = tmpDir();
    await withSteps(dir, [1]);
    const first = new CheckpointManager(dir, { fsync: false });
    const lock = JSON.parse(fs.readFileSync(path.join(dir, LOCK_FILE), 'utf8'));
    expect(lock).toMatchObject({ pid: process.pid, host: os.hostname() });
    expect(liveWriter(dir)).toMatchObject({ pid: process.pid });
    // The first manager's save in progress (its tmp directory) must survive the second open.
    const inProgress = path.join(dir, '2.orbax-checkpoint-tmp');
    fs.mkdirSync(inProgress);
    expect(() => new CheckpointManager(dir)).toThrow(
      new RegExp(`^CheckpointManager: ${dir.replace(/[/\\^$.*+?()[\]{}|]/g, '\\$&')} is already open for writing by pid ${process.pid} on host ${os.hostname()} \\(since .*\\) \\(another CheckpointManager in this process\\); .*open this one with \\{ readOnly: true \\}`),
    );
    expect(fs.existsSync(inProgress)).toBe(true);
    fs.rmdirSync(inProgress);
    const reader = new CheckpointManager(dir, { readOnly: true });
    expect(reader.readOnly).toBe(true);
    await first.save(2, args.StandardSave(tree(2)));
    await first.waitUntilFinished();
    reader.reload();
    expect(await restoredStep(reader, 2)).toBe(2);
    await expect(reader.save(3, args.StandardSave(tree(3)))).rejects.toThrow(/^save: the CheckpointManager for .* was opened with \{ readOnly: true \}/);
    await expect(reader.delete(1)).rejects.toThrow(/^delete: .* readOnly/);
    await reader.close();
    expect(fs.existsSync(path.join(dir, LOCK_FILE))).toBe(true); // a reader never removes the writer's lock
    await first.close();
    expect(fs.existsSync(path.join(dir, LOCK_FILE))).toBe(false);
    const second = new CheckpointManager(dir);
    expect(second.allSteps()).toEqual([1, 2]);
    await second.close();
    expect(() => new CheckpointManager(path.join(dir, 'missing'), { readOnly: true })).toThrow(/does not exist \(a read-only manager does not create it\)/);
  });

  it('takes over a stale lock: a dead process on this host, or a lock from another host not touched for a while', async () => {
    const dir = tmpDir();
    await withSteps(dir, [1]);
    const dead = spawn(process.execPath, ['-e', '']);
    const deadPid = dead.pid!;
    await new Promise((r) => dead.on('exit', r));
    const file = path.join(dir, LOCK_FILE);
    fs.writeFileSync(file, JSON.stringify({ pid: deadPid, host: os.hostname(), token: 'old', since: 0 }));
    fs.mkdirSync(path.join(dir, '5.orbax-checkpoint-tmp')); // the dead writer's interrupted save
    const m = new CheckpointManager(dir);
    expect(JSON.parse(fs.readFileSync(file, 'utf8')).pid).toBe(process.pid);
    expect(fs.existsSync(path.join(dir, '5.orbax-checkpoint-tmp'))).toBe(false);
    await m.close();
    // Another host: live while touched recently, stale after `staleAfterMs`.
    fs.writeFileSync(file, JSON.stringify({ pid: 1, host: 'elsewhere', token: 'other', since: Date.now() }));
    expect(() => new CheckpointManager(dir, { lock: { staleAfterMs: 60_000 } })).toThrow(/already open for writing by pid 1 on host elsewhere/);
    const old = new Date(Date.now() - 120_000);
    fs.utimesSync(file, old, old);
    const n = new CheckpointManager(dir, { lock: { staleAfterMs: 60_000 } });
    expect(JSON.parse(fs.readFileSync(file, 'utf8')).host).toBe(os.hostname());
    await n.close();
  });

  it('refuses a writer while another process writes, and opens once that process is gone', async () => {
    const dir = tmpDir();
    const child: ChildProcess = spawn(process.execPath, [path.join(here, 'fixtures', 'crashChild.mjs'), dir], { stdio: ['ignore', 'pipe', 'pipe'], cwd: path.join(here, '..') });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on('data', (d) => String(d).includes('ready') && resolve());
        child.on('exit', (code) => reject(new Error(`child exited with ${code}`)));
      });
      expect(() => new CheckpointManager(dir)).toThrow(new RegExp(`already open for writing by pid ${child.pid} on host`));
      expect(fs.existsSync(path.join(dir, LOCK_FILE))).toBe(true);
    } finally {
      child.kill('SIGKILL');
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(null) : child.on('exit', r)));
    }
    const m = new CheckpointManager(dir, { maxToKeep: 3 });
    for (const s of m.allSteps()) expect((await m.restore(s, { iter: args.JsonRestore() })).iter).toEqual({ step: s });
    await m.close();
  });
});

describe('restore of a step that is being saved', () => {
  it('waits for the same manager\'s save in flight instead of calling it incomplete', async () => {
    const dir = tmpDir();
    const m = new CheckpointManager(dir);
    await m.save(4, args.StandardSave({ w: np.full([512, 512], 4, 'float32'), step: 4 }));
    expect(m.isSavingInProgress()).toBe(true); // the commit needs the event loop, not reached yet
    expect(m.allSteps()).toEqual([]);
    expect(await restoredStep(m, 4)).toBe(4);
    expect(m.allSteps()).toEqual([4]);
    await m.close();
  });

  it('says a step is still being written by another writer, or was never committed when no writer is left', async () => {
    const dir = tmpDir();
    await withSteps(dir, [1]);
    const writer = new CheckpointManager(dir);
    fs.mkdirSync(path.join(dir, '2.orbax-checkpoint-tmp')); // the writer's save of step 2, in progress
    const reader = new CheckpointManager(dir, { readOnly: true });
    await expect(reader.restore(2)).rejects.toThrow(new RegExp(`^restore: step 2 in .* is still being written by pid ${process.pid} on host .*; wait until it commits .*; available: \\[1\\]`));
    await writer.close();
    await expect(reader.restore(2)).rejects.toThrow(/^restore: step 2 in .* was never committed: only the temporary 2\.orbax-checkpoint-tmp of an interrupted save is there \(no live writer\); available: \[1\]/);
    // Steps committed by a writer after the reader opened are found without an explicit reload.
    fs.rmdirSync(path.join(dir, '2.orbax-checkpoint-tmp'));
    await withSteps(dir, [3]);
    expect(await restoredStep(reader)).toBe(3); // the latest step, looked up again by a reader
    expect(await restoredStep(reader, 3)).toBe(3);
    await reader.close();
  });
});
