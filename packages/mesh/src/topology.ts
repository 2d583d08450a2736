/**
 * TPU generations and slice topologies as data records (tinygrad-style): each generation's
 * chip (MXU geometry, peak bf16 FLOP/s, HBM) and interconnect (ICI links per chip, bandwidth
 * per link and direction, per-step latency), and a topology: the chip grid of a slice, which
 * dimensions wrap around (a torus) and which generation it is made of. Chips are numbered
 * row-major over the grid, the last dimension fastest; a program's device k is chip k.
 * Sources for every number are in COST_MODEL.md. A generation record is a superset of core's
 * systolic `TpuPreset`, so a compiled program's cost analysis runs on it directly.
 */
import type { systolic } from '@tpukit/core';

/**
 * A TPU generation: core's systolic `TpuPreset` (MXU geometry, derived clock, peak bf16
 * FLOP/s, HBM capacity and bandwidth, ICI ports) plus the interconnect numbers the cost model
 * needs.
 */
export interface Generation extends systolic.TpuPreset {
  /** ICI bytes per second per chip, both directions of every link together. */
  readonly iciBandwidth: number;
  /** ICI bytes per second of one link in one direction. */
  readonly linkBandwidth: number;
  /** Seconds per collective step (one hop and the synchronisation around it): an assumption, not published. */
  readonly linkLatency: number;
}

const GB = 1e9;
const GiB = 2 ** 30;

function generation(g: Omit<Generation, 'clockHz' | 'linkBandwidth'>): Generation {
  const clockHz = g.peakBf16Flops / (2 * g.mxuRows * g.mxuCols * g.mxusPerCore * g.coresPerChip);
  return Object.freeze({ ...g, clockHz, linkBandwidth: g.iciBandwidth / (2 * g.iciLinks) });
}

/** Assumed per-step collective latency (hop + synchronisation); Google publishes none. */
export const DEFAULT_LINK_LATENCY = 1e-6;

export const generations: Readonly<Record<'v4' | 'v5e' | 'v5p' | 'v6e', Generation>> = Object.freeze({
  v4: generation({ name: 'v4', mxuRows: 128, mxuCols: 128, mxusPerCore: 4, coresPerChip: 2, peakBf16Flops: 275e12, hbmBytes: 32 * GiB, hbmBandwidth: 1200 * GB, iciLinks: 6, iciBandwidth: 600 * GB, linkLatency: DEFAULT_LINK_LATENCY, topology: '3D torus', source: 'https://cloud.google.com/tpu/docs/v4; Jouppi et al., TPU v4 (ISCA 2023): 6 ICI links of 50 GB/s per direction' }),
  v5e: generation({ name: 'v5e', mxuRows: 128, mxuCols: 128, mxusPerCore: 4, coresPerChip: 1, peakBf16Flops: 197e12, hbmBytes: 16 * GB, hbmBandwidth: 819 * GB, iciLinks: 4, iciBandwidth: 400 * GB, linkLatency: DEFAULT_LINK_LATENCY, topology: '2D torus', source: 'https://cloud.google.com/tpu/docs/v5e (ICI 1600 Gbps per chip and direction, 4 ports)' }),
  v5p: generation({ name: 'v5p', mxuRows: 128, mxuCols: 128, mxusPerCore: 4, coresPerChip: 2, peakBf16Flops: 459e12, hbmBytes: 95 * GB, hbmBandwidth: 2765 * GB, iciLinks: 6, iciBandwidth: 1200 * GB, linkLatency: DEFAULT_LINK_LATENCY, topology: '3D torus', source: 'https://cloud.google.com/tpu/docs/v5p (bidirectional ICI 1200 GBps per chip, 3D torus)' }),
  v6e: generation({ name: 'v6e', mxuRows: 256, mxuCols: 256, mxusPerCore: 2, coresPerChip: 1, peakBf16Flops: 918e12, hbmBytes: 32 * GB, hbmBandwidth: 1640 * GB, iciLinks: 4, iciBandwidth: 800 * GB, linkLatency: DEFAULT_LINK_LATENCY, topology: '2D torus', source: 'https://cloud.google.com/tpu/docs/v6e (bidirectional ICI 800 GBps per chip, 4 ports)' }),
});

export interface Topology {
  readonly name: string;
  readonly generation: Generation;
  /** Chips along each dimension of the slice. */
  readonly dims: readonly number[];
  /** Whether each dimension has wrap-around links (a ring) or is a line. */
  readonly wraparound: readonly boolean[];
}

/** A user-defined topology: any grid, any wrap-around, any generation record. */
export function customTopology(t: { name?: string; generation: Generation; dims: readonly number[]; wraparound?: readonly boolean[] }): Topology {
  const { dims } = t;
  if (!dims.length || dims.some((d) => !Number.isInteger(d) || d < 1)) throw new Error(`topology: dims ${JSON.stringify(dims)} must be positive integers`);
  const wrap = t.wraparound ?? dims.map(() => false);
  if (wrap.length !== dims.length) throw new Error(`topology: wraparound ${JSON.stringify(wrap)} needs one entry per dimension of ${dims.join('x')}`);
  return Object.freeze({ name: t.name ?? `${t.generation.name}-${dims.join('x')}`, generation: t.generation, dims: [...dims], wraparound: [...wrap] });
}

/**
 * A v4 / v5p slice `x*y*z`: a 3D torus whose dimensions wrap around where they span whole
 * 4x4x4 cubes (the optical switches close the ring), a mesh line otherwise.
 */
export function torus3d(generation: Generation, dims: readonly [number, number, number]): Topology {
  return customTopology({ generation, dims, wraparound: dims.map((d) => d >= 4 && d % 4 === 0) });
}

/** A v5e / v6e slice `x*y`: a 2D grid whose dimensions wrap around only at the full 16-chip pod edge. */
export function torus2d(generation: Generation, dims: readonly [number, number]): Topology {
  return customTopology({ generation, dims, wraparound: dims.map((d) => d === 16) });
}

const SHAPES_3D: Record<number, [number, number, number]> = {
  1: [1, 1, 1], 2: [1, 1, 2], 4: [2, 2, 1], 8: [2, 2, 2], 16: [2, 2, 4], 32: [2, 4, 4], 64: [4, 4, 4], 128: [4, 4, 8], 256: [4, 8, 8],
  512: [8, 8, 8], 1024: [8, 8, 16], 2048: [8, 16, 16], 4096: [16, 16, 16], 6144: [16, 16, 24],
};
const SHAPES_2D: Record<number, [number, number]> = { 1: [1, 1], 4: [2, 2], 8: [2, 4], 16: [4, 4], 32: [4, 8], 64: [8, 8], 128: [8, 16], 256: [16, 16] };

/** The usual slice of `chips` chips of a generation (the shapes of Google's slice tables). */
export function slice(generation: Generation, chips: number): Topology {
  if (generation.topology.startsWith('3D')) {
    const s = SHAPES_3D[chips];
    if (!s) throw new Error(`slice: no standard ${generation.name} slice of ${chips} chips; known sizes ${Object.keys(SHAPES_3D).join(', ')} (use torus3d for others)`);
    return torus3d(generation, s);
  }
  const s = SHAPES_2D[chips];
  if (!s) throw new Error(`slice: no standard ${generation.name} slice of ${chips} chips; known sizes ${Object.keys(SHAPES_2D).join(', ')} (use torus2d for others)`);
  return torus2d(generation, s);
}

export const chipCount = (t: Topology): number => t.dims.reduce((a, b) => a * b, 1);

/** Grid coordinates of chip `k` (row-major, last dimension fastest). */
export function coordsOf(t: Topology, k: number): number[] {
  const c = new Array<number>(t.dims.length);
  for (let d = t.dims.length - 1; d >= 0; d--) {
    c[d] = k % t.dims[d];
    k = Math.floor(k / t.dims[d]);
  }
  return c;
}

/** Hops between two chips (shortest path, wrap-around used where present). */
export function hops(t: Topology, a: number, b: number): number {
  const ca = coordsOf(t, a);
  const cb = coordsOf(t, b);
  return ca.reduce((s, x, d) => {
    const diff = Math.abs(x - cb[d]);
    return s + (t.wraparound[d] ? Math.min(diff, t.dims[d] - diff) : diff);
  }, 0);
}
