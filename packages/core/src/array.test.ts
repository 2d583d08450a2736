/** The Array API: shape/dtype/size/ndim, data()/dataSync()/toArray()/item(), dispose and `using`, toString, methods. */
import { describe, expect, it } from 'vitest';
import { np } from './index';

describe('Array', () => {
  it('reports shape, dtype, size, ndim, weakType', () => {
    const x = np.zeros([2, 3, 4], 'int8');
    expect([x.shape, x.dtype, x.size, x.ndim, x.weakType]).toEqual([[2, 3, 4], 'int8', 24, 3, false]);
    const s = np.array(1.5);
    expect([s.shape, s.size, s.ndim, s.weakType]).toEqual([[], 1, 0, true]);
    expect(Object.isFrozen(x.shape)).toBe(true);
  });

  it('dataSync returns a fresh copy (bf16/f16 decoded to Float32Array); data() resolves to the same', async () => {
    const x = np.array([1.5, -2], 'bfloat16');
    const d = x.dataSync();
    expect(d).toBeInstanceOf(Float32Array);
    expect([...d]).toEqual([1.5, -2]);
    d[0] = 99;
    expect(x.dataSync()[0]).toBe(1.5);
    const i = np.array([1, 2], 'int32');
    const di = i.dataSync();
    di[0] = 7;
    expect(i.toArray()).toEqual([1, 2]);
    expect([...(await i.data())]).toEqual([1, 2]);
    expect(np.array([1], 'float16').dataSync()).toBeInstanceOf(Float32Array);
    expect(np.array([1], 'uint32').dataSync()).toBeInstanceOf(Uint32Array);
  });

  it('toArray gives nested lists, booleans for bool, a scalar for rank 0', () => {
    expect(np.arange(6).reshape([2, 3]).toArray()).toEqual([[0, 1, 2], [3, 4, 5]]);
    expect(np.array([[true], [false]]).toArray()).toEqual([[true], [false]]);
    expect(np.array(true).toArray()).toBe(true);
    expect(np.array(3).toArray()).toBe(3);
    expect(np.zeros([2, 0]).toArray()).toEqual([[], []]);
    expect(np.zeros([0, 2]).toArray()).toEqual([]);
  });

  it('item needs exactly one element', () => {
    expect(np.array([[7]], 'uint8').item()).toBe(7);
    expect(np.array([false]).item()).toBe(false);
    expect(() => np.zeros([2]).item()).toThrow('item: needs an array of size 1; got float32[2] (size 2)');
    expect(() => np.zeros([0]).item()).toThrow('item: needs an array of size 1; got float32[0] (size 0)');
  });

  it('dispose releases the buffer: reading or computing afterwards is an error; dispose twice is fine', () => {
    const x = np.ones([3]);
    x.dispose();
    x.dispose();
    expect(x.isDisposed).toBe(true);
    expect(x.shape).toEqual([3]);
    expect(() => x.dataSync()).toThrow('Array: cannot read a float32[3] array after dispose()');
    expect(() => np.add(x, 1)).toThrow('Array: cannot use a float32[3] array after dispose()');
  });

  it('`using` disposes at the end of the block', () => {
    let escaped;
    {
      using y = np.ones([2]);
      expect(y.toArray()).toEqual([1, 1]);
      escaped = y;
    }
    expect(escaped.isDisposed).toBe(true);
  });

  it('toString shows values, dtype, weak_type and shape', () => {
    expect(String(np.array([1, 2], 'int8'))).toBe('Array([1,2], dtype=int8, shape=[2])');
    expect(String(np.array(2.5))).toBe('Array(2.5, dtype=float32, weak_type=True, shape=[])');
  });

  it('methods forward to np', () => {
    const x = np.arange(6).reshape([2, 3]);
    expect(x.T.shape).toEqual([3, 2]);
    expect(x.sum({ axis: 0 }).toArray()).toEqual([3, 5, 7]);
    expect(x.astype('bool').dtype).toBe('bool');
    expect(x.add(1).mul(2).sub(1).toArray()).toEqual([[1, 3, 5], [7, 9, 11]]);
    expect(x.max().item()).toBe(5);
    expect(x.argmax({ axis: 1 }).toArray()).toEqual([2, 2]);
    expect(x.neg().ravel().toArray()).toEqual([0, -1, -2, -3, -4, -5]);
    expect(x.matmul(np.ones([3, 1], 'int32')).toArray()).toEqual([[3], [12]]);
  });

  it('sharding and addressable shards of an unsharded array', () => {
    const x = np.zeros([2, 3]);
    expect(x.sharding.isFullyReplicated).toBe(true);
    const [s] = x.addressableShards;
    expect(s.index).toEqual([[0, 2], [0, 3]]);
    expect(s.data).toBe(x);
  });
});
