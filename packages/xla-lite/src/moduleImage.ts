/**
 * An HloModule as plain data and back: instructions by index, operands and called computations
 * as indices, callees before callers, the entry last. The compile cache (diskCache.ts, JSON on
 * disk) and the device programs (spmd/deviceProgram.ts, structured-cloned to worker threads) both
 * use this form; they differ only in how a literal is carried.
 */
import type { Array } from '@tpukit/core';
import { getPrimitive, type ShapedArray } from '@tpukit/core/internal';
import { HloComputation, HloInstruction, type HloModule } from './hlo';

/** One instruction; `L` is how the owner carries a literal (JSON numbers, shared storage). */
export interface InstImage<L> {
  readonly opcode: string;
  readonly prim: string | null;
  readonly shapes: ShapedArray[];
  readonly operands: number[];
  readonly params: Record<string, unknown>;
  readonly paramIndex: number;
  readonly literal: L | null;
  readonly called: number[];
  readonly layout?: number[] | null;
}

/** One computation: its instructions and which of them are its outputs. */
export interface CompImage<L> {
  readonly name: string;
  readonly instructions: InstImage<L>[];
  readonly outputs: number[];
}

/**
 * The computations reachable from `mod`'s entry as images. `inst` gives an instruction's
 * primitive name, parameters and literal in the owner's form, or throws / returns null when the
 * instruction cannot be carried (then the whole image is null).
 */
export function imageComputations<L>(
  mod: HloModule,
  inst: (i: HloInstruction, comp: HloComputation) => { prim: string | null; params: Record<string, unknown>; literal: L | null } | null,
): CompImage<L>[] | null {
  const comps = mod.reachable();
  const out: CompImage<L>[] = [];
  for (const c of comps) {
    const idx = new Map(c.instructions.map((i, k) => [i, k]));
    const instructions: InstImage<L>[] = [];
    for (const i of c.instructions) {
      const form = inst(i, c);
      if (form === null) return null;
      instructions.push({
        opcode: i.opcode,
        prim: form.prim,
        shapes: i.shapes.map((s) => ({ shape: [...s.shape], dtype: s.dtype, weakType: s.weakType })),
        operands: i.operands.map((o) => idx.get(o)!),
        params: form.params,
        paramIndex: i.paramIndex,
        literal: form.literal,
        called: i.called.map((s) => comps.indexOf(s)),
        layout: i.layout,
      });
    }
    out.push({ name: c.name, instructions, outputs: c.outputs.map((o) => idx.get(o)!) });
  }
  return out;
}

/** The computations of an image rebuilt (callees first); each instruction gets a copy of its parameters. */
export function rebuildComputations<L>(images: readonly CompImage<L>[], literal: (l: L) => Array): HloComputation[] {
  const comps: HloComputation[] = [];
  for (const cj of images) {
    const c = new HloComputation(cj.name);
    const built: HloInstruction[] = [];
    for (const ij of cj.instructions) {
      let i: HloInstruction;
      if (ij.opcode === 'parameter') i = c.addParameter(ij.shapes[0]);
      else {
        i = c.add(new HloInstruction(ij.opcode, ij.shapes, ij.operands.map((k) => built[k]), { ...ij.params }, ij.prim ? getPrimitive(ij.prim) : null));
        if (ij.literal) i.literal = literal(ij.literal);
        i.called = ij.called.map((k) => comps[k]);
        i.layout = ij.layout ?? null;
      }
      built.push(i);
    }
    c.outputs = cj.outputs.map((k) => built[k]);
    comps.push(c);
  }
  return comps;
}
