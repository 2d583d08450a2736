/**
 * Writes checkpoints with orbax-ts the way a user would (CheckpointManager + args), for
 * check_orbax.py to restore with the real Orbax and TensorStore (FIDELITY.md at the repo root):
 *
 *     npx tsx packages/orbax-ts/tools/write_checkpoints.ts OUT_DIR
 *
 * OUT_DIR/<name>/ holds each manager's directory; OUT_DIR/expected.json what each step's items
 * hold: per leaf path (keys joined by '.'), the dtype, shape and exact values (floats as hex bit
 * patterns, float32 8 digits, bfloat16 4) or the JSON value of a non-array leaf.
 */
import { type Array, type Device, type Index, type Sharding, fromStorage, makeArrayFromCallback, np, toStorage, tree } from '@tpukit/core';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CheckpointManager, args, saveSafetensors } from '../src/index';
import { encodeValues } from './bitsEncoding';
import { mixedTree } from './mixedTree';

const devs = globalThis.Array.from({ length: 8 }, (_, id): Device => ({ id, deviceKind: 'virtual', platform: 'cpu', processIndex: 0 }));
/** A grid sharding: axis k split into parts[k] equal blocks, `replicas` copies of each tile. */
class Grid implements Sharding {
  readonly deviceSet: Device[];
  readonly isFullyReplicated = false;
  constructor(readonly parts: number[], readonly replicas = 1) {
    this.deviceSet = devs.slice(0, parts.reduce((a, b) => a * b, 1) * replicas);
  }
  devicesIndicesMap(shape: readonly number[]): Map<Device, Index> {
    const m = new Map<Device, Index>();
    this.deviceSet.forEach((d, i) => {
      let t = Math.floor(i / this.replicas);
      const idx = shape.map((_, k) => k).reverse().map((k) => {
        const p = this.parts[k] ?? 1;
        const c = t % p;
        t = Math.floor(t / p);
        const per = shape[k] / p;
        return [c * per, (c + 1) * per] as const;
      }).reverse();
      m.set(d, idx);
    });
    return m;
  }
  shardShape(shape: readonly number[]): number[] {
    return shape.map((s, k) => s / (this.parts[k] ?? 1));
  }
  toString(): string {
    return `Grid(${this.parts.join('x')}, replicas=${this.replicas})`;
  }
}

const fill = (shape: number[], dtype: 'float32' | 'bfloat16' | 'int32', k: number): Array =>
  np.array(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => (dtype === 'int32' ? ((i * 7919 + k) % 2001) - 1000 : Math.sin(i * 0.37 + k) * 3)), dtype).reshape(shape);

function sharded(shape: number[], dtype: 'float32' | 'bfloat16' | 'int32', k: number, s: Sharding): Array {
  const whole = fill(shape, dtype, k);
  const src = toStorage(whole);
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  return makeArrayFromCallback(shape, dtype, s, (idx) => {
    const sub = idx.map(([a, b]) => b - a);
    const out = new (src.constructor as new (n: number) => typeof src)(sub.reduce((a, b) => a * b, 1));
    let o = 0;
    const walk = (d: number, base: number): void => {
      if (d === shape.length) {
        out[o++] = src[base];
        return;
      }
      for (let i = idx[d][0]; i < idx[d][1]; i++) walk(d + 1, base + i * strides[d]);
    };
    walk(0, 0);
    return fromStorage(out, sub, dtype);
  });
}

function encodeLeaf(x: unknown): unknown {
  if (x !== null && typeof x === 'object' && 'dtype' in (x as object) && 'shape' in (x as object)) {
    const a = x as Array;
    return { dtype: a.dtype, shape: a.shape, values: encodeValues(a) };
  }
  return { value: x };
}
function describe(t: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [p, leaf] of tree.flattenWithPath(t)[0]) out[p.map((k: { key?: unknown; idx?: unknown }) => String(k.key ?? k.idx ?? k)).join('.')] = encodeLeaf(leaf);
  return out;
}

async function main(): Promise<void> {
  const out = process.argv[2];
  if (!out) throw new Error('usage: write_checkpoints.ts OUT_DIR');
  mkdirSync(out, { recursive: true });
  const expected: Record<string, Record<string, Record<string, unknown>>> = {};

  // 1. A training state as a user saves it: params (f32, bf16, odd shapes), optimizer state
  //    (int32 count as a 0-d array), numbers, a boolean, a string, a list of layers; plus a
  //    JSON item (the data iterator) and metrics; two steps kept.
  const state = (s: number) => ({
    params: {
      dense: { kernel: fill([5, 3], 'float32', s), bias: fill([3], 'float32', s + 1) },
      embed: fill([7, 4], 'bfloat16', s + 2),
      layers: [{ w: fill([2, 3, 1], 'float32', s + 3) }, { w: fill([2, 3, 1], 'float32', s + 4) }],
    },
    opt: { count: np.array(s * 10, 'int32'), mu: { kernel: fill([5, 3], 'float32', s + 5) }, ids: fill([11], 'int32', s) },
    step: s,
    lr: 0.001 * s,
    done: s > 1,
  });
  {
    const dir = path.join(out, 'train');
    const mgr = new CheckpointManager(dir, { maxToKeep: 2 });
    expected.train = {};
    for (const s of [1, 2, 3]) {
      const st = state(s);
      await mgr.save(s, args.Composite({ state: args.StandardSave(st), iter: args.JsonSave({ pos: s * 4, epoch: 0 }) }), { metrics: { loss: 1 / s } });
      expected.train[String(s)] = { state: describe(st), iter: { value: { pos: s * 4, epoch: 0 } } } as never;
    }
    await mgr.close();
    delete expected.train['1'];
  }
  // 2. Sharded arrays: chunks follow the shards (one axis, a 2x2 grid with replicas, a 4x2 grid).
  {
    const dir = path.join(out, 'sharded');
    const mgr = new CheckpointManager(dir, { enableAsyncCheckpointing: false });
    const st = {
      rows: sharded([8, 6], 'float32', 1, new Grid([4, 1])),
      grid: sharded([6, 4], 'bfloat16', 2, new Grid([2, 2], 2)),
      tiles: sharded([8, 8], 'int32', 3, new Grid([4, 2])),
      whole: fill([3, 5], 'float32', 4),
    };
    await mgr.save(5, args.StandardSave(st));
    await mgr.close();
    expected.sharded = { '5': { default: describe(st) } } as never;
  }
  // 3. safetensors (saveSafetensors), for the Python `safetensors` package to load.
  {
    const params = { embed: fill([6, 4], 'bfloat16', 7), layers: [{ w: fill([4, 4], 'float32', 8), b: fill([4], 'float32', 9) }], ids: fill([5], 'int32', 10), mask: np.array([true, false, true], 'bool') };
    saveSafetensors(path.join(out, 'model.safetensors'), params, { metadata: { format: 'pt', source: 'tpukit' } });
    writeFileSync(path.join(out, 'expected_safetensors.json'), JSON.stringify(describe(params)));
  }
  // 4. Non-array leaves and containers (mixedTree.ts): check_orbax.py compares Orbax's restore
  //    with what Orbax restores from the same tree it saved itself.
  {
    const mgr = new CheckpointManager(path.join(out, 'mixed'), { enableAsyncCheckpointing: false });
    await mgr.save(3, args.Composite({ state: args.StandardSave(mixedTree()) }));
    await mgr.close();
  }
  writeFileSync(path.join(out, 'expected.json'), JSON.stringify(expected));
  console.log(`write_checkpoints: ${Object.keys(expected).join(', ')} -> ${out}`);
}

await main();
