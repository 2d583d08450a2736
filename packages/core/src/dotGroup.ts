/**
 * `evalDotsInto`: independent dot_generals into caller storage as one group, so a backend with
 * a thread pool can run them as one job (the systolic GEMM engine: one wake-up, each thread
 * claiming whole products, largest first, each run on its one-thread path, then sharing what is
 * left of the others; `GemmEngine.beginGroup`). Results are the same bits as `evalPrimitiveInto` one by one.
 */
import type { Array } from './array';
import { getBackend } from './backend';
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
  if (!globalThis.Array.isArray(list) || list.length === 0) throw new TypeError(`evalDotsInto: list must be a non-empty array of { args, params, out }; got ${list === null || !globalThis.Array.isArray(list) ? typeof list : 'an empty array'}`);
  for (let i = 0; i < list.length; i++) {
    const d = list[i];
    if (d === null || typeof d !== 'object' || !globalThis.Array.isArray(d.args) || d.args.length !== 2 || !ArrayBuffer.isView(d.out)) {
      throw new TypeError(`evalDotsInto: dot ${i} must be { args: [lhs, rhs], params, out: typed array }; got ${d === null ? 'null' : typeof d !== 'object' ? typeof d : `args of length ${globalThis.Array.isArray(d.args) ? d.args.length : typeof d.args} and out ${Object.prototype.toString.call(d.out)}`}`);
    }
    for (let j = 0; j < i; j++) {
      const o = list[j].out;
      if (viewsOverlap(o, d.out)) {
        throw new RangeError(`evalDotsInto: the destinations of dots ${j} and ${i} overlap (bytes [${o.byteOffset}, ${o.byteOffset + o.byteLength}) and [${d.out.byteOffset}, ${d.out.byteOffset + d.out.byteLength}) of one buffer)`);
      }
    }
  }
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
