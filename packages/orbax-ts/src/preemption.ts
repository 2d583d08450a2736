/**
 * Preemption handling: TPU VMs get SIGTERM shortly before they are taken away. After
 * `installPreemptionHandler()`, the first signal only sets a flag, so the training loop's next
 * `manager.reachedPreemption(step)` returns true, it saves and exits cleanly. A second signal
 * exits at once (code 128 + signal number); that cannot corrupt what is on disk, since a
 * step only becomes visible through an atomic rename after it is complete.
 */
import * as os from 'node:os';

export type PreemptionSignal = 'SIGTERM' | 'SIGINT' | 'SIGHUP' | 'SIGUSR1' | 'SIGUSR2';

let received: PreemptionSignal | null = null;
let installed: { signals: PreemptionSignal[]; handler: (s: NodeJS.Signals) => void } | null = null;

export interface PreemptionHandle {
  /** Removes the signal listeners (the flag stays as it is). */
  uninstall(): void;
}

export function installPreemptionHandler(opts: { signals?: PreemptionSignal[]; onSignal?: (signal: PreemptionSignal) => void } = {}): PreemptionHandle {
  const signals = opts.signals ?? ['SIGTERM', 'SIGINT'];
  for (const s of signals) {
    if (!(s in os.constants.signals)) throw new Error(`installPreemptionHandler: unknown signal ${JSON.stringify(s)}; use e.g. 'SIGTERM' or 'SIGINT'`);
  }
  if (installed) uninstall();
  const handler = (s: NodeJS.Signals): void => {
    const sig = s as PreemptionSignal;
    if (received !== null) {
      // Second signal: leave now. Any save in flight stays an uncommitted tmp directory.
      process.exit(128 + (os.constants.signals[sig] ?? 15));
    }
    received = sig;
    opts.onSignal?.(sig);
  };
  for (const s of signals) process.on(s, handler);
  installed = { signals, handler };
  return { uninstall };
}

function uninstall(): void {
  if (!installed) return;
  for (const s of installed.signals) process.off(s, installed.handler);
  installed = null;
}

/** The signal received since the handler was installed (or the flag was reset), or null. */
export function preemptionSignal(): PreemptionSignal | null {
  return received;
}

/** Clears the flag (for a process that handled a preemption and carries on, and for tests). */
export function resetPreemption(): void {
  received = null;
}
