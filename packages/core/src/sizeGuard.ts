/**
 * The array size guard: every array's byte size is checked against one limit before its memory
 * is allocated, so that `np.zeros([1e6, 1e6])` is an error naming the op, the shape, the bytes
 * and the limit (not V8's bare `Invalid typed array length`), and `np.zeros([65536, 65536])`
 * does not quietly take 17 GB.
 *
 * Checked where arrays come to be: every primitive's outputs (eager evaluation and tracing, so
 * jit, vmap and grad programs are refused at trace time, before anything runs), creation from
 * JS values, and the fused random samplers. The limit is `TPUKIT_MAX_ARRAY_BYTES` (a byte count,
 * optionally with a KiB/MiB/GiB/TiB suffix) when set, else 4 GiB; `setMaxArrayBytes` changes it.
 */
import { envVar } from './env';
import { showValue } from './describe';
import { type DType, itemsize } from './dtype';

export const DEFAULT_MAX_ARRAY_BYTES = 4 * 2 ** 30;

const UNITS: Record<string, number> = { '': 1, b: 1, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12 };

/** Parses a byte count: `4294967296`, `4GiB`, `512 MiB`, `1e9`. */
export function parseBytes(text: string, what: string): number {
  const m = /^\s*([0-9]+(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m ? UNITS[m[2].toLowerCase()] : undefined;
  const n = m && unit !== undefined ? Number(m[1]) * unit : NaN;
  if (!Number.isFinite(n) || n <= 0) {
    throw new RangeError(`${what} must be a positive byte count such as 4294967296, 4GiB or 512MiB; got ${showValue(text)}`);
  }
  return Math.floor(n);
}

let limit: number | undefined;

function fromEnv(): number {
  const env = envVar('TPUKIT_MAX_ARRAY_BYTES');
  return env === undefined || env === '' ? DEFAULT_MAX_ARRAY_BYTES : parseBytes(env, 'TPUKIT_MAX_ARRAY_BYTES');
}

/** The largest array, in bytes, that tpukit will allocate. */
export function getMaxArrayBytes(): number {
  if (limit === undefined) limit = fromEnv();
  return limit;
}

/**
 * Sets the size limit (bytes, or a string like '8GiB'); `null` goes back to the environment's
 * or the default. Returns the previous limit.
 */
export function setMaxArrayBytes(bytes: number | string | null): number {
  const prev = getMaxArrayBytes();
  if (bytes === null) limit = fromEnv();
  else if (typeof bytes === 'string') limit = parseBytes(bytes, 'setMaxArrayBytes');
  else if (typeof bytes === 'number' && Number.isFinite(bytes) && bytes > 0) limit = Math.floor(bytes);
  else throw new RangeError(`setMaxArrayBytes: the limit must be a positive number of bytes, a string such as '8GiB', or null; got ${String(bytes)}`);
  return prev;
}

function human(bytes: number): string {
  for (const [u, f] of [['TiB', 2 ** 40], ['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]] as const) {
    if (bytes >= f) return `${(bytes / f).toPrecision(3)} ${u}`;
  }
  return `${bytes} B`;
}

/** Throws when an array of `shape` and `dtype` would exceed the limit. */
export function checkArrayBytes(op: string, shape: readonly number[], dtype: DType): void {
  let n = 1;
  for (let i = 0; i < shape.length; i++) n *= shape[i];
  const bytes = n * itemsize(dtype);
  const max = limit ?? getMaxArrayBytes();
  if (bytes > max) {
    throw new RangeError(
      `${op}: an array of shape [${shape.join(',')}] ${dtype} needs ${bytes} bytes (${human(bytes)}), over the limit of ${max} bytes (${human(max)}); ` +
        'raise it with setMaxArrayBytes(bytes) or TPUKIT_MAX_ARRAY_BYTES if this is intended',
    );
  }
}
