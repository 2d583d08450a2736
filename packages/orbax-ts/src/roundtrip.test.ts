// Law: save-then-restore is the identity, bit for bit, for random pytrees: every dtype (random
// bit patterns, NaN payloads included), empty arrays, scalars, nested dicts / lists / Maps /
// null, and non-array leaves; also through a target, and onto sharded layouts.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Array as TArray, DTYPES, type DType, fromStorage, toStorage } from '@tpukit/core';
import { SplitSharding, tmpDir } from '../test/helpers';
import { CheckpointManager, args } from './index';

const BYTES: Record<DType, number> = { bool: 1, int8: 1, uint8: 1, int32: 4, uint32: 4, float16: 2, bfloat16: 2, float32: 4 };

function makeArray(dtype: DType, shape: number[], bytes: Uint8Array): TArray {
  const n = shape.reduce((a, b) => a * b, 1);
  const buf = new Uint8Array(n * BYTES[dtype]);
  buf.set(bytes.subarray(0, buf.length));
  if (dtype === 'bool') for (let i = 0; i < n; i++) buf[i] &= 1;
  const C = { bool: Uint8Array, int8: Int8Array, uint8: Uint8Array, int32: Int32Array, uint32: Uint32Array, float16: Uint16Array, bfloat16: Uint16Array, float32: Float32Array }[dtype];
  return fromStorage(new C(buf.buffer, 0, n) as never, shape, dtype);
}

const arrayArb = fc
  .record({
    dtype: fc.constantFrom(...DTYPES),
    shape: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }),
    bytes: fc.uint8Array({ minLength: 256, maxLength: 256 }),
  })
  .map(({ dtype, shape, bytes }) => makeArray(dtype, shape, bytes));

const key = fc.stringMatching(/^[a-z][a-z0-9_]{0,4}$/);
const leafArb = fc.oneof(
  { weight: 4, arbitrary: arrayArb },
  { weight: 1, arbitrary: fc.double() },
  { weight: 1, arbitrary: fc.string({ maxLength: 5 }) },
  { weight: 1, arbitrary: fc.boolean() },
);
const treeArb: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leafArb,
    fc.constant(null),
    fc.array(tie('node'), { maxLength: 3 }),
    fc.dictionary(key, tie('node'), { maxKeys: 3 }),
    fc.uniqueArray(fc.tuple(key, tie('node')), { maxLength: 2, selector: ([k]) => k }).map((es) => new Map(es)),
  ),
})).node;

/** Structural, bit-exact equality (arrays by dtype, shape and storage bytes; numbers by Object.is). */
export function sameTree(a: unknown, b: unknown, at = '$'): void {
  if (a instanceof TArray) {
    expect(b, at).toBeInstanceOf(TArray);
    const y = b as TArray;
    expect(y.dtype, at).toBe(a.dtype);
    expect([...y.shape], at).toEqual([...a.shape]);
    const sa = toStorage(a);
    const sb = toStorage(y);
    expect(Buffer.from(sb.buffer, sb.byteOffset, sb.byteLength).equals(Buffer.from(sa.buffer, sa.byteOffset, sa.byteLength)), at).toBe(true);
  } else if (a instanceof Map) {
    expect(b, at).toBeInstanceOf(Map);
    expect([...(b as Map<unknown, unknown>).keys()], at).toEqual([...a.keys()]);
    for (const [k, v] of a) sameTree(v, (b as Map<unknown, unknown>).get(k), `${at}[${String(k)}]`);
  } else if (Array.isArray(a)) {
    expect(Array.isArray(b), at).toBe(true);
    expect((b as unknown[]).length, at).toBe(a.length);
    a.forEach((v, i) => sameTree(v, (b as unknown[])[i], `${at}[${i}]`));
  } else if (a !== null && typeof a === 'object') {
    expect(Object.keys(b as object).sort(), at).toEqual(Object.keys(a).sort());
    for (const [k, v] of Object.entries(a)) sameTree(v, (b as Record<string, unknown>)[k], `${at}.${k}`);
  } else {
    expect(Object.is(a, b), `${at}: ${String(a)} vs ${String(b)}`).toBe(true);
  }
}

describe('save then restore is the identity', () => {
  it('for random pytrees (sync writes, no fsync)', async () => {
    const mgr = new CheckpointManager(tmpDir(), { enableAsyncCheckpointing: false, fsync: false });
    let step = 0;
    await fc.assert(
      fc.asyncProperty(treeArb, async (t) => {
        step++;
        await mgr.save(step, args.StandardSave(t));
        sameTree(t, await mgr.restore(step));
        // Through a target of the same structure, too.
        sameTree(t, await mgr.restore(step, args.StandardRestore(t)));
      }),
      { numRuns: 40 },
    );
    await mgr.close();
  });

  it.each([false, true])('for random pytrees through the background writer (writeWhileCopying: %s)', async (writeWhileCopying) => {
    const mgr = new CheckpointManager(tmpDir(), { fsync: false, maxToKeep: 2, writeWhileCopying });
    let step = 0;
    await fc.assert(
      fc.asyncProperty(treeArb, async (t) => {
        step++;
        await mgr.save(step, args.StandardSave(t));
        await mgr.waitUntilFinished();
        sameTree(t, await mgr.restore(step));
      }),
      { numRuns: 10 },
    );
    await mgr.close();
  });

  it('for sharded arrays saved from one layout and restored onto another', async () => {
    const mgr = new CheckpointManager(tmpDir(), { enableAsyncCheckpointing: false, fsync: false });
    let step = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<DType>('float32', 'bfloat16', 'int8'),
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 3 }),
        fc.uint8Array({ minLength: 256, maxLength: 256 }),
        async (dtype, rows, cols, from, fromRep, to, toRep, bytes) => {
          step++;
          const full = makeArray(dtype, [rows, cols], bytes);
          const fs = new SplitSharding(from, fromRep);
          const { makeArrayFromCallback } = await import('@tpukit/core');
          const part = (idx: readonly (readonly [number, number])[]) => {
            const s = toStorage(full);
            const [[r0, r1]] = idx;
            return fromStorage(s.slice(r0 * cols, r1 * cols) as never, [r1 - r0, cols], dtype);
          };
          const x = makeArrayFromCallback([rows, cols], dtype, fs, part);
          await mgr.save(step, args.StandardSave({ x }));
          const target = new SplitSharding(to, toRep, to % 2 === 0 ? 1 : 0);
          const back = await mgr.restore(step, args.StandardRestore({ x: makeArrayFromCallback([rows, cols], dtype, target, (idx) => fromStorage(new (toStorage(full).constructor as never as new (n: number) => never)(idx.reduce((a, [s, e]) => a * (e - s), 1)), idx.map(([s, e]) => e - s), dtype)) }));
          expect(back.x.sharding).toBe(target);
          expect(back.x.addressableShards.length).toBe(to * toRep);
          // Each shard holds exactly the bytes of its index range of the saved array (compared as
          // bytes: assembling through JS numbers would quiet signalling NaNs), and nothing
          // assembled the whole array.
          expect(back.x._backend).toBeNull();
          const isz = BYTES[dtype];
          const src = toStorage(full);
          const srcBytes = new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
          for (const sh of back.x.addressableShards) {
            const [[r0, r1], [c0, c1]] = sh.index;
            const want: number[] = [];
            for (let r = r0; r < r1; r++) want.push(...srcBytes.subarray((r * cols + c0) * isz, (r * cols + c1) * isz));
            const got = toStorage(sh.data);
            expect([...new Uint8Array(got.buffer, got.byteOffset, got.byteLength)]).toEqual(want);
          }
        },
      ),
      { numRuns: 40 },
    );
    await mgr.close();
  });
});
