/**
 * A model's parameters as one safetensors file (orbax-ts writes and checks the format), for
 * serving elsewhere and for `load_parameters_path=<file>.safetensors`.
 *
 * Names are the parameter tree's paths joined by '.', with the layers always unstacked:
 * `decoder.layers_0.self_attention.query.kernel` whether or not the model runs `scan_layers`
 * (its stacked `decoder.layers` leaves are split on their leading axis on save and stacked on
 * load), so a file is independent of that choice. `dtype: 'bfloat16'` stores every float tensor
 * as BF16 (half the bytes); on load, float tensors are cast to the model's `weight_dtype`.
 */
import { type Array, type DType, np } from '@tpukit/core';
import { loadSafetensors, matchSafetensors, saveSafetensors } from '@tpukit/orbax-ts';
import { layerParams, type ModelConfig, type Params, stackTrees } from './model';

type Tree = { [k: string]: Array | Tree };

const FLOATS: readonly DType[] = ['float32', 'bfloat16', 'float16'];

/** The parameters with `decoder.layers` (stacked) replaced by `decoder.layers_<i>`. */
export function unstackLayers(params: Params, m: ModelConfig): Params {
  if (!m.scanLayers) return params;
  const dec = params.decoder as Tree;
  const out: Tree = {};
  for (const [k, v] of Object.entries(dec)) if (k !== 'layers') out[k] = v;
  for (let l = 0; l < m.numLayers; l++) out[`layers_${l}`] = layerParams(params, m, l);
  return { ...params, decoder: out };
}

/** The inverse of unstackLayers for a scan_layers model. */
function restackLayers(params: Params, m: ModelConfig): Params {
  if (!m.scanLayers) return params;
  const dec = params.decoder as Tree;
  const out: Tree = {};
  for (const [k, v] of Object.entries(dec)) if (!k.startsWith('layers_')) out[k] = v;
  out.layers = stackTrees(globalThis.Array.from({ length: m.numLayers }, (_, l) => dec[`layers_${l}`] as Tree));
  return { ...params, decoder: out };
}

function mapLeaves(t: Tree, f: (a: Array) => Array): Tree {
  return Object.fromEntries(Object.entries(t).map(([k, v]) => [k, 'shape' in v && typeof (v as Array).size === 'number' ? f(v as Array) : mapLeaves(v as Tree, f)]));
}

export interface SaveParamsOptions {
  /** Store float tensors in this dtype (default: as they are, i.e. weight_dtype). */
  dtype?: 'float32' | 'bfloat16' | 'float16';
  /** Extra `__metadata__` entries (strings). */
  metadata?: Record<string, string>;
}

/** Writes a model's parameters to `file` as safetensors (atomically; see the module comment for names). */
export function saveParams(file: string, params: Params, m: ModelConfig, opts: SaveParamsOptions = {}): void {
  const op = 'saveParams';
  if (opts.dtype !== undefined && !FLOATS.includes(opts.dtype)) throw new Error(`${op}: dtype must be one of ${FLOATS.join(', ')}; got ${String(opts.dtype)}`);
  let flat = unstackLayers(params, m);
  const dt = opts.dtype;
  if (dt !== undefined) flat = mapLeaves(flat, (a) => (FLOATS.includes(a.dtype) && a.dtype !== dt ? np.astype(a, dt) : a));
  saveSafetensors(file, flat, { metadata: { format: 'tpukit-maxtext', decoder_block: m.decoderBlock, num_layers: String(m.numLayers), ...opts.metadata } });
}

/**
 * Reads parameters for model `m` from a safetensors file onto `template` (the model's parameter
 * tree, e.g. from initParams). Every tensor must be there with the template's shape; float
 * tensors of another float dtype (e.g. BF16) are cast to the template's. Missing, extra and
 * mis-shaped tensors are listed in one error.
 */
export function loadParams(file: string, m: ModelConfig, template: Params): Params {
  const op = 'loadParams';
  const tensors = loadSafetensors(file);
  const like = unstackLayers(template, m);
  const specs: Record<string, DType> = {};
  const walk = (t: Tree, prefix: string): void => {
    for (const [k, v] of Object.entries(t)) {
      if ('shape' in v && typeof (v as Array).size === 'number') specs[prefix + k] = (v as Array).dtype;
      else walk(v as Tree, `${prefix}${k}.`);
    }
  };
  walk(like as Tree, '');
  const cast: Record<string, Array> = Object.create(null);
  for (const [name, t] of Object.entries(tensors)) {
    const want = specs[name];
    cast[name] = want !== undefined && want !== t.dtype && FLOATS.includes(want) && FLOATS.includes(t.dtype) ? np.astype(t, want) : t;
  }
  try {
    return restackLayers(matchSafetensors(cast, like, file) as Params, m);
  } catch (e) {
    throw new Error(`${op}: ${(e as Error).message}`, { cause: e });
  }
}
