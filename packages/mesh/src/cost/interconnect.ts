/**
 * The interconnect model core's systolic cost ledger takes (core cannot import mesh, so mesh
 * injects it): `interconnect(topology, { algorithm })` times every collective a partitioned
 * program executes with `collectiveTime` on the topology records (device position k is chip
 * k, row-major over the slice; all replica groups of one collective run at once, so the
 * slowest group's time counts). `useInterconnect(topology)` installs it process-wide, so any
 * `systolic.withLedger(...)` shows compute and communication per step; `useInterconnect(null)`
 * removes it.
 */
import { systolic } from '@tpukit/core';
import { chipCount, type Topology } from '../topology';
import { type Algorithm, collectiveTime } from './collectiveTime';

export interface InterconnectOptions {
  /** Default 'torus' (one bidirectional ring per spanned dimension). */
  readonly algorithm?: Algorithm;
}

const ALGORITHMS: readonly Algorithm[] = ['ring', 'bidirectional-ring', 'torus'];

function checkTopology(t: unknown, where: string): Topology {
  const x = t as Partial<Topology> | null | undefined;
  if (x === null || typeof x !== 'object' || !globalThis.Array.isArray(x.dims) || !globalThis.Array.isArray(x.wraparound) || typeof x.generation !== 'object' || x.generation === null) {
    throw new TypeError(`${where}: needs a topology record (torus3d(generations.v5p, [2, 2, 2]), slice(generations.v5e, 8), customTopology(...)); got ${t === null || t === undefined ? String(t) : JSON.stringify(t)}`);
  }
  if (!(x.generation.linkBandwidth! > 0) || !(x.generation.linkLatency! >= 0)) {
    throw new TypeError(`${where}: topology ${x.name} has a generation without linkBandwidth / linkLatency (use a record from generations or one with both)`);
  }
  return x as Topology;
}

/** A `systolic.InterconnectModel` timing collectives on `topology`. */
export function interconnect(topology: Topology, opts: InterconnectOptions = {}): systolic.InterconnectModel {
  const t = checkTopology(topology, 'interconnect');
  const algorithm = opts.algorithm ?? 'torus';
  if (!ALGORITHMS.includes(algorithm)) throw new Error(`interconnect: unknown algorithm ${JSON.stringify(algorithm)}; known: ${ALGORITHMS.join(', ')}`);
  return Object.freeze({
    name: `${t.name} ${algorithm}`,
    chips: chipCount(t),
    seconds(call: systolic.CollectiveCall): number {
      if (call.kind === 'collective-permute') return collectiveTime({ kind: call.kind, bytes: call.bytes, group: [], pairs: call.pairs ?? [] }, t, algorithm);
      return call.groups.reduce((m, g) => Math.max(m, collectiveTime({ kind: call.kind, bytes: call.bytes, group: g }, t, algorithm)), 0);
    },
  });
}

/** Installs (or with null removes) the interconnect model of `topology` for every systolic cost ledger; returns the previous model. */
export function useInterconnect(topology: Topology | null, opts: InterconnectOptions = {}): systolic.InterconnectModel | null {
  if (topology === null) return systolic.setInterconnect(null);
  return systolic.setInterconnect(interconnect(checkTopology(topology, 'useInterconnect'), opts));
}
