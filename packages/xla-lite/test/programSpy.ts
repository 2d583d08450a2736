/** Test helper: which wasm programs ran steps during a call (a spy on `WasmProgram.prototype.run`). */
import { vi } from 'vitest';
import { WasmProgram } from '../src/wasm/program';

/** Runs `call`, recording the wasm programs that ran steps in it. */
export function programsOf(call: () => unknown): Set<WasmProgram> {
  const seen = new Set<WasmProgram>();
  const run = WasmProgram.prototype.run;
  const spy = vi.spyOn(WasmProgram.prototype, 'run').mockImplementation(function (this: WasmProgram, ...a: Parameters<WasmProgram['run']>) {
    seen.add(this);
    return run.apply(this, a);
  });
  try {
    call();
  } finally {
    spy.mockRestore();
  }
  return seen;
}
