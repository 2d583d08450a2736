/**
 * Test helper: writes HLO by hand (instructions over core primitives) so each pass can be
 * tested in isolation, without tracing.
 */
import { type Array, type DType, np } from '@tpukit/core';
import { getPrimitive, type ShapedArray } from '@tpukit/core/internal';
import { expect } from 'vitest';
import { HloComputation, HloInstruction } from '../src/internal';

export const f32 = (...shape: number[]): ShapedArray => ({ shape, dtype: 'float32', weakType: false });
export const ty = (dtype: DType, ...shape: number[]): ShapedArray => ({ shape, dtype, weakType: false });

export class B {
  readonly c = new HloComputation('test');
  param(s: ShapedArray): HloInstruction {
    return this.c.addParameter(s);
  }
  constant(v: number | number[], dtype: DType = 'float32'): HloInstruction {
    const lit = np.array(v, dtype);
    const i = new HloInstruction('constant', [lit.aval], [], {}, null);
    i.literal = lit;
    return this.c.add(i);
  }
  /** An instruction of core primitive `name` (shape from its abstractEval). */
  op(name: string, operands: HloInstruction[], params: Record<string, unknown> = {}): HloInstruction {
    const prim = getPrimitive(name);
    const shapes = prim.abstractEval(operands.map((o) => o.shape), params);
    return this.c.add(new HloInstruction(name, shapes, operands, params, prim));
  }
  out(...o: HloInstruction[]): HloComputation {
    this.c.outputs = o;
    return this.c;
  }
}

export const prims = (c: HloComputation): string[] => c.instructions.map((i) => i.prim?.name ?? i.opcode);

/**
 * |a - e| <= atol + rtol*|e| elementwise (NaN matches NaN): core's `expectAllclose` semantics.
 * Restated here because importing core's test/matchers.ts pulls core's sources into this
 * package's type-check (whose ambient WebAssembly declarations then clash with the DOM-less lib).
 */
export function expectAllclose(actual: Array | number, expected: Array | number, opts: { rtol?: number; atol?: number } = {}): void {
  const a = typeof actual === 'number' ? [actual] : actual.dataSync();
  const e = typeof expected === 'number' ? [expected] : expected.dataSync();
  const rtol = opts.rtol ?? 1e-5;
  const atol = opts.atol ?? 1e-6;
  expect(a.length, 'length').toBe(e.length);
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(e[i]) && Number.isNaN(a[i])) continue;
    if (!(Math.abs(a[i] - e[i]) <= atol + rtol * Math.abs(e[i]))) expect.fail(`element ${i}: got ${a[i]}, expected ${e[i]} (rtol ${rtol}, atol ${atol})`);
  }
}
