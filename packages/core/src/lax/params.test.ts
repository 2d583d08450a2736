// The slicing / gather / scatter / sort primitives carry plain-data params (numbers, arrays of
// numbers, strings, null), so transformation rules and compilers can read and hash them. A
// recording trace sees every bind made by the lax and np entry points and checks the params
// survive a JSON round trip unchanged.
import { describe, expect, it } from 'vitest';
import { type Array, lax, np } from '../index';
import { type Primitive, type Trace, evalPrimitive, setDynamicTrace } from '../internal';

const MINE = new Set(['slice', 'dynamic_slice', 'dynamic_update_slice', 'concatenate', 'pad', 'gather', 'scatter', 'scatter-add', 'scatter-mul', 'scatter-min', 'scatter-max', 'sort', 'top_k']);

function record(fn: () => void): { name: string; params: unknown }[] {
  const seen: { name: string; params: unknown }[] = [];
  const trace = {
    level: 0,
    processPrimitive(prim: Primitive, args: Array[], params: unknown) {
      seen.push({ name: prim.name, params });
      return evalPrimitive(prim, args, params);
    },
  } as Trace;
  const prev = setDynamicTrace(trace);
  try {
    fn();
  } finally {
    setDynamicTrace(prev);
  }
  return seen;
}

describe('params are plain data', () => {
  it('for every primitive the indexing and shape functions bind', () => {
    const x = np.arange(24).reshape([2, 3, 4]).astype('float32');
    const seen = record(() => {
      x.get(1, '::-1', null);
      x.get([0, 1], ':', [2, 3]);
      x.at(0, '1:3').set(1);
      x.at(':', [0, 0]).add(1);
      x.at([1]).multiply(2);
      x.at([1]).min(2);
      x.at([1]).max(2);
      x.at([9]).get({ mode: 'fill' });
      lax.dynamicSlice(x, [np.array(1), 0, 0], [1, 2, 2]);
      lax.dynamicUpdateSlice(x, np.zeros([1, 1, 1]), [0, 0, 0]);
      np.concatenate([x, x], 2);
      np.pad(x, 1, { mode: 'reflect' });
      lax.pad(x, 0, [[1, -1, 1], [0, 0, 0], [0, 0, 0]]);
      np.argsort(x, { axis: 1 });
      lax.topK(x, 2);
      np.takeAlongAxis(x, np.zeros([2, 3, 1], 'int32'), 2);
      np.einsum('iji->j', np.ones([2, 3, 2]));
    });
    const names = new Set(seen.map((s) => s.name));
    for (const n of MINE) expect(names, n).toContain(n);
    for (const s of seen.filter((r) => MINE.has(r.name))) {
      expect(JSON.parse(JSON.stringify(s.params)), s.name).toEqual(s.params);
    }
  });
});
