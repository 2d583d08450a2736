/**
 * TPU generations as data (tinygrad-style hardware records): MXU geometry, MXUs per TensorCore,
 * TensorCores per chip, peak bf16 FLOP/s, HBM capacity and bandwidth, ICI ports. Values are from
 * Google's public Cloud TPU documentation (https://cloud.google.com/tpu/docs/v2, /v3, /v4, /v5e,
 * /v5p, /v6e and /system-architecture-tpu-vm). Google does not publish the clock of every
 * generation, so `clockHz` is derived from the published peak:
 * peak = 2 * rows * cols * mxusPerCore * coresPerChip * clock. Users can define their own presets.
 */
import { showValue } from '../../describe';

export interface TpuPreset {
  readonly name: string;
  /** Rows x columns of multiply-accumulate cells in one MXU. */
  readonly mxuRows: number;
  readonly mxuCols: number;
  readonly mxusPerCore: number;
  readonly coresPerChip: number;
  readonly clockHz: number;
  /** Peak dense bf16 FLOP/s per chip (published). */
  readonly peakBf16Flops: number;
  readonly hbmBytes: number;
  /** HBM bandwidth per chip, bytes per second. */
  readonly hbmBandwidth: number;
  /** ICI ports per chip. */
  readonly iciLinks: number;
  /** Bidirectional ICI bandwidth per chip in bytes/s, where published. */
  readonly iciBandwidth: number | null;
  readonly topology: string;
  readonly source: string;
}

const GiB = 2 ** 30;
const GB = 1e9;

function preset(p: Omit<TpuPreset, 'clockHz'>): TpuPreset {
  const clockHz = p.peakBf16Flops / (2 * p.mxuRows * p.mxuCols * p.mxusPerCore * p.coresPerChip);
  return Object.freeze({ ...p, clockHz });
}

export const presets: Readonly<Record<'v2' | 'v3' | 'v4' | 'v5e' | 'v5p' | 'v6e', TpuPreset>> = Object.freeze({
  v2: preset({ name: 'v2', mxuRows: 128, mxuCols: 128, mxusPerCore: 1, coresPerChip: 2, peakBf16Flops: 45e12, hbmBytes: 16 * GiB, hbmBandwidth: 600 * GB, iciLinks: 4, iciBandwidth: null, topology: '2D torus', source: 'https://cloud.google.com/tpu/docs/v2' }),
  v3: preset({ name: 'v3', mxuRows: 128, mxuCols: 128, mxusPerCore: 2, coresPerChip: 2, peakBf16Flops: 123e12, hbmBytes: 32 * GiB, hbmBandwidth: 900 * GB, iciLinks: 4, iciBandwidth: null, topology: '2D torus', source: 'https://cloud.google.com/tpu/docs/v3' }),
  v4: preset({ name: 'v4', mxuRows: 128, mxuCols: 128, mxusPerCore: 4, coresPerChip: 2, peakBf16Flops: 275e12, hbmBytes: 32 * GiB, hbmBandwidth: 1200 * GB, iciLinks: 6, iciBandwidth: null, topology: '3D mesh/torus', source: 'https://cloud.google.com/tpu/docs/v4' }),
  v5e: preset({ name: 'v5e', mxuRows: 128, mxuCols: 128, mxusPerCore: 4, coresPerChip: 1, peakBf16Flops: 197e12, hbmBytes: 16 * GB, hbmBandwidth: 819 * GB, iciLinks: 4, iciBandwidth: 400 * GB, topology: '2D torus', source: 'https://cloud.google.com/tpu/docs/v5e' }),
  v5p: preset({ name: 'v5p', mxuRows: 128, mxuCols: 128, mxusPerCore: 4, coresPerChip: 2, peakBf16Flops: 459e12, hbmBytes: 95 * GB, hbmBandwidth: 2765 * GB, iciLinks: 6, iciBandwidth: 600 * GB, topology: '3D torus', source: 'https://cloud.google.com/tpu/docs/v5p' }),
  v6e: preset({ name: 'v6e', mxuRows: 256, mxuCols: 256, mxusPerCore: 2, coresPerChip: 1, peakBf16Flops: 918e12, hbmBytes: 32 * GB, hbmBandwidth: 1638 * GB, iciLinks: 4, iciBandwidth: 800 * GB, topology: '2D torus', source: 'https://cloud.google.com/tpu/docs/v6e' }),
});

/** Checks a user-defined preset; throws naming the bad field. */
export function checkPreset(p: TpuPreset, op = 'systolic'): TpuPreset {
  for (const k of ['mxuRows', 'mxuCols', 'mxusPerCore', 'coresPerChip', 'clockHz', 'peakBf16Flops', 'hbmBandwidth'] as const) {
    const v = p[k];
    if (typeof v !== 'number' || !(v > 0) || !Number.isFinite(v)) throw new RangeError(`${op}: preset ${showValue(p.name)} needs a positive ${k}; got ${v}`);
  }
  return p;
}
