/**
 * `evalDotsInto`: independent dot_generals into caller storage as one group, so a backend with
 * a thread pool can run them as one job (the systolic GEMM engine: one wake-up, each thread
 * claiming whole products, largest first, each run on its one-thread path, then sharing what is
 * left of the others; `GemmEngine.beginGroup`). Results are the same bits as `evalPrimitiveInto` one by one.
 */
import type { Array } from './array';
import { type Backend, getBackend } from './backend';
import { type StorageArray, viewsOverlap } from './dtype';
import { dotGeneralP, type DotGeneralParams } from './lax/dot';
import { evalPrimitiveInto, type IntoMemo } from './trace';

/** One dot of a group: its two operands, its parameters, its destination (host storage owned by the caller) and optional memo. */
export interface DotInto {
  args: readonly Array[];
  params: DotGeneralParams;
  out: StorageArray;
  memo?: IntoMemo;
}

/**
 * Runs dot_generals that do not depend on each other (none reads another's destination) into
 * their destinations, as `evalPrimitiveInto(dotGeneralP, ...)` would one by one. Returns, per
 * dot, its result Array, or null where the backend does not run that dot into caller storage
 * (run it with `evalPrimitive` then). Destinations must not share memory.
 */
export function evalDotsInto(list: readonly DotInto[]): (Array | null)[] {
  checkDots(list, 'evalDotsInto');
  const backend = getBackend();
  const grouped = list.length > 1 && backend.beginDotGroup?.() === true;
  const out: (Array | null)[] = [];
  let ok = false;
  try {
    for (const d of list) out.push(evalPrimitiveInto(dotGeneralP, d.args as Array[], d.params, d.out, d.memo));
    ok = true;
  } finally {
    if (grouped) backend.endDotGroup!(ok);
  }
  return out;
}

function checkDots(list: readonly DotInto[], op: string): void {
  if (!globalThis.Array.isArray(list) || list.length === 0) throw new TypeError(`${op}: list must be a non-empty array of { args, params, out }; got ${list === null || !globalThis.Array.isArray(list) ? typeof list : 'an empty array'}`);
  for (let i = 0; i < list.length; i++) {
    const d = list[i];
    if (d === null || typeof d !== 'object' || !globalThis.Array.isArray(d.args) || d.args.length !== 2 || !ArrayBuffer.isView(d.out)) {
      throw new TypeError(`${op}: dot ${i} must be { args: [lhs, rhs], params, out: typed array }; got ${d === null ? 'null' : typeof d !== 'object' ? typeof d : `args of length ${globalThis.Array.isArray(d.args) ? d.args.length : typeof d.args} and out ${Object.prototype.toString.call(d.out)}`}`);
    }
    for (let j = 0; j < i; j++) {
      const o = list[j].out;
      if (viewsOverlap(o, d.out)) {
        throw new RangeError(`${op}: the destinations of dots ${j} and ${i} overlap (bytes [${o.byteOffset}, ${o.byteOffset + o.byteLength}) and [${d.out.byteOffset}, ${d.out.byteOffset + d.out.byteLength}) of one buffer)`);
      }
    }
  }
}

/**
 * A dot group run in two halves (XLA's async-start / async-done): `start(list)` hands the dots
 * to the backend's thread pool (`Backend.startDotGroup`: the workers claim the products at once)
 * and returns; the calling thread may then run work that neither reads the dots' destinations,
 * writes their operands or destinations, nor uses the backend or a thread pool (the systolic
 * backend throws for any primitive meanwhile); `join()` computes what the workers left, waits
 * for them and returns what `evalDotsInto(list)` would. Where the backend starts nothing (one
 * thread, no pool, no `startDotGroup`, a group of one), `start` only records the list and `join`
 * runs it all with `evalDotsInto`: the same bits either way. One object per call site, reused
 * (its `results` array too); a thrown `start` leaves nothing started.
 */
export class StartedDots {
  private list: readonly DotInto[] | null = null;
  /** The backend whose group is open or started (null: `join` runs the list with `evalDotsInto`). */
  private backend: Backend | null = null;
  /** Whether the backend started products that `join` must join. */
  private started = false;
  private results: (Array | null)[] = [];

  /** Whether `start` was called and `join` not yet. */
  get pending(): boolean {
    return this.list !== null;
  }

  start(list: readonly DotInto[]): void {
    if (this.list !== null) throw new Error('StartedDots.start: this group was started already and not joined (join it first)');
    checkDots(list, 'StartedDots.start');
    const backend = getBackend();
    this.results.length = 0;
    if (list.length > 1 && backend.startDotGroup !== undefined && backend.beginDotGroup?.() === true) {
      let ok = false;
      try {
        for (const d of list) this.results.push(evalPrimitiveInto(dotGeneralP, d.args as Array[], d.params, d.out, d.memo));
        ok = true;
      } finally {
        if (!ok) backend.endDotGroup!(false);
      }
      this.started = backend.startDotGroup();
      this.backend = backend;
    }
    this.list = list;
  }

  /** Joins the group `start` started (see the class); returns, per dot, its result Array or null (as `evalDotsInto`), in an array reused by the next `join`. */
  join(): (Array | null)[] {
    const list = this.list;
    if (list === null) throw new Error('StartedDots.join: join without a started group (start first)');
    this.list = null;
    const backend = this.backend;
    if (backend === null) {
      this.results = evalDotsInto(list);
      return this.results;
    }
    this.backend = null;
    if (this.started) {
      this.started = false;
      backend.joinDotGroup!();
    }
    return this.results;
  }
}
