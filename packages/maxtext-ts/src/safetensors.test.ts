import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Array, np, random, tree } from '@tpukit/core';
import { loadSafetensors, saveSafetensors } from '@tpukit/orbax-ts';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { restoreParams } from './checkpoints';
import { loadConfig } from './config';
import { initParams, modelConfig, type Params } from './model';
import { loadParams, saveParams } from './safetensors';

const dir = mkdtempSync(join(tmpdir(), 'maxtext-st-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const small = ['base_emb_dim=8', 'head_dim=4', 'base_mlp_dim=16', 'base_num_decoder_layers=2', 'max_target_length=8', 'base_num_query_heads=2', 'base_num_kv_heads=1'];
const leaves = (p: Params): Array[] => tree.leaves(p) as Array[];
const values = (p: Params): number[][] => leaves(p).map((a) => [...(np.astype(a, 'float32').dataSync() as Float32Array)]);

describe('saveParams / loadParams (safetensors)', () => {
  it('save then load is the identity, scanned or not, llama2 or gpt3, and files are independent of scan_layers', () => {
    fc.assert(
      fc.property(fc.boolean(), fc.constantFrom('llama2', 'gpt3'), fc.boolean(), fc.integer({ min: 0, max: 1000 }), (scan, blockKind, tied, seed) => {
        const extra = [`scan_layers=${scan}`, `decoder_block=${blockKind}`, `logits_via_embedding=${tied}`];
        const m = modelConfig(loadConfig('tiny', [...small, ...extra]));
        const p = initParams(m, random.key(seed));
        const f = join(dir, `p-${seed}.safetensors`);
        saveParams(f, p, m);
        const back = loadParams(f, m, initParams(m, random.key(seed + 1)));
        expect(tree.structure(back).toString()).toBe(tree.structure(p).toString());
        expect(values(back)).toEqual(values(p));
        // The same file loads into the other layer layout.
        const other = modelConfig(loadConfig('tiny', [...small, ...extra.slice(1), `scan_layers=${!scan}`]));
        const o = loadParams(f, other, initParams(other, random.key(0)));
        expect(values(o).flat().sort()).toEqual(values(p).flat().sort());
      }),
      { numRuns: 6 },
    );
  });

  it('names are the unstacked parameter paths; BF16 halves the bytes and loads back as the weight dtype', () => {
    const m = modelConfig(loadConfig('tiny', small));
    const p = initParams(m, random.key(2));
    const f32 = join(dir, 'f32.safetensors');
    const b16 = join(dir, 'bf16.safetensors');
    saveParams(f32, p, m);
    saveParams(b16, p, m, { dtype: 'bfloat16' });
    const raw = loadSafetensors(b16);
    expect(Object.keys(raw)).toContain('decoder.layers_1.self_attention.query.kernel');
    expect(Object.keys(raw)).not.toContain('decoder.layers.self_attention.query.kernel');
    expect(raw['token_embedder.embedding'].dtype).toBe('bfloat16');
    expect(raw['decoder.layers_0.mlp.wo.kernel'].shape).toEqual([16, 8]);
    const dataBytes = (file: string): number => {
      const b = readFileSync(file);
      return b.length - 8 - Number(b.readBigUInt64LE(0));
    };
    expect(dataBytes(b16) * 2).toBe(dataBytes(f32));
    const back = loadParams(b16, m, p);
    expect(leaves(back).every((a) => a.dtype === 'float32')).toBe(true);
    // bf16 keeps 8 significant bits: relative error <= 2^-8.
    const [a, b] = [values(p).flat(), values(back).flat()];
    a.forEach((x, i) => expect(Math.abs(b[i] - x)).toBeLessThanOrEqual(Math.abs(x) * 2 ** -8 + 1e-30));
  });

  it('missing, extra and mis-shaped tensors are one clear error', () => {
    const m = modelConfig(loadConfig('tiny', small));
    const p = initParams(m, random.key(3));
    const f = join(dir, 'ok.safetensors');
    saveParams(f, p, m);
    const raw = loadSafetensors(f);
    const bad = join(dir, 'bad.safetensors');
    const broken: Record<string, Array> = { ...raw, 'decoder.layers_0.mlp.wo.kernel': np.zeros([15, 8]), 'decoder.extra.kernel': np.zeros([2]) };
    delete broken['decoder.decoder_norm.scale'];
    saveSafetensors(bad, broken);
    const err = (() => {
      try {
        loadParams(bad, m, p);
      } catch (e) {
        return (e as Error).message;
      }
      return '';
    })();
    expect(err).toContain('loadParams: loadSafetensors:');
    expect(err).toContain('missing from the file: "decoder.decoder_norm.scale"');
    expect(err).toContain('in the file but not in the template: "decoder.extra.kernel"');
    expect(err).toContain('"decoder.layers_0.mlp.wo.kernel": shape [15, 8] in the file, [16, 8] in the template');
    // Another model size does not fit either.
    const bigger = modelConfig(loadConfig('tiny', [...small, 'base_num_decoder_layers=3']));
    expect(() => loadParams(f, bigger, initParams(bigger, random.key(0)))).toThrow('missing from the file: "decoder.layers_2.');
    expect(() => saveParams(f, p, m, { dtype: 'int8' as never })).toThrow('saveParams: dtype must be one of float32, bfloat16, float16; got int8');
  });

  it('load_parameters_path may be a .safetensors file', async () => {
    const c = loadConfig('tiny', small);
    const m = modelConfig(c);
    const p = initParams(m, random.key(4));
    const f = join(dir, 'lpp.safetensors');
    saveParams(f, p, m);
    const back = await restoreParams(loadConfig('tiny', [...small, `load_parameters_path=${f}`]), f, initParams(m, random.key(5)));
    expect(values(back)).toEqual(values(p));
  });
});
