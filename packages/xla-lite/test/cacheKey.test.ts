// The compile-cache key covers shardings (as JAX keys on input shardings): a new sharding is a
// miss explained as "sharding changed from ... to ...", the same one (or an equal default) is a
// hit, and the persistent cache keeps one entry per sharding. Plus the jit bad-input errors
// that name the function and the argument.
import { type Array, type Device, type Index, makeArrayFromCallback, np, type Sharding, SingleDeviceSharding } from '@tpukit/core';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { diskCacheStats, jit, setCacheDir } from '../src/index';

const dev = (id: number): Device => ({ id, deviceKind: 'cpu (virtual)', platform: 'cpu', processIndex: 0 });

/** Rows split evenly over two virtual devices. */
class RowSharding implements Sharding {
  readonly deviceSet = [dev(1), dev(2)];
  readonly isFullyReplicated = false;
  devicesIndicesMap(shape: readonly number[]): Map<Device, Index> {
    const h = shape[0] / 2;
    const rest = shape.slice(1).map((d) => [0, d] as const);
    return new Map([
      [this.deviceSet[0], [[0, h] as const, ...rest]],
      [this.deviceSet[1], [[h, shape[0]] as const, ...rest]],
    ]);
  }
  shardShape(shape: readonly number[]): number[] {
    return [shape[0] / 2, ...shape.slice(1)];
  }
  toString(): string {
    return 'RowSharding(devices=[1,2])';
  }
}

const values = [1, 2, 3, 4, 5, 6, 7, 8];
const dense = () => np.array(values, 'float32').reshape([4, 2]);
const sharded = (s: Sharding) => makeArrayFromCallback([4, 2], 'float32', s, (idx: Index) => dense().get(...idx.map(([a, b]) => `${a}:${b}`)));

describe('shardings in the compile-cache key', () => {
  it('a new sharding misses and is explained; the same sharding hits; results agree', () => {
    const f = jit(function scale(x: Array) {
      return np.multiply(x, 2);
    });
    const want = [...(f(dense()) as Array).dataSync()];
    f(dense());
    const rows = sharded(new RowSharding());
    expect([...(f(rows) as Array).dataSync()]).toEqual(want);
    f(sharded(new RowSharding()));
    f(sharded(new SingleDeviceSharding(dev(3))));
    f(sharded(new SingleDeviceSharding()));
    const s = f.compileStats();
    expect([s.hits, s.misses, s.recompiles]).toEqual([3, 3, 2]);
    expect(s.explanations).toEqual([
      'argument 0 (x): sharding changed from SingleDeviceSharding(device=cpu:0) to RowSharding(devices=[1,2])',
      'argument 0 (x): sharding changed from RowSharding(devices=[1,2]) to SingleDeviceSharding(device=cpu:3)',
    ]);
    expect(f.traceCount).toBe(3);
  });

  it('names the leaf of a pytree argument whose sharding changed', () => {
    const f = jit((p: { a: Array; b: Array }) => np.add(p.a, p.b));
    f({ a: dense(), b: dense() });
    f({ a: dense(), b: sharded(new RowSharding()) });
    expect(f.compileStats().explanations).toEqual(['argument 0 (p): sharding changed from SingleDeviceSharding(device=cpu:0) to RowSharding(devices=[1,2])'.replace('(p):', '(p) leaf 1:')]);
  });

  it('the persistent cache keeps one entry per sharding', () => {
    const dir = mkdtempSync(join(tmpdir(), 'xla-shard-'));
    setCacheDir(dir);
    try {
      const body = (x: Array) => np.tanh(np.multiply(x, 3));
      const s0 = diskCacheStats();
      jit(body)(dense());
      jit(body)(sharded(new RowSharding()));
      const s1 = diskCacheStats();
      expect(s1.writes - s0.writes).toBe(2);
      expect(s1.hits - s0.hits).toBe(0);
      expect(readdirSync(dir).filter((n) => n.endsWith('.json'))).toHaveLength(2);
      jit(body)(sharded(new RowSharding()));
      expect(diskCacheStats().hits - s1.hits).toBe(1);
    } finally {
      setCacheDir(null);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('jit bad inputs name the function and the argument', () => {
  const x = np.ones([2]);

  it('traced functions returning non-Arrays', () => {
    expect(() => jit(function label(a: Array) {
      return ['loss', a];
    })(x)).toThrow(/jit\(label\): output leaf 0 of .* is a string, not an Array/);
    expect(() => jit(function flag(a: Array) {
      return { ok: true, a };
    })(x)).toThrow(/jit\(flag\): output leaf \d .* is a boolean \(true\), not an Array/);
  });

  it('unhashable static arguments', () => {
    const f = jit(function cfgd(a: Array, cfg: unknown) {
      return a;
    }, { staticArgnums: 1 });
    expect(() => f(x, new Float32Array(2))).toThrow(/jit\(cfgd\): static argument 1 is not hashable: a Float32Array/);
    class Config {
      k = 1;
    }
    expect(() => f(x, new Config())).toThrow(/jit\(cfgd\): static argument 1 is not hashable: a Config \(mutable objects have no value identity\)/);
    expect(() => f(x, { nested: [np.ones([1])] })).toThrow(/static argument 1 is not hashable: an Array f32\[1\]/);
  });

  it('non-Array traced arguments (JS numbers and booleans are traced as weak scalars)', () => {
    const f = jit(function mul(a: Array, k: unknown) {
      return np.multiply(a, k as number);
    });
    expect(() => f(x, 'three')).toThrow(/jit\(mul\): argument 1 \(k\) is a string, not an Array/);
    expect(() => f(x, [x, 2n])).toThrow(/jit\(mul\): argument 1 \(k\) leaf 1 is a JS bigint \(2\), not an Array/);
    expect(() => f(x, 2 ** 40)).toThrow(/jit\(mul\): argument 1 \(k\) is the JS integer 1099511627776, outside int32/);
    expect([...f(x, 3).dataSync()]).toEqual([3, 3]);
  });

  it('shape-polymorphic misuse: symbolic or negative dimensions, and traced values used as sizes', () => {
    const f = jit(function total(v: Array) {
      return np.sum(v);
    });
    expect(() => f.lower({ shape: ['batch', 3], dtype: 'float32' } as never)).toThrow(/jit\(total\): argument 0 \(v\) has shape \[batch,3\] whose dimension 0 is "batch"; xla-lite compiles static shapes only/);
    expect(() => f.lower({ shape: [-1, 3], dtype: 'float32' } as never)).toThrow(/dimension 0 is -1/);
    expect(f.lower({ shape: [2, 3], dtype: 'float32' } as never).asText()).toContain('f32[2,3]');
    const g = jit(function fill(v: Array, n: Array) {
      return np.add(np.zeros([n as unknown as number]), np.sum(v));
    });
    expect(() => g(x, np.array(3, 'int32'))).toThrow(/jit\(fill\): while tracing: zeros: shape dimension 0 is an Array \(int32\[\]\), not a number; shapes must be known when tracing/);
  });
});
