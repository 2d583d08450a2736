/**
 * `plan(config, { tpu: 'v5e-256' })`: which TPU slice, how long, how much, without running
 * anything. For every (data, fsdp, tensor) factorisation of the slice's chips it models the
 * per-chip memory (parameters, gradients and optimizer state in weight_dtype, sharded over fsdp
 * x tensor; activations in dtype under the remat policy, batch over data x fsdp and hidden dims
 * over tensor) and the step time (matmul FLOPs on the generation's systolic arrays, padded to
 * the MXU tiles; collectives of every layer through @tpukit/mesh's interconnect model on the
 * slice's torus; overlap of the weight collectives with compute), and recommends the fastest
 * mesh that fits in HBM. TPU names follow Google's accelerator types: the number counts
 * TensorCores, so v4-64 and v5p-128 are 32 and 64 chips (two cores a chip), v5e-256 and
 * v6e-8 are 256 and 8 chips.
 */
import { type CollectiveOp, collectiveTime, type Generation, generations, simulate, slice, type Topology } from '@tpukit/mesh';
import type { Config } from './config';
import { calculateTflopsTrainingPerDevice } from './flops';
import { DEFAULT_PRICES, PRICE_TIERS, type PriceTable, type PriceTier } from './planPrices';

export class PlanError extends Error {
  override name = 'PlanError';
}

const GiB = 2 ** 30;
const BYTES = { float32: 4, bfloat16: 2 } as const;

/** The config keys the planner reads. */
export type PlanConfig = Pick<
  Config,
  | 'emb_dim' | 'num_query_heads' | 'num_kv_heads' | 'head_dim' | 'mlp_dim' | 'num_decoder_layers' | 'vocab_size' | 'mlp_activations' | 'logits_via_embedding'
  | 'decoder_block' | 'dtype' | 'weight_dtype' | 'remat_policy' | 'per_device_batch_size' | 'max_target_length' | 'gradient_accumulation_steps' | 'opt_type'
>;

export interface MeshShape {
  readonly data: number;
  readonly fsdp: number;
  readonly tensor: number;
}

export interface PlanOptions {
  /** Accelerator type, e.g. v5e-256, v5p-128, v4-64, v6e-8 (the number counts TensorCores). */
  readonly tpu: string;
  /** Token budget of the run (default: 20 tokens per parameter, Chinchilla). */
  readonly tokens?: number;
  readonly pricing?: PriceTable;
  /** Force a mesh instead of searching (its product must be the chip count). */
  readonly mesh?: MeshShape;
  /** Share of the padded MXU peak the matmuls reach (default 0.85: pipeline fill, non-matmul ops; an assumption). */
  readonly mxuEfficiency?: number;
  /** Fraction of the weight collectives (fsdp gathers, gradient reductions) hidden behind compute, 0..1 (default 0.9). */
  readonly overlap?: number;
}

export interface MemoryBreakdown {
  readonly params: number;
  readonly grads: number;
  readonly optimizer: number;
  readonly activations: number;
  readonly total: number;
}

export interface MeshEstimate {
  readonly mesh: MeshShape;
  readonly memory: MemoryBreakdown;
  readonly fits: boolean;
  readonly computeSeconds: number;
  readonly communicationSeconds: number;
  readonly stepSeconds: number;
  readonly mfu: number;
  readonly tokensPerSecond: number;
}

export interface CostRow {
  readonly tier: PriceTier;
  readonly perChipHour: number;
  readonly per1MTokens: number;
  readonly perRun: number;
}

export interface Plan {
  readonly tpu: string;
  readonly generation: string;
  readonly chips: number;
  readonly topology: readonly number[];
  readonly hbmBytes: number;
  readonly params: number;
  readonly tokensPerStep: number;
  readonly tokenBudget: number;
  /** The recommended (fastest fitting) mesh, or null when no mesh fits. */
  readonly best: MeshEstimate | null;
  /** Every mesh considered, fastest first. */
  readonly candidates: readonly MeshEstimate[];
  /** When nothing fits: the smallest per-chip need over all meshes. */
  readonly doesNotFit: string | null;
  readonly runSeconds: number | null;
  readonly costs: readonly CostRow[];
  readonly pricingSource: string;
}

/** Parses an accelerator type like `v5p-128` into its generation and chip count. */
export function parseTpu(tpu: string): { generation: Generation; chips: number; topology: Topology } {
  const m = /^(v4|v5e|v5p|v6e)-(\d+)$/.exec(tpu.trim());
  if (!m) throw new PlanError(`plan: tpu ${JSON.stringify(tpu)} is not an accelerator type; expected <generation>-<cores> with generation one of ${Object.keys(generations).join(', ')} (e.g. v5e-256, v5p-128, v4-64, v6e-8)`);
  const generation = generations[m[1] as keyof typeof generations];
  const cores = Number(m[2]);
  if (cores < 1 || cores % generation.coresPerChip !== 0) throw new PlanError(`plan: tpu ${tpu}: ${cores} TensorCores is not a whole number of ${generation.name} chips (${generation.coresPerChip} cores each)`);
  const chips = cores / generation.coresPerChip;
  let topology: Topology;
  try {
    topology = slice(generation, chips);
  } catch (e) {
    throw new PlanError(`plan: tpu ${tpu} (${chips} chips) is not a valid slice: ${(e as Error).message}`);
  }
  return { generation, chips, topology };
}

/** Learnable parameters per decoder layer and outside the layers. */
export function parameterCounts(c: PlanConfig): { perLayer: number; embedding: number; total: number } {
  const D = c.emb_dim;
  const q = c.num_query_heads * c.head_dim;
  const kv = c.num_kv_heads * c.head_dim;
  const gpt3 = c.decoder_block === 'gpt3';
  const attention = D * (q + 2 * kv) + q * D;
  const mlp = D * c.mlp_dim * (c.mlp_activations.length + 1);
  const norms = (gpt3 ? 4 : 2) * D; // gpt3: LayerNorm scale + bias
  const biases = gpt3 ? q + 2 * kv + D + c.mlp_dim + D : 0;
  const perLayer = attention + mlp + norms + biases;
  const embedding = c.vocab_size * D * (c.logits_via_embedding ? 1 : 2) + (gpt3 ? c.max_target_length * D + 2 * D : D);
  return { perLayer, embedding, total: perLayer * c.num_decoder_layers + embedding };
}

/** Activation elements saved per token per layer for the backward pass, by remat policy. */
function savedPerTokenPerLayer(c: PlanConfig): number {
  const D = c.emb_dim;
  const qkv = (c.num_query_heads + 2 * c.num_kv_heads) * c.head_dim;
  const attnOut = c.num_query_heads * c.head_dim;
  const dots = qkv + attnOut + D + c.mlp_dim * c.mlp_activations.length + D; // every matmul output
  if (c.remat_policy === 'full') return D; // only the layer input; the layer is recomputed
  if (c.remat_policy === 'minimal') return D + dots; // layer input + matmul outputs
  return D + dots + 2 * D + c.mlp_dim * (c.mlp_activations.length) + 2 * D; // + norm outputs, activation outputs, residuals
}

/**
 * Per-chip bytes of a training step under a mesh. Parameters and gradients in weight_dtype,
 * Adam's two moments in weight_dtype (SGD: none), all sharded over fsdp x tensor. Activations:
 * each chip holds per_device_batch_size x tensor sequences (the global batch splits over data x
 * fsdp) with hidden dimensions split over tensor, i.e. per_device_batch_size sequences' worth:
 * the saved tensors of every layer, one layer's recompute working set (all matmul outputs of a
 * layer) and the float32 logits (vocab split over tensor) with their gradient.
 */
export function memoryPerChip(c: PlanConfig, mesh: MeshShape): MemoryBreakdown {
  const { perLayer, embedding } = parameterCounts(c);
  const P = perLayer * c.num_decoder_layers + embedding;
  const w = BYTES[c.weight_dtype];
  const shard = mesh.fsdp * mesh.tensor;
  const params = (P * w) / shard;
  const grads = params;
  const optimizer = c.opt_type === 'sgd' ? 0 : 2 * params;
  const a = BYTES[c.dtype];
  const tokens = c.per_device_batch_size * c.max_target_length;
  const layerWorking = savedPerTokenPerLayer({ ...c, remat_policy: 'minimal' }) * tokens * a;
  const saved = savedPerTokenPerLayer(c) * tokens * a * c.num_decoder_layers;
  const logits = 2 * tokens * c.vocab_size * 4; // float32 logits and their gradient
  const activations = saved + layerWorking + logits;
  return { params, grads, optimizer, activations, total: params + grads + optimizer + activations };
}

/** Share of a (rows x k) @ (k x cols) matmul's MXU passes doing useful work when k and cols pad to the array. */
function tileEfficiency(k: number, cols: number, g: Generation): number {
  const pad = (n: number, t: number): number => n / (Math.ceil(n / t) * t);
  return pad(k, g.mxuRows) * pad(cols, g.mxuCols);
}

/** The valid (data, fsdp, tensor) meshes of `chips`: tensor divides the kv heads' query groups and the MLP width. */
export function meshCandidates(c: PlanConfig, chips: number): MeshShape[] {
  const out: MeshShape[] = [];
  for (let tensor = 1; tensor <= chips; tensor *= 2) {
    if (chips % tensor !== 0 || c.num_query_heads % tensor !== 0 || c.mlp_dim % tensor !== 0) continue;
    const rest = chips / tensor;
    for (let fsdp = 1; fsdp <= rest; fsdp++) if (rest % fsdp === 0) out.push({ data: rest / fsdp, fsdp, tensor });
  }
  return out;
}

const range = (start: number, count: number, stride: number): number[] => Array.from({ length: count }, (_, k) => start + k * stride);

/** Step time, MFU and tokens/s of one mesh on a slice. */
export function estimateMesh(c: PlanConfig, mesh: MeshShape, topology: Topology, opts: { mxuEfficiency?: number; overlap?: number } = {}): MeshEstimate {
  const g = topology.generation;
  const chips = mesh.data * mesh.fsdp * mesh.tensor;
  const { perLayer, embedding } = parameterCounts(c);
  const modelFlops = calculateTflopsTrainingPerDevice(c).total * 1e12;
  // Full remat recomputes the forward pass: 4 passes of matmuls instead of 3.
  const hardwareFlops = modelFlops * (c.remat_policy === 'full' ? 4 / 3 : 1);
  const t = mesh.tensor;
  const D = c.emb_dim;
  const eff = (opts.mxuEfficiency ?? 0.85) * Math.min(tileEfficiency(D, (c.mlp_dim / t), g), tileEfficiency(D, (c.num_query_heads * c.head_dim) / t, g));
  const computeSeconds = hardwareFlops / (g.peakBf16Flops * eff);
  // Device k of the mesh (data, fsdp, tensor), tensor fastest, is chip k of the slice.
  const tensorGroup = range(0, t, 1);
  const fsdpGroup = range(0, mesh.fsdp, t);
  const dataGroup = range(0, mesh.data, t * mesh.fsdp);
  const w = BYTES[c.weight_dtype];
  const weightOps: CollectiveOp[] = [];
  const layerBytes = (perLayer * w) / t;
  const G = c.gradient_accumulation_steps;
  for (let l = 0; l <= c.num_decoder_layers; l++) {
    const bytes = l === c.num_decoder_layers ? (embedding * w) / t : layerBytes;
    if (mesh.fsdp > 1) {
      for (let k = 0; k < G; k++) weightOps.push({ kind: 'all-gather', bytes, group: fsdpGroup }, { kind: 'all-gather', bytes, group: fsdpGroup });
      weightOps.push({ kind: 'reduce-scatter', bytes, group: fsdpGroup });
    }
    if (mesh.data > 1) weightOps.push({ kind: 'all-reduce', bytes: bytes / mesh.fsdp, group: dataGroup });
  }
  const tensorOps: CollectiveOp[] = [];
  if (t > 1) {
    const act = c.per_device_batch_size * t * c.max_target_length * D * BYTES[c.dtype];
    const perLayerOps = c.remat_policy === 'full' ? 6 : 4; // 2 forward, 2 backward (+2 in the recompute)
    for (let l = 0; l < c.num_decoder_layers * perLayerOps * G; l++) tensorOps.push({ kind: 'all-reduce', bytes: act, group: tensorGroup });
  }
  const weights = simulate({ flops: modelFlops, computeSeconds, collectives: weightOps, devices: chips }, { topology, overlap: opts.overlap ?? 0.9 });
  // Tensor-parallel all-reduces sit on the critical path between matmuls: not overlapped.
  const tensorSeconds = tensorOps.reduce((s, op) => s + collectiveTime(op, topology), 0);
  const stepSeconds = weights.stepSeconds + tensorSeconds;
  const tokens = c.per_device_batch_size * c.max_target_length * G * chips;
  return {
    mesh,
    memory: memoryPerChip(c, mesh),
    fits: false,
    computeSeconds,
    communicationSeconds: weights.communicationSeconds + tensorSeconds,
    stepSeconds,
    mfu: modelFlops / stepSeconds / g.peakBf16Flops,
    tokensPerSecond: tokens / stepSeconds,
  };
}

/** Plans a training run of `config` on a TPU slice (see the file header). */
export function plan(config: PlanConfig, options: PlanOptions): Plan {
  const { generation, chips, topology } = parseTpu(options.tpu);
  const pricing = options.pricing ?? DEFAULT_PRICES;
  if (options.tokens !== undefined && !(options.tokens > 0 && Number.isFinite(options.tokens))) throw new PlanError(`plan: tokens must be a positive number; got ${options.tokens}`);
  if (options.mxuEfficiency !== undefined && !(options.mxuEfficiency > 0 && options.mxuEfficiency <= 1)) throw new PlanError(`plan: mxuEfficiency must be in (0, 1]; got ${options.mxuEfficiency}`);
  if (options.overlap !== undefined && !(options.overlap >= 0 && options.overlap <= 1)) throw new PlanError(`plan: overlap must be in [0, 1]; got ${options.overlap}`);
  let meshes: MeshShape[];
  if (options.mesh) {
    const { data, fsdp, tensor } = options.mesh;
    if (![data, fsdp, tensor].every((v) => Number.isInteger(v) && v >= 1) || data * fsdp * tensor !== chips) {
      throw new PlanError(`plan: mesh data=${data} fsdp=${fsdp} tensor=${tensor} must be positive integers whose product is the ${chips} chips of ${options.tpu}`);
    }
    meshes = [options.mesh];
  } else meshes = meshCandidates(config, chips);
  const hbm = generation.hbmBytes;
  const candidates = meshes
    .map((m) => {
      const e = estimateMesh(config, m, topology, options);
      return { ...e, fits: e.memory.total <= hbm };
    })
    .sort((a, b) => a.stepSeconds - b.stepSeconds);
  const best = candidates.find((e) => e.fits) ?? null;
  const params = parameterCounts(config).total;
  const tokenBudget = options.tokens ?? 20 * params;
  let doesNotFit: string | null = null;
  if (!best) {
    const least = candidates.reduce((m, e) => (e.memory.total < m.memory.total ? e : m), candidates[0]);
    doesNotFit = `does not fit: needs ${(least.memory.total / GiB).toFixed(1)} GiB per chip (best mesh data=${least.mesh.data} fsdp=${least.mesh.fsdp} tensor=${least.mesh.tensor}), has ${(hbm / GiB).toFixed(1)}`;
  }
  const runSeconds = best ? tokenBudget / best.tokensPerSecond : null;
  const row = pricing.generations[generation.name];
  const costs: CostRow[] = [];
  if (best && row) {
    for (const tier of PRICE_TIERS) {
      const price = row.perChipHour[tier];
      if (price === undefined) continue;
      const dollarsPerSecond = (price * chips) / 3600;
      costs.push({ tier, perChipHour: price, per1MTokens: (dollarsPerSecond / best.tokensPerSecond) * 1e6, perRun: dollarsPerSecond * (runSeconds ?? 0) });
    }
  }
  return {
    tpu: options.tpu,
    generation: generation.name,
    chips,
    topology: topology.dims,
    hbmBytes: hbm,
    params,
    tokensPerStep: config.per_device_batch_size * config.max_target_length * config.gradient_accumulation_steps * chips,
    tokenBudget,
    best,
    candidates,
    doesNotFit,
    runSeconds,
    costs,
    pricingSource: `${pricing.source} (${pricing.date})`,
  };
}

function duration(s: number): string {
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 2 * 3600) return `${(s / 60).toFixed(1)} min`;
  if (s < 3 * 86400) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} days`;
}

const gib = (b: number): string => `${(b / GiB).toFixed(2)} GiB`;

/** A readable table of a plan (what `maxtext plan` prints). */
export function formatPlan(p: Plan, top = 5): string {
  const lines = [
    `${p.tpu}: ${p.chips} ${p.generation} chips (${p.topology.join('x')}), ${gib(p.hbmBytes)} HBM each; model ${(p.params / 1e9).toFixed(2)}B params, ${p.tokensPerStep} tokens/step`,
  ];
  if (!p.best) {
    lines.push(p.doesNotFit ?? 'does not fit');
    return lines.join('\n');
  }
  const b = p.best;
  const m = b.memory;
  lines.push(
    `recommended mesh: data=${b.mesh.data} fsdp=${b.mesh.fsdp} tensor=${b.mesh.tensor}`,
    '',
    '| per chip | value |',
    '|---|---|',
    `| params | ${gib(m.params)} |`,
    `| grads | ${gib(m.grads)} |`,
    `| optimizer state | ${gib(m.optimizer)} |`,
    `| activations | ${gib(m.activations)} |`,
    `| total / HBM | ${gib(m.total)} / ${gib(p.hbmBytes)} |`,
    `| step time | ${(b.stepSeconds * 1e3).toFixed(1)} ms (compute ${(b.computeSeconds * 1e3).toFixed(1)} ms, communication ${(b.communicationSeconds * 1e3).toFixed(1)} ms) |`,
    `| MFU | ${(b.mfu * 100).toFixed(1)}% |`,
    `| tokens/s | ${b.tokensPerSecond.toFixed(0)} (${(b.tokensPerSecond / p.chips).toFixed(0)} per chip) |`,
    `| time to ${(p.tokenBudget / 1e9).toFixed(1)}B tokens | ${duration(p.runSeconds ?? 0)} |`,
    '',
    '| price tier | $/chip-hour | $ per 1M tokens | $ per run |',
    '|---|---|---|---|',
    ...p.costs.map((c) => `| ${c.tier} | ${c.perChipHour.toFixed(2)} | ${c.per1MTokens.toFixed(4)} | ${c.perRun.toFixed(0)} |`),
    `prices: ${p.pricingSource}`,
    '',
    '| mesh (data, fsdp, tensor) | GiB/chip | fits | step ms | MFU |',
    '|---|---|---|---|---|',
    ...p.candidates.slice(0, top).map((e) => `| ${e.mesh.data}, ${e.mesh.fsdp}, ${e.mesh.tensor} | ${(e.memory.total / GiB).toFixed(2)} | ${e.fits ? 'yes' : 'no'} | ${(e.stepSeconds * 1e3).toFixed(1)} | ${(e.mfu * 100).toFixed(1)}% |`),
  );
  return lines.join('\n');
}
