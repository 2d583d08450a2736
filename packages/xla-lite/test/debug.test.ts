// debug.print through the xla-lite compiler: runs at run time on every call (not at trace
// time), survives DCE/CSE/constant folding and fusion, keeps program order, works in control
// flow bodies (compiled through subprograms.ts), under vmap and grad (again in the backward
// pass of grad(checkpoint(f)), as JAX rematerialises it), and exports as the
// host-callback custom call JAX emits.
import { checkpoint, debug, grad, lax, np, vmap, type Array } from '@tpukit/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { compileLog, jit, setCacheDir, diskCacheStats } from '../src/index';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// What debug.print printed during the current test (core's capture, shared by both packages' tests).
let printed: debug.PrintCapture;
beforeEach(() => {
  printed = debug.capturePrints();
});
afterEach(() => printed.restore());

const f32 = (x: number[] | number) => np.array(x, 'float32');

describe('debug.print under xla-lite jit', () => {
  it('prints the run-time values on every call, once traced and compiled', () => {
    let traces = 0;
    const before = compileLog().length;
    const f = jit(function step(x: Array) {
      traces++;
      const y = np.multiply(np.exp(x), 2);
      debug.print('x={} y={y:.2f}', x, { y: np.sum(y) });
      return np.add(y, 1);
    });
    const a = f(f32([0, 1])) as Array;
    f(f32([1, 2]));
    expect(traces).toBe(1);
    expect(compileLog().length - before).toBe(1);
    expect(printed.lines).toEqual(['x=[0. 1.] y=7.44', 'x=[1. 2.] y=20.21']);
    expect([...a.dataSync()].map((v) => Math.round(v * 1000) / 1000)).toEqual([3, 6.437]);
  });

  it('is not removed by DCE (unused value), merged by CSE (same print twice) or folded (constant operand)', () => {
    const f = jit((x: Array) => {
      const unused = np.sin(x);
      debug.print('dead value {}', unused);
      debug.print('same {}', x);
      debug.print('same {}', x);
      debug.print('const {}', np.add(f32(1), f32(2)));
      return np.multiply(x, 2);
    });
    f(f32([0]));
    f(f32([0]));
    const once = ['dead value [0.]', 'same [0.]', 'same [0.]', 'const 3.0'];
    expect(printed.lines).toEqual([...once, ...once]);
    const text = f.lower(f32([0])).compile().asText();
    expect(text.match(/custom-call\(.*custom_call_target="xla_ffi_python_cpu_callback", custom_call_has_side_effect=true/g)).toHaveLength(4);
  });

  it('keeps program order between prints and around fused work', () => {
    const f = jit((x: Array) => {
      debug.print('first {}', x);
      const y = np.tanh(np.multiply(x, 3));
      debug.print('second {}', y);
      const z = np.add(np.exp(y), 1);
      debug.print('third {}', np.sum(z), { ordered: true });
      return z;
    });
    f(f32([0]));
    expect(printed.lines).toEqual(['first [0.]', 'second [0.]', 'third 2.0']);
  });

  it('prints per iteration inside scan, whileLoop and cond bodies', () => {
    const f = jit((xs: Array) => {
      const [c] = lax.scan((c: Array, x: Array) => {
        const nc = np.add(np.multiply(c, 2), x);
        debug.print('scan c={} x={}', c, x);
        return [nc, nc];
      }, f32(0), xs);
      const n = lax.whileLoop((i: Array) => np.less(i, 2), (i: Array) => {
        debug.print('while i={}', i);
        return np.add(np.multiply(i, 1), 1);
      }, np.array(0, 'int32'));
      return lax.cond(np.greater(c, 2), (v: Array) => {
        debug.print('big {}', v);
        return np.multiply(v, 2);
      }, (v: Array) => {
        debug.print('small {}', v);
        return np.negative(v);
      }, np.add(c, n.astype('float32')));
    });
    f(f32([1, 2]));
    f(f32([0, 1]));
    expect(printed.lines).toEqual([
      'scan c=0.0 x=1.0', 'scan c=1.0 x=2.0', 'while i=0', 'while i=1', 'big 6.0',
      'scan c=0.0 x=0.0', 'scan c=0.0 x=1.0', 'while i=0', 'while i=1', 'small 3.0',
    ]);
  });

  it('a loop whose only purpose is printing is kept', () => {
    const f = jit((x: Array) => {
      lax.foriLoop(0, 2, (i: Array, c: Array) => {
        debug.print('tick {} {}', i, c);
        return np.add(c, 1);
      }, x);
      return x;
    });
    f(f32(5));
    expect(printed.lines).toEqual(['tick 0 5.0', 'tick 1 6.0']);
  });

  it('vmap of jit prints once per batch element; grad of jit prints the primal', () => {
    const f = jit((x: Array) => {
      debug.print('v {}', x);
      return np.sum(np.square(x));
    });
    vmap(f)(np.array([[1, 2], [3, 4]], 'float32'));
    expect(printed.lines).toEqual(['v [1. 2.]', 'v [3. 4.]']);
    printed.lines.length = 0;
    const g = grad(f)(f32([1, 2])) as Array;
    expect([...g.dataSync()]).toEqual([2, 4]);
    expect(printed.lines).toEqual(['v [1. 2.]']);
    printed.lines.length = 0;
    jit(vmap(f))(np.array([[5, 6]], 'float32'));
    expect(printed.lines).toEqual(['v [5. 6.]']);
  });

  it('jit(grad(checkpoint(f))) prints in the forward pass and again in the rematerialising backward pass, every call', () => {
    const layer = (x: Array) => {
      const h = np.multiply(np.add(x, 1), 2);
      debug.print('h = {}', h);
      return np.sum(np.tanh(h));
    };
    const before = compileLog().length;
    const step = jit(grad(checkpoint(layer)));
    const g = step(f32([0, 0.5])) as Array;
    step(f32([0, 0]));
    expect(compileLog().length - before).toBe(1);
    expect(printed.lines).toEqual(['h = [2. 3.]', 'h = [2. 3.]', 'h = [2. 2.]', 'h = [2. 2.]']);
    expect(g.dataSync()[1]).toBeCloseTo(2 * (1 - Math.tanh(3) ** 2), 5);
    const hlo = step.lower(f32([0, 0])).compile().asText();
    expect(hlo.match(/custom_call_target="xla_ffi_python_cpu_callback"/g)).toHaveLength(2);
    // With everything saveable the backward pass recomputes nothing, so it prints once.
    printed.lines.length = 0;
    jit(grad(checkpoint(layer, { policy: 'everything_saveable' })))(f32([0, 0]));
    expect(printed.lines).toEqual(['h = [2. 2.]']);
  });

  it('exports to StableHLO as a side-effecting host callback custom call', () => {
    const mlir = jit((x: Array) => {
      debug.print('x {}', x);
      return np.exp(x);
    }).lower(f32([1, 2])).asStableHlo();
    expect(mlir).toMatch(
      /^\s+"stablehlo\.custom_call"\(%arg0\) \{call_target_name = "xla_ffi_python_cpu_callback", api_version = 4 : i32, backend_config = \{descriptor = \d+ : ui64\}, has_side_effect = true, operand_layouts = \[dense<0> : tensor<1xindex>\], result_layouts = \[\], tpukit\.callback = "print \\"x \{\}\\""\} : \(tensor<2xf32>\) -> \(\)$/m,
    );
  });

  it('a program with a host callback is not written to the persistent cache', () => {
    const dir = mkdtempSync(join(tmpdir(), 'xla-debug-'));
    setCacheDir(dir);
    try {
      const before = diskCacheStats().uncacheable;
      jit((x: Array) => {
        debug.print('cached? {}', x);
        return np.add(x, 1);
      })(f32([1]));
      expect(diskCacheStats().uncacheable).toBe(before + 1);
      expect(printed.lines).toEqual(['cached? [1.]']);
    } finally {
      setCacheDir(null);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
