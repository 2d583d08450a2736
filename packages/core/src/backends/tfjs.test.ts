/** `@tpukit/core/tfjs` round trips on the tfjs cpu and wasm backends. */
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import '@tensorflow/tfjs-backend-wasm';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { type DType, np } from '../index';
import { fromTfjs, tfjsDTypeOf, toTfjs } from './tfjs';

beforeAll(() => {
  tf.enableProdMode();
});

describe.each(['cpu', 'wasm'])('tfjs interop on the %s backend', (backend) => {
  beforeAll(async () => {
    expect(await tf.setBackend(backend)).toBe(true);
    await tf.ready();
  });

  it('float32 / int32 / bool round-trip exactly, shapes included', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 3 }), fc.constantFrom<DType>('float32', 'int32', 'bool'), (shape, d) => {
        const n = shape.reduce((a, b) => a * b, 1);
        const x = np.reshape(np.array(Array.from({ length: n }, (_, i) => (i * 37) % 11 - 5 + (d === 'float32' ? 0.25 : 0)), d), shape);
        const t = toTfjs(x);
        expect([t.dtype, t.shape]).toEqual([d, shape]);
        const back = fromTfjs(t);
        expect([back.dtype, back.shape]).toEqual([d, shape]);
        expect(back.toArray()).toEqual(x.toArray());
        t.dispose();
      }),
      { numRuns: 20 },
    );
  });

  it('bfloat16 / float16 become float32 and come back exactly with { dtype }', () => {
    for (const d of ['bfloat16', 'float16'] as const) {
      const x = np.array([1.5, -0.333, 65504, 1e-3], d);
      const t = toTfjs(x);
      expect(t.dtype).toBe('float32');
      expect([...(t.dataSync() as Float32Array)]).toEqual([...x.dataSync()]);
      const back = fromTfjs(t, { dtype: d });
      expect(back.dtype).toBe(d);
      expect(back.toArray()).toEqual(x.toArray());
    }
  });

  it('int8 / uint8 / uint32 become int32; uint32 above 2^31 - 1 is an error', () => {
    expect(toTfjs(np.array([-128, 127], 'int8')).arraySync()).toEqual([-128, 127]);
    expect(toTfjs(np.array([0, 255], 'uint8')).arraySync()).toEqual([0, 255]);
    const u = toTfjs(np.array([0, 2147483647], 'uint32'));
    expect([u.dtype, u.arraySync()]).toEqual(['int32', [0, 2147483647]]);
    expect(() => toTfjs(np.array([1, 2147483648], 'uint32'))).toThrow(
      "toTfjs: uint32[2] element 1 is 2147483648, above int32's 2147483647 (tfjs has no uint32); convert with astype('float32') first",
    );
    expect(fromTfjs(toTfjs(np.array([200], 'uint8')), { dtype: 'uint8' }).toArray()).toEqual([200]);
  });

  it('tfjs ops on converted tensors agree with tpukit', () => {
    const a = np.reshape(np.arange(6, undefined, 1, 'float32'), [2, 3]);
    const b = np.reshape(np.arange(6, undefined, 1, 'float32'), [3, 2]);
    const viaTf = fromTfjs(tf.matMul(toTfjs(a), toTfjs(b)));
    expect(viaTf.toArray()).toEqual(np.matmul(a, b).toArray());
  });

  it('the Array owns a copy; disposed tensors and foreign dtypes are errors', () => {
    const t = tf.tensor([1, 2, 3], [3], 'float32');
    const x = fromTfjs(t);
    t.dispose();
    expect(x.toArray()).toEqual([1, 2, 3]);
    expect(() => fromTfjs(t)).toThrow('fromTfjs: the float32[3] tensor is disposed');
    expect(() => fromTfjs(tf.tensor(['a'], [1], 'string'))).toThrow('fromTfjs: tfjs dtype string has no tpukit counterpart (supported: float32, int32, bool)');
    expect(() => fromTfjs({} as never)).toThrow('fromTfjs: expected a tfjs Tensor; got object');
    expect(() => toTfjs([1, 2] as never)).toThrow('toTfjs: expected a tpukit Array; got object');
  });
});

it('tfjsDTypeOf covers every dtype', () => {
  expect(['bool', 'int8', 'uint8', 'int32', 'uint32', 'bfloat16', 'float16', 'float32'].map((d) => tfjsDTypeOf(d as DType))).toEqual(
    ['bool', 'int32', 'int32', 'int32', 'int32', 'float32', 'float32', 'float32'],
  );
});
