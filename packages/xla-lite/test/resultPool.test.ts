// Results copied out of the wasm arena reuse buffers call after call; an output never shares
// one, so arrays returned by an earlier call keep their values.
import { type Array, debug, nn, np, withBackend } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { arenaTraffic, jit } from '../src/index';
import { expectAllclose } from './build';

const seq = (n: number, s: number) => np.array(globalThis.Array.from({ length: n }, (_, i) => Math.sin(i * s)), 'float32');
const x1 = seq(64 * 32, 0.3).reshape([64, 32]);
const x2 = seq(64 * 32, 0.7).reshape([64, 32]);
const w = seq(32 * 16, 0.11).reshape([32, 16]);

function f(a: Array, b: Array): Array[] {
  const h = np.tanh(np.multiply(a, 2));
  const y = np.matmul(h, b);
  return [h, y, np.sum(np.exp(np.multiply(y, 0.1))), h.reshape([2048])];
}

describe('reused result buffers', () => {
  it('outputs of one call keep their values after the next call, and every call matches eager', () => {
    withBackend('systolic', () => {
      const jf = jit(f);
      const r1 = jf(x1, w);
      const v1 = r1.map((r) => r.toArray());
      const r2 = jf(x2, w);
      expect(r1.map((r) => r.toArray())).toEqual(v1);
      const e2 = f(x2, w);
      r2.forEach((r, k) => expectAllclose(r, e2[k], { rtol: 1e-4, atol: 1e-5 }));
      const r3 = jf(x1, w);
      r3.forEach((r, k) => expect(r.toArray()).toEqual(v1[k]));
    });
  });

  it('dot results (plain, under an epilogue, feeding other dots) reuse buffers without leaking into outputs or later calls', () => {
    withBackend('systolic', () => {
      const bias = seq(16, 0.5);
      const w2 = seq(16 * 32, 0.23).reshape([16, 32]);
      // y: dot + bias epilogue read by a wasm kernel and by a dot; z: a plain dot read by the
      // second epilogue; u: dot + epilogue output; the sum reads y in the arena only.
      const g = (a: Array, b: Array): Array[] => {
        const y = np.add(np.matmul(a, b), bias);
        const z = np.matmul(y, w2);
        const u = np.tanh(np.add(np.matmul(a, np.matmul(b, w2)), z));
        return [u, z, np.sum(np.exp(np.multiply(y, 0.01))), y];
      };
      const jg = jit(g);
      const r1 = jg(x1, w);
      const v1 = r1.map((r) => r.toArray());
      const e1 = g(x1, w);
      r1.forEach((r, k) => expectAllclose(r, e1[k], { rtol: 1e-4, atol: 1e-5 }));
      const r2 = jg(x2, w);
      expect(r1.map((r) => r.toArray())).toEqual(v1);
      const e2 = g(x2, w);
      r2.forEach((r, k) => expectAllclose(r, e2[k], { rtol: 1e-4, atol: 1e-5 }));
      expect(jg(x1, w).map((r) => r.toArray())).toEqual(v1);
    });
  });

  it('a dot read only by wasm kernels (scores -> softmax) written straight into the arena matches eager, call after call', () => {
    withBackend('systolic', () => {
      const g = (a: Array, b: Array): Array[] => {
        const p = nn.softmax(np.matmul(a, a.T), { axis: -1 });
        return [np.matmul(p, a), np.sum(np.exp(np.multiply(np.matmul(b.T, b), 0.01)))];
      };
      const jg = jit(g);
      for (const a of [x1, x2, x1]) {
        const r = jg(a, w);
        const e = g(a, w);
        r.forEach((v, k) => expectAllclose(v, e[k], { rtol: 1e-4, atol: 1e-5 }));
      }
    });
  });

  it('transposes (heads split and merged) reuse buffers and match eager, call after call', () => {
    withBackend('systolic', () => {
      const g = (a: Array): Array[] => {
        const h = np.transpose(np.tanh(a).reshape([4, 16, 2, 16]), [0, 2, 1, 3]);
        const s = np.matmul(h, np.swapaxes(h, -1, -2));
        return [np.transpose(np.matmul(nn.softmax(s, { axis: -1 }), h), [0, 2, 1, 3]).reshape([64, 32]), np.transpose(h, [1, 0, 2, 3])];
      };
      const jg = jit(g);
      const r1 = jg(x1);
      const v1 = r1.map((r) => r.toArray());
      for (const a of [x2, x1]) {
        const r = jg(a);
        const e = g(a);
        r.forEach((v, k) => expectAllclose(v, e[k], { rtol: 1e-4, atol: 1e-5 }));
      }
      expect(r1.map((r) => r.toArray())).toEqual(v1);
    });
  });

  it('with donated state, outputs land in the donated storage and match the undonated program', () => {
    withBackend('systolic', () => {
      const step = (p: { w: Array }, a: Array): [Array, { w: Array }] => {
        const y = np.matmul(a, p.w);
        return [np.sum(np.square(y)), { w: np.subtract(p.w, np.multiply(np.matmul(a.T, y), 1e-3)) }];
      };
      const plain = jit(step);
      const donated = jit(step, { donateArgnums: 0 });
      let pd = { w: np.array(w.toArray() as number[][], 'float32') };
      let pp = { w };
      for (const a of [x1, x2, x1]) {
        const [lp, np2] = plain(pp, a);
        const before = pd.w;
        const [ld, nd] = donated(pd, a);
        expect(ld.toArray()).toEqual(lp.toArray());
        expect(nd.w.toArray()).toEqual(np2.w.toArray());
        expect(before.isDeleted()).toBe(true);
        pd = nd;
        pp = np2;
      }
    });
  });

  it('outputs get fresh buffers (no copy at the end of the call), stay valid after the next call, and donation is unchanged', () => {
    withBackend('systolic', () => {
      // Adam's update: one multi-output wasm fusion per parameter writes p, m and v; the
      // outputs are fed back in as the next call's arguments, as a training loop does.
      type P = { a: Array; b: Array };
      const adam = (p: P, m: P, v: P, g: P, lr: Array): [P, P, P] => {
        const m2 = { a: np.add(np.multiply(m.a, 0.9), np.multiply(g.a, 0.1)), b: np.add(np.multiply(m.b, 0.9), np.multiply(g.b, 0.1)) };
        const v2 = { a: np.add(np.multiply(v.a, 0.999), np.multiply(np.square(g.a), 0.001)), b: np.add(np.multiply(v.b, 0.999), np.multiply(np.square(g.b), 0.001)) };
        const upd = (w: Array, a: Array, b: Array) => np.subtract(w, np.multiply(lr, np.divide(a, np.add(np.sqrt(b), 1e-8))));
        return [{ a: upd(p.a, m2.a, v2.a), b: upd(p.b, m2.b, v2.b) }, m2, v2];
      };
      const plain = jit(adam);
      const donated = jit(adam, { donateArgnums: [0, 1, 2] });
      const zeros = (): P => ({ a: np.zeros([64, 32]), b: np.zeros([16]) });
      const grads = [{ a: x1, b: seq(16, 0.9) }, { a: x2, b: seq(16, 0.4) }];
      let state: [P, P, P] = [{ a: x2, b: seq(16, 0.2) }, zeros(), zeros()];
      let dstate: [P, P, P] = [{ a: np.add(x2, 0), b: seq(16, 0.2) }, zeros(), zeros()];
      const kept: { out: [P, P, P]; values: unknown[] }[] = [];
      for (let t = 0; t < 4; t++) {
        const lr = np.array(1e-2 * (t + 1), 'float32');
        const t0 = arenaTraffic().outputCopiedBytes;
        const out = plain(...state, grads[t % 2], lr);
        expect(arenaTraffic().outputCopiedBytes - t0).toBe(0);
        const e = adam(...state, grads[t % 2], lr);
        [0, 1, 2].forEach((k) => {
          expectAllclose(out[k].a, e[k].a, { rtol: 1e-5, atol: 1e-6 });
          expectAllclose(out[k].b, e[k].b, { rtol: 1e-5, atol: 1e-6 });
        });
        const before = dstate;
        const dout = donated(...dstate, grads[t % 2], lr);
        [0, 1, 2].forEach((k) => {
          expect(dout[k].a.toArray()).toEqual(out[k].a.toArray());
          expect(dout[k].b.toArray()).toEqual(out[k].b.toArray());
          expect(before[k].a.isDeleted()).toBe(true);
        });
        kept.push({ out, values: out.flatMap((q) => [q.a.toArray(), q.b.toArray()]) });
        state = out;
        dstate = dout;
      }
      // Every call's outputs still hold their values after the later calls.
      for (const { out, values } of kept) expect(out.flatMap((q) => [q.a.toArray(), q.b.toArray()])).toEqual(values);
      // Outputs also read inside the call (h feeds a dot; y an epilogue and a wasm kernel): fresh too.
      const jf = jit(f);
      jf(x1, w);
      const t0 = arenaTraffic().outputCopiedBytes;
      const r = jf(x2, w);
      expect(arenaTraffic().outputCopiedBytes - t0).toBe(0);
      const v = r.map((q) => q.toArray());
      jf(x1, w);
      expect(r.map((q) => q.toArray())).toEqual(v);
    });
  });

  it('a program with a host callback still hands the callback values that stay valid', () => {
    const seen: Array[] = [];
    const printed = debug.capturePrints();
    try {
      const jf = jit((a: Array) => {
        const h = np.tanh(np.multiply(a, 2));
        debug.print('{}', np.sum(h));
        return np.sum(np.multiply(h, h));
      });
      seen.push(jf(x1), jf(x2));
      expectAllclose(seen[0], np.sum(np.square(np.tanh(np.multiply(x1, 2)))), { rtol: 1e-4 });
      expect(printed.lines.length).toBe(2);
    } finally {
      printed.restore();
    }
  });
});
