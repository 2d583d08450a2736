// Reshapes inside an executable share their operand's storage instead of copying it; results
// must be those of eager execution, including when arguments, constants or outputs are involved.
import { type Array, np } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { jit } from '../src/index';
import { expectAllclose } from './build';

const x = np.array(globalThis.Array.from({ length: 24 }, (_, i) => Math.sin(i) * 2), 'float32').reshape([4, 6]);

describe('reshape sharing storage', () => {
  it('matches eager for reshapes of intermediates, arguments and outputs, call after call', () => {
    const f = (a: Array): Array[] => {
      const e = np.exp(a);
      const r = e.reshape([2, 12]);
      const t = np.tanh(a);
      return [np.sum(np.multiply(r, 2), { axis: 1 }), a.reshape([24]), t.reshape([6, 4]), np.add(r.reshape([24]), 1), e];
    };
    const jf = jit(f);
    for (let k = 0; k < 3; k++) {
      const xi = np.add(x, k);
      const want = f(xi);
      const got = jf(xi);
      got.forEach((g, j) => {
        expect(g.shape).toEqual(want[j].shape);
        expectAllclose(g, want[j]);
      });
    }
  });

  it('an output that is a reshape does not share storage with another output', () => {
    const jf = jit((a: Array) => {
      const e = np.multiply(np.exp(a), 3);
      return [e.reshape([24]), e.reshape([2, 12])];
    });
    const [p, q] = jf(x);
    expect(p.toArray()).toEqual(q.reshape([24]).toArray());
    // A donated output is overwritten by the next call; its sibling must keep its values.
    const before = q.toArray();
    const g = jit((v: Array) => np.add(v, 1), { donateArgnums: [0] });
    g(p);
    expect(q.toArray()).toEqual(before);
  });
});
