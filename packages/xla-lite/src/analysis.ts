/**
 * `costAnalysis()` and `memoryAnalysis()` of a compiled module. Costs use core's systolic cost
 * model per instruction (`systolic.opCost`: MXU cycles for dots on the preset, HBM roofline for
 * the rest). A fusion is costed as one kernel: one FLOP per element per fused op, bytes only
 * for its external inputs and its output (its intermediates never touch memory); a row fusion
 * (kRow) the same, reading its inputs once (the row stays in cache between its stages); an
 * output fusion (kOutput) as its dot plus the epilogue's other inputs (the epilogue rewrites
 * the dot's result before it is stored, so that result moves once). Control flow
 * costs its called computations: a scan its body times its length, a cond its most expensive
 * branch, a while one trip of its body (the trip count is not known at compile time).
 * Transcendentals count exp/log/tanh/logistic/sin/cos/sqrt/rsqrt/pow/erf elements as XLA does.
 * The gathers and segment sums the one-hot pass makes of one-hot dots (passes/oneHotDot.ts)
 * count the replaced dot's FLOPs (`nominalFlops`), so `flops` and MFU stay those of the model's
 * matmuls; their bytes and seconds are their own (memory bound).
 */
import { systolic } from '@tpukit/core';
import { type Primitive } from '@tpukit/core/internal';
import { bytesOf, type HloComputation, type HloInstruction, isScalarConstant, numel } from './hlo';
import { assignBuffers } from './passes/bufferAssignment';
import { nominalFlopsOf } from './passes/oneHotDot';

type TpuPreset = systolic.TpuPreset;

export interface CostAnalysis {
  flops: number;
  transcendentals: number;
  bytesAccessed: number;
  /** Modelled seconds on the preset (sum of per-op rooflines). */
  seconds: number;
  /** Modelled seconds of the MXU (dot) instructions alone. */
  mxuSeconds: number;
  preset: string;
}

export interface MemoryAnalysis {
  argumentBytes: number;
  outputBytes: number;
  tempBytes: number;
  /** Temp bytes if no buffer were ever reused. */
  tempBytesNoReuse: number;
  /** Bytes placed into donated argument buffers. */
  aliasBytes: number;
  peakBytes: number;
}

/** Whether cost analysis counts the primitive's elements as transcendentals (core's elementwise descriptor). */
const isTranscendental = (p: Primitive | null): boolean => p?.elementwise?.transcendental === true;

const zero = (preset: TpuPreset): CostAnalysis => ({ flops: 0, transcendentals: 0, bytesAccessed: 0, seconds: 0, mxuSeconds: 0, preset: preset.name });

function addInto(a: CostAnalysis, b: CostAnalysis, times = 1): void {
  a.flops += b.flops * times;
  a.transcendentals += b.transcendentals * times;
  a.bytesAccessed += b.bytesAccessed * times;
  a.seconds += b.seconds * times;
  a.mxuSeconds += b.mxuSeconds * times;
}

/**
 * Bytes a fusion reads of operand `o`: none for a scalar constant (a compile-time value the
 * kernel holds in a register; XLA fuses such constants into the fusion, so they are no
 * parameter of it), else its size.
 */
function fusionOperandBytes(o: HloInstruction): number {
  return isScalarConstant(o) ? 0 : bytesOf(o.shape);
}

function instructionCost(i: HloInstruction, preset: TpuPreset): CostAnalysis {
  const c = zero(preset);
  if (i.opcode === 'parameter' || i.opcode === 'constant' || i.opcode === 'get-tuple-element') return c;
  if (i.opcode === 'fusion') {
    const body = i.called[0];
    let dotBytes = 0;
    for (const m of body.instructions) {
      if (m.opcode === 'parameter') continue;
      if (m.prim!.name === 'dot_general') {
        // kOutput: the dot costs what it costs alone (MXU cycles, its operands and result once).
        const oc = systolic.opCost(m.prim!, m.operands.map((o) => o.shape), m.params, m.shapes, preset);
        c.flops += oc.flops;
        c.mxuSeconds += oc.seconds;
        c.seconds += oc.seconds;
        dotBytes = oc.bytes;
        continue;
      }
      const name = m.prim!.name;
      const n = name.startsWith('reduce_') ? numel(m.operands[0].shape) : numel(m.shape);
      if (name !== 'broadcast_in_dim' && name !== 'convert_element_type' && name !== 'stop_gradient') c.flops += n;
      if (isTranscendental(m.prim)) c.transcendentals += n;
    }
    if (dotBytes) {
      // The epilogue is applied to the dot's result before it is stored (in place here): only
      // its other inputs add traffic; the result is written once, already counted by the dot.
      const dotOperands = new Set(body.instructions.find((m) => m.prim?.name === 'dot_general')!.operands);
      const epilogueIn = body.params.reduce((s, p, k) => s + (dotOperands.has(p) ? 0 : fusionOperandBytes(i.operands[k])), 0);
      c.bytesAccessed = dotBytes + epilogueIn;
      c.seconds += epilogueIn / preset.hbmBandwidth;
      return c;
    }
    c.bytesAccessed = i.operands.reduce((s, o) => s + fusionOperandBytes(o), 0) + i.shapes.reduce((s, sh) => s + bytesOf(sh), 0);
    c.seconds = c.bytesAccessed / preset.hbmBandwidth;
    return c;
  }
  // Collectives and the partitioner's local slices: communication is modelled by @tpukit/mesh's cost model.
  if (i.prim === null) return c;
  const name = i.prim.name;
  if (i.called.length) {
    const p = i.params as Record<string, any>;
    if (name === 'scan') addInto(c, computationCost(i.called[0], preset), p.length);
    else if (name === 'cond') {
      const costs = i.called.map((b) => computationCost(b, preset));
      addInto(c, costs.reduce((m, x) => (x.seconds > m.seconds ? x : m)));
    } else for (const s of i.called) addInto(c, computationCost(s, preset));
    return c;
  }
  const oc = systolic.opCost(i.prim!, i.operands.map((o) => o.shape), i.params, i.shapes, preset);
  // A one-hot dot rewritten as a gather / segment sum reports the dot's FLOPs (nominal: MFU
  // counts the model's matmul FLOPs however they run); its time is the data movement's.
  c.flops = nominalFlopsOf(i) ?? oc.flops;
  c.bytesAccessed = oc.bytes;
  c.seconds = oc.seconds;
  if (oc.unit === 'mxu') c.mxuSeconds = oc.seconds;
  if (isTranscendental(i.prim)) c.transcendentals = i.shapes.reduce((s, sh) => s + numel(sh), 0);
  return c;
}

export function computationCost(comp: HloComputation, preset: TpuPreset): CostAnalysis {
  const total = zero(preset);
  for (const i of comp.instructions) addInto(total, instructionCost(i, preset));
  return total;
}

export function memoryAnalysis(comp: HloComputation, donated: readonly number[]): MemoryAnalysis {
  const a = assignBuffers(comp, donated);
  return { argumentBytes: a.argumentBytes, outputBytes: a.outputBytes, tempBytes: a.tempBytes, tempBytesNoReuse: a.tempBytesNoReuse, aliasBytes: a.aliasedBytes, peakBytes: a.peakBytes };
}
