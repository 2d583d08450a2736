/**
 * Test helpers for the systolic GEMM engine. Operands in a GEMM engine's memory, as a compiled step's arena holds them (read in place by the
 * products, results written there): `inMemory` copies an array into a region reserved for it and
 * returns the view; `releaseAll` gives every region back.
 */
import { Worker } from 'node:worker_threads';
import { expect } from 'vitest';
import { registerBackend } from '../src/index';
import { holdWorkers } from '../src/wasm/workerPool';
import { SystolicBackend } from '../src/backends/systolic/backend';
import { gemmPhases } from '../src/backends/systolic/phases';
import type { GemmEngine } from '../src/backends/systolic/gemmEngine';

/**
 * A registered systolic backend named `name` whose engine runs the 5 x 8 micro-kernel (MR 5, MC
 * 130), whatever the environment picks (`gemmKernel: '5x8'`).
 */
export function backend5x8(name: string): SystolicBackend {
  const backend = new SystolicBackend(name, { gemmKernel: '5x8' });
  registerBackend(backend);
  return backend;
}

export function engineMemory(e: GemmEngine): { inMemory: <T extends Float32Array | Uint16Array>(x: T) => T; releaseAll: () => void } {
  const addrs: number[] = [];
  const inMemory = <T extends Float32Array | Uint16Array>(x: T): T => {
    const addr = e.reserve(x.byteLength); // (grows the memory: take the buffer after)
    addrs.push(addr);
    const v = (x instanceof Uint16Array ? new Uint16Array(e.buffer(), addr, x.length) : new Float32Array(e.buffer(), addr, x.length)) as T;
    v.set(x);
    return v;
  };
  return { inMemory, releaseAll: () => addrs.splice(0).forEach((a) => e.release(a)) };
}

/** n operand values from `seed`: magnitudes 2^-4..2^4, a float32 subnormal every 11th (the GEMM tests' operands). */
export function data(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.sin(i * 0.37 + seed) * 2 ** ((i % 9) - 4) + (i % 11 === 0 ? 3e-39 : 0);
  return out;
}

/**
 * Holds the pools' workers (`holdWorkers`) until `release()`; a helper thread lets them go after
 * 20 s in any case, a safety net that decides nothing on a correct pool: a calling thread waiting
 * for them then returns (and the test's checks fail) instead of hanging.
 */
export function holdAll(): { hold: Int32Array; release: () => void } {
  const hold = holdWorkers(true)!;
  const releaser = new Worker('const h = new Int32Array(require("node:worker_threads").workerData.hold); Atomics.wait(h, 0, 1, 20000); Atomics.store(h, 0, 0); Atomics.notify(h, 0);', { eval: true, workerData: { hold: hold.buffer } });
  return {
    hold,
    release: () => {
      holdWorkers(false);
      void releaser.terminate();
    },
  };
}

/**
 * Holds the pools' workers and lets them go from another thread (started and waiting
 * beforehand) `ms` after `start()`: a worker then joins a job already under way. `stop()` ends
 * the helper and releases the workers whatever happened.
 */
function releaseLater(ms: number): { start: () => void; stop: () => void } {
  const held = holdAll();
  const sig = new Int32Array(new SharedArrayBuffer(8)); // [ready, go]
  const letGo = new Worker(
    `const { workerData: w } = require("node:worker_threads"); const h = new Int32Array(w.hold), s = new Int32Array(w.sig); Atomics.store(s, 0, 1); Atomics.notify(s, 0); Atomics.wait(s, 1, 0, 20000); Atomics.wait(s, 0, 1, ${ms}); Atomics.store(h, 0, 0); Atomics.notify(h, 0);`,
    { eval: true, workerData: { hold: held.hold.buffer, sig: sig.buffer } },
  );
  Atomics.wait(sig, 0, 0, 20000); // (the releasing thread is running)
  return {
    start: () => {
      Atomics.store(sig, 1, 1);
      Atomics.notify(sig, 1);
    },
    stop: () => {
      held.release();
      void letGo.terminate();
    },
  };
}

/**
 * Runs `product(start)` up to 20 times with the workers released ~2 ms after `start()` (a loaded
 * machine may deschedule either thread, so one attempt is not enough) and returns how many
 * attempts had a worker compute some of the pool's units; stops at the first. `product` asserts
 * its own result; the calling thread must compute some units in every attempt.
 */
export function lateJoins(product: (start: () => void, attempt: number) => void): number {
  const wasTimed = gemmPhases.enabled;
  gemmPhases.enabled = true;
  let joined = 0;
  try {
    for (let attempt = 0; attempt < 20 && joined === 0; attempt++) {
      const late = releaseLater(2);
      try {
        const p0 = { ...gemmPhases.pool };
        product(late.start, attempt);
        const units = gemmPhases.pool.tiles - p0.tiles;
        const caller = gemmPhases.pool.callerTiles - p0.callerTiles;
        expect(caller, 'units the calling thread computed').toBeGreaterThan(0);
        if (caller < units) joined++;
      } finally {
        late.stop();
      }
    }
  } finally {
    gemmPhases.enabled = wasTimed;
  }
  return joined;
}
