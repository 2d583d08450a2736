/**
 * Writes StableHLO modules exported by tpukit, with tpukit's own inputs and outputs, for
 * run_stablehlo.py to compile and run with a real XLA (FIDELITY.md at the repo root says what ran).
 *
 *     npx tsx packages/mesh/tools/export_stablehlo_cases.ts OUT_DIR [--wrappers]
 *
 * `--wrappers` writes `wrapperCases()` (nested jit, remat, custom derivatives, top_k) instead.
 * For each case NAME: NAME.opt.mlir (`compile().asStableHlo()`, the optimised module: fusions
 * inline, fused attention / one-hot gathers expanded), NAME.low.mlir (`lower().asStableHlo()`,
 * the unoptimised module), NAME.npz (arg0.. inputs, out0.. tpukit's outputs, float32 / int32)
 * and an entry in cases.json (tolerances, what to expect). Inputs are deterministic.
 */
import { type Array, setDefaultMatmulPrecision } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { writeNpz, type NpyArray } from './npz';
import { caseModules, cases, jitOptions, wrapperCases } from './stablehloCases';

const toNpy = (a: Array): NpyArray => ({ shape: a.shape, dtype: a.dtype, data: a.dataSync() as ArrayLike<number> });

function main(): void {
  const dir = process.argv[2];
  if (!dir) throw new Error('usage: export_stablehlo_cases.ts OUT_DIR [--wrappers]');
  mkdirSync(dir, { recursive: true });
  setDefaultMatmulPrecision('default');
  const index: Record<string, unknown>[] = [];
  for (const c of process.argv.includes('--wrappers') ? wrapperCases() : cases()) {
    const entry: Record<string, unknown> = { name: c.name, note: c.note, tol: c.tol, gpuTol: c.gpuTol ?? c.tol, partitions: c.partitions ?? 1, modules: [] };
    if (c.shardings) entry.optSkipped = 'a partitioned executable exports only before partitioning (lower().asStableHlo() with mhlo.sharding)';
    for (const { kind, text: get } of caseModules(c)) {
      try {
        const text = get();
        writeFileSync(path.join(dir, `${c.name}.${kind}.mlir`), text);
        (entry.modules as string[]).push(kind);
        entry[`${kind}CustomCalls`] = [...text.matchAll(/call_target_name = "([^"]+)"/g)].map((m) => m[1]);
      } catch (e) {
        entry[`${kind}Error`] = String(e).slice(0, 300);
      }
    }
    if (c.shardings) {
      // The collectives tpukit's own partitioner chose, for comparison with XLA's.
      const hlo = jit(c.fn as (...xs: Array[]) => Array, jitOptions(c) as never).lower(...c.args).compile().asText();
      entry.tpukitCollectives = Object.fromEntries(
        ['all-reduce', 'all-gather', 'reduce-scatter', 'all-to-all', 'collective-permute'].map((k) => [k, (hlo.match(new RegExp(`\\b${k}\\(`, 'g')) ?? []).length]).filter(([, n]) => (n as number) > 0),
      );
    }
    const res = jit(c.fn as (...xs: Array[]) => Array, jitOptions(c) as never)(...c.args) as Array | Array[];
    const outs = Array.isArray(res) ? res : [res];
    const arrays: Record<string, NpyArray> = {};
    c.args.forEach((a, i) => (arrays[`arg${i}`] = toNpy(a)));
    outs.forEach((a, i) => (arrays[`out${i}`] = toNpy(a)));
    entry.outDtypes = outs.map((a) => a.dtype);
    writeNpz(path.join(dir, `${c.name}.npz`), arrays);
    index.push(entry);
    console.log(`${c.name}: modules ${(entry.modules as string[]).join(', ')}; ${outs.length} output(s)`);
  }
  writeFileSync(path.join(dir, 'cases.json'), JSON.stringify(index, null, 1));
}

main();
