/**
 * `shardMap(f, { mesh, inSpecs, outSpecs, checkVma })` (jax.shard_map): runs `f` once per
 * device on that device's block of every argument, with collectives over the mesh axes, and
 * assembles the outputs' blocks by `outSpecs`.
 *
 * How it runs: each mesh axis becomes a named vmap axis (outermost = the mesh's first axis). An
 * argument is reshaped so that the mesh axes its spec splits it over come first, each batched
 * along its own vmap (replicated axes are not batched, so the value is seen as the same on those
 * devices). The body then sees exactly one device's block; collectives turn into array ops over
 * the batch dimensions (collectives.ts). Because it is built from core transformations, shardMap
 * composes with grad, jvp, vmap and jit, inside and outside its body.
 */
import { Array, type PyTree, asArray, lax, tree, vmap } from '@tpukit/core';
import { type BoundAxis, withAxes } from './axisContext';
import type { Mesh } from './mesh';
import { NamedSharding } from './namedSharding';
import { PartitionSpec } from './partitionSpec';

export interface ShardMapOptions {
  mesh: Mesh;
  /** One spec for every argument leaf, or one entry per argument (a spec, or a pytree of specs matching it). */
  inSpecs: PartitionSpec | readonly unknown[];
  /** One spec for every output leaf, or a pytree of specs that is a prefix of the output. */
  outSpecs: PartitionSpec | unknown;
  /** Check that an output only varies along the axes its spec names (default true). */
  checkVma?: boolean;
}

const isSpec = (v: unknown): v is PartitionSpec => v instanceof PartitionSpec;

/** Splits every dim by its spec's axes and moves those (mesh-ordered) to the front: [used axes..., block]. */
function toBlocks(x: Array, s: NamedSharding): Array {
  const { mesh, spec } = s;
  const shape: number[] = [];
  const labels: (string | number)[] = [];
  x.shape.forEach((d, k) => {
    const axes = spec.axesOf(k);
    for (const a of axes) {
      shape.push(mesh.axisSize(a));
      labels.push(a);
    }
    shape.push(d / s.partsOf(k));
    labels.push(k);
  });
  const used = mesh.axisNames.filter((a) => labels.includes(a));
  const order = [...used, ...x.shape.map((_, k) => k)];
  return lax.transpose(lax.reshape(x, shape), order.map((l) => labels.indexOf(l)));
}

/** The inverse of `toBlocks`: [used axes..., block] back to the global array. */
function fromBlocks(y: Array, s: NamedSharding): Array {
  const { mesh, spec } = s;
  const used = mesh.axisNames.filter((a) => spec.axes().includes(a));
  const blockRank = y.ndim - used.length;
  s.check(blockShapeTimesParts(y.shape.slice(used.length), s), 'shardMap: outSpecs');
  const labels: (string | number)[] = [...used, ...globalThis.Array.from({ length: blockRank }, (_, k) => k)];
  const order: (string | number)[] = [];
  const shape: number[] = [];
  for (let k = 0; k < blockRank; k++) {
    order.push(...spec.axesOf(k), k);
    shape.push(y.shape[used.length + k] * s.partsOf(k));
  }
  return lax.reshape(lax.transpose(y, order.map((l) => labels.indexOf(l))), shape);
}

const blockShapeTimesParts = (block: readonly number[], s: NamedSharding) => block.map((b, k) => b * s.partsOf(k));

/** Index 0 of dim 0. */
function first(y: Array): Array {
  const rest = y.shape.slice(1);
  return lax.reshape(lax.slice(y, y.shape.map(() => 0), [1, ...rest]), rest);
}

/** `specs` (a spec, or a pytree of specs) with every spec replaced by `fn(spec)`. */
function mapSpecs(specs: unknown, fn: (s: PartitionSpec) => number | null): unknown {
  if (isSpec(specs)) return fn(specs);
  if (globalThis.Array.isArray(specs)) return specs.map((v) => mapSpecs(v, fn));
  if (typeof specs === 'object' && specs !== null) return Object.fromEntries(Object.entries(specs).map(([k, v]) => [k, mapSpecs(v, fn)]));
  throw new TypeError(`shardMap: outSpecs must be a PartitionSpec or a pytree of them; found ${JSON.stringify(specs)}`);
}

function specsFor(specs: PartitionSpec | readonly unknown[], args: readonly unknown[], what: string): PartitionSpec[] {
  if (isSpec(specs)) return tree.leaves(args).map(() => specs);
  if (!globalThis.Array.isArray(specs) || specs.length !== args.length) {
    throw new Error(`shardMap: ${what} must be one PartitionSpec or one entry per argument (${args.length}); got ${globalThis.Array.isArray(specs) ? `${specs.length} entries` : JSON.stringify(specs)}`);
  }
  return args.flatMap((a, i) => prefixSpecs(specs[i], a, `${what}[${i}]`));
}

/** A spec (for every leaf) or a pytree of specs matching `value`, as one spec per leaf of `value`. */
function prefixSpecs(spec: unknown, value: unknown, what: string): PartitionSpec[] {
  const n = tree.leaves(value).length;
  if (isSpec(spec)) return globalThis.Array.from({ length: n }, () => spec);
  const flat = tree.leaves(spec, { isLeaf: isSpec });
  if (flat.length !== n || !flat.every(isSpec)) {
    throw new Error(`shardMap: ${what} must be a PartitionSpec or a pytree of them matching the value's ${n} leaves; got ${flat.length} entries`);
  }
  return flat as PartitionSpec[];
}

/** `jax.shard_map`. */
export function shardMap<F extends (...args: any[]) => any>(f: F, opts: ShardMapOptions): (...args: Parameters<F>) => ReturnType<F> {
  const { mesh, inSpecs, outSpecs } = opts;
  const checkVma = opts.checkVma ?? true;
  if (!mesh || !globalThis.Array.isArray(mesh.axisNames)) throw new TypeError('shardMap: opts.mesh must be a Mesh');
  const nAxes = mesh.axisNames.length;
  return ((...args: unknown[]) => {
    const [leaves, inTree] = tree.flatten(args);
    const specs = specsFor(inSpecs, args, 'inSpecs');
    const shardings = leaves.map((l, i) => {
      const x = asArray(l as Array, { op: 'shardMap' });
      const s = new NamedSharding(mesh, specs[i]);
      s.check(x.shape, `shardMap: argument leaf ${i} (inSpecs ${specs[i]})`);
      const own = (l as Array).sharding;
      if (l instanceof Array && own instanceof NamedSharding && !own.mesh.equals(mesh)) {
        throw new Error(`shardMap: argument leaf ${i} is sharded over ${own.mesh} but shardMap's mesh is ${mesh}; reshard it first`);
      }
      return s;
    });
    const blocks = leaves.map((l, i) => toBlocks(asArray(l as Array, { op: 'shardMap' }), shardings[i]));
    let outTree: tree.TreeDef | null = null;
    let outSpecsFlat: PartitionSpec[] = [];
    const indices = mesh.axisSizes.map((n) => lax.iota('int32', n));

    const level = (axis: number, xs: Array[], idx: Array[]): Array[] => {
      if (axis === nAxes) {
        const bound: BoundAxis[] = mesh.axisNames.map((name, i) => ({ name, size: mesh.axisSizes[i], index: idx[i] }));
        return withAxes(bound, () => {
          const out = f(...(tree.unflatten(inTree, xs) as unknown[]));
          const [outs, def] = tree.flatten(out);
          outTree = def;
          outSpecsFlat = prefixSpecs(outSpecs, out, 'outSpecs');
          return outs.map((o, i) => asArray(o as Array, { op: 'shardMap' }));
        });
      }
      const name = mesh.axisNames[axis];
      const inAxes = [...xs.map((_, i) => (specs[i].axes().includes(name) ? 0 : null)), ...idx.map((_, i) => (i === axis ? 0 : null))];
      // An output whose spec does not name this axis must not vary along it (checkVma), or
      // (checkVma false) is taken from the axis' first device.
      const outAxes = mapSpecs(outSpecs, (sp) => (sp.axes().includes(name) || !checkVma ? 0 : null));
      let outs: Array[];
      try {
        outs = vmap((...ys: Array[]) => level(axis + 1, ys.slice(0, xs.length), ys.slice(xs.length)), { inAxes, axisSize: mesh.axisSizes[axis], axisName: name, outAxes })(...xs, ...idx);
      } catch (e) {
        const m = e instanceof Error ? /^vmap: output (\d+) is batched/.exec(e.message) : null;
        if (!m) throw e;
        const i = Number(m[1]);
        throw new Error(`shardMap: output leaf ${i} varies along mesh axis '${name}' but its outSpecs entry ${outSpecsFlat[i]} does not name '${name}' (reduce it with psum/pmax/..., name the axis in the spec, or pass checkVma: false to take the first device's value)`);
      }
      return outs.map((y, i) => (outSpecsFlat[i].axes().includes(name) || checkVma ? y : first(y)));
    };
    const outBlocks = level(0, blocks, indices);
    const outs = outBlocks.map((y, i) => fromBlocks(y, new NamedSharding(mesh, outSpecsFlat[i])));
    return tree.unflatten(outTree!, outs);
  }) as unknown as (...args: Parameters<F>) => ReturnType<F>;
}
