/**
 * The config: MaxText's YAML keys and defaults (configs/base.yml), a config file or a shipped
 * config name layered on them, then `key=value` overrides, as `train.py base.yml key=value`
 * does. Every key has a zod schema and a sentence saying what it allows; an unknown key or a bad
 * value is a `ConfigError` naming the source, the key, the value and what would be valid. The
 * result is frozen and carries MaxText's derived keys (emb_dim, num_query_heads, ...).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const int = (min: number): z.ZodType<number> => z.number().int().min(min);
const pos = z.number().positive();
const nonneg = z.number().min(0);
const frac = z.number().min(0).max(1);
const str = z.string();
const bool = z.boolean();
const oneOf = <T extends string>(...v: [T, ...T[]]): z.ZodType<T> => z.enum(v);

/** Every key: its schema and what it allows, in words (for error messages). */
const KEYS = {
  run_name: [str, 'a string'],
  base_output_directory: [str, 'a directory path (string)'],
  steps: [int(1), 'an integer >= 1'],
  log_period: [int(1), 'an integer >= 1'],
  enable_tensorboard: [bool, 'true or false'],
  metrics_file: [str, 'a file path (string)'],
  profiler: [oneOf('', 'trace'), '"" or "trace"'],
  skip_first_n_steps_for_profiler: [int(0), 'an integer >= 0'],
  profiler_steps: [int(1), 'an integer >= 1'],
  init_weights_seed: [int(0), 'an integer >= 0'],
  backend: [oneOf('systolic', 'reference'), 'one of systolic, reference'],
  tpu_generation: [oneOf('v2', 'v3', 'v4', 'v5e', 'v5p', 'v6e'), 'one of v2, v3, v4, v5e, v5p, v6e'],
  measure_mfu: [bool, 'true or false'],
  decoder_block: [oneOf('llama2', 'gpt3'), 'one of llama2, gpt3'],
  base_emb_dim: [int(1), 'an integer >= 1'],
  base_num_query_heads: [int(1), 'an integer >= 1'],
  base_num_kv_heads: [int(1), 'an integer >= 1 dividing base_num_query_heads'],
  base_mlp_dim: [int(1), 'an integer >= 1'],
  base_num_decoder_layers: [int(1), 'an integer >= 1'],
  head_dim: [int(1), 'an integer >= 1 (even with RoPE)'],
  vocab_size: [int(2), 'an integer >= 2'],
  mlp_activations: [z.union([z.tuple([z.literal('silu'), z.literal('linear')]), z.tuple([z.literal('gelu'), z.literal('linear')]), z.tuple([z.literal('gelu')]), z.tuple([z.literal('relu')]), z.tuple([z.literal('silu')])]), 'one of [silu, linear], [gelu, linear], [gelu], [relu], [silu]'],
  normalization_layer_epsilon: [pos, 'a number > 0'],
  logits_via_embedding: [bool, 'true or false'],
  rope_max_timescale: [pos, 'a number > 0'],
  dtype: [oneOf('bfloat16', 'float32'), 'one of bfloat16, float32'],
  weight_dtype: [oneOf('float32', 'bfloat16'), 'one of float32, bfloat16'],
  matmul_precision: [oneOf('default', 'high', 'highest'), 'one of default, high, highest'],
  remat_policy: [oneOf('full', 'minimal', 'none'), 'one of full, minimal, none'],
  scan_layers: [bool, 'true or false'],
  attention: [oneOf('autoselected', 'dot_product', 'flash'), 'one of autoselected, dot_product, flash'],
  per_device_batch_size: [int(1), 'an integer >= 1 (fractional batch sizes are not supported)'],
  max_target_length: [int(2), 'an integer >= 2'],
  gradient_accumulation_steps: [int(1), 'an integer >= 1'],
  ici_data_parallelism: [z.number().int().refine((v) => v === -1 || v >= 1), '-1 or an integer >= 1'],
  ici_fsdp_parallelism: [z.number().int().refine((v) => v === -1 || v >= 1), '-1 or an integer >= 1'],
  ici_tensor_parallelism: [z.number().int().refine((v) => v === -1 || v >= 1), '-1 or an integer >= 1'],
  logical_axis_rules: [z.array(z.tuple([str, z.array(oneOf('data', 'fsdp', 'tensor'))])), 'a list of [logical_name, [mesh axes from data, fsdp, tensor]]'],
  opt_type: [oneOf('adamw', 'adam', 'sgd'), 'one of adamw, adam, sgd'],
  adam_b1: [z.number().min(0).lt(1), 'a number in [0, 1)'],
  adam_b2: [z.number().min(0).lt(1), 'a number in [0, 1)'],
  adam_eps: [nonneg, 'a number >= 0'],
  adam_eps_root: [nonneg, 'a number >= 0'],
  adam_weight_decay: [nonneg, 'a number >= 0'],
  gradient_clipping_threshold: [nonneg, 'a number >= 0 (0 disables clipping)'],
  learning_rate: [nonneg, 'a number >= 0'],
  lr_schedule_type: [oneOf('cosine', 'wsd', 'constant'), 'one of cosine, wsd, constant'],
  warmup_steps_fraction: [frac, 'a number in [0, 1]'],
  learning_rate_final_fraction: [frac, 'a number in [0, 1]'],
  wsd_decay_steps_fraction: [frac, 'a number in [0, 1]'],
  wsd_decay_style: [oneOf('linear', 'cosine'), 'one of linear, cosine'],
  learning_rate_schedule_steps: [z.number().int().refine((v) => v === -1 || v >= 1), '-1 or an integer >= 1'],
  dataset_type: [oneOf('synthetic', 'grain'), 'one of synthetic, grain'],
  grain_train_files: [str, 'a file path or glob (string)'],
  grain_file_type: [oneOf('text', 'jsonl', 'tfrecord'), 'one of text, jsonl, tfrecord'],
  grain_text_field: [str, 'a JSONL field name'],
  tokenizer_type: [oneOf('byte'), 'byte'],
  packing: [bool, 'true or false'],
  data_shuffle_seed: [int(0), 'an integer >= 0'],
  enable_checkpointing: [bool, 'true or false'],
  async_checkpointing: [bool, 'true or false'],
  checkpoint_period: [int(1), 'an integer >= 1'],
  max_num_checkpoints_to_keep: [z.number().int().refine((v) => v === -1 || v >= 1), '-1 (keep all) or an integer >= 1'],
  save_checkpoint_on_completion: [bool, 'true or false'],
  load_parameters_path: [str, 'a checkpoint directory path (string)'],
  prompt: [str, 'a string'],
  max_prefill_predict_length: [int(1), 'an integer >= 1'],
  decode_sampling_strategy: [oneOf('greedy', 'weighted', 'topk', 'nucleus'), 'one of greedy, weighted, topk, nucleus'],
  decode_sampling_temperature: [pos, 'a number > 0'],
  decode_sampling_top_k: [int(0), 'an integer >= 0'],
  decode_sampling_nucleus_p: [z.number().gt(0).max(1), 'a number in (0, 1]'],
} as const satisfies Record<string, readonly [z.ZodType, string]>;

type Keys = typeof KEYS;
/** The raw keys, as in the YAML. */
export type RawConfig = { -readonly [K in keyof Keys]: z.infer<Keys[K][0]> };

/** A validated config: the raw keys plus MaxText's derived ones. */
export interface Config extends RawConfig {
  /** Where the config came from (a file path or a shipped name), for messages. */
  readonly source: string;
  /** Directory relative paths in the config resolve against. */
  readonly config_dir: string;
  emb_dim: number;
  num_query_heads: number;
  num_kv_heads: number;
  mlp_dim: number;
  num_decoder_layers: number;
  /** Devices this run trains on (product of the ici_* keys after -1 is filled in). */
  num_devices: number;
  global_batch_size_to_train_on: number;
  global_batch_size_to_load: number;
}

export const CONFIG_KEYS: readonly string[] = Object.keys(KEYS);

/** The folder with base.yml and the shipped configs (next to dist/ or src/). */
export function configsDir(): string {
  const here = typeof __dirname === 'string' ? __dirname : dirname(fileURLToPath(import.meta.url));
  for (const d of [join(here, '..', 'configs'), join(here, '..', '..', 'configs')]) if (existsSync(join(d, 'base.yml'))) return d;
  throw new ConfigError(`config: cannot find the shipped configs folder (looked next to ${here})`);
}

/** Names accepted by `loadConfig` in place of a path. */
export const SHIPPED_CONFIGS = ['base', 'tiny', 'small', 'llama2-7b', 'gpt3-6b'] as const;

function readYaml(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`config: cannot read ${path}: ${(e as Error).message}`);
  }
  return parseYamlObject(text, path);
}

function parseYamlObject(text: string, source: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new ConfigError(`config ${source}: not valid YAML: ${(e as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigError(`config ${source}: the top level must be a mapping of key: value; got ${Array.isArray(doc) ? 'a list' : typeof doc}`);
  return doc as Record<string, unknown>;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}

/** Keys within a few edits of `key` (or containing it), for "did you mean". */
function closest(key: string): string[] {
  const near = CONFIG_KEYS.map((k) => [k, k.includes(key) && key.length > 3 ? 0 : editDistance(key, k)] as const).filter(([, d]) => d <= Math.max(2, Math.floor(key.length / 4)));
  return near.sort((a, b) => a[1] - b[1]).slice(0, 3).map(([k]) => k);
}

function checkKey(key: string, value: unknown, source: string): unknown {
  const spec = (KEYS as Record<string, readonly [z.ZodType, string]>)[key];
  if (!spec) {
    const near = closest(key);
    throw new ConfigError(`config ${source}: unknown key ${JSON.stringify(key)}${near.length ? `; did you mean ${near.join(', ')}?` : ''} (see configs/base.yml for every key)`);
  }
  const r = spec[0].safeParse(value);
  if (!r.success) throw new ConfigError(`config ${source}: ${key} = ${JSON.stringify(value)} is not allowed: expected ${spec[1]}`);
  return r.data;
}

/** Parses `key=value` overrides; values are YAML scalars or flow collections (`[silu, linear]`). */
export function parseOverrides(overrides: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const o of overrides) {
    const eq = o.indexOf('=');
    if (eq <= 0) throw new ConfigError(`config override ${JSON.stringify(o)}: expected key=value`);
    const key = o.slice(0, eq).trim();
    const text = o.slice(eq + 1);
    let value: unknown;
    try {
      value = text === '' ? '' : parseYaml(text);
    } catch (e) {
      throw new ConfigError(`config override ${key}: value ${JSON.stringify(text)} is not valid YAML: ${(e as Error).message}`);
    }
    out[key] = value ?? '';
  }
  return out;
}

/** What a config is built for beyond its keys. */
export interface ConfigOptions {
  /**
   * The devices the run trains on (MaxText: jax.device_count()); default: the
   * `TPUKIT_CPU_DEVICES` environment variable (as @tpukit/mesh reads it) when set, else 1 (not the
   * core count mesh defaults to, so a run does not change with the machine). Above 1 the trainer
   * shards over a mesh of @tpukit/mesh's devices, whose count must be this number.
   */
  numDevices?: number;
}

/**
 * Validates layered raw values into a Config. `layers` are applied in order (base first); each
 * is checked against the schema with its own source named in errors.
 */
export function buildConfig(layers: readonly { source: string; values: Record<string, unknown> }[], configDir: string, opts: ConfigOptions = {}): Config {
  const raw: Record<string, unknown> = {};
  for (const { source, values } of layers) for (const [k, v] of Object.entries(values)) raw[k] = checkKey(k, v, source);
  for (const k of CONFIG_KEYS) if (!(k in raw)) throw new ConfigError(`config: key ${k} has no value (base.yml is incomplete)`);
  const r = raw as RawConfig;
  const source = [...layers].reverse().find((l) => l.source !== 'overrides')?.source ?? 'base';
  const fail = (msg: string): never => {
    throw new ConfigError(`config ${source}: ${msg}`);
  };
  if (r.base_num_query_heads % r.base_num_kv_heads !== 0) fail(`base_num_query_heads (${r.base_num_query_heads}) must be a multiple of base_num_kv_heads (${r.base_num_kv_heads})`);
  if (r.decoder_block === 'llama2' && r.head_dim % 2 !== 0) fail(`head_dim = ${r.head_dim} must be even for RoPE (decoder_block llama2)`);
  if (r.tokenizer_type === 'byte' && r.dataset_type === 'grain' && r.vocab_size < 256) fail(`vocab_size = ${r.vocab_size} is too small for tokenizer_type byte: expected >= 256`);
  if (r.dataset_type === 'grain' && r.grain_train_files === '') fail('dataset_type grain needs grain_train_files (a path or glob)');
  const ici = [r.ici_data_parallelism, r.ici_fsdp_parallelism, r.ici_tensor_parallelism];
  const auto = ici.filter((v) => v === -1).length;
  if (auto > 1) fail(`at most one ici_*_parallelism may be -1; got ici_data_parallelism=${ici[0]}, ici_fsdp_parallelism=${ici[1]}, ici_tensor_parallelism=${ici[2]}`);
  const fixed = ici.filter((v) => v !== -1).reduce((a, b) => a * b, 1);
  const env = process.env.TPUKIT_CPU_DEVICES;
  const devices = opts.numDevices ?? (env === undefined || env === '' ? 1 : Number(env));
  if (!Number.isInteger(devices) || devices < 1) {
    throw new ConfigError(`config: ${opts.numDevices === undefined ? `TPUKIT_CPU_DEVICES=${env}` : `numDevices = ${opts.numDevices}`} must be an integer >= 1`);
  }
  if (auto === 0 ? fixed !== devices : devices % fixed !== 0) {
    fail(`the product of ici_data_parallelism=${ici[0]}, ici_fsdp_parallelism=${ici[1]}, ici_tensor_parallelism=${ici[2]} must equal the device count (${devices})`);
  }
  const batch = r.per_device_batch_size * devices;
  return Object.freeze({
    ...r,
    source,
    config_dir: configDir,
    emb_dim: r.base_emb_dim,
    num_query_heads: r.base_num_query_heads,
    num_kv_heads: r.base_num_kv_heads,
    mlp_dim: r.base_mlp_dim,
    num_decoder_layers: r.base_num_decoder_layers,
    num_devices: devices,
    global_batch_size_to_train_on: batch,
    global_batch_size_to_load: batch * r.gradient_accumulation_steps,
  });
}

/** Parses YAML text (not a file) over base.yml, then the overrides. */
export function parseConfig(yamlText: string, overrides: readonly string[] = [], source = '<text>', configDir = process.cwd(), opts: ConfigOptions = {}): Config {
  const base = join(configsDir(), 'base.yml');
  return buildConfig(
    [
      { source: base, values: readYaml(base) },
      { source, values: parseYamlObject(yamlText, source) },
      { source: 'overrides', values: parseOverrides(overrides) },
    ],
    configDir,
    opts,
  );
}

/** A shipped config name (`tiny`, `small`, `llama2-7b`, `gpt3-6b`, `base`) or a YAML file path. */
export function loadConfig(nameOrPath: string, overrides: readonly string[] = [], opts: ConfigOptions = {}): Config {
  const shipped = (SHIPPED_CONFIGS as readonly string[]).includes(nameOrPath);
  const path = shipped ? join(configsDir(), `${nameOrPath}.yml`) : resolve(nameOrPath);
  if (!shipped && !existsSync(path)) {
    throw new ConfigError(`config: ${JSON.stringify(nameOrPath)} is neither a shipped config (${SHIPPED_CONFIGS.join(', ')}) nor an existing file`);
  }
  return parseConfig(readFileSync(path, 'utf8'), overrides, path, dirname(path), opts);
}

/** A path from the config, resolved against the config file's folder. */
export function configPath(c: Config, p: string): string {
  return isAbsolute(p) ? p : join(c.config_dir, p);
}
