/**
 * WebAssembly feature detection for the generated kernels: SIMD128, relaxed SIMD and threads
 * (shared memory). Each is probed by validating a tiny module, never by user-agent sniffing.
 * In Node 20 relaxed SIMD sits behind a V8 flag that NODE_OPTIONS refuses; `enableRelaxedSimd`
 * sets it through `v8.setFlagsFromString` before any module is compiled (workers started
 * afterwards inherit it). In a browser it is a no-op and detection decides.
 */
import { ModuleBuilder, OP, SIMD } from './assembler';
import { WA } from './webassemblyTypes';

let relaxedFlagTried = false;

/** Turns on V8's relaxed-SIMD flag where the runtime is Node and lacks it; harmless elsewhere. */
export function enableRelaxedSimd(): void {
  if (relaxedFlagTried) return;
  relaxedFlagTried = true;
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown; versions?: { node?: string } } }).process;
  if (!proc?.versions?.node || typeof proc.getBuiltinModule !== 'function') return;
  try {
    const v8 = proc.getBuiltinModule('node:v8') as { setFlagsFromString(flags: string): void } | undefined;
    v8?.setFlagsFromString('--experimental-wasm-relaxed-simd');
  } catch {
    // Not allowed here (sandboxed runtime): detection below reports no relaxed SIMD.
  }
}

function validates(build: (m: ModuleBuilder) => void): boolean {
  try {
    const m = new ModuleBuilder();
    build(m);
    return WA.validate(m.toBytes());
  } catch {
    return false;
  }
}

let cache: { simd: boolean; relaxedSimd: boolean; relaxedBf16Dot: boolean; threads: boolean } | null = null;

/** What this runtime's WebAssembly supports (computed once). */
export function wasmFeatures(): { simd: boolean; relaxedSimd: boolean; relaxedBf16Dot: boolean; threads: boolean } {
  if (cache) return cache;
  enableRelaxedSimd();
  const vec = (sub: number, arity: number) => (m: ModuleBuilder) =>
    m.addFunction('f', [], ['v128'], (f) => {
      for (let i = 0; i < arity; i++) f.v128Const([0, 0, 0, 0]);
      f.simd(sub);
    });
  const simd = validates(vec(SIMD.f32x4_add, 2));
  const relaxedSimd = simd && validates(vec(SIMD.f32x4_relaxed_madd, 3));
  const relaxedBf16Dot = simd && validates(vec(SIMD.f32x4_relaxed_dot_bf16x8_add_f32x4, 3));
  const threads =
    typeof SharedArrayBuffer !== 'undefined' &&
    validates((m) => {
      m.importMemory('env', 'mem', { initial: 1, maximum: 1, shared: true });
      m.addFunction('f', [], ['i32'], (f) => f.i32Const(0).i32Const(1).atomic(0x1e).op(OP.nop));
    });
  cache = { simd, relaxedSimd, relaxedBf16Dot, threads };
  return cache;
}
