/**
 * The persistent compilation cache (`setCacheDir(dir)`), as JAX's `jax_compilation_cache_dir`:
 * an optimised module is written to `<dir>/<key>.json`, where the key hashes the jaxpr's text
 * (which spells out every equation, parameter, literal and type), the pipeline options, the
 * donated arguments and the inputs' shardings (passed in `extra` by the compiler; a program
 * compiled for other shardings is another entry), so a second process (or a retrace) loads it
 * and skips the passes. Modules
 * whose instructions carry parameters that do not survive JSON (sub-jaxprs of control flow,
 * functions of custom rules) are not cached; `diskCacheStats()` counts them.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ClosedJaxpr, type DType, np } from '@tpukit/core';
import { HloModule } from './hlo';
import { type CompImage, imageComputations, rebuildComputations } from './moduleImage';

const FORMAT = 'xla-lite-module-v1';
let dir: string | null = null;
const stats = { hits: 0, misses: 0, writes: 0, uncacheable: 0 };

/** Sets (or, with null, unsets) the directory of the persistent compilation cache. */
export function setCacheDir(path: string | null): void {
  if (path !== null) mkdirSync(path, { recursive: true });
  dir = path;
}

export function getCacheDir(): string | null {
  return dir;
}

export function diskCacheStats(): Readonly<typeof stats> {
  return { ...stats };
}

export function cacheKey(jaxpr: ClosedJaxpr, extra: unknown): string {
  const avals = jaxpr.inAvals.map((a) => `${a.dtype}[${a.shape.join(',')}]${a.weakType ? 'w' : ''}`).join(';');
  return createHash('sha256').update(`${FORMAT}\n${jaxpr.toString()}\n${avals}\n${JSON.stringify(extra)}`).digest('hex').slice(0, 40);
}

type LiteralJson = { dtype: DType; shape: number[]; data: number[] };

const jsonSafe = (v: unknown): boolean => {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v);
  if (Array.isArray(v)) return v.every(jsonSafe);
  if (typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return Object.values(v as object).every((x) => x === undefined || jsonSafe(x));
  return false;
};

function serialize(mod: HloModule): string | null {
  const out = imageComputations<LiteralJson>(mod, (i) =>
    jsonSafe(i.params)
      ? { prim: i.prim?.name ?? null, params: i.params, literal: i.literal ? { dtype: i.literal.dtype, shape: [...i.literal.shape], data: Array.from(i.literal.dataSync() as ArrayLike<number>) } : null }
      : null,
  );
  return out === null ? null : JSON.stringify({ format: FORMAT, name: mod.name, computations: out });
}

function deserialize(text: string): HloModule {
  const j = JSON.parse(text) as { format: string; name: string; computations: CompImage<LiteralJson>[] };
  if (j.format !== FORMAT) throw new Error(`xla-lite cache: unknown format ${j.format}`);
  const comps = rebuildComputations(j.computations, (l) => np.array(l.data, l.dtype).reshape(l.shape));
  const mod = new HloModule(j.name, comps[comps.length - 1]);
  mod.computations = comps;
  return mod;
}

/** The cached optimised module for `key`, or null (no cache dir, not cached, unreadable). */
export function loadModule(key: string): HloModule | null {
  if (dir === null) return null;
  let text: string;
  try {
    text = readFileSync(join(dir, `${key}.json`), 'utf8');
  } catch {
    stats.misses++;
    return null;
  }
  try {
    const m = deserialize(text);
    stats.hits++;
    return m;
  } catch {
    stats.misses++;
    return null;
  }
}

/** Writes an optimised module under `key` (atomically); false when it cannot be serialised. */
export function storeModule(key: string, mod: HloModule): boolean {
  if (dir === null) return false;
  const text = serialize(mod);
  if (text === null) {
    stats.uncacheable++;
    return false;
  }
  const tmp = join(dir, `${key}.${process.pid}.tmp`);
  writeFileSync(tmp, text);
  renameSync(tmp, join(dir, `${key}.json`));
  stats.writes++;
  return true;
}
