// Crash test: a child process saves in a loop and is SIGKILLed at random moments, and also at
// forced points inside the commit (mid-write, just before and just after the rename, mid-delete).
// The kill delays come from a fixed-seed generator, so every run tries the same schedule (where
// the child is at each delay still depends on the machine's speed).
// After every kill, a fresh manager must report only complete steps, and the latest one must
// restore to exactly what was saved at that step. Runs against the built dist (the worker
// thread cannot run from .ts on Node 20).
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { toStorage, type Array as TArray } from '@tpukit/core';
import { CheckpointManager, LOCK_FILE, args } from '../src/index';
import { seededRandom, tmpDir } from './helpers';
// @ts-expect-error plain .mjs fixture shared with the child
import { stateFor } from './fixtures/crashState.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const child = path.join(here, 'fixtures', 'crashChild.mjs');

function run(dir: string, fault: string | undefined, delayMs: number): Promise<{ killedBy: 'us' | 'itself' | 'exit' }> {
  return new Promise((resolve, reject) => {
    const p: ChildProcess = spawn(process.execPath, [child, dir, ...(fault ? [fault] : [])], { stdio: ['ignore', 'pipe', 'pipe'], cwd: path.join(here, '..') });
    let err = '';
    let timer: NodeJS.Timeout | null = null;
    p.stderr!.on('data', (d) => (err += d));
    p.stdout!.on('data', (d) => {
      if (String(d).includes('ready') && !fault) timer = setTimeout(() => p.kill('SIGKILL'), delayMs);
    });
    p.on('exit', (code, signal) => {
      if (timer) clearTimeout(timer);
      if (signal === 'SIGKILL') resolve({ killedBy: fault ? 'itself' : 'us' });
      else reject(new Error(`crash child exited with code ${code} signal ${signal}: ${err}`));
    });
  });
}

function bitsEqual(a: TArray, b: TArray): boolean {
  const x = toStorage(a);
  const y = toStorage(b);
  return a.dtype === b.dtype && Buffer.from(x.buffer, x.byteOffset, x.byteLength).equals(Buffer.from(y.buffer, y.byteOffset, y.byteLength));
}

describe('crash test', () => {
  it('after any SIGKILL the latest reported step is complete and restores exactly', async () => {
    const dir = tmpDir();
    const faults = ['mid-write', 'before-rename', 'after-rename', 'mid-delete'];
    let latestSeen = -1;
    let leftovers = 0;
    const kills = 56;
    const random = seededRandom(0x5eed);
    for (let i = 0; i < kills; i++) {
      const fault = i % 7 === 3 ? faults[Math.floor(i / 7) % faults.length] : undefined;
      const r = await run(dir, fault, random() * 120);
      expect(r.killedBy).toBe(fault ? 'itself' : 'us');
      if (fs.readdirSync(dir).some((n) => n.includes('.orbax-checkpoint-tmp'))) leftovers++;
      const mgr = new CheckpointManager(dir, { maxToKeep: 3 });
      // Only steps, and the writer lock of `mgr` (it took over the killed child's stale lock).
      expect(fs.readdirSync(dir).every((n) => /^\d+$/.test(n) || n === LOCK_FILE), fs.readdirSync(dir).join(',')).toBe(true);
      const steps = mgr.allSteps();
      const latest = mgr.latestStep();
      if (latest === null) {
        expect(latestSeen).toBe(-1);
        await mgr.close(); // releases the writer lock for the next child
        continue;
      }
      expect(latest).toBeGreaterThanOrEqual(latestSeen);
      latestSeen = latest;
      for (const s of steps) {
        const back = await mgr.restore(s, { state: args.StandardRestore(), iter: args.JsonRestore() });
        const want = stateFor(s);
        expect(back.iter).toEqual({ step: s });
        expect(bitsEqual(back.state.params.w, want.params.w), `step ${s} w`).toBe(true);
        expect(bitsEqual(back.state.params.h, want.params.h), `step ${s} h`).toBe(true);
        expect(bitsEqual(back.state.opt[0], want.opt[0]), `step ${s} opt`).toBe(true);
        expect(back.state.opt[1]).toBe(s);
      }
      await mgr.close();
    }
    // The forced faults at 'mid-write' and 'before-rename' always leave a tmp dir behind.
    expect(leftovers).toBeGreaterThanOrEqual(2);
    expect(latestSeen).toBeGreaterThan(5);
  }, 120_000);
});
