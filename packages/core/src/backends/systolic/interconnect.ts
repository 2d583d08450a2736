/**
 * Communication in the cost ledger. A partitioned program's collectives cost interconnect
 * time beside its compute; how much depends on the slice (topology, link bandwidth and
 * latency, algorithm), which core does not know: an `InterconnectModel` is injected, either
 * per ledger (`withLedger(fn, { interconnect })`) or process-wide (`setInterconnect`;
 * @tpukit/mesh's `useInterconnect(topology)` installs one built from its topology records).
 *
 * The executor of a partitioned program reports to the ledgers through three scopes:
 * `perChip(devices, fn)` (its N devices run the same instructions on same-shaped shards, in
 * this thread; each op is costed once per chip, i.e. each device's execution counts 1/N),
 * `collective(call, move)` (records the collective's modelled time and bytes; `move`, the
 * host's emulation of the exchange, is not compute) and `uncosted(fn)` (host-side placement of
 * shards and assembly of results). Outside an active ledger they only run `fn`.
 */
export type CollectiveKind = 'all-reduce' | 'all-gather' | 'reduce-scatter' | 'all-to-all' | 'collective-permute';

/** One collective as a partitioned program executes it. */
export interface CollectiveCall {
  readonly kind: CollectiveKind;
  /** Full buffer bytes per device: the gathered result, the scattered input, else the buffer. */
  readonly bytes: number;
  /** Replica groups of device positions (all run at once). */
  readonly groups: readonly (readonly number[])[];
  /** For collective-permute: (source, target) device positions. */
  readonly pairs?: readonly (readonly [number, number])[];
}

/** Modelled interconnect time of collectives on some slice (implemented by @tpukit/mesh). */
export interface InterconnectModel {
  /** For reports, e.g. `v5p-2x2x2 torus`. */
  readonly name: string;
  /** Chips of the slice: a program partitioned over more devices cannot be costed on it. */
  readonly chips: number;
  seconds(call: CollectiveCall): number;
}

export interface CollectiveCost {
  readonly kind: CollectiveKind;
  readonly bytes: number;
  /** Devices in one replica group (2 for a permute's pairs). */
  readonly groupSize: number;
  readonly seconds: number;
}

const KINDS: readonly CollectiveKind[] = ['all-reduce', 'all-gather', 'reduce-scatter', 'all-to-all', 'collective-permute'];

/** Checks an interconnect model record (a clear error naming `where` and what is missing). */
export function checkInterconnect(m: unknown, where: string): InterconnectModel {
  const x = m as Partial<InterconnectModel> | null | undefined;
  if (x === null || typeof x !== 'object' || typeof x.seconds !== 'function' || !Number.isInteger(x.chips) || (x.chips as number) < 1 || typeof x.name !== 'string') {
    throw new TypeError(
      `${where}: an interconnect model needs { name: string, chips: positive integer, seconds(call) }; got ${m === null || m === undefined ? String(m) : JSON.stringify(Object.keys(m as object))} (build one with @tpukit/mesh's interconnect(topology) or useInterconnect(topology))`,
    );
  }
  return x as InterconnectModel;
}

/** The cost of one collective on `m`, or an error naming the collective and why it cannot be costed. */
export function collectiveCost(call: CollectiveCall, m: InterconnectModel | null): CollectiveCost {
  if (!KINDS.includes(call.kind)) throw new Error(`systolic ledger: unknown collective ${JSON.stringify(call.kind)}; known: ${KINDS.join(', ')}`);
  const groupSize = call.kind === 'collective-permute' ? 2 : Math.max(0, ...call.groups.map((g) => g.length));
  if (m === null) {
    throw new Error(
      `systolic ledger: a partitioned program ran ${call.kind} over ${groupSize} devices (${call.bytes} bytes) but the ledger has no interconnect model to cost it; install one with @tpukit/mesh's useInterconnect(topology) or pass { interconnect } to withLedger`,
    );
  }
  const devices = 1 + Math.max(-1, ...call.groups.flat(), ...(call.pairs ?? []).flat());
  if (devices > m.chips) throw new Error(`systolic ledger: ${call.kind} over device ${devices - 1} but interconnect ${m.name} has ${m.chips} chips; use a topology with at least ${devices} chips`);
  const seconds = m.seconds(call);
  if (!(seconds >= 0) || !Number.isFinite(seconds)) throw new Error(`systolic ledger: interconnect ${m.name} gave ${seconds} seconds for ${call.kind} of ${call.bytes} bytes; it must be a finite non-negative number`);
  return { kind: call.kind, bytes: call.bytes, groupSize, seconds };
}

let installed: InterconnectModel | null = null;

/** The process-wide interconnect model ledgers use when none is passed to `withLedger` (null: none). Returns the previous one. */
export function setInterconnect(m: InterconnectModel | null): InterconnectModel | null {
  const prev = installed;
  installed = m === null ? null : checkInterconnect(m, 'systolic.setInterconnect');
  return prev;
}

export function getInterconnect(): InterconnectModel | null {
  return installed;
}
