/**
 * Published MaxText training results (model shape, slice, batch, remat, mesh, MFU) to hold the
 * planner against. Shapes are MaxText's `global_parameter_scale` models expanded to explicit
 * keys (base.yml: emb 2048, 16 heads of 128, MLP 7168, 16 layers, scaled by
 * get_individual_scales); the run settings are those of the scripts named in `source`.
 */
import { loadConfig } from './config';
import { parseTpu, plan, type Plan } from './plan';

export interface PublishedResult {
  readonly name: string;
  readonly tpu: string;
  /** maxtext-ts key=value overrides over the shipped `base` config. */
  readonly overrides: readonly string[];
  /** ici_tensor_parallelism of the published run (fsdp takes the rest of the slice). */
  readonly tensor: number;
  /** Published model FLOPs utilisation, 0..1. */
  readonly mfu: number;
  readonly source: string;
}

const shape = (emb: number, heads: number, mlp: number, layers: number): string[] => [
  `base_emb_dim=${emb}`,
  `base_num_query_heads=${heads}`,
  `base_num_kv_heads=${heads}`,
  `base_mlp_dim=${mlp}`,
  `base_num_decoder_layers=${layers}`,
  'head_dim=128',
  'vocab_size=32000',
  'max_target_length=2048',
];

const V5E = 'https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/configs/v5e/README.md (run scripts MaxText/configs/v5e/16b.sh, 32b.sh)';
const V5P = 'https://github.com/AI-Hypercomputer/maxtext/blob/main/MaxText/configs/v5p/README.md and the MaxText README performance table (run scripts MaxText/configs/v5p/32b.sh, 64b.sh, 128b.sh)';

export const PUBLISHED_RESULTS: readonly PublishedResult[] = [
  { name: '16B', tpu: 'v5e-256', overrides: [...shape(4096, 64, 28672, 32), 'per_device_batch_size=6', 'remat_policy=full'], tensor: 1, mfu: 0.611, source: V5E },
  { name: '32B', tpu: 'v5e-256', overrides: [...shape(8192, 64, 28672, 32), 'per_device_batch_size=4', 'remat_policy=full'], tensor: 1, mfu: 0.6686, source: V5E },
  { name: '32B', tpu: 'v5p-128', overrides: [...shape(8192, 64, 28672, 32), 'per_device_batch_size=7', 'remat_policy=minimal'], tensor: 4, mfu: 0.7147, source: V5P },
  { name: '64B', tpu: 'v5p-128', overrides: [...shape(8192, 64, 28672, 64), 'per_device_batch_size=3', 'remat_policy=minimal'], tensor: 4, mfu: 0.7031, source: V5P },
  { name: '128B', tpu: 'v5p-256', overrides: [...shape(8192, 128, 57344, 64), 'per_device_batch_size=1', 'remat_policy=minimal'], tensor: 8, mfu: 0.6868, source: V5P },
];

/** The planner's prediction for a published run, on the published mesh (computed, not looked up). */
export function predictPublished(r: PublishedResult): Plan {
  const c = loadConfig('base', r.overrides);
  const { chips } = parseTpu(r.tpu);
  return plan(c, { tpu: r.tpu, mesh: { data: 1, fsdp: chips / r.tensor, tensor: r.tensor } });
}

/** The README comparison table: published MFU beside the planner's. */
export function publishedTable(): string {
  const lines = ['| model | slice | batch/chip, remat, tensor | published MFU | planner MFU | ratio | planner GiB/chip (fits) |', '|---|---|---|---|---|---|---|'];
  for (const r of PUBLISHED_RESULTS) {
    const p = predictPublished(r);
    const e = p.candidates[0];
    const b = r.overrides.find((o) => o.startsWith('per_device_batch_size='))?.split('=')[1];
    const remat = r.overrides.find((o) => o.startsWith('remat_policy='))?.split('=')[1];
    lines.push(`| ${r.name} | ${r.tpu} | ${b}, ${remat}, ${r.tensor} | ${(r.mfu * 100).toFixed(1)}% | ${(e.mfu * 100).toFixed(1)}% | ${(e.mfu / r.mfu).toFixed(2)} | ${(e.memory.total / 2 ** 30).toFixed(1)} (${e.fits ? 'yes' : 'no'}) |`);
  }
  return lines.join('\n');
}
