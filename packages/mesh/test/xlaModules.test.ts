// The StableHLO texts a real XLA compiled and ran (FIDELITY.md) are pinned by their SHA-256 in
// fixtures/xla_modules.json. xlaOutputs.test.ts checks tpukit's numbers against XLA's, and the
// export tests check the modules' structure; this one catches any change in the exported text
// itself (an op spelled, ordered or typed differently), which only a device run can vouch for.
// When it fails on purpose: run the device check (FIDELITY.md), then refresh the pins with
// `npx tsx packages/mesh/tools/pin_xla_modules.ts "<that run>"`.
import { setDefaultMatmulPrecision } from '@tpukit/core';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { moduleDigests } from '../tools/stablehloCases';

const pinned = JSON.parse(readFileSync(new URL('./fixtures/xla_modules.json', import.meta.url), 'utf8')) as { compiledBy: string; modules: Record<string, string> };

let previous: ReturnType<typeof setDefaultMatmulPrecision>;
beforeAll(() => {
  previous = setDefaultMatmulPrecision('default');
});
afterAll(() => {
  setDefaultMatmulPrecision(previous ?? 'default');
});

describe(`StableHLO export pinned to the modules XLA compiled (${pinned.compiledBy.slice(0, 40)}...)`, () => {
  it('every exported module is the one XLA compiled', () => {
    const now = moduleDigests();
    expect(Object.keys(now).sort(), 'the exported modules (case.kind) vs those pinned').toEqual(Object.keys(pinned.modules).sort());
    const changed = Object.keys(now).filter((k) => now[k] !== pinned.modules[k]);
    expect(changed, `these exported modules differ from the text XLA compiled in ${pinned.compiledBy}; run the device check (FIDELITY.md), then pin_xla_modules.ts`).toEqual([]);
  });

  it('no pinned module is a refusal', () => {
    expect(Object.entries(pinned.modules).filter(([, d]) => !/^[0-9a-f]{64}$/.test(d))).toEqual([]);
  });
});
