// The one-hot gather must not deoptimise again and again in a training run (BENCHMARKS.md,
// deopt15): with a loop of its own, V8 on-stack-replaced it in its first call, before the code
// after the loop had type feedback, and kept entering that stale OSR code from the loop in every
// later call, each time deoptimising ("insufficient type feedback") and finishing the call in the
// interpreter. Whether that loop starts in a given process depends on when the concurrent OSR
// compile lands (in the old code it did in some runs and not in others), so the probe checks the
// cause, which is deterministic: the gather is never OSR-compiled (it has no loop), and, as a
// second check, it is not deoptimised after a warm-up. It runs the BUILT package (dist, as
// `pnpm test` builds it first) in a child Node with `--trace-opt --trace-deopt`.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const packageDir = fileURLToPath(new URL('..', import.meta.url));

/**
 * Over 80 calls of the gather at the GPT bench's embedding size (V=256, N=128, M=2048): the OSR
 * compiles of `gatherInto`, and its deoptimisations in calls 20..79.
 */
function gatherProbe(): { osr: number; deopts: number; checksum: number } {
  const code = `
import { withBackend } from '@tpukit/core';
import { oneHotGatherP } from '@tpukit/xla-lite/internal';
const V = 256, N = 128, M = 2048;
const table = { data: Float32Array.from({ length: V * N }, (_, j) => Math.sin(j * 0.61)), shape: [V, N], dtype: 'float32' };
const index = { data: Int32Array.from({ length: M }, (_, j) => (j * 7) % V), shape: [M], dtype: 'int32' };
const p = { classes: V, precision: null, dtype: 'float32', nominalFlops: 2 * M * V * N };
const out = new Float32Array(M * N);
withBackend('systolic', () => {
  for (let i = 0; i < 80; i++) {
    if (i === 20) console.log('WARM');
    oneHotGatherP.implInto([table, index], p, { shape: [M, N], dtype: 'float32' }, out);
  }
});
let s = 0;
for (let i = 0; i < out.length; i += 97) s += out[i];
console.log('CHECKSUM ' + s);
`;
  const r = spawnSync(process.execPath, ['--trace-opt', '--trace-deopt', '--input-type=module', '-e', code], { cwd: packageDir, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
  if (r.status !== 0) throw new Error(`gather probe failed: ${r.stderr}`);
  const lines = r.stdout.split('\n');
  const warm = lines.indexOf('WARM');
  if (warm < 0) throw new Error(`gather probe: no WARM line in its output:\n${r.stdout.slice(0, 2000)}`);
  const deopts = lines.slice(warm).filter((l) => l.includes('deoptimizing') && l.includes('<JSFunction gatherInto ')).length;
  const osr = lines.filter((l) => l.startsWith('[compiling method') && l.includes('<JSFunction gatherInto ') && l.includes(' OSR')).length;
  const sum = /CHECKSUM (\S+)/.exec(r.stdout);
  return { osr, deopts, checksum: sum ? Number(sum[1]) : NaN };
}

describe('onehot_gather on V8', () => {
  // V8 only (Node). Before the fix: 1-2 OSR compiles in every run, and in some runs all 60 calls
  // after the warm-up deoptimised; after: none of either (a stray deopt is tolerated).
  it.runIf(typeof process !== 'undefined' && !!process.versions?.v8)('is never on-stack-replaced and does not keep deoptimising', () => {
    const { osr, deopts, checksum } = gatherProbe();
    expect(Number.isFinite(checksum)).toBe(true);
    expect(osr).toBe(0);
    expect(deopts).toBeLessThanOrEqual(2);
  });
});
