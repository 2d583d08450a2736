// The Array methods as a consumer package sees them: this file is typechecked against core's
// BUILT declarations (dist/index.d.ts, through the package's exports), so it fails `pnpm
// typecheck` when the bundled .d.ts loses a method or its argument types (a module augmentation
// that tsup's dts step drops, an `any` that creeps in). The runtime checks keep the values honest.
import { type Array, np } from '@tpukit/core';
import { describe, expect, expectTypeOf, it } from 'vitest';

type Tail<F> = F extends (x: never, ...rest: infer R) => unknown ? R : never;

describe('core Array methods, typed from the built .d.ts', () => {
  const x = np.arange(6).astype('float32').reshape([2, 3]);

  it('chains of methods are Arrays', () => {
    const y = x.sum(0).reshape([3, 1]);
    expectTypeOf(y).toEqualTypeOf<Array>();
    expectTypeOf(x.max(-1, { keepdims: true }).astype('bfloat16').T).toEqualTypeOf<Array>();
    expectTypeOf(x.get(0, '1:').at(0).get({ mode: 'fill', fillValue: -1 })).toEqualTypeOf<Array>();
    expect(y.shape).toEqual([3, 1]);
    expect(y.toArray()).toEqual([[3], [5], [7]]);
    expect(x.max(-1, { keepdims: true }).toArray()).toEqual([[2], [5]]);
    expect(x.at(0, 1).add(10).get(0, 1).item()).toBe(11);
  });

  it('each method takes what its np function takes after the array', () => {
    expectTypeOf(x.sum).parameters.toEqualTypeOf<Tail<typeof np.sum>>();
    expectTypeOf(x.mean).parameters.toEqualTypeOf<Tail<typeof np.mean>>();
    expectTypeOf(x.max).parameters.toEqualTypeOf<Tail<typeof np.max>>();
    expectTypeOf(x.var).parameters.toEqualTypeOf<Tail<typeof np.variance>>();
    expectTypeOf(x.std).parameters.toEqualTypeOf<Tail<typeof np.std>>();
    expectTypeOf(x.argmax).parameters.toEqualTypeOf<Tail<typeof np.argmax>>();
    expectTypeOf(x.cumsum).parameters.toEqualTypeOf<Tail<typeof np.cumsum>>();
    expectTypeOf(x.sort).parameters.toEqualTypeOf<Tail<typeof np.sort>>();
    expectTypeOf(x.argsort).parameters.toEqualTypeOf<Tail<typeof np.argsort>>();
    expectTypeOf(x.at(0)).toMatchTypeOf<{ set(v: unknown): Array; apply(fn: (v: Array) => Array): Array }>();
  });

  it('wrong arguments are type errors (and runtime errors)', () => {
    // @ts-expect-error: `axes` is not an option of sum
    expect(() => x.sum({ axes: 0 })).toThrow(/sum: unknown option "axes"/);
    // @ts-expect-error: argmax takes one axis, not a list
    expect(() => x.argmax({ axis: [0, 1] })).toThrow(/argmax: axis must be one integer or null/);
    // @ts-expect-error: sort's options have no `order`
    expect(() => x.sort(0, { order: 'a' })).toThrow(/sort: unknown option "order"/);
  });
});
