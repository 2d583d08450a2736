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
import { type Array, type ClosedJaxpr, lax, makeArrayFromCallback, makeJaxpr, np, toStorage, tree, vmap } from '@tpukit/core';
import { asArray } from '@tpukit/core/internal';
import { type BoundAxis, withAxes } from './axisContext';
import type { Mesh } from './mesh';
import { runSpmd } from './spmd';
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

/** The function `shardMap` returns: call it (one vectorised program here), or `await onDevices(...)`. */
export type ShardMapped<F extends (...args: any[]) => any> = ((...args: Parameters<F>) => ReturnType<F>) & {
  /**
   * Runs the body on every device of the mesh at once, each on its own worker thread, with
   * collectives meeting worker to worker in shared memory; the outputs are sharded Arrays whose shards are what
   * each device computed. Arguments must be concrete (not traced).
   */
  onDevices(...args: Parameters<F>): Promise<ReturnType<F>>;
};

/** Arguments flattened, with a checked NamedSharding per leaf. */
function prepareArgs(mesh: Mesh, inSpecs: ShardMapOptions['inSpecs'], args: unknown[]) {
  const [leaves, inTree] = tree.flatten(args);
  const specs = specsFor(inSpecs, args, 'inSpecs');
  const arrays = leaves.map((l) => asArray(l as Array, { op: 'shardMap' }));
  const shardings = arrays.map((x, i) => {
    const s = new NamedSharding(mesh, specs[i]);
    s.check(x.shape, `shardMap: argument leaf ${i} (inSpecs ${specs[i]})`);
    const own = x.sharding;
    if (own instanceof NamedSharding && !own.mesh.equals(mesh)) {
      throw new Error(`shardMap: argument leaf ${i} is sharded over ${own.mesh} but shardMap's mesh is ${mesh}; reshard it first`);
    }
    return s;
  });
  return { arrays, inTree, specs, shardings };
}

/** `jax.shard_map`. */
export function shardMap<F extends (...args: any[]) => any>(f: F, opts: ShardMapOptions): ShardMapped<F> {
  const { mesh, inSpecs, outSpecs } = opts;
  const checkVma = opts.checkVma ?? true;
  if (!mesh || !globalThis.Array.isArray(mesh.axisNames)) throw new TypeError('shardMap: opts.mesh must be a Mesh');
  const nAxes = mesh.axisNames.length;
  const mapped = ((...args: unknown[]) => {
    const { arrays, inTree, specs, shardings } = prepareArgs(mesh, inSpecs, args);
    const blocks = arrays.map((x, i) => toBlocks(x, shardings[i]));
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
  }) as unknown as ShardMapped<F>;
  const tracedPrograms = new Map<string, { closed: ClosedJaxpr; outTree: tree.TreeDef; outSpecsFlat: PartitionSpec[] }>();
  const trace = (arrays: Array[], inTree: tree.TreeDef, shardings: NamedSharding[]) => {
    let outTree: tree.TreeDef | null = null;
    let outSpecsFlat: PartitionSpec[] = [];
    const closed = makeJaxpr((...ins: Array[]) => {
      const bound: BoundAxis[] = mesh.axisNames.map((name, i) => ({ name, size: mesh.axisSizes[i], index: ins[arrays.length + i] }));
      return withAxes(bound, () => {
        const out = f(...(tree.unflatten(inTree, ins.slice(0, arrays.length)) as unknown[]));
        const [outs, def] = tree.flatten(out);
        outTree = def;
        outSpecsFlat = prefixSpecs(outSpecs, out, 'outSpecs');
        return outs.map((o) => asArray(o as Array, { op: 'shardMap' }));
      });
    })(...arrays.map((x, i) => ({ shape: shardings[i].shardShape(x.shape), dtype: x.dtype, weakType: x.weakType })), ...mesh.axisNames.map(() => ({ shape: [], dtype: 'int32' })));
    return { closed, outTree: outTree!, outSpecsFlat };
  };
  mapped.onDevices = (async (...args: unknown[]) => {
    const { arrays, inTree, shardings } = prepareArgs(mesh, inSpecs, args);
    // The per-device program, traced once per signature (like jit): one device's blocks and its
    // coordinates in, its output blocks out.
    const key = `${String(inTree)}|${arrays.map((x) => `${x.dtype}[${x.shape.join(',')}]${x.weakType ? 'w' : ''}`).join(';')}`;
    let traced = tracedPrograms.get(key);
    if (!traced) tracedPrograms.set(key, (traced = trace(arrays, inTree, shardings)));
    const { closed, outTree, outSpecsFlat } = traced;
    const maps = arrays.map((x, i) => shardings[i].devicesIndicesMap(x.shape));
    const perDevice = mesh.devices.map((dev, k) => [
      ...arrays.map((x, i) => {
        const held = x.sharding instanceof NamedSharding && x.sharding.equals(shardings[i]) ? x.addressableShards.find((sh) => sh.device === dev) : undefined;
        if (held) return held.data;
        const index = maps[i].get(dev)!;
        // A replicated argument goes as is (several devices reading one Array share its buffer).
        if (index.every(([a, b], d) => a === 0 && b === x.shape[d])) return x;
        return lax.slice(x, index.map(([a]) => a), index.map(([, b]) => b));
      }),
      ...mesh.coords(k).map((c) => np.array(c, 'int32')),
    ]);
    const results = await runSpmd(mesh, closed, perDevice);
    const outs = outSpecsFlat.map((spec, i) => {
      const s = new NamedSharding(mesh, spec);
      const block = results[0][i].shape;
      const shape = block.map((b, k) => b * s.partsOf(k));
      const map = s.devicesIndicesMap(shape);
      // Devices holding the same block (the axes the spec does not name) must agree.
      const first = new Map<string, number>();
      mesh.devices.forEach((dev, k) => {
        const key = JSON.stringify(map.get(dev));
        const j = first.get(key);
        if (j === undefined) first.set(key, k);
        else if (checkVma && !sameValues(results[j][i], results[k][i])) {
          throw new Error(`shardMap: output leaf ${i} differs between devices ${mesh.devices[j].id} and ${dev.id}, which its outSpecs entry ${spec} says hold the same block (reduce it, name the axis, or pass checkVma: false to keep each device's value)`);
        }
      });
      let k = 0;
      return makeArrayFromCallback(shape, results[0][i].dtype, s, () => results[k++][i]);
    });
    return tree.unflatten(outTree, outs);
  }) as unknown as ShardMapped<F>['onDevices'];
  return mapped;
}

function sameValues(a: Array, b: Array): boolean {
  const x = toStorage(a);
  const y = toStorage(b);
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i] && !(Number.isNaN(x[i]) && Number.isNaN(y[i]))) return false;
  return true;
}
