import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultMatmulPrecision, np, random } from '@tpukit/core';
import onnxProto from 'onnx-proto';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { forward, initParams, type ModelConfig, modelConfig, type Params } from './model';
import { exportOnnx, exportOnnxBytes } from './onnx';

type Ort = typeof import('onnxruntime-node');
let ort: Ort | null = null;
let why = '';
try {
  ort = createRequire(import.meta.url)('onnxruntime-node') as Ort;
} catch (e) {
  why = (e as Error).message;
  console.warn(`onnx.test: onnxruntime-node cannot load here, the runtime comparisons are skipped: ${why}`);
}

const dir = mkdtempSync(join(tmpdir(), 'maxtext-onnx-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const small = ['base_emb_dim=16', 'head_dim=4', 'base_mlp_dim=32', 'base_num_decoder_layers=2', 'max_target_length=16', 'base_num_query_heads=4', 'base_num_kv_heads=2'];

async function compare(m: ModelConfig, params: Params, B: number, L: number): Promise<number> {
  const file = join(dir, `m-${m.decoderBlock}-${B}x${L}.onnx`);
  exportOnnx(file, m, params, { batch: B, length: L });
  const ids = Int32Array.from({ length: B * L }, (_, i) => (i * 37 + 11) % m.vocabSize);
  const session = await ort!.InferenceSession.create(file);
  const out = await session.run({ tokens: new ort!.Tensor('int64', BigInt64Array.from(ids, (v) => BigInt(v)), [B, L]) });
  expect(out.logits.dims).toEqual([B, L, m.vocabSize]);
  const tokens = np.reshape(np.array(ids), [B, L]);
  const positions = np.broadcastTo(np.arange(L, undefined, undefined, 'int32'), [B, L]);
  // Attention's matmuls follow the default precision (one bf16 pass); the float32 comparison needs it exact.
  const precision = m.dtype === 'float32' ? 'highest' : null;
  const want = defaultMatmulPrecision(precision, () => forward(params, tokens, np.onesLike(tokens), positions, m).dataSync() as Float32Array);
  const got = out.logits.data as Float32Array;
  let worst = 0;
  want.forEach((w, i) => (worst = Math.max(worst, Math.abs(w - got[i]))));
  return worst;
}

describe.skipIf(ort === null)('exportOnnx runs in onnxruntime-node with tpukit logits', () => {
  for (const [name, extra] of [
    ['llama2 (RMSNorm, RoPE, GQA, SwiGLU, tied), scanned', []],
    ['gpt3 (LayerNorm, learned positions, gelu, output kernel), unrolled', ['decoder_block=gpt3', 'mlp_activations=[gelu]', 'logits_via_embedding=false', 'scan_layers=false', 'base_num_kv_heads=4']],
  ] as const) {
    it(`float32 activations, highest matmul precision: |logits - tpukit| <= 1e-3 (${name})`, async () => {
      const m = modelConfig(loadConfig('tiny', [...small, ...extra, 'dtype=float32', 'matmul_precision=highest']));
      const params = initParams(m, random.key(5));
      expect(await compare(m, params, 2, 12)).toBeLessThanOrEqual(1e-3);
      expect(await compare(m, params, 1, 16)).toBeLessThanOrEqual(1e-3);
    });
  }

  it('bf16 activations (the default dtype): within 0.1 of the float32 ONNX graph (bf16 rounding; 0.033 measured)', async () => {
    const m = modelConfig(loadConfig('tiny', small));
    expect(m.dtype).toBe('bfloat16');
    expect(await compare(m, initParams(m, random.key(6)), 2, 8)).toBeLessThanOrEqual(0.1);
  });

  it('a broken graph is caught: other parameters do not match', async () => {
    const m = modelConfig(loadConfig('tiny', [...small, 'dtype=float32', 'matmul_precision=highest']));
    const a = initParams(m, random.key(1));
    const file = join(dir, 'other.onnx');
    exportOnnx(file, m, initParams(m, random.key(2)), { batch: 1, length: 4 });
    const session = await ort!.InferenceSession.create(file);
    const out = await session.run({ tokens: new ort!.Tensor('int64', BigInt64Array.from([1n, 2n, 3n, 4n]), [1, 4]) });
    const want = forward(a, np.array([[1, 2, 3, 4]], 'int32'), np.ones([1, 4], 'int32'), np.array([[0, 1, 2, 3]], 'int32'), m).dataSync() as Float32Array;
    expect(Math.max(...want.map((w, i) => Math.abs(w - (out.logits.data as Float32Array)[i])))).toBeGreaterThan(1e-2);
  });
});

describe('exportOnnx without a runtime', () => {
  const m = modelConfig(loadConfig('tiny', small));
  const params = initParams(m, random.key(0));

  it('writes a ModelProto that decodes with the ONNX definitions: opset 15, tokens in, logits out, named weights', () => {
    const file = join(dir, 'decode.onnx');
    exportOnnx(file, m, params, { batch: 3, length: 5 });
    const model = onnxProto.onnx.ModelProto.decode(readFileSync(file));
    expect(Number(model.opsetImport[0].version)).toBe(15);
    const g = model.graph as onnxProto.onnx.GraphProto;
    expect(g.input.map((i) => i.name)).toEqual(['tokens']);
    expect(g.output.map((o) => o.name)).toEqual(['logits']);
    expect(g.output[0].type!.tensorType!.shape!.dim!.map((d) => Number(d.dimValue))).toEqual([3, 5, 256]);
    const names = g.initializer.map((t) => t.name);
    expect(names).toContain('decoder.layers_1.self_attention.query.kernel');
    expect(names.filter((n) => n === 'token_embedder.embedding')).toHaveLength(1);
  });

  it('bad arguments name the operation, the argument and the value', () => {
    expect(() => exportOnnxBytes(m, params, { batch: 0, length: 4 })).toThrow('exportOnnx: batch must be an integer >= 1; got 0');
    expect(() => exportOnnxBytes(m, params, { batch: 1, length: 17 })).toThrow('exportOnnx: length must be an integer in [1, max_target_length = 16]; got 17');
    const other = modelConfig(loadConfig('tiny', [...small, 'logits_via_embedding=false']));
    expect(() => exportOnnxBytes(other, params, { batch: 1, length: 4 })).toThrow('exportOnnx: params have no decoder.logits_dense.kernel');
  });
});
