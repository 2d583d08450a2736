/**
 * Sharded training through @tpukit/mesh (MaxText's maxtext_utils / sharding rules): the `ici_*`
 * keys build a `data x fsdp x tensor` mesh, every parameter carries logical axis names (MaxText's
 * `nn.with_logical_partitioning` names: vocab, embed, heads, kv_heads, mlp, norm, layers) and
 * `logical_axis_rules` maps them to mesh axes, giving each parameter's `NamedSharding`; the batch
 * is split along its first dimension by the rule for `activation_batch`.
 */
import { type Array, type Device, tree } from '@tpukit/core';
import { type Mesh, makeMesh, NamedSharding, P, type SpecEntry } from '@tpukit/mesh';
import type { Config } from './config';
import type { Params } from './model';

/** The mesh axes, in MaxText's order (outermost first). */
export const MESH_AXES = ['data', 'fsdp', 'tensor'] as const;

/** Logical axis names of one dimension (null: no name, never split). */
export type LogicalAxes = readonly (string | null)[];

/**
 * The mesh of the `ici_*` keys over `devs` (their product, after a -1 is filled in, must equal
 * the number of devices).
 */
export function makeTrainMesh(c: Config, devs: readonly Device[]): Mesh {
  const ici = [c.ici_data_parallelism, c.ici_fsdp_parallelism, c.ici_tensor_parallelism];
  const fixed = ici.filter((v) => v !== -1).reduce((a, b) => a * b, 1);
  const n = devs.length;
  const shape = ici.map((v) => (v === -1 ? n / fixed : v));
  if (shape.some((s) => !Number.isInteger(s) || s < 1) || shape.reduce((a, b) => a * b, 1) !== n) {
    throw new RangeError(
      `makeTrainMesh: the product of ici_data_parallelism=${ici[0]}, ici_fsdp_parallelism=${ici[1]}, ici_tensor_parallelism=${ici[2]} must equal the device count ${n}` +
        ' (set the keys, or the devices with setCpuDeviceCount / TPUKIT_CPU_DEVICES)',
    );
  }
  return makeMesh(shape, MESH_AXES, { devices: devs });
}

/** Logical names of a parameter from its path in the model's tree (MaxText's annotations). */
export function logicalAxesOf(path: readonly string[], ndim: number): LogicalAxes {
  const name = path.at(-1);
  const owner = path.at(-2) ?? '';
  let axes: LogicalAxes;
  if (name === 'scale' || name === 'bias') axes = ['norm'];
  else if (owner === 'token_embedder') axes = ['vocab', 'embed'];
  else if (owner === 'position_embedder') axes = [null, 'embed'];
  else if (owner === 'query') axes = ['embed', 'heads'];
  else if (owner === 'key' || owner === 'value') axes = ['embed', 'kv_heads'];
  else if (owner === 'out') axes = ['heads', 'embed'];
  else if (owner === 'wi' || owner === 'wi_0' || owner === 'wi_1') axes = ['embed', 'mlp'];
  else if (owner === 'wo') axes = ['mlp', 'embed'];
  else if (owner === 'logits_dense') axes = ['embed', 'vocab'];
  else throw new Error(`logicalAxesOf: no logical axis names for parameter ${path.join('/')}`);
  // Scanned layers are stacked on a leading axis.
  if (path[0] === 'decoder' && path[1] === 'layers') axes = ['layers', ...axes];
  if (axes.length !== ndim) throw new Error(`logicalAxesOf: parameter ${path.join('/')} has ${ndim} dimensions but logical axes [${axes.join(', ')}]`);
  return axes;
}

/**
 * flax's `logical_to_mesh_axes`: each logical name takes the mesh axes of the first rule naming
 * it whose axes this spec does not use yet; no rule (or an empty one) leaves the dimension whole.
 */
export function logicalToSpec(axes: LogicalAxes, rules: Config['logical_axis_rules']): SpecEntry[] {
  const used = new Set<string>();
  return axes.map((name) => {
    if (name === null) return null;
    for (const [logical, meshAxes] of rules) {
      if (logical !== name || meshAxes.some((a) => used.has(a))) continue;
      for (const a of meshAxes) used.add(a);
      return meshAxes.length === 0 ? null : meshAxes.length === 1 ? meshAxes[0] : [...meshAxes];
    }
    return null;
  });
}

const pathKeys = (path: tree.KeyPath): string[] => path.map((e) => (e.kind === 'dict' ? e.key : e.kind === 'seq' ? String(e.idx) : String(e.kind === 'attr' ? e.name : e.key)));

function namedSharding(mesh: Mesh, spec: SpecEntry[], shape: readonly number[], what: string): NamedSharding {
  const s = new NamedSharding(mesh, P(...spec));
  s.check(shape, what);
  return s;
}

/** Each parameter's NamedSharding from its logical axes and the config's rules. */
export function paramShardings(params: Params, c: Config, mesh: Mesh): tree.PyTree<NamedSharding> {
  return tree.mapWithPath((path: tree.KeyPath, p: Array) => {
    const keys = pathKeys(path);
    return namedSharding(mesh, logicalToSpec(logicalAxesOf(keys, p.ndim), c.logical_axis_rules), p.shape, `parameter ${keys.join('/')}`);
  }, params);
}

/**
 * Shardings for an optimizer state: every subtree shaped like the parameters (Adam's mu and nu)
 * takes the parameters' shardings, every other leaf (step counts) is replicated.
 */
export function optStateShardings(optState: unknown, params: Params, pShardings: tree.PyTree<NamedSharding>, mesh: Mesh): unknown {
  const paramDef = tree.structure(params);
  const pLeaves = tree.leaves<NamedSharding>(pShardings, { isLeaf: (x) => x instanceof NamedSharding });
  const replicated = new NamedSharding(mesh, P());
  const walk = (x: unknown): unknown => {
    if (x !== null && typeof x === 'object' && !('shape' in x) && tree.structure(x).equals(paramDef)) return tree.unflatten(paramDef, pLeaves);
    if (globalThis.Array.isArray(x)) return x.map(walk);
    if (x !== null && typeof x === 'object' && !('shape' in x) && Object.getPrototypeOf(x) === Object.prototype) {
      return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, walk(v)]));
    }
    return x === null || x === undefined ? x : replicated;
  };
  return walk(optState);
}

/** The sharding of the batch arrays ([B, L]): rows split by the rule for `activation_batch`. */
export function batchSharding(c: Config, mesh: Mesh): NamedSharding {
  const spec = logicalToSpec(['activation_batch', null], c.logical_axis_rules);
  return new NamedSharding(mesh, P(...spec));
}
