// Orbax restores an orbax-ts checkpoint WITHOUT a target: orbax-ts writes Orbax's `_sharding`
// file with a sharding that names no device (src/orbaxSharding.ts). (1) Always: the file a fixed
// tree gets is byte-equal to fixtures/orbax_sharding/_sharding, which the real Orbax 0.12.4
// restored (FIDELITY.md), and its keys/values follow Orbax's encoding. (2) With a Python that can
// `import jax, orbax.checkpoint` (TPUKIT_JAX_PYTHON, else python3 on PATH): that Python restores
// a fresh save three ways with no target, on 1 and on 4 (forced host) CPU devices, and every
// value must come back bit-equal and replicated over all devices. Skipped, saying why, otherwise.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Array as TArray, toStorage, tree } from '@tpukit/core';
import { CheckpointManager, args } from '../src/index';
import { REPLICATED_SHARDING, SHARDING_FILE, shardingKey } from '../src/orbaxSharding';
import { tmpDir } from './helpers';
import { shardingFixtureTree } from './shardingFixture';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

async function saveFixture(): Promise<string> {
  const dir = tmpDir();
  const mgr = new CheckpointManager(dir, { enableAsyncCheckpointing: false });
  await mgr.save(1, args.StandardSave(shardingFixtureTree()));
  await mgr.close();
  return dir;
}

describe("orbax-ts writes Orbax's _sharding file", () => {
  it('byte-equal to the fixture Orbax restored; one entry per array, none for other leaves', async () => {
    const dir = await saveFixture();
    const item = path.join(dir, '1', 'default');
    const written = fs.readFileSync(path.join(item, SHARDING_FILE), 'utf8');
    expect(written).toBe(fs.readFileSync(path.join(fixtures, 'orbax_sharding', SHARDING_FILE), 'utf8'));
    const doc = JSON.parse(written) as Record<string, string>;
    const names = Object.keys(doc).map((k) => Buffer.from(k, 'base64url').toString('utf8'));
    expect(names.sort()).toEqual(['ab?', 'params.b', 'params.w']);
    for (const n of names) expect(fs.existsSync(path.join(item, n, '.zarray')), n).toBe(true);
    for (const v of Object.values(doc)) {
      expect(JSON.parse(v)).toEqual({ sharding_type: 'NamedSharding', shape: [-1], axis_names: ['replica'], partition_spec: [] });
    }
    // orbax-ts reads its own checkpoint back unchanged (the file is in the checksum manifest).
    const back = await new CheckpointManager(dir, { readOnly: true }).restore(1);
    expect((back.params.w as TArray).toArray()).toEqual([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]);
    expect(JSON.parse(fs.readFileSync(path.join(dir, '1', '_CHECKSUMS'), 'utf8')).files['default/_sharding']).toBeDefined();
  });

  it('writes no _sharding for an item without arrays', async () => {
    const dir = tmpDir();
    const mgr = new CheckpointManager(dir, { enableAsyncCheckpointing: false });
    await mgr.save(1, args.StandardSave({ step: 3, name: 'x' }));
    await mgr.close();
    expect(fs.existsSync(path.join(dir, '1', 'default', SHARDING_FILE))).toBe(false);
  });

  it("keys are Python's base64.urlsafe_b64encode of the parameter name (padding kept)", () => {
    // Values computed with Python 3: base64.urlsafe_b64encode(name.encode()).decode().
    expect(shardingKey('a')).toBe('YQ==');
    expect(shardingKey('params.w')).toBe('cGFyYW1zLnc=');
    expect(shardingKey('ab?')).toBe('YWI_');
    expect(shardingKey('a>b')).toBe('YT5i');
    expect(shardingKey('\u00e9')).toBe('w6k=');
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }), (name) => {
        const k = shardingKey(name);
        expect(k).toMatch(/^[A-Za-z0-9_-]*={0,2}$/);
        expect(k.length % 4).toBe(0);
        expect(Buffer.from(k, 'base64url').toString('utf8')).toBe(name);
      }),
    );
    expect(REPLICATED_SHARDING).not.toMatch(/device/); // names no device of the saving machine
  });
});

/** The first Python that can import jax and orbax.checkpoint, or why none can. */
function findJaxPython(): { python: string } | { why: string } {
  const tried: string[] = [];
  for (const python of [process.env.TPUKIT_JAX_PYTHON, 'python3'].filter((p): p is string => !!p)) {
    const r = spawnSync(python, ['-c', 'import jax, orbax.checkpoint'], { encoding: 'utf8', env: { ...process.env, JAX_PLATFORMS: 'cpu' } });
    if (r.status === 0) return { python };
    tried.push(`${python}: ${r.error ? r.error.message : (r.stderr.trim().split('\n').pop() ?? `exit ${r.status}`)}`);
  }
  return { why: `no Python with jax and orbax-checkpoint (set TPUKIT_JAX_PYTHON): ${tried.join('; ')}` };
}

const jaxPython = findJaxPython();
if ('why' in jaxPython) console.warn(`orbaxNoTarget.test.ts: skipping the real-Orbax restore: ${jaxPython.why}`);

type PyLeaf = { dtype: string; shape: number[]; hex: string; replicated: boolean } | { value: unknown };

describe.skipIf('why' in jaxPython)('the real Orbax restores an orbax-ts checkpoint without a target', () => {
  for (const devices of [1, 4]) {
    it(`StandardCheckpointer, PyTreeCheckpointer and CheckpointManager on ${devices} CPU device(s): bit-equal, replicated`, async () => {
      const dir = await saveFixture();
      const env = { ...process.env, JAX_PLATFORMS: 'cpu', XLA_FLAGS: `--xla_force_host_platform_device_count=${devices}` };
      const r = spawnSync((jaxPython as { python: string }).python, [path.join(fixtures, 'orbax_restore_no_target.py'), dir, '1', 'default'], { encoding: 'utf8', env, maxBuffer: 1 << 26 });
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as Record<string, { devices?: number; error?: string; leaves?: Record<string, PyLeaf> }>;
      const want = new Map(tree.flattenWithPath(shardingFixtureTree())[0].map(([p, v]) => [p.map((k) => String(k.kind === 'seq' ? k.idx : k.kind === 'attr' ? k.name : k.key)).join('.'), v]));
      expect(Object.keys(out)).toEqual(['StandardCheckpointer', 'PyTreeCheckpointer', 'CheckpointManager']);
      for (const [way, res] of Object.entries(out)) {
        expect(res.error, way).toBeUndefined();
        expect(res.devices, way).toBe(devices);
        expect(Object.keys(res.leaves!).sort(), way).toEqual([...want.keys()].sort());
        for (const [p, got] of Object.entries(res.leaves!)) {
          const w = want.get(p);
          if (w instanceof TArray) {
            const s = toStorage(w);
            expect(got, `${way} ${p}`).toEqual({ dtype: w.dtype, shape: [...w.shape], hex: Buffer.from(s.buffer, s.byteOffset, s.byteLength).toString('hex'), replicated: true });
          } else {
            expect(got, `${way} ${p}`).toEqual({ value: w });
          }
        }
      }
    }, 180_000);
  }
});

