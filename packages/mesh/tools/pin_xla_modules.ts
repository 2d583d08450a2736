/**
 * Pins the StableHLO texts a real XLA compiled: writes test/fixtures/xla_modules.json, the
 * SHA-256 of every module `export_stablehlo_cases.ts` writes (the fidelity cases and the call
 * wrappers, 'low' and 'opt'), which test/xlaModules.test.ts compares with today's export.
 * Run it only after a device run passed on the same export (FIDELITY.md), naming that run:
 *
 *     npx tsx packages/mesh/tools/pin_xla_modules.ts "2026-11-26 06:41 UTC, jax 0.11.2, H200 + CPU"
 */
import { setDefaultMatmulPrecision } from '@tpukit/core';
import { writeFileSync } from 'node:fs';
import { moduleDigests } from './stablehloCases';

const run = process.argv[2];
if (!run) throw new Error('pin_xla_modules: name the device run that compiled these modules (date, jax version, devices), e.g. "2026-11-26 06:41 UTC, jax 0.11.2, H200 + CPU"');
setDefaultMatmulPrecision('default');
const modules = moduleDigests();
const file = new URL('../test/fixtures/xla_modules.json', import.meta.url);
writeFileSync(file, `${JSON.stringify({ compiledBy: run, modules }, null, 1)}\n`);
console.log(`pin_xla_modules: ${Object.keys(modules).length} modules pinned to ${file.pathname}`);
