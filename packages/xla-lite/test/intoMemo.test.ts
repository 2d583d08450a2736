// The executable keeps one `intoMemo` per dot / primitive step (core's evalPrimitiveInto skips
// the shape rule while the operands' avals repeat). A memo must never go stale: the same
// compiled step called with donated and undonated arguments, on two backends, with argument
// values changing, gives what a fresh compile gives.
import { type Array, nn, np, withBackend } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { jit } from '../src/index';

const seq = (n: number, s: number) => np.array(globalThis.Array.from({ length: n }, (_, i) => Math.sin(i * s)), 'float32');

/** Plain dots, a dot under an epilogue, and a dot feeding a dot (every "into" path of the executable). */
function f(a: Array, w: Array, b: Array, w2: Array): Array[] {
  const h = nn.relu(np.add(np.matmul(a, w), b));
  const y = np.matmul(h, w2);
  return [np.add(a, 1), np.sum(np.multiply(y, y)), np.matmul(np.transpose(a), h)];
}

const bits = (x: Array): number[] => globalThis.Array.from(new Uint32Array(Float32Array.from(x.dataSync() as Float32Array).buffer));

describe('per-step intoMemo in the executable', () => {
  it('donated and undonated calls of one program, on two backends, match fresh compiles bit for bit', () => {
    const w = seq(32 * 16, 0.11).reshape([32, 16]);
    const b = seq(16, 0.5);
    const w2 = seq(16 * 8, 0.23).reshape([16, 8]);
    const inputs = [0.3, 0.7, 1.1, 0.3].map((s) => () => seq(64 * 32, s).reshape([64, 32]));
    for (const backend of ['systolic', 'reference'] as const) {
      withBackend(backend, () => {
        const plain = jit(f);
        const donated = jit(f, { donateArgnums: [0] });
        for (const make of inputs) {
          const want = jit(f)(make(), w, b, w2).map(bits); // a fresh program, fresh memos
          expect(plain(make(), w, b, w2).map(bits)).toEqual(want);
          expect(donated(make(), w, b, w2).map(bits)).toEqual(want);
        }
      });
    }
  });
});
