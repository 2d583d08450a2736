/**
 * The HLO-like IR xla-lite compiles: a module holds computations (the entry, fused computations
 * and control-flow bodies); a computation holds instructions in topological order, its
 * parameters and its outputs. Every instruction has an opcode (XLA's name, e.g. `multiply`,
 * `broadcast`, `dot`), its output shapes (one, or several for tuple-producing ops such as
 * `while`, read through `get-tuple-element`), its operands, its parameters and, for execution,
 * the core primitive it came from, and a physical layout (minor-to-major, row-major unless layout
 * assignment chose another). Passes rewrite computations in place through `replaceUses`.
 */
import type { Array } from '@tpukit/core';
import { getPrimitive, type Primitive, type ShapedArray } from '@tpukit/core/internal';

let nextId = 0;

export class HloInstruction {
  readonly id = nextId++;
  /** For `parameter`: its position. */
  paramIndex = -1;
  /** For `constant`: its value. */
  literal: Array | null = null;
  /** Called computations (fusion body, branches, loop condition/body). */
  called: HloComputation[] = [];
  /**
   * Physical layout of the (single) output, XLA's minor-to-major dimension order; null is the
   * default row-major layout `{n-1,...,0}`. Only `copy` instructions made by layout assignment
   * carry another layout (see passes/layoutAssignment.ts).
   */
  layout: number[] | null = null;

  constructor(
    public opcode: string,
    public shapes: ShapedArray[],
    public operands: HloInstruction[],
    public params: Record<string, unknown>,
    /** The core primitive that executes it (null for parameter, constant, fusion, get-tuple-element). */
    public prim: Primitive | null,
  ) {}

  /** The single output shape (throws for tuple-shaped instructions). */
  get shape(): ShapedArray {
    if (this.shapes.length !== 1) throw new Error(`hlo: ${this.opcode}.${this.id} has ${this.shapes.length} outputs; read them with get-tuple-element`);
    return this.shapes[0];
  }

  get isTuple(): boolean {
    return this.shapes.length !== 1;
  }
}

/**
 * A new instruction applying a primitive (given or by name) to `operands`: its output shapes from
 * the primitive's shape rule (which checks the operands), its opcode the primitive's HLO name.
 * The one way passes make instructions of primitives.
 */
export function makeInstruction(prim: Primitive | string, operands: HloInstruction[], params: Record<string, unknown>): HloInstruction {
  const p = typeof prim === 'string' ? getPrimitive(prim) : prim;
  const shapes = p.abstractEval(
    operands.map((o) => o.shape),
    params,
  );
  return new HloInstruction(p.hlo ?? p.name, shapes, operands, params, p);
}

export class HloComputation {
  readonly params: HloInstruction[] = [];
  instructions: HloInstruction[] = [];
  outputs: HloInstruction[] = [];

  constructor(public name: string) {}

  addParameter(shape: ShapedArray): HloInstruction {
    const p = new HloInstruction('parameter', [shape], [], {}, null);
    p.paramIndex = this.params.length;
    this.params.push(p);
    this.instructions.push(p);
    return p;
  }

  add(i: HloInstruction): HloInstruction {
    this.instructions.push(i);
    return i;
  }

  /**
   * Copies the instructions of `src` other than its parameters into this computation, in order,
   * their operands through `map` (which holds a stand-in for each of `src`'s parameters and gets
   * each copy); returns the copies of `src`'s outputs.
   */
  addCopies(src: HloComputation, map: Map<HloInstruction, HloInstruction>): HloInstruction[] {
    for (const m of src.instructions) {
      if (m.opcode === 'parameter') continue;
      map.set(m, this.add(new HloInstruction(m.opcode, m.shapes, m.operands.map((o) => map.get(o)!), m.params, m.prim)));
    }
    return src.outputs.map((o) => map.get(o)!);
  }

  /** Rewires every use of `from` (operands and outputs) to `to`. */
  replaceUses(from: HloInstruction, to: HloInstruction): void {
    for (const i of this.instructions) i.operands = i.operands.map((o) => (o === from ? to : o));
    this.outputs = this.outputs.map((o) => (o === from ? to : o));
  }

  /** Users of each instruction (an output counts as a use by `null`). */
  users(): Map<HloInstruction, (HloInstruction | null)[]> {
    const m = new Map<HloInstruction, (HloInstruction | null)[]>();
    for (const i of this.instructions) m.set(i, []);
    for (const i of this.instructions) for (const o of i.operands) m.get(o)?.push(i);
    for (const o of this.outputs) m.get(o)?.push(null);
    return m;
  }

  /** Re-sorts instructions topologically (stable), as passes may insert out of order. */
  sort(): void {
    const seen = new Set<HloInstruction>();
    const out: HloInstruction[] = [];
    const visit = (i: HloInstruction): void => {
      if (seen.has(i)) return;
      seen.add(i);
      for (const o of i.operands) visit(o);
      out.push(i);
    };
    for (const p of this.params) visit(p);
    for (const i of this.instructions) visit(i);
    this.instructions = out;
  }
}

export class HloModule {
  /** Every computation, entry last (XLA prints callees first). */
  computations: HloComputation[] = [];

  constructor(
    public name: string,
    public entry: HloComputation,
  ) {}

  /** The entry and every computation reachable from it, callees first. */
  reachable(): HloComputation[] {
    const seen = new Set<HloComputation>();
    const out: HloComputation[] = [];
    const visit = (c: HloComputation): void => {
      if (seen.has(c)) return;
      seen.add(c);
      for (const i of c.instructions) for (const s of i.called) visit(s);
      out.push(c);
    };
    visit(this.entry);
    return out;
  }
}

/** Number of elements of a shape. */
export const numel = (s: ShapedArray): number => s.shape.reduce((a, b) => a * b, 1);

const ITEMSIZE: Record<string, number> = { float32: 4, int32: 4, uint32: 4, bfloat16: 2, float16: 2, int8: 1, uint8: 1, bool: 1 };
/** Bytes of a buffer of this shape. */
export const bytesOf = (s: ShapedArray): number => numel(s) * (ITEMSIZE[s.dtype] ?? 4);


/** Whether `i` is a constant of one element (kernels take it as an immediate: no memory read). */
export const isScalarConstant = (i: HloInstruction): boolean => i.opcode === 'constant' && numel(i.shape) === 1;
