/**
 * `pnpm bench:orbax`: checkpoint save / restore throughput of @tpukit/orbax-ts for a 100 MB and
 * a 1 GB pytree (10 arrays) of float32 and of bfloat16, against plain `fs.writeFile` /
 * `fs.readFile` of the same bytes (measured in the same run: in one file and in as many files as
 * arrays, with and without fsync), and how long an async `save` blocks the caller against one
 * memory copy of the state (a fresh `slice()`, and a copy into memory already touched). Medians
 * of runs 1..RUNS-1, the steady state of a training loop that saves again and again (every
 * manager's first save allocates its snapshot buffers, later ones reuse them); run 0, each
 * manager's first save, is printed on its own. Set ORBAX_BENCH_SIZES_MB=100 to skip the 1 GB
 * case, ORBAX_BENCH_DTYPES=float32 to run one dtype, ORBAX_BENCH_VERBOSE=1 to print every run's
 * timings. Every measurement starts after a `sync`, and deleting old files is left out of every
 * timing.
 *
 * Imports the built package from its dist (the bench package does not list orbax-ts).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { type Array as TArray, type DType, fromStorage, toStorage } from '@tpukit/core';
import { CheckpointManager, args } from '@tpukit/orbax-ts';

const RUNS = Number(process.env.ORBAX_BENCH_RUNS ?? 5);
const SIZES_MB = (process.env.ORBAX_BENCH_SIZES_MB ?? '100,1000').split(',').map(Number);
const LEAVES = 10;

/** A full GC between measurements (the bench runs with --expose-gc), so no run pays for garbage an earlier one left. */
const collect = (): void => (globalThis as { gc?: () => void }).gc?.();
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const now = (): number => performance.now();

function makeTree(totalBytes: number, dtype: DType): Record<string, TArray> {
  const per = Math.floor(totalBytes / LEAVES / 4096) * 4096; // whole rows of 1024 elements
  const t: Record<string, TArray> = {};
  for (let i = 0; i < LEAVES; i++) {
    if (dtype === 'float32') {
      const a = new Float32Array(per / 4);
      for (let j = 0; j < a.length; j += 997) a[j] = j * 0.25 + i;
      t[`w${i}`] = fromStorage(a, [a.length / 1024, 1024], 'float32');
    } else {
      const a = new Uint16Array(per / 2);
      for (let j = 0; j < a.length; j += 997) a[j] = (j + i) & 0xffff;
      t[`w${i}`] = fromStorage(a, [a.length / 1024, 1024], 'bfloat16');
    }
  }
  return t;
}

function bytesOf(x: TArray): Uint8Array {
  const s = toStorage(x);
  return new Uint8Array(s.buffer, s.byteOffset, s.byteLength);
}

/**
 * Flushes dirty pages between measurements (untimed), so no run pays for the previous one's
 * writeback. `sync` runs in one shell started before any big buffer exists: spawning a process
 * per call (execSync) forks this process, and a fork write-protects every page of the heap, so
 * the first write to each page afterwards takes a copy-on-write fault (measured: a 100 MB copy
 * into touched memory took 41 ms right after an execSync, 12 ms otherwise), which would charge
 * the bench's own forks to whichever measurement writes memory first (the snapshot copy).
 */
const syncer = spawn('sh', ['-c', 'while read -r _; do sync; echo done; done'], { stdio: ['pipe', 'pipe', 'inherit'] });
syncer.unref();
let syncerOut = '';
const syncWaiters: Array<() => void> = [];
syncer.stdout.on('data', (d: Buffer) => {
  syncerOut += d.toString();
  for (let i; (i = syncerOut.indexOf('done\n')) >= 0; ) {
    syncerOut = syncerOut.slice(i + 5);
    syncWaiters.shift()?.();
  }
});
function settle(): Promise<void> {
  return new Promise((resolve) => {
    syncWaiters.push(resolve);
    syncer.stdin.write('sync\n');
  });
}

/** Before each measurement: no dirty pages (settle) and no garbage left by the previous one (collect). */
async function quiesce(): Promise<void> {
  collect();
  await settle();
}

/**
 * Saves `tree` as `step` on `m`, timing until `save` returns (block) and until the step is
 * committed (total); then deletes the step and quiesces, both untimed.
 */
async function timeSave(m: CheckpointManager, step: number, tree: Record<string, TArray>): Promise<{ block: number; total: number }> {
  const t0 = now();
  await m.save(step, args.StandardSave(tree));
  const block = now() - t0;
  await m.waitUntilFinished();
  const total = now() - t0;
  await m.delete(step);
  await quiesce();
  return { block, total };
}

async function peerWrite(dir: string, tree: Record<string, TArray>, fsync: boolean): Promise<number> {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir);
  const t0 = now();
  for (const [k, v] of Object.entries(tree)) {
    const f = path.join(dir, k);
    if (!fsync) await fs.promises.writeFile(f, bytesOf(v));
    else {
      const h = await fs.promises.open(f, 'w');
      await h.writeFile(bytesOf(v));
      await h.sync();
      await h.close();
    }
  }
  return now() - t0;
}

/** The tree's bytes concatenated into one buffer (made once per size, outside the timings). */
function concat(tree: Record<string, TArray>): Uint8Array {
  const parts = Object.values(tree).map(bytesOf);
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    all.set(p, off);
    off += p.length;
  }
  return all;
}

/** The same bytes as one file (plain `fs.writeFile` of one buffer), page cache only. */
async function peerWriteOne(dir: string, all: Uint8Array): Promise<number> {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir);
  const t0 = now();
  await fs.promises.writeFile(path.join(dir, 'all'), all);
  return now() - t0;
}

async function peerRead(dir: string, tree: Record<string, TArray>): Promise<number> {
  const t0 = now();
  for (const k of Object.keys(tree)) await fs.promises.readFile(path.join(dir, k));
  return now() - t0;
}

const mbs = (bytes: number, ms: number): string => `${((bytes / 1e6) / (ms / 1e3)).toFixed(0).padStart(5)} MB/s`;

async function main(): Promise<void> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'orbax-bench-'));
  if (!(globalThis as { gc?: unknown }).gc) console.log('note: run with --expose-gc (pnpm bench:orbax does) so garbage from one measurement is not collected during the next');
  console.log(`orbax-ts checkpoint bench: ${os.cpus().length} cores (${os.cpus()[0]?.model}), node ${process.version}, tmpdir ${os.tmpdir()}, medians of runs 1-${RUNS - 1} (run 0: first saves)`);
  try {
    for (const mb of SIZES_MB) {
      for (const dtype of (process.env.ORBAX_BENCH_DTYPES ?? 'float32,bfloat16').split(',') as DType[]) {
        const bytes = mb * 1e6;
        const tree = makeTree(bytes, dtype);
        const total = Object.values(tree).reduce((n, x) => n + bytesOf(x).length, 0);
        const r = {
          copy: [] as number[], warmCopy: [] as number[], block: [] as number[], save: [] as number[], saveNoSync: [] as number[], saveSync: [] as number[],
          saveCopyFirst: [] as number[], blockCopyFirst: [] as number[],
          restore: [] as number[], w: [] as number[], w1: [] as number[], wf: [] as number[], rd: [] as number[],
        };
        const warm = Object.values(tree).map((x) => new Uint8Array(bytesOf(x).length).fill(1));
        const all = concat(tree);
        const dir = path.join(root, `ckpt-${mb}-${dtype}`);
        const mgr = new CheckpointManager(dir);
        // Atomic (tmp dir + commit marker + rename) but not durable: the like-for-like peer of a
        // plain fs.writeFile, which also stops at the page cache.
        const mgrNoSync = new CheckpointManager(`${dir}-nosync`, { fsync: false });
        // Orbax's order: copy everything, then write (blocks less, commits later).
        const mgrCopyFirst = new CheckpointManager(`${dir}-copyfirst`, { fsync: false, writeWhileCopying: false });
        // No copy at all: a sync save writes from the arrays' own storage (the caller waits).
        const mgrSync = new CheckpointManager(`${dir}-sync`, { fsync: false, enableAsyncCheckpointing: false });
        // Each async manager starts its writer thread when constructed; a training loop makes its
        // first save long after that. Give the threads time to load before anything is timed, so
        // run 0 (the first save, which also allocates the snapshot buffers) is not measured
        // against three thread start-ups on a two-core machine.
        await new Promise((r) => setTimeout(r, 500));
        for (let run = 0; run < RUNS; run++) {
          // One memory copy of the state: the floor for how long save may block.
          let t0 = now();
          const copies = Object.values(tree).map((x) => bytesOf(x).slice());
          r.copy.push(now() - t0);
          copies.length = 0;
          // Free that copy now: left to the collector, it is collected (1 GB unmapped) during the
          // next large allocation, i.e. during the first save, which it made 1.5x a copy at 1 GB.
          collect();
          t0 = now();
          Object.values(tree).forEach((x, i) => warm[i].set(bytesOf(x)));
          r.warmCopy.push(now() - t0);
          t0 = now();
          await mgr.save(run, args.StandardSave(tree));
          r.block.push(now() - t0);
          await mgr.waitUntilFinished();
          r.save.push(now() - t0);
          t0 = now();
          let back = await mgr.restore(run);
          r.restore.push(now() - t0);
          if (bytesOf(back.w3).length !== bytesOf(tree.w3).length) throw new Error('restore returned the wrong size');
          back = null; // garbage, collected before the next measurement
          await mgr.delete(run); // untimed, like the peer's cleanup
          await quiesce();
          r.saveNoSync.push((await timeSave(mgrNoSync, run, tree)).total);
          const copyFirst = await timeSave(mgrCopyFirst, run, tree);
          r.blockCopyFirst.push(copyFirst.block);
          r.saveCopyFirst.push(copyFirst.total);
          r.saveSync.push((await timeSave(mgrSync, run, tree)).total);
          r.w1.push(await peerWriteOne(path.join(root, 'peer'), all));
          await quiesce();
          r.w.push(await peerWrite(path.join(root, 'peer'), tree, false));
          r.rd.push(await peerRead(path.join(root, 'peer'), tree));
          await quiesce();
          r.wf.push(await peerWrite(path.join(root, 'peer'), tree, true));
          fs.rmSync(path.join(root, 'peer'), { recursive: true, force: true });
          await quiesce();
        }
        for (const m of [mgr, mgrNoSync, mgrSync, mgrCopyFirst]) await m.close();
        for (const d of [dir, `${dir}-nosync`, `${dir}-sync`, `${dir}-copyfirst`]) fs.rmSync(d, { recursive: true, force: true });
        if (process.env.ORBAX_BENCH_VERBOSE) console.log(JSON.stringify(Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v.map(Math.round)]))));
        const steady = (v: number[]): number[] => (v.length > 1 ? v.slice(1) : v);
        const m = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, median(steady(v))])) as Record<keyof typeof r, number>;
        const x = (a: number, b: number): string => `${(a / b).toFixed(2)}x`;
        const line = (label: string, ms: number, rest = ''): void => console.log(`  ${label.padEnd(46)} ${mbs(total, ms)} ${ms.toFixed(0).padStart(6)} ms   ${rest}`);
        console.log(`\n${(total / 1e6).toFixed(0)} MB ${dtype} pytree (${LEAVES} arrays)`);
        line('save (async, fsync: false, committed)', m.saveNoSync, `${x(m.saveNoSync, m.w1)} fs.writeFile (1 file), ${x(m.saveNoSync, m.w)} (${LEAVES} files)   <- headline; first save ${r.saveNoSync[0].toFixed(0)} ms`);
        line('save (async, fsync: false, writeWhileCopying: false)', m.saveCopyFirst, `${x(m.saveCopyFirst, m.w1)} fs.writeFile (1 file), ${x(m.saveCopyFirst, m.w)} (${LEAVES} files); blocked ${m.blockCopyFirst.toFixed(0)} ms (${x(m.blockCopyFirst, m.copy)} copy, ${x(m.blockCopyFirst, m.warmCopy)} copy into touched memory)`);
        line('save (sync, fsync: false, no copy)', m.saveSync, `${x(m.saveSync, m.w1)} fs.writeFile (1 file), ${x(m.saveSync, m.w)} (${LEAVES} files)`);
        line('save (async, fsync, until committed)', m.save, `${x(m.save, m.w1)} fs.writeFile (1 file), ${x(m.save, m.w)} (${LEAVES} files), ${x(m.save, m.wf)} fs.writeFile+fsync`);
        const bg = median(steady(r.save.map((v, i) => v - r.block[i])));
        line('background write (after save returned)', bg, `${x(bg, m.w)} fs.writeFile, ${x(bg, m.wf)} fs.writeFile+fsync`);
        line('plain fs.writeFile, 1 file', m.w1);
        line(`plain fs.writeFile, ${LEAVES} files`, m.w);
        line(`plain fs.writeFile + fsync, ${LEAVES} files`, m.wf);
        line('restore (verified)', m.restore, `${x(m.restore, m.rd)} fs.readFile`);
        line('plain fs.readFile', m.rd);
        console.log(`  save() blocked the caller: median ${m.block.toFixed(0)} ms (first save ${r.block[0].toFixed(0)} ms) vs one memory copy ${m.copy.toFixed(0)} ms (${x(m.block, m.copy)}; first ${x(r.block[0], r.copy[0])}), copy into touched memory ${m.warmCopy.toFixed(0)} ms (${x(m.block, m.warmCopy)})`);
      }
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
    syncer.stdin.end();
  }
}

await main();
