/**
 * How HLO text shows what sharding adds: `sharding={devices=[2,1]0,1}` on annotated values (as
 * XLA prints shardings after propagation), and the collectives' attributes with XLA's
 * spellings: `replica_groups={{0,1},{2,3}}`, `dimensions={0}`, `to_apply=%add`,
 * `source_target_pairs={{0,1},{1,0}}`. The partitioner's local slice prints its per-device
 * offsets (`offsets_by_device`) where XLA would read them from a table by `partition-id`.
 */
import type { HloInstruction } from '../hlo';

const set = (xs: readonly number[]): string => `{${xs.join(',')}}`;
const groups = (gs: readonly (readonly number[])[]): string => `{${gs.map(set).join(',')}}`;

/** Attributes of collectives and local slices (null for every other instruction). */
export function spmdAttrs(i: HloInstruction): string[] | null {
  if (i.prim?.name === 'sharding_constraint') return ['custom_call_target="Sharding"'];
  if (i.prim !== null) return null;
  const p = i.params as Record<string, any>;
  switch (i.opcode) {
    case 'all-reduce':
      return [`replica_groups=${groups(p.replicaGroups)}`, `to_apply=%${p.toApply}`];
    case 'all-gather':
      return [`replica_groups=${groups(p.replicaGroups)}`, `dimensions=${set(p.dimensions)}`];
    case 'reduce-scatter':
      return [`replica_groups=${groups(p.replicaGroups)}`, `dimensions=${set(p.dimensions)}`, `to_apply=%${p.toApply}`];
    case 'all-to-all':
      return [`replica_groups=${groups(p.replicaGroups)}`, `split_dimension=${p.splitDimension}`, `concat_dimension=${p.concatDimension}`];
    case 'collective-permute':
      return [`source_target_pairs=${groups(p.sourceTargetPairs)}`];
    case 'dynamic-slice':
      return [`dynamic_slice_sizes=${set(p.sizes)}`, `offsets_by_device=${groups(p.offsets)}`];
    default:
      return null;
  }
}

/** `sharding={...}` when the instruction carries one. */
export function shardingAttrs(i: HloInstruction): string[] {
  const s = (i.params as { sharding?: unknown }).sharding;
  return s === undefined || s === null ? [] : [`sharding=${String(s)}`];
}
