/**
 * Buffer assignment with liveness, the analysis behind `memoryAnalysis()`: every value the
 * entry computation materialises gets a buffer; a buffer is live from its defining instruction
 * to its last use (outputs to the end). Sweeping in program order, a new buffer takes the
 * best-fitting slab freed by a dead temporary, so temporaries share memory; only new slabs grow
 * the temp allocation; a loop fusion may write over an operand that dies at it (in place).
 * Donated arguments (`donateArgnums`) are freed after their last use and
 * their memory may then hold an output or temporary (counted as `aliasedBytes`). Parameters,
 * constants and `get-tuple-element` / `reshape` (aliases of their operand) get no new buffer.
 * The WebAssembly executor (`wasm/program.ts`) lays out its arena with the same pass, passing
 * `materialises` (only the values it keeps in the arena get buffers), `counts` (only reads by
 * wasm kernels keep a value alive there: everything else reads a copy) and `alignment`
 * (buffer sizes rounded up, so every buffer starts 16-byte aligned). The operands of a dot group's
 * members (passes/dotGroups.ts) stay live until the group's last member, or until the end of its
 * window (`dotGroupJoinsOf`), with the members' results, when it has one.
 */
import { bytesOf, type HloComputation, type HloInstruction } from '../hlo';
import { dotGroupJoinsOf, dotGroupsOf } from './dotGroups';

export interface BufferAssignment {
  /** Offset of each materialised value in its region ('temp' slab or a donated argument). */
  readonly slots: Map<HloInstruction, { region: 'temp' | 'donated'; offset: number; size: number }>;
  readonly argumentBytes: number;
  readonly outputBytes: number;
  /** Size of the temp slab after reuse (outputs included, as XLA's temp allocation holds them until returned). */
  readonly tempBytes: number;
  /** What the temp slab would be with no reuse at all. */
  readonly tempBytesNoReuse: number;
  /** Bytes placed into donated argument buffers. */
  readonly aliasedBytes: number;
  /** Most bytes live at once (arguments + live values). */
  readonly peakBytes: number;
  /** Index (in instruction order) of each value's last use; outputs get the length. */
  readonly lastUse: Map<HloInstruction, number>;
}

const ALIAS = new Set(['get-tuple-element', 'reshape', 'parameter', 'constant']);

export interface AssignOptions {
  /** Which non-alias instructions get a buffer (default: all). */
  materialises?: (i: HloInstruction) => boolean;
  /** Round every buffer's size up to a multiple of this many bytes (default 1). */
  alignment?: number;
  /**
   * Which uses keep a value alive (`user` null: a computation output); default all. A
   * materialised value none of whose uses count dies where it is defined.
   */
  counts?: (user: HloInstruction | null, operand: HloInstruction) => boolean;
}

export function assignBuffers(c: HloComputation, donated: readonly number[] = [], opts: AssignOptions = {}): BufferAssignment {
  const align = opts.alignment ?? 1;
  const materialises = opts.materialises ?? (() => true);
  const order = c.instructions;
  const pos = new Map(order.map((i, k) => [i, k]));
  const end = order.length;
  // Liveness: an alias keeps its source alive.
  const root = (i: HloInstruction): HloInstruction => (i.opcode === 'get-tuple-element' || i.opcode === 'reshape' ? root(i.operands[0]) : i);
  const lastUse = new Map<HloInstruction, number>();
  const touch = (i: HloInstruction, t: number): void => {
    const r = root(i);
    lastUse.set(r, Math.max(lastUse.get(r) ?? -1, t));
    lastUse.set(i, Math.max(lastUse.get(i) ?? -1, t));
  };
  const counts = opts.counts ?? (() => true);
  order.forEach((i, t) => i.operands.forEach((o) => counts(i, o) && touch(o, t)));
  // A dot group (passes/dotGroups.ts) reads its members' operands when it runs, from its last
  // member up to the end of its window, if any (`dotGroupJoinsOf`: the group is joined right
  // after the window's last instruction), and writes its members' results meanwhile: both stay
  // live past the window's end (t + 1), so that the window's last instruction, which runs before
  // the join, never takes one of their buffers (not even in place, as a loop whose operand dies
  // at it would).
  const joinAt = dotGroupJoinsOf(c);
  dotGroupsOf(c).forEach((g, q) => {
    const w = joinAt[q] ?? null;
    const t = pos.get(w ?? g[g.length - 1]);
    if (t === undefined) return;
    const until = w === null ? t : t + 1;
    for (const m of g) {
      m.operands.forEach((o) => counts(m, o) && touch(o, until));
      if (w !== null) touch(m, until);
    }
  });
  for (const o of c.outputs) if (counts(null, o)) touch(o, end);
  if (opts.counts) order.forEach((i, t) => !ALIAS.has(i.opcode) && materialises(i) && !lastUse.has(i) && lastUse.set(i, t));

  const argumentBytes = c.params.reduce((s, p) => s + bytesOf(p.shape), 0);
  const outputBytes = c.outputs.reduce((s, o) => s + bytesOf(o.shape), 0);
  const slots: BufferAssignment['slots'] = new Map();
  const free: { region: 'temp' | 'donated'; offset: number; size: number }[] = [];
  let tempBytes = 0;
  let tempBytesNoReuse = 0;
  let aliasedBytes = 0;
  let live = argumentBytes;
  let peakBytes = live;
  const dying = new Map<number, HloInstruction[]>();
  for (const [i, t] of lastUse) {
    if (!dying.has(t)) dying.set(t, []);
    dying.get(t)!.push(i);
  }
  const donatedParams = new Set(donated.map((d) => c.params[d]).filter(Boolean));
  const release = (d: HloInstruction): void => {
    const s = slots.get(d);
    if (s) {
      free.push({ ...s });
      if (s.region === 'temp') live -= s.size;
    } else if (donatedParams.has(d)) {
      free.push({ region: 'donated', offset: d.paramIndex, size: bytesOf(d.shape) });
    }
  };
  const released = new Set<HloInstruction>();
  order.forEach((i, t) => {
    // An elementwise loop writes element k after reading element k of each operand, so an
    // operand that dies here may hold the output (in-place, as XLA's buffer sharing allows).
    // (Single-output loops only: a multi-output loop's outputs live in regions of their own.)
    if (i.opcode === 'fusion' && (i.params as { kind?: string }).kind === 'kLoop' && !i.isTuple) {
      for (const o of i.operands) {
        const r = o.opcode === 'get-tuple-element' || o.opcode === 'reshape' ? null : o;
        if (r && lastUse.get(r) === t && !released.has(r) && bytesOf(r.shape) >= bytesOf(i.shape)) {
          release(r);
          released.add(r);
        }
      }
    }
    if (!ALIAS.has(i.opcode) && materialises(i)) {
      const size = Math.ceil(i.shapes.reduce((s, sh) => s + bytesOf(sh), 0) / align) * align;
      tempBytesNoReuse += size;
      let best = -1;
      free.forEach((f, k) => {
        if (f.size >= size && (best < 0 || f.size < free[best].size)) best = k;
      });
      if (best >= 0) {
        const f = free.splice(best, 1)[0];
        slots.set(i, { region: f.region, offset: f.offset, size });
        if (f.region === 'donated') aliasedBytes += size;
        else live += size;
        if (f.size > size) free.push({ region: f.region, offset: f.offset + size, size: f.size - size });
      } else {
        slots.set(i, { region: 'temp', offset: tempBytes, size });
        tempBytes += size;
        live += size;
      }
      peakBytes = Math.max(peakBytes, live);
    }
    for (const d of dying.get(t) ?? []) if (!released.has(d)) release(d);
  });
  for (const p of donatedParams) if (!lastUse.has(p)) free.push({ region: 'donated', offset: p.paramIndex, size: bytesOf(p.shape) });
  return { slots, argumentBytes, outputBytes, tempBytes, tempBytesNoReuse, aliasedBytes, peakBytes, lastUse };
}
