/**
 * Which generated JavaScript kernel runs a fusion the WebAssembly program (`wasm/program.ts`)
 * does not cover, or every fusion when wasm kernels are off: a row kernel for `kRow` fusions (rowKernel.ts), the
 * single-pass loop kernel (kernel.ts) for kLoop and kInput fusions and for the epilogue of a
 * kOutput fusion (passed as `body`, the dot itself runs as its core primitive).
 */
import type { HloComputation, HloInstruction } from '../hlo';
import { compileKernel, type FusedKernel } from './kernel';
import { compileRowKernel } from './rowKernel';

export function compileFusionKernel(fusion: HloInstruction, body: HloComputation = fusion.called[0]): FusedKernel {
  return (fusion.params as { kind: string }).kind === 'kRow' ? compileRowKernel(body) : compileKernel(body);
}
