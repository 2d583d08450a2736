/**
 * tools/run_stablehlo.py reads the signature tpukit's StableHLO export writes: argument and
 * result types with their `mhlo.sharding`, and `mhlo.num_partitions`. Checked with the
 * system's python3 (numpy only; the JAX part of the runner is unverified here). Skipped when
 * no python3 with numpy is available.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const tools = fileURLToPath(new URL('../tools', import.meta.url));
const py = ['/usr/bin/python3', 'python3'].find((p) => spawnSync(p, ['-c', 'import numpy'], { encoding: 'utf8' }).status === 0);

/** What `jit(matmul, { inShardings: [P(None,'x'), P('x',None)], outShardings: P('x',None) }).lower(...).asStableHlo()` writes (xla-lite's test checks these lines). */
const MODULE = `module @jit_fn attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x4xf32> {mhlo.sharding = "{devices=[1,2]0,1}"}, %arg1: tensor<4x4xf32> {mhlo.sharding = "{devices=[2,1]0,1}"}) -> (tensor<4x4xf32> {mhlo.sharding = "{devices=[2,1]0,1}"}) {
    %0 = "stablehlo.dot_general"(%arg0, %arg1) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    "func.return"(%0) : (tensor<4x4xf32>) -> ()
  }
}
`;

describe.skipIf(!py)('run_stablehlo.py', () => {
  it('reads argument and result shardings and the partition count', () => {
    const r = spawnSync(py!, ['-c', 'import json,sys; import run_stablehlo as r; print(json.dumps(r.parse_signature(sys.stdin.read())))'], { cwd: tools, input: MODULE, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    const f32x4x4 = [[4, 4], 'f32'];
    expect(JSON.parse(r.stdout)).toEqual([
      [
        [f32x4x4, '{devices=[1,2]0,1}'],
        [f32x4x4, '{devices=[2,1]0,1}'],
      ],
      [[f32x4x4, '{devices=[2,1]0,1}']],
      2,
    ]);
  });

  it('fails with a clear message when JAX is missing or finds too few devices', () => {
    const r = spawnSync(py!, ['run_stablehlo.py', '/dev/stdin'], { cwd: tools, input: MODULE, encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/No module named 'jax'|wants 2 partitions/);
  });
});
