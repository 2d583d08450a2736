// Preemption: the first signal makes reachedPreemption true so the loop saves and exits 0; a
// second signal exits at once (128 + signo) and leaves the directory consistent.
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { toStorage } from '@tpukit/core';
import { CheckpointManager, installPreemptionHandler, preemptionSignal, resetPreemption } from '../src/index';
import { tmpDir } from './helpers';
// @ts-expect-error plain .mjs fixture shared with the child
import { stateFor } from './fixtures/crashState.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

function runChild(dir: string, signals: NodeJS.Signals[], gapMs: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [path.join(here, 'fixtures', 'preemptChild.mjs'), dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      if (String(d).includes('ready')) {
        setTimeout(() => {
          signals.forEach((s, i) => setTimeout(() => p.kill(s), i * gapMs));
        }, 120);
      }
    });
    p.on('exit', (code) => resolve({ code, out }));
  });
}

describe('preemption', () => {
  afterEach(() => resetPreemption());

  it('in process: a signal flips reachedPreemption and shouldSave', () => {
    const h = installPreemptionHandler({ signals: ['SIGUSR2'] });
    const mgr = new CheckpointManager(tmpDir(), { saveIntervalSteps: 100 });
    expect(mgr.reachedPreemption(7)).toBe(false);
    expect(mgr.shouldSave(7)).toBe(false);
    process.emit('SIGUSR2', 'SIGUSR2');
    expect(preemptionSignal()).toBe('SIGUSR2');
    expect(mgr.reachedPreemption(7)).toBe(true);
    expect(mgr.shouldSave(7)).toBe(true);
    h.uninstall();
    expect(() => installPreemptionHandler({ signals: ['SIGNOPE' as never] })).toThrow(/unknown signal "SIGNOPE"/);
  });

  it('first SIGTERM: the loop saves the current step and exits cleanly', async () => {
    const dir = tmpDir();
    const { code, out } = await runChild(dir, ['SIGTERM'], 0);
    expect(code).toBe(0);
    const step = Number(/saved (\d+)/.exec(out)![1]);
    const mgr = new CheckpointManager(dir);
    expect(mgr.latestStep()).toBe(step);
    const back = await mgr.restore();
    expect([...toStorage(back.params.w)]).toEqual([...toStorage(stateFor(step).params.w)]);
  });

  it('a second signal exits at once without corrupting the directory', async () => {
    const dir = tmpDir();
    const { code, out } = await runChild(dir, ['SIGTERM', 'SIGINT'], 5);
    expect(out).not.toMatch(/saved/);
    // Both signals can land during one synchronous step; libuv then dispatches them in signal
    // number order (SIGINT before SIGTERM), so either one may be "the second": 128 + 2 or 128 + 15.
    expect([130, 143]).toContain(code);
    const mgr = new CheckpointManager(dir);
    for (const s of mgr.allSteps()) {
      const back = await mgr.restore(s);
      expect([...toStorage(back.params.w)]).toEqual([...toStorage(stateFor(s).params.w)]);
    }
  });
});
