// Elementwise fusion duplicates a cheap broadcast (of a constant, a scalar, or any float32
// value) into every consumer fusion instead of materialising it once as a kernel of its own,
// as XLA's instruction fusion does. Checked with and without row fusion (whose broadcast
// clones used to hide the gap in the elementwise pass), on hand-written HLO and through jit
// against eager.
import { type Array, np } from '@tpukit/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dce, fuseElementwise, type HloComputation, type HloInstruction, jit } from '../src/internal';
import { B, expectAllclose, f32 } from './build';

const isBroadcast = (i: HloInstruction): boolean => i.prim?.name === 'broadcast_in_dim';
/** Fusions whose body computes nothing but broadcasts: a materialised broadcast. */
const broadcastKernels = (c: HloComputation): HloInstruction[] =>
  c.instructions.filter((i) => i.opcode === 'fusion' && i.called[0].instructions.filter((m) => m.opcode !== 'parameter').every(isBroadcast));
/** Broadcasts materialised in `c`: standalone broadcast kernels and unfused broadcast instructions. */
const materialised = (c: HloComputation): HloInstruction[] => [...broadcastKernels(c), ...c.instructions.filter(isBroadcast)];

describe('elementwise fusion duplicates shared broadcasts into each consumer', () => {
  it('a scalar-constant broadcast read by three fusions (loop, leading and trailing reduction) lives in all three', () => {
    const b = new B();
    const x = b.param(f32(3, 4));
    const y = b.param(f32(3, 4));
    const two = b.op('broadcast_in_dim', [b.constant(2)], { shape: [3, 4], broadcastDimensions: [] });
    const e = b.op('mul', [b.op('exp', [x]), two]);
    const cols = b.op('reduce_sum', [b.op('mul', [b.op('log', [y]), two])], { axes: [0] });
    const rows = b.op('reduce_max', [b.op('add', [x, two])], { axes: [1] });
    const c = b.out(e, cols, rows);
    expect(fuseElementwise(c, undefined, 1)).toBe(3);
    dce(c);
    expect(materialised(c)).toEqual([]);
    const fusions = c.instructions.filter((i) => i.opcode === 'fusion');
    expect(fusions).toHaveLength(3);
    // Each fusion reads the scalar constant, not a [3,4] array, and broadcasts it itself.
    for (const f of fusions) {
      expect(f.called[0].instructions.some(isBroadcast)).toBe(true);
      expect(f.operands.some((o) => o.opcode === 'constant')).toBe(true);
      expect(f.operands.every((o) => o.opcode !== 'fusion')).toBe(true);
    }
  });

  it('a broadcast with a non-fusible reader stays materialised for it alone', () => {
    const b = new B();
    const x = b.param(f32(4, 4));
    const v = b.param(f32(4));
    const bv = b.op('broadcast_in_dim', [v], { shape: [4, 4], broadcastDimensions: [1] });
    const t = b.op('tanh', [b.op('add', [x, bv])]);
    const d = b.op('dot_general', [x, bv], { dimensionNumbers: [[[1], [0]], [[], []]], precision: null, preferredElementType: null });
    const c = b.out(t, d);
    fuseElementwise(c, undefined, 1);
    dce(c);
    // One copy feeds the dot (a kernel of its own, as the dot needs a buffer); the loop fusion
    // broadcasts v itself.
    const kernels = broadcastKernels(c);
    expect(kernels).toHaveLength(1);
    expect(c.instructions.find((i) => i.prim?.name === 'dot_general')!.operands[1]).toBe(kernels[0]);
    const loop = c.instructions.find((i) => i.opcode === 'fusion' && i !== kernels[0])!;
    expect(loop.operands).toContain(v);
    expect(loop.called[0].instructions.some(isBroadcast)).toBe(true);
  });

  // Law: for random readers of one shared broadcast (of a constant, of a computed scalar, or of
  // a row vector), jit(f) == f, and no broadcast is materialised, with or without row fusion.
  const READERS: ((x: Array, t: Array) => Array)[] = [
    (x, t) => np.multiply(np.exp(x), t),
    (x, t) => np.subtract(np.tanh(x), t),
    (x, t) => np.sum(np.multiply(x, t), { axis: 0 }),
    (x, t) => np.max(np.add(np.square(x), t), { axis: 1 }),
    (x, t) => np.divide(t, np.add(np.abs(x), 1)),
  ];
  const SOURCES: ((x: Array, s: number) => Array)[] = [
    (_x, s) => np.full([4, 6], s, 'float32'),
    (x, s) => np.broadcastTo(np.multiply(np.sum(x), s), [4, 6]),
    (x, s) => np.broadcastTo(np.multiply(np.mean(x, { axis: 0 }), s), [4, 6]),
  ];
  it('law: shared broadcast readers equal eager and materialise nothing', () => {
    const x = np.array(Float32Array.from({ length: 24 }, (_, i) => Math.sin(i * 0.7)), 'float32').reshape([4, 6]);
    fc.assert(
      fc.property(
        fc.nat(SOURCES.length - 1),
        fc.float({ min: -3, max: 3, noNaN: true, noDefaultInfinity: true }),
        fc.array(fc.nat(READERS.length - 1), { minLength: 2, maxLength: 4 }),
        fc.boolean(),
        (src, s, readers, rowFusion) => {
          const f = (x: Array): Array[] => {
            const t = SOURCES[src](x, s);
            return readers.map((r) => READERS[r](x, t));
          };
          const lowered = jit(f).lower(x);
          const compiled = lowered.compile({ rowFusion });
          expect(materialised(compiled.module.entry)).toEqual([]);
          const got = compiled.call([...lowered.jaxpr.consts, x]);
          f(x).forEach((want, k) => expectAllclose(got[k], want, { rtol: 1e-5, atol: 1e-6 }));
        },
      ),
      { numRuns: 20 },
    );
  });
});
