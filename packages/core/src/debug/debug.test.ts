/**
 * `debug.print` / `debug.callback`: NumPy-style value formatting, Python format syntax and its
 * errors, and run-time semantics under every transformation (eager, jit op by op, vmap
 * unrolled per element, grad/jvp printing primals, scan/while/cond bodies, partial eval).
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkpoint, type CheckpointOptions, debug, grad, jit, jvp, lax, linearize, makeJaxpr, np, vjp, vmap, type Array } from '../index';
import { evalJaxpr } from '../internal';
import { partialEvalJaxpr } from '../transforms/partialEval';

// What debug.print printed during the current test (core's capture, shared by both packages' tests).
let printed: debug.PrintCapture;
beforeEach(() => {
  printed = debug.capturePrints();
});
afterEach(() => printed.restore());

const f32 = (x: number[] | number) => np.array(x, 'float32');

describe('NumPy-style str of arrays', () => {
  it('pads float columns like NumPy', () => {
    expect(debug.arrayStr(f32([1, 2.5, 3]))).toBe('[1.  2.5 3. ]');
    expect(debug.arrayStr(f32([1, 2, 3]))).toBe('[1. 2. 3.]');
    expect(debug.arrayStr(f32([-1, 2]))).toBe('[-1.  2.]');
    expect(debug.arrayStr(f32([0.1, 0.2, 0.3]))).toBe('[0.1 0.2 0.3]');
    expect(debug.arrayStr(np.array([[1, 2], [3, 4]], 'float32'))).toBe('[[1. 2.]\n [3. 4.]]');
    expect(debug.arrayStr(np.array([1e-5, 1], 'float32'))).toBe('[1.e-05 1.e+00]');
    expect(debug.arrayStr(np.array([Number.NaN, 1], 'float32'))).toBe('[nan  1.]');
  });

  it('ints, bools, 3-d blocks, scalars, summaries', () => {
    expect(debug.arrayStr(np.array([1, 10, -3], 'int32'))).toBe('[ 1 10 -3]');
    expect(debug.arrayStr(np.array([true, false]))).toBe('[ True False]');
    expect(debug.arrayStr(np.arange(0, 8, 1, 'int32').reshape([2, 2, 2]))).toBe('[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]');
    expect(debug.arrayStr(f32(1))).toBe('1.0');
    expect(debug.arrayStr(f32(0.1))).toBe('0.1');
    expect(debug.arrayStr(np.array(0.1, 'bfloat16'))).toBe('0.1');
    expect(debug.arrayStr(np.array(7, 'int32'))).toBe('7');
    expect(debug.arrayStr(np.array(true))).toBe('True');
    expect(debug.arrayStr(np.arange(0, 2000, 1, 'int32'))).toBe('[   0    1    2 ... 1997 1998 1999]');
  });

  it('law: every printed element reads back as the same value (float32, bfloat16, int32)', () => {
    const parse = (t: string) => t.replace(/[[\]]/g, ' ').trim().split(/\s+/).map(Number);
    fc.assert(
      fc.property(fc.array(fc.float({ noNaN: true, noDefaultInfinity: true }), { minLength: 1, maxLength: 12 }), (xs) => {
        const a = np.array(xs, 'float32');
        expect([...np.array(parse(debug.arrayStr(a)), 'float32').dataSync()]).toEqual([...a.dataSync()]);
        const b = np.array(xs.map((v) => (Math.abs(v) > 1e30 ? 1 : v)), 'bfloat16');
        expect([...np.array(parse(debug.arrayStr(b)), 'bfloat16').dataSync()]).toEqual([...b.dataSync()]);
      }),
      { numRuns: 60 },
    );
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { minLength: 1, maxLength: 12 }), (xs) => {
        expect(parse(debug.arrayStr(np.array(xs, 'int32')))).toEqual(xs);
      }),
      { numRuns: 30 },
    );
  });

  it('repr gives Array(..., dtype=...)', () => {
    expect(debug.reprValue(f32([1, 2]))).toBe('Array([1., 2.], dtype=float32)');
  });
});

describe('debug.print formatting', () => {
  it('fills {}, {0} and {name} fields with str() of the values', () => {
    debug.print('x={} y={}', f32([1, 2]), np.array(3, 'int32'));
    debug.print('{1} then {0}', f32(1), f32(2));
    debug.print('named {x} and {}', f32(5), { x: f32([0.5]) });
    debug.print('{{literal}} {:.3f} {!r}', f32(1.25), f32([1]));
    debug.print('plain {} {}', 3, 'text');
    expect(printed.lines).toEqual(['x=[1. 2.] y=3', '2.0 then 1.0', 'named [0.5] and 5.0', '{literal} 1.250 Array([1.], dtype=float32)', 'plain 3 text']);
  });

  it('format specs follow Python for scalars', () => {
    expect(debug.applySpec(3.14159, '.2f')).toBe('3.14');
    expect(debug.applySpec(1234.56, '.3e')).toBe('1.235e+03');
    expect(debug.applySpec(42, '>6d')).toBe('    42');
    expect(debug.applySpec(42, '06d')).toBe('000042');
    expect(debug.applySpec(0.25, '.1%')).toBe('25.0%');
    expect(debug.applySpec(-1.5, '+.1f')).toBe('-1.5');
    expect(debug.applySpec(1.5, '+.1f')).toBe('+1.5');
  });

  it('rejects bad formats and unused or missing arguments at the call', () => {
    expect(() => debug.print('{} {}', f32(1))).toThrow(/reads positional argument 1 but 1 were given/);
    expect(() => debug.print('{}', f32(1), f32(2))).toThrow(/unused positional arguments 1/);
    expect(() => debug.print('{x}', { y: f32(1) })).toThrow(/keyword argument "x"; given: y/);
    expect(() => debug.print('{x}', { x: f32(1), z: f32(2) })).toThrow(/unused keyword arguments z/);
    expect(() => debug.print('{} {0}', f32(1))).toThrow(/cannot switch between automatic field numbering/);
    expect(() => debug.print('oops }', f32(1))).toThrow(/single '}'/);
    expect(() => debug.print('{:.2f}', f32([1, 2]))).toThrow(/needs a scalar; argument 0 is float32\[2\]/);
    expect(() => debug.print(3 as unknown as string)).toThrow(/first argument must be a format string/);
    expect(() => debug.callback(3 as unknown as () => void)).toThrow(/first argument must be a function/);
    expect(printed.lines).toEqual([]);
  });
});

describe('debug.print at run time', () => {
  it('prints eagerly and on every jit call, never at trace time', () => {
    let traces = 0;
    const f = jit((x: Array) => {
      traces++;
      debug.print('x = {}', x);
      return np.multiply(x, 2);
    });
    f(f32([1, 2]));
    f(f32([3, 4]));
    expect(traces).toBe(1);
    expect(printed.lines).toEqual(['x = [1. 2.]', 'x = [3. 4.]']);
  });

  it('shows in the jaxpr as an effect with no outputs', () => {
    const j = makeJaxpr((x: Array) => {
      debug.print('{}', x);
      return x;
    })(f32([1]));
    expect(j.toString()).toMatch(/_ = debug_callback\[/);
    expect(printed.lines).toEqual([]);
  });

  it('vmap unrolls: one line per batch element (as JAX)', () => {
    vmap((x: Array, s: Array) => {
      debug.print('row {} scale {}', x, s);
      return x;
    }, { inAxes: [0, null] })(np.array([[1, 2], [3, 4]], 'float32'), f32(2));
    expect(printed.lines).toEqual(['row [1. 2.] scale 2.0', 'row [3. 4.] scale 2.0']);
  });

  it('grad and jvp print the primal values', () => {
    const g = grad((x: Array) => {
      debug.print('primal {}', x);
      return np.sum(np.multiply(x, x));
    });
    expect([...(g(f32([1, 2])) as Array).dataSync()]).toEqual([2, 4]);
    jvp((x: Array) => {
      debug.print('jvp {}', x);
      return np.sin(x);
    }, [f32(0.5)], [f32(1)]);
    expect(printed.lines).toEqual(['primal [1. 2.]', 'jvp 0.5']);
  });

  it('grad of jit prints once per call', () => {
    const f = jit((x: Array) => {
      debug.print('in jit {}', x);
      return np.sum(np.exp(x));
    });
    grad(f)(f32([0, 1]));
    expect(printed.lines).toEqual(['in jit [0. 1.]']);
  });

  describe('under grad(checkpoint(f)) a print runs again when the backward pass rematerialises f (JAX\'s rule)', () => {
    const yz = (x: Array) => {
      const y = np.add(x, 1);
      const z = np.multiply(y, 2);
      debug.print('y: {}, z: {}', y, z);
      return np.exp(z);
    };
    const twice = ['y: 3.0, z: 6.0', 'y: 3.0, z: 6.0'];
    const once = ['y: 3.0, z: 6.0'];
    const saveAllBut = (...names: string[]): CheckpointOptions['policy'] => (prim) => !names.includes(prim.name);
    it.each([
      ['nothing_saveable (the default)', undefined, twice],
      ['dots_saveable (the print is not saveable)', 'dots_saveable', twice],
      ['everything_saveable (y and z are saved, nothing is recomputed)', 'everything_saveable', once],
      ['everything but add (z is saved: the print would need extra recomputation)', saveAllBut('add'), once],
      ['everything but add and mul (y and z are recomputed anyway)', saveAllBut('add', 'mul'), twice],
    ] as [string, CheckpointOptions['policy'], string[]][])('%s', (_name, policy, want) => {
      const g = grad(checkpoint(yz, { policy }))(f32(2)) as Array;
      expect(g.item()).toBeCloseTo(2 * Math.exp(6), 0);
      expect(printed.lines).toEqual(want);
    });

    it('the forward pass prints at vjp, the recomputation when the pullback runs; jit prints both per call', () => {
      const [, pull] = vjp(checkpoint(yz), f32(2)) as [Array, (ct: Array) => Array[]];
      expect(printed.lines).toEqual(once);
      pull(f32(1));
      expect(printed.lines).toEqual(twice);
      printed.lines.length = 0;
      let traces = 0;
      const step = jit((x: Array) => {
        traces++;
        return grad(checkpoint(yz))(x);
      });
      step(f32(2));
      step(f32(0));
      expect(traces).toBe(1);
      expect(printed.lines).toEqual([...twice, 'y: 1.0, z: 2.0', 'y: 1.0, z: 2.0']);
    });

    it('a print of an input alone runs again even when everything is saveable (it reads nothing saved)', () => {
      grad(checkpoint((x: Array) => {
        debug.print('x: {}', x);
        return np.sin(x);
      }, { policy: 'everything_saveable' }))(f32(2));
      expect(printed.lines).toEqual(['x: 2.0', 'x: 2.0']);
    });
  });

  it('partial evaluation keeps a print of an unknown value (it has no outputs to keep it alive)', () => {
    const closed = makeJaxpr((x: Array) => {
      const y = np.multiply(x, 3);
      debug.print('y = {}', y);
      return np.sin(x);
    })(f32(2));
    const split = partialEvalJaxpr(closed, [true], false);
    expect(split.unknown.toString()).toMatch(/debug_callback/);
    const kOuts = evalJaxpr(split.known.jaxpr, split.known.consts, []);
    evalJaxpr(split.unknown.jaxpr, split.unknown.consts, [...kOuts.slice(kOuts.length - split.numRes), f32(2)]);
    expect(printed.lines).toEqual(['y = 6.0']);
    const [, fLin] = linearize((x: Array) => {
      debug.print('primal {}', x);
      return np.multiply(x, 3);
    }, f32(2));
    fLin(f32(1));
    expect(printed.lines).toEqual(['y = 6.0', 'primal 2.0']);
  });

  it('prints inside scan, whileLoop and cond bodies with the per-iteration values', () => {
    lax.scan((c: Array, x: Array) => {
      debug.print('c={} x={}', c, x);
      return [np.add(c, x), c];
    }, f32(0), f32([1, 2, 3]));
    lax.whileLoop((i: Array) => np.less(i, 2), (i: Array) => {
      debug.print('i={}', i);
      return np.add(i, 1);
    }, np.array(0, 'int32'));
    for (const p of [true, false]) {
      lax.cond(np.array(p), (x: Array) => {
        debug.print('true branch {}', x);
        return x;
      }, (x: Array) => {
        debug.print('false branch {}', x);
        return x;
      }, f32(1));
    }
    expect(printed.lines).toEqual(['c=0.0 x=1.0', 'c=1.0 x=2.0', 'c=3.0 x=3.0', 'i=0', 'i=1', 'true branch 1.0', 'false branch 1.0']);
  });

  it('debug.callback gets concrete values in the same structure', () => {
    const seen: unknown[] = [];
    const f = jit((p: { w: Array; b: Array }) => {
      debug.callback((q: { w: Array; b: Array }, k: number) => seen.push([q.w.toArray(), q.b.toArray(), k]), p, 7);
      return p.w;
    });
    f({ w: f32([1]), b: f32(2) });
    debug.callback((x: Array) => seen.push(x.toArray()), f32(9), { ordered: true });
    expect(seen).toEqual([[[1], 2, 7], 9]);
  });

  it('transposing a callback on a linear value is the JAX error', () => {
    expect(debug.debugCallbackP.rules.transpose).toBeTypeOf('function');
    expect(() => (debug.debugCallbackP.rules.transpose as unknown as () => void)()).toThrow(/transpose doesn't support debugging callbacks/);
  });
});

describe('debug.capturePrints', () => {
  it('collects lines until restored, nests, and puts the previous sink back', () => {
    const outer = debug.capturePrints();
    debug.print('a {}', f32(1));
    const inner = debug.capturePrints();
    debug.print('b {}', f32(2));
    inner.restore();
    debug.print('c {}', f32(3));
    outer[Symbol.dispose]();
    inner.restore(); // a second restore does nothing (it must not reinstate the outer capture)
    debug.print('d {}', f32(4));
    expect(inner.lines).toEqual(['b 2.0']);
    expect(outer.lines).toEqual(['a 1.0', 'c 3.0']);
    // The per-test capture set up before `outer` is current again.
    expect(printed.lines).toEqual(['d 4.0']);
  });
});

describe('README debug example', () => {
  it('runs as written', () => {
    const f = jit((x: Array) => {
      debug.print('x = {} (sum {s:.1f})', x, { s: np.sum(x) });
      return np.multiply(x, 2);
    });
    f(np.array([1, 2.5, 3], 'float32'));
    vmap((r: Array) => {
      debug.print('row {}', r);
      return r;
    })(np.eye(2));
    expect(printed.lines).toEqual(['x = [1.  2.5 3. ] (sum 6.5)', 'row [1. 0.]', 'row [0. 1.]']);
  });
});
