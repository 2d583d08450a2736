/**
 * `random` is built from primitives only: under a trace whose values are abstract (shape and
 * dtype, no data), every sampler still runs and yields the right output shape and dtype. This is
 * what lets the transformations (jaxpr tracing, vmap, jit) treat random code like any other; a
 * host-side read of a traced value would throw here.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Array, random } from '../index';
import { type Primitive, type Trace, setDynamicTrace } from '../internal';
import type { ShapedArray } from '../primitive';

class AbstractTracer extends Array {
  readonly #trace: Trace;
  constructor(aval: ShapedArray, trace: Trace) {
    super(aval, null, null);
    this.#trace = trace;
  }
  override get _trace(): Trace {
    return this.#trace;
  }
}

function shapeTrace(): Trace & { names: string[] } {
  const names: string[] = [];
  const trace = {
    level: 1,
    names,
    processPrimitive(prim: Primitive, args: Array[], params: unknown): Array[] {
      names.push(prim.name);
      return prim.abstractEval(args.map((a) => a.aval), params).map((o) => new AbstractTracer(o, trace));
    },
  };
  return trace;
}

let prev: Trace | null = null;
afterEach(() => {
  setDynamicTrace(prev);
});

function traced<T>(fn: (key: Array, trace: ReturnType<typeof shapeTrace>) => T): { out: T; names: string[] } {
  const trace = shapeTrace();
  prev = setDynamicTrace(trace);
  const key = new AbstractTracer({ shape: [2], dtype: 'uint32', weakType: false }, trace);
  try {
    return { out: fn(key, trace), names: trace.names };
  } finally {
    setDynamicTrace(prev);
  }
}

describe('random under an abstract trace', () => {
  it.each([
    ['split', (k: Array) => random.split(k, 3), [3, 2], 'uint32'],
    ['foldIn', (k: Array) => random.foldIn(k, 7), [2], 'uint32'],
    ['bits', (k: Array) => random.bits(k, [4, 5]), [4, 5], 'uint32'],
    ['uniform', (k: Array) => random.uniform(k, [3], { minval: -1, maxval: 2 }), [3], 'float32'],
    ['uniform bf16', (k: Array) => random.uniform(k, [3], { dtype: 'bfloat16' }), [3], 'bfloat16'],
    ['normal', (k: Array) => random.normal(k, [2, 2]), [2, 2], 'float32'],
    ['truncatedNormal', (k: Array) => random.truncatedNormal(k, -1, 1, [4]), [4], 'float32'],
    ['bernoulli', (k: Array) => random.bernoulli(k, 0.3, [6]), [6], 'bool'],
    ['gumbel', (k: Array) => random.gumbel(k, [3]), [3], 'float32'],
    ['categorical', (k: Array) => random.categorical(k, random.normal(k, [2, 5]), { shape: [7, 2] }), [7, 2], 'int32'],
    ['randint', (k: Array) => random.randint(k, [5], 0, 10), [5], 'int32'],
    ['exponential', (k: Array) => random.exponential(k, [3]), [3], 'float32'],
    ['laplace', (k: Array) => random.laplace(k, [3], { dtype: 'float16' }), [3], 'float16'],
    ['logistic', (k: Array) => random.logistic(k, [3]), [3], 'float32'],
    ['pareto', (k: Array) => random.pareto(k, 3, [2]), [2], 'float32'],
    ['weibullMin', (k: Array) => random.weibullMin(k, 1, 2, [2]), [2], 'float32'],
    ['randint uint8', (k: Array) => random.randint(k, [5], 0, 256, 'uint8'), [5], 'uint8'],
    ['permutation', (k: Array) => random.permutation(k, 10), [10], 'int32'],
    ['choice', (k: Array) => random.choice(k, 10, { shape: [3], replace: false }), [3], 'int32'],
  ] as const)('%s', (_name, fn, shape, dtype) => {
    const { out, names } = traced((k) => fn(k));
    expect(out.shape).toEqual(shape);
    expect(out.dtype).toBe(dtype);
    expect(out._trace).not.toBeNull();
    expect(names).toContain('threefry2x32');
  });

  it('a traced seed makes a traced key', () => {
    const { out } = traced((_k, trace) => random.key(new AbstractTracer({ shape: [], dtype: 'int32', weakType: false }, trace)));
    expect(out.shape).toEqual([2]);
    expect(out._trace).not.toBeNull();
  });
});
