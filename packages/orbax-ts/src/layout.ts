/**
 * Names and paths of the on-disk layout (see the README's "On disk" section), and the path
 * checks that keep a checkpoint from steering reads or writes outside its directory. Nothing
 * read from a checkpoint becomes part of a path without passing `safeComponent`, and files are
 * opened only after `checkInside` confirms (through realpath) that they live under the step.
 *
 * This file imports only node built-ins, so the background writer can use it too.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Orbax's step-level metadata file (JSON). */
export const CHECKPOINT_METADATA = '_CHECKPOINT_METADATA';
/** Orbax's commit marker (written by its COMMIT_FILE mode; tpukit always writes it). */
export const COMMIT_MARKER = 'commit_success.txt';
/** Orbax's per-item pytree metadata file. */
export const PYTREE_METADATA = '_METADATA';
/** Orbax StringHandler's file of an item's string leaves: `{parameter name: value}`. */
export const STRINGS_FILE = '_strings.json';
/** tpukit's checksum manifest: CRC-32 and size of every other file in the step. */
export const CHECKSUMS = '_CHECKSUMS';
/** Orbax's temporary-directory suffix: `<step>.orbax-checkpoint-tmp`. */
export const TMP_SUFFIX = '.orbax-checkpoint-tmp';
/** A step being deleted is first renamed to `<step>.orbax-checkpoint-tmp-deleting`. */
export const DELETING_SUFFIX = `${TMP_SUFFIX}-deleting`;
/** File name of a JsonSave item (Orbax JsonCheckpointHandler's default). */
export const JSON_ITEM_FILE = 'metadata';
/** Reserved item holding `save(..., { metrics })`, file `metrics/metrics` as in Orbax. */
export const METRICS_ITEM = 'metrics';
export const METRICS_FILE = 'metrics';
/** The item name used when `save` gets a single, unnamed item. */
export const DEFAULT_ITEM = 'default';

export const STANDARD_HANDLER = 'orbax.checkpoint._src.handlers.standard_checkpoint_handler.StandardCheckpointHandler';
export const JSON_HANDLER = 'orbax.checkpoint._src.handlers.json_checkpoint_handler.JsonCheckpointHandler';

export const stepDirName = (step: number): string => String(step);

/** The step number of a finished step directory's name, or null for anything else. */
export function parseStepDirName(name: string): number | null {
  if (!/^(0|[1-9][0-9]{0,15})$/.test(name)) return null;
  const n = Number(name);
  return Number.isSafeInteger(n) ? n : null;
}

/**
 * `name` if it is one safe path component: non-empty, at most 255 bytes, no `/`, `\`, NUL or
 * control characters, not `.` or `..`, not starting with `.` (hidden names are reserved for
 * Zarr's `.zarray`). Throws naming `what` otherwise.
 */
export function safeComponent(name: unknown, what: string): string {
  const bad = (why: string): never => {
    throw new Error(`${what}: ${JSON.stringify(name)} is not a safe file name (${why}); names must be one path component without '/', '\\', control characters or a leading '.'`);
  };
  if (typeof name !== 'string') return bad('not a string');
  if (name.length === 0) return bad('empty');
  if (Buffer.byteLength(name) > 255) return bad('longer than 255 bytes');
  if (name.startsWith('.')) return bad("starts with '.'");
  // eslint-disable-next-line no-control-regex
  if (/[/\\\u0000-\u001f\u007f]/.test(name)) return bad("contains '/', '\\' or a control character");
  return name;
}

/**
 * Throws unless `p`, with symlinks resolved, lies inside `root` (also resolved). Returns the
 * resolved path. Used before every read of a checkpoint file.
 */
export function checkInside(root: string, p: string, op: string): string {
  const realRoot = fs.realpathSync(root);
  let real: string;
  try {
    real = fs.realpathSync(p);
  } catch (e) {
    throw new Error(`${op}: missing file ${p} (${(e as NodeJS.ErrnoException).code ?? e})`);
  }
  const rel = path.relative(realRoot, real);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) {
    throw new Error(`${op}: ${p} resolves to ${real}, outside the checkpoint directory ${realRoot}; refusing to read it`);
  }
  return real;
}
