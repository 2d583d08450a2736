/**
 * ONNX export of the model's inference graph: token ids [batch, length] (int64) -> logits
 * [batch, length, vocab] (float32), for serving with any ONNX runtime. The protobuf messages come
 * from `onnx-proto` (ONNX's onnx.proto compiled with protobufjs).
 *
 * - Opset 15, IR version 8, float32 throughout: weights are stored as float32 initializers
 *   (bf16 weights are widened), activations run in float32 whatever `dtype` says.
 * - Fixed shapes: batch and length are chosen at export; positions are 0..length-1 (one sequence
 *   per row, no packing), so RoPE tables, learned position embeddings and the causal mask are
 *   constants.
 * - The graph follows `forward` op for op: RMSNorm / LayerNorm, grouped-query attention (kv
 *   heads expanded to the query heads), RoPE on halves, SwiGLU or a single-activation MLP, tied
 *   logits scaled by 1/sqrt(emb_dim) or an output kernel.
 */
import { writeFileSync } from 'node:fs';
import { type Array, np } from '@tpukit/core';
import onnxProto from 'onnx-proto';
import type { ModelConfig, Params } from './model';
import { unstackLayers } from './safetensors';

const { onnx } = onnxProto;
type Tree = { [k: string]: Array | Tree };
const OPSET = 15;

/** Accumulates nodes and initializers; every helper returns its output's name. */
class GraphBuilder {
  readonly nodes: onnxProto.onnx.INodeProto[] = [];
  readonly inits: onnxProto.onnx.ITensorProto[] = [];
  private n = 0;

  op(type: string, inputs: string[], attrs: Record<string, number | number[]> = {}): string {
    const out = `${type.toLowerCase()}_${this.n++}`;
    const attribute = Object.entries(attrs).map(([name, v]) =>
      globalThis.Array.isArray(v)
        ? { name, type: onnx.AttributeProto.AttributeType.INTS, ints: v }
        : Number.isInteger(v)
          ? { name, type: onnx.AttributeProto.AttributeType.INT, i: v }
          : { name, type: onnx.AttributeProto.AttributeType.FLOAT, f: v },
    );
    this.nodes.push({ opType: type, input: inputs, output: [out], name: out, attribute });
    return out;
  }

  /** A float32 initializer. */
  f32(name: string, dims: readonly number[], data: Float32Array): string {
    this.inits.push({ name, dims: [...dims], dataType: onnx.TensorProto.DataType.FLOAT, rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) });
    return name;
  }

  /** An int64 initializer (shapes, axes, slice bounds). */
  i64(values: readonly number[]): string {
    const name = `const_${this.n++}`;
    const data = BigInt64Array.from(values, (v) => BigInt(v));
    this.inits.push({ name, dims: [values.length], dataType: onnx.TensorProto.DataType.INT64, rawData: new Uint8Array(data.buffer) });
    return name;
  }

  scalar(v: number): string {
    return this.f32(`const_${this.n++}`, [], Float32Array.of(v));
  }

  /** A parameter of the model as a float32 initializer named by its path. */
  param(name: string, a: Array): string {
    return this.f32(name, a.shape, np.astype(a, 'float32').dataSync() as Float32Array);
  }
}

export interface OnnxExportOptions {
  batch: number;
  length: number;
}

/** The ONNX ModelProto bytes of the model's inference graph (see the module comment). */
export function exportOnnxBytes(m: ModelConfig, params: Params, opts: OnnxExportOptions): Uint8Array {
  const op = 'exportOnnx';
  const { batch: B, length: L } = opts;
  if (!(Number.isInteger(B) && B >= 1)) throw new Error(`${op}: batch must be an integer >= 1; got ${B}`);
  if (!(Number.isInteger(L) && L >= 1 && L <= m.maxTargetLength)) throw new Error(`${op}: length must be an integer in [1, max_target_length = ${m.maxTargetLength}]; got ${L}`);
  const g = new GraphBuilder();
  const flat = unstackLayers(params, m) as Tree;
  const leaf = (t: Tree, path: string): string => {
    const parts = path.split('.');
    const a = parts.reduce((x: Tree | Array, p) => {
      const next = (x as Tree)[p];
      if (next === undefined) throw new Error(`${op}: params have no ${path} (do they belong to this model config?)`);
      return next;
    }, t) as Array;
    return g.param(path, a);
  };
  const D = m.embDim;
  const [N, K, H] = [m.numQueryHeads, m.numKvHeads, m.headDim];

  const norm = (x: string, p: string): string => {
    if (m.decoderBlock === 'llama2') {
      const ms = g.op('ReduceMean', [g.op('Mul', [x, x])], { axes: [-1], keepdims: 1 });
      const inv = g.op('Reciprocal', [g.op('Sqrt', [g.op('Add', [ms, g.scalar(m.epsilon)])])]);
      return g.op('Mul', [g.op('Mul', [x, inv]), leaf(flat, `${p}.scale`)]);
    }
    const c = g.op('Sub', [x, g.op('ReduceMean', [x], { axes: [-1], keepdims: 1 })]);
    const v = g.op('ReduceMean', [g.op('Mul', [c, c])], { axes: [-1], keepdims: 1 });
    const y = g.op('Div', [c, g.op('Sqrt', [g.op('Add', [v, g.scalar(m.epsilon)])])]);
    return g.op('Add', [g.op('Mul', [y, leaf(flat, `${p}.scale`)]), leaf(flat, `${p}.bias`)]);
  };

  // RoPE tables [L, 1, H/2], computed as applyRope does (float32 sinusoid).
  const half = H / 2;
  const sin = new Float32Array(L * half);
  const cos = new Float32Array(L * half);
  for (let t = 0; t < L; t++) {
    for (let i = 0; i < half; i++) {
      const s = Math.fround(t / Math.fround(m.ropeMaxTimescale ** Math.fround((2 * i) / H)));
      sin[t * half + i] = Math.sin(s);
      cos[t * half + i] = Math.cos(s);
    }
  }
  const rope = m.decoderBlock === 'llama2' ? { sin: g.f32('rope_sin', [L, 1, half], sin), cos: g.f32('rope_cos', [L, 1, half], cos) } : null;
  const rotate = (x: string): string => {
    if (rope === null) return x;
    const first = g.op('Slice', [x, g.i64([0]), g.i64([half]), g.i64([3])]);
    const second = g.op('Slice', [x, g.i64([half]), g.i64([H]), g.i64([3])]);
    const a = g.op('Sub', [g.op('Mul', [first, rope.cos]), g.op('Mul', [second, rope.sin])]);
    const b = g.op('Add', [g.op('Mul', [second, rope.cos]), g.op('Mul', [first, rope.sin])]);
    return g.op('Concat', [a, b], { axis: 3 });
  };
  const causal = new Float32Array(L * L);
  for (let i = 0; i < L; i++) for (let j = i + 1; j < L; j++) causal[i * L + j] = -0.7 * 3.4028234663852886e38;
  const maskName = g.f32('causal_mask', [L, L], causal);
  const kvHeadsFor = (x: string): string => {
    // [B, L, K, H] -> [B, N, L, H]: query head n reads kv head floor(n / (N / K)).
    const t = g.op('Transpose', [x], { perm: [0, 2, 1, 3] });
    if (K === N) return t;
    const e = g.op('Expand', [g.op('Unsqueeze', [t, g.i64([2])]), g.i64([B, K, N / K, L, H])]);
    return g.op('Reshape', [e, g.i64([B, N, L, H])]);
  };
  const act = (name: string, x: string): string => {
    if (name === 'silu') return g.op('Mul', [x, g.op('Sigmoid', [x])]);
    if (name === 'relu') return g.op('Relu', [x]);
    if (name === 'gelu') {
      const inner = g.op('Mul', [g.op('Add', [x, g.op('Mul', [g.op('Mul', [g.op('Mul', [x, x]), x]), g.scalar(0.044715)])]), g.scalar(Math.sqrt(2 / Math.PI))]);
      return g.op('Mul', [g.op('Mul', [x, g.scalar(0.5)]), g.op('Add', [g.op('Tanh', [inner]), g.scalar(1)])]);
    }
    return x;
  };

  const embedding = leaf(flat, 'token_embedder.embedding');
  let x = g.op('Gather', [embedding, 'tokens'], { axis: 0 });
  if (m.decoderBlock === 'gpt3') {
    const pos = ((flat.position_embedder as Tree).embedding as Array).get(`:${L}`);
    x = g.op('Add', [x, g.param('position_embedder.embedding[:length]', pos)]);
  }
  for (let l = 0; l < m.numLayers; l++) {
    const p = `decoder.layers_${l}`;
    const h = norm(x, `${p}.pre_self_attention_layer_norm`);
    const proj = (w: string, heads: number): string => g.op('Reshape', [g.op('MatMul', [h, leaf(flat, `${p}.self_attention.${w}.kernel`)]), g.i64([B, L, heads, H])]);
    const q = g.op('Transpose', [rotate(proj('query', N))], { perm: [0, 2, 1, 3] }); // [B, N, L, H]
    const k = kvHeadsFor(rotate(proj('key', K)));
    const v = kvHeadsFor(proj('value', K));
    const scores = g.op('Add', [g.op('Mul', [g.op('MatMul', [q, g.op('Transpose', [k], { perm: [0, 1, 3, 2] })]), g.scalar(1 / Math.sqrt(H))]), maskName]);
    const att = g.op('MatMul', [g.op('Softmax', [scores], { axis: -1 }), v]); // [B, N, L, H]
    const merged = g.op('Reshape', [g.op('Transpose', [att], { perm: [0, 2, 1, 3] }), g.i64([B, L, N * H])]);
    const y = g.op('Add', [x, g.op('MatMul', [merged, leaf(flat, `${p}.self_attention.out.kernel`)])]);
    const h2 = norm(y, `${p}.post_self_attention_layer_norm`);
    const dense = (w: string, input: string): string => g.op('MatMul', [input, leaf(flat, `${p}.mlp.${w}.kernel`)]);
    const hidden =
      m.mlpActivations.length === 2
        ? g.op('Mul', [act(m.mlpActivations[0], dense('wi_0', h2)), act(m.mlpActivations[1], dense('wi_1', h2))])
        : act(m.mlpActivations[0], dense('wi', h2));
    x = g.op('Add', [y, dense('wo', hidden)]);
  }
  const out = norm(x, 'decoder.decoder_norm');
  const logits = m.tiedEmbedding
    ? g.op('Mul', [g.op('MatMul', [out, g.op('Transpose', [embedding], { perm: [1, 0] })]), g.scalar(1 / Math.sqrt(D))])
    : g.op('MatMul', [out, leaf(flat, 'decoder.logits_dense.kernel')]);
  g.nodes.push({ opType: 'Identity', input: [logits], output: ['logits'], name: 'logits' });

  const dims = (ds: number[]) => ({ dim: ds.map((d) => ({ dimValue: d })) });
  const model = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'tpukit maxtext-ts',
    opsetImport: [{ domain: '', version: OPSET }],
    graph: {
      name: `maxtext_${m.decoderBlock}`,
      node: g.nodes,
      initializer: g.inits,
      input: [{ name: 'tokens', type: { tensorType: { elemType: onnx.TensorProto.DataType.INT64, shape: dims([B, L]) } } }],
      output: [{ name: 'logits', type: { tensorType: { elemType: onnx.TensorProto.DataType.FLOAT, shape: dims([B, L, m.vocabSize]) } } }],
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

/** Writes the model's ONNX inference graph (tokens [batch, length] int64 -> logits) to `file`. */
export function exportOnnx(file: string, m: ModelConfig, params: Params, opts: OnnxExportOptions): void {
  writeFileSync(file, exportOnnxBytes(m, params, opts));
}
