/**
 * `HloSharding`: how XLA describes the layout of one array over N devices, independent of
 * any mesh class. A tile assignment splits each dimension into `tileDims[d]` equal tiles; the
 * device holding each tile is listed in row-major order over `[...tileDims, replicas]`, the
 * last factor being the replication group (`last_tile_dim_replicate`). Printed and parsed
 * the way XLA prints it: `{replicated}`, `{devices=[2,1]0,1}`,
 * `{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}` (and the iota form `<=[4]` on input).
 * Devices are positions 0..N-1 in the program's device list, as XLA's logical device ids.
 *
 * The partitioner works on the concrete form of a sharding, a `Layout`: the index box each
 * device holds. `fromBoxes` turns any tile-shaped layout back into an HloSharding, and
 * `fromCoreSharding` derives one from core's abstract `Sharding` (e.g. mesh's NamedSharding)
 * through `devicesIndicesMap`, so xla-lite never needs the mesh's classes.
 */
import type { Device, Index, Sharding } from '@tpukit/core';

/** Per dimension `[start, stop)`. */
export type Box = ReadonlyArray<readonly [number, number]>;
/** The box each device (by position) holds. */
export type Layout = readonly Box[];

const prod = (xs: readonly number[]): number => xs.reduce((a, b) => a * b, 1);
export const boxKey = (b: Box): string => b.map(([s, e]) => `${s}:${e}`).join(',');
export const boxSize = (b: Box): number => prod(b.map(([s, e]) => e - s));

export class HloSharding {
  /** Device position -> flat index into the tile array `[...tileDims, replicas]`. */
  private readonly where: number[];

  constructor(
    /** Tiles per data dimension. */
    readonly tileDims: readonly number[],
    /** Devices holding each tile (the `last_tile_dim_replicate` factor; 1 when none). */
    readonly replicas: number,
    /** Row-major device positions over `[...tileDims, replicas]`. */
    readonly devices: readonly number[],
  ) {
    const n = prod(tileDims) * replicas;
    if (devices.length !== n) throw new Error(`HloSharding: tile assignment [${[...tileDims, replicas].join(',')}] needs ${n} devices; got ${devices.length}`);
    this.where = new globalThis.Array(n).fill(-1);
    devices.forEach((d, k) => {
      if (!Number.isInteger(d) || d < 0 || d >= n || this.where[d] !== -1) throw new Error(`HloSharding: device list ${devices.join(',')} must be a permutation of 0..${n - 1}`);
      this.where[d] = k;
    });
  }

  static replicated(rank: number, numDevices: number): HloSharding {
    return new HloSharding(new globalThis.Array(rank).fill(1), numDevices, [...globalThis.Array(numDevices).keys()]);
  }

  get rank(): number {
    return this.tileDims.length;
  }
  get numDevices(): number {
    return this.devices.length;
  }
  get isReplicated(): boolean {
    return this.tileDims.every((t) => t === 1);
  }

  /** The tile coordinates of a device (one per data dimension) and its replica index. */
  coordOf(device: number): { tile: number[]; replica: number } {
    let k = this.where[device];
    const replica = k % this.replicas;
    k = Math.floor(k / this.replicas);
    const tile = new globalThis.Array(this.rank).fill(0);
    for (let d = this.rank - 1; d >= 0; d--) {
      tile[d] = k % this.tileDims[d];
      k = Math.floor(k / this.tileDims[d]);
    }
    return { tile, replica };
  }

  /** The box every device holds of a `shape`d array (dimensions must divide evenly). */
  layout(shape: readonly number[], what = 'array'): Layout {
    if (shape.length !== this.rank) throw new Error(`sharding ${this} has rank ${this.rank} but the ${what} has shape [${shape.join(',')}]`);
    shape.forEach((n, d) => {
      if (n % this.tileDims[d] !== 0) throw new Error(`sharding ${this}: dimension ${d} of the ${what} [${shape.join(',')}] (size ${n}) is not divisible by its ${this.tileDims[d]} tiles`);
    });
    return this.devices.map((_, dev) => {
      const { tile } = this.coordOf(dev);
      return shape.map((n, d): [number, number] => {
        const w = n / this.tileDims[d];
        return [tile[d] * w, (tile[d] + 1) * w];
      });
    });
  }

  /** The shape of one shard. */
  shardShape(shape: readonly number[]): number[] {
    return shape.map((n, d) => n / this.tileDims[d]);
  }

  equals(o: HloSharding): boolean {
    return String(this) === String(o);
  }

  /** XLA's text form. */
  toString(): string {
    if (this.isReplicated) return '{replicated}';
    const dims = this.replicas > 1 ? [...this.tileDims, this.replicas] : this.tileDims;
    return `{devices=[${dims.join(',')}]${this.devices.join(',')}${this.replicas > 1 ? ' last_tile_dim_replicate' : ''}}`;
  }

  /**
   * Parses XLA's text form for an array of `rank` dimensions over `numDevices` devices:
   * `{replicated}`, `{maximal device=k}` is not supported (tpukit shards over all devices),
   * `{devices=[..]ids}`, `{devices=[..]<=[n]}`, with optional `last_tile_dim_replicate`.
   */
  static parse(text: string, rank: number, numDevices: number): HloSharding {
    const t = text.trim();
    const bad = (why: string): never => {
      throw new Error(`HloSharding.parse: ${JSON.stringify(text)}: ${why}`);
    };
    if (t === '{replicated}') return HloSharding.replicated(rank, numDevices);
    const m = /^\{devices=\[([0-9,]+)\]\s*(<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?|[0-9,]+)(\s+last_tile_dim_replicate)?\}$/.exec(t);
    if (!m) return bad('expected {replicated} or {devices=[dims]ids [last_tile_dim_replicate]}');
    const dims = m[1].split(',').map(Number);
    const last = m[5] !== undefined;
    if (dims.length !== rank + (last ? 1 : 0)) bad(`tile assignment has ${dims.length} dimensions; an array of rank ${rank} needs ${rank + (last ? 1 : 0)}`);
    let devices: number[];
    if (m[3] !== undefined) {
      const iotaDims = m[3].split(',').map(Number);
      const perm = m[4] !== undefined ? m[4].split(',').map(Number) : iotaDims.map((_, i) => i);
      devices = iotaTranspose(iotaDims, perm);
    } else devices = m[2].split(',').map(Number);
    if (devices.length !== numDevices) bad(`lists ${devices.length} devices; the program runs on ${numDevices}`);
    return new HloSharding(last ? dims.slice(0, -1) : dims, last ? dims[dims.length - 1] : 1, devices);
  }

  /**
   * The sharding whose device `d` holds `boxes[d]` of a `shape`d array, or null when the
   * boxes are not an even tiling (unequal tiles, uncovered tiles, unequal replication).
   */
  static fromBoxes(boxes: Layout, shape: readonly number[]): HloSharding | null {
    const rank = shape.length;
    const starts = shape.map((_, d) => [...new Set(boxes.map((b) => b[d][0]))].sort((a, b) => a - b));
    const tileDims = starts.map((s) => s.length);
    for (let d = 0; d < rank; d++) {
      const w = shape[d] / tileDims[d];
      if (!Number.isInteger(w)) return null;
      if (w === 0) continue; // an empty dimension: every box is [0, 0)
      for (const b of boxes) if (b[d][0] % w !== 0 || b[d][1] - b[d][0] !== w) return null;
    }
    const groups = new Map<number, number[]>();
    boxes.forEach((b, dev) => {
      let k = 0;
      for (let d = 0; d < rank; d++) k = k * tileDims[d] + (shape[d] === 0 ? 0 : b[d][0] / (shape[d] / tileDims[d]));
      const g = groups.get(k);
      if (g) g.push(dev);
      else groups.set(k, [dev]);
    });
    const ntiles = prod(tileDims);
    if (groups.size !== ntiles) return null;
    const r = boxes.length / ntiles;
    const devices: number[] = [];
    for (let k = 0; k < ntiles; k++) {
      const g = groups.get(k)!;
      if (g.length !== r) return null;
      devices.push(...g);
    }
    return new HloSharding(tileDims, r, devices);
  }
}

/** Devices `0..n-1` laid out as `dims`, transposed by `perm`, flattened (XLA's iota tile assignment). */
function iotaTranspose(dims: number[], perm: number[]): number[] {
  const n = prod(dims);
  const strides = dims.map((_, i) => prod(dims.slice(i + 1)));
  const outDims = perm.map((p) => dims[p]);
  const out: number[] = [];
  const idx = new globalThis.Array(outDims.length).fill(0);
  for (let k = 0; k < n; k++) {
    out.push(idx.reduce((acc, v, j) => acc + v * strides[perm[j]], 0));
    for (let j = outDims.length - 1; j >= 0; j--) {
      if (++idx[j] < outDims[j]) break;
      idx[j] = 0;
    }
  }
  return out;
}

/**
 * The HloSharding of core's abstract `sharding` for a `shape`d array, with devices numbered
 * by their position in `devices` (the program's device list). Errors name `what` (e.g.
 * `jit(f) argument 0`) and say why: a device outside the list, a device the sharding leaves
 * out, or uneven tiles.
 */
export function fromCoreSharding(sharding: Sharding, shape: readonly number[], devices: readonly Device[], what: string): HloSharding {
  const pos = new Map<Device, number>();
  devices.forEach((d, i) => pos.set(d, i));
  const byId = new Map<number, number>();
  devices.forEach((d, i) => byId.set(d.id, i));
  const map = sharding.devicesIndicesMap(shape);
  const boxes: Index[] = new globalThis.Array(devices.length);
  for (const [dev, index] of map) {
    if (index.length !== shape.length) throw new Error(`${what}: sharding ${sharding} gives device ${dev.id} an index of rank ${index.length} for shape [${shape.join(',')}] (rank ${shape.length})`);
    const p = pos.get(dev) ?? byId.get(dev.id);
    if (p === undefined) {
      throw new Error(`${what}: sharding ${sharding} places data on device ${dev.id}, which is not among the program's devices [${devices.map((d) => d.id).join(',')}] (mismatched meshes?)`);
    }
    boxes[p] = index;
  }
  const missing = devices.filter((_, i) => boxes[i] === undefined);
  if (missing.length) {
    throw new Error(`${what}: sharding ${sharding} leaves out devices [${missing.map((d) => d.id).join(',')}] of the program's devices [${devices.map((d) => d.id).join(',')}] (mismatched meshes?)`);
  }
  const hs = HloSharding.fromBoxes(boxes, shape);
  if (!hs) throw new Error(`${what}: sharding ${sharding} does not split shape [${shape.join(',')}] into even tiles (every dimension must be divisible by the number of its shards)`);
  return hs;
}

/**
 * JAX's `GSPMDSharding`: a core `Sharding` made of an HloSharding over a device list. The
 * results of a sharded program carry it when no output sharding was asked for.
 */
export class GSPMDSharding implements Sharding {
  constructor(
    readonly deviceSet: readonly Device[],
    readonly hlo: HloSharding,
  ) {
    if (deviceSet.length !== hlo.numDevices) throw new Error(`GSPMDSharding: ${hlo} needs ${hlo.numDevices} devices; got ${deviceSet.length}`);
  }
  get isFullyReplicated(): boolean {
    return this.hlo.isReplicated;
  }
  devicesIndicesMap(shape: readonly number[]): Map<Device, Index> {
    const lay = this.hlo.layout(shape);
    return new Map(this.deviceSet.map((d, i) => [d, lay[i]]));
  }
  shardShape(shape: readonly number[]): number[] {
    return this.hlo.shardShape(shape);
  }
  toString(): string {
    return `GSPMDSharding(${this.hlo}, devices=[${this.deviceSet.map((d) => d.id).join(',')}])`;
  }
}
