// xla-lite's on/off environment switches go through core's `envSwitch`: unset, empty, 0 or 1, and
// any other value is an error that names the variable and the value when the package loads (a
// mistyped value used to mean "on" for the switches that default on). It imports the BUILT
// package (dist, as `pnpm test` builds it first) in a child Node, since the switches are read once,
// at import.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const packageDir = fileURLToPath(new URL('..', import.meta.url));

const SWITCHES = ['TPUKIT_ZERO_COPY', 'TPUKIT_EPILOGUE_BANDS', 'TPUKIT_EPILOGUE_COLSUM', 'TPUKIT_ROW_OPERAND_SUMS', 'TPUKIT_ROW_SUMS_1T', 'TPUKIT_RESIDENT_DONATION', 'TPUKIT_TANH_CALL', 'TPUKIT_TANH_DEFER', 'TPUKIT_PROFILE', 'TPUKIT_ROW_SUM_ONLY_SKIP', 'TPUKIT_ROW_REREAD', 'TPUKIT_ROW_SCRATCH_ALIGN', 'TPUKIT_ROW_DEFER_SUMS', 'TPUKIT_ROW_RECOMPUTE', 'TPUKIT_EXP_SHIFTED', 'TPUKIT_ONEHOT_ARENA'];

/** Imports xla-lite in a child Node with `env` added; prints the three settings it can report. */
function importWith(env: Record<string, string>): { status: number | null; stdout: string; stderr: string } {
  const code = `
import { epilogueBandsEnabled, profile, rowSumsOneThreadEnabled, zeroCopyDotsEnabled } from '@tpukit/xla-lite';
console.log(JSON.stringify({ bands: epilogueBandsEnabled(), profile: profile.enabled(), rows1t: rowSumsOneThreadEnabled(), zeroCopy: zeroCopyDotsEnabled() }));
`;
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !SWITCHES.includes(k)));
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: packageDir, encoding: 'utf8', env: { ...clean, NODE_OPTIONS: '', ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('xla-lite environment switches', () => {
  it('take 0, 1 or nothing', () => {
    const dflt = importWith({});
    expect(dflt.status).toBe(0);
    expect(JSON.parse(dflt.stdout)).toEqual({ bands: false, profile: false, rows1t: true, zeroCopy: true });
    const flipped = importWith({ TPUKIT_EPILOGUE_BANDS: '1', TPUKIT_PROFILE: '1', TPUKIT_ROW_SUMS_1T: '0', TPUKIT_ZERO_COPY: '' });
    expect(flipped.status).toBe(0);
    expect(JSON.parse(flipped.stdout)).toEqual({ bands: true, profile: true, rows1t: false, zeroCopy: true });
  });

  it.each(SWITCHES)('%s: another value throws at import, naming the variable and the value', (name) => {
    const r = importWith({ [name]: 'yes' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`environment variable ${name} must be 0 or 1; got "yes"`);
  });
});
