/** The array size guard: every way an array comes to be is checked against one byte limit, up front. */
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_MAX_ARRAY_BYTES, getMaxArrayBytes, jit, makeJaxpr, np, random, setMaxArrayBytes, vmap } from './index';
import { parseBytes } from './sizeGuard';

afterEach(() => {
  setMaxArrayBytes(null);
});

describe('array size guard', () => {
  it('np.zeros([1e6, 1e6]) names the op, shape, bytes and limit instead of a bare V8 error', () => {
    expect(() => np.zeros([1e6, 1e6])).toThrow(
      'zeros: an array of shape [1000000,1000000] float32 needs 4000000000000 bytes (3.64 TiB), over the limit of 4294967296 bytes (4.00 GiB); raise it with setMaxArrayBytes(bytes) or TPUKIT_MAX_ARRAY_BYTES if this is intended',
    );
    expect(() => np.zeros([65536, 65536])).toThrow(/zeros: an array of shape \[65536,65536\] float32 needs 17179869184 bytes \(16.0 GiB\)/);
    expect(getMaxArrayBytes()).toBe(DEFAULT_MAX_ARRAY_BYTES);
  });

  it('a lower limit applies to every creation path, eager and traced', () => {
    setMaxArrayBytes(1024);
    expect(np.zeros([256]).size).toBe(256); // exactly 1024 bytes is allowed
    expect(() => np.zeros([257])).toThrow(/^zeros: an array of shape \[257\] float32 needs 1028 bytes/);
    expect(() => np.ones([16, 17], 'int32')).toThrow(/^ones: .* needs 1088 bytes/);
    expect(() => np.full([2000], 1, 'int8')).toThrow(/^full: an array of shape \[2000\] int8 needs 2000 bytes/);
    expect(() => np.empty([300])).toThrow(/an array of shape \[300\] float32 needs 1200 bytes/);
    expect(() => np.array(Array.from({ length: 300 }, () => 1.5))).toThrow(/^array: an array of shape \[300\] float32/);
    expect(() => np.broadcastTo(np.ones([1]), [300])).toThrow(/^broadcast_in_dim: an array of shape \[300\] float32 needs 1200 bytes/);
    expect(() => np.arange(300)).toThrow(/an array of shape \[300\] int32 needs 1200 bytes/);
    expect(() => random.normal(random.key(0), [300])).toThrow(/^random\.normal: an array of shape \[300\] uint32 needs 1200 bytes/);
    expect(() => random.split(random.key(0), 200)).toThrow(/^random\.split: an array of shape \[200,2\] uint32 needs 1600 bytes/);
    const x = np.ones([200]);
    expect(() => np.outer(x, x)).toThrow(/an array of shape \[200,200\] float32 needs 160000 bytes/);
    // Traced programs are refused when traced, before any kernel runs.
    const f = (v: ReturnType<typeof np.ones>) => np.broadcastTo(v, [4, 200]);
    expect(() => makeJaxpr(f)(x)).toThrow(/^broadcast_in_dim: an array of shape \[4,200\] float32 needs 3200 bytes/);
    expect(() => jit(f)(x)).toThrow(/^jit\(f\): while tracing: broadcast_in_dim: an array of shape \[4,200\] float32 needs 3200 bytes/);
    expect(() => vmap((v: ReturnType<typeof np.ones>) => np.outer(v, v))(np.ones([2, 16]))).toThrow(/an array of shape \[2,16,16\] float32 needs 2048 bytes/);
  });

  it('setMaxArrayBytes takes bytes or a string, returns the previous limit, and validates', () => {
    expect(setMaxArrayBytes('1MiB')).toBe(DEFAULT_MAX_ARRAY_BYTES);
    expect(getMaxArrayBytes()).toBe(2 ** 20);
    expect(setMaxArrayBytes(null)).toBe(2 ** 20);
    expect(() => setMaxArrayBytes(-1)).toThrow('setMaxArrayBytes: the limit must be a positive number of bytes');
    expect(() => setMaxArrayBytes('lots')).toThrow('setMaxArrayBytes must be a positive byte count such as 4294967296, 4GiB or 512MiB; got "lots"');
    expect(parseBytes('4GiB', 'x')).toBe(2 ** 32);
    expect(parseBytes('512 MiB', 'x')).toBe(2 ** 29);
    expect(parseBytes('1e9', 'x')).toBe(1e9);
  });

  it('TPUKIT_MAX_ARRAY_BYTES sets the limit (read again by setMaxArrayBytes(null))', () => {
    process.env.TPUKIT_MAX_ARRAY_BYTES = '2KiB';
    try {
      setMaxArrayBytes(null);
      expect(getMaxArrayBytes()).toBe(2048);
      expect(() => np.zeros([513])).toThrow(/over the limit of 2048 bytes/);
      process.env.TPUKIT_MAX_ARRAY_BYTES = 'huge';
      expect(() => setMaxArrayBytes(null)).toThrow('TPUKIT_MAX_ARRAY_BYTES must be a positive byte count');
    } finally {
      delete process.env.TPUKIT_MAX_ARRAY_BYTES;
    }
  });
});
