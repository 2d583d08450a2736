import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';
import { calculateTflopsTrainingPerDevice, tokensPerDevicePerStep } from './flops';

describe('calculateTflopsTrainingPerDevice', () => {
  it('matches a hand computation for the tiny config', () => {
    // B=8 S=64 D=64 F=128 Hq=4 Hkv=2 h=16 L=2 V=256, SwiGLU (2 activations), no accumulation.
    // ffn1 = 2*8*64*128*64*2 = 16_777_216; ffn2 = 8_388_608; qkv = 2*8*64*64*(4+4)*16 = 8_388_608
    // projection = 2*8*64*64*4*16 = 4_194_304; embedding = 2*8*64*64*256 = 16_777_216
    // causal attention = 4*8*64*64*4*16/2 = 4_194_304
    // learnable = ((16_777_216 + 8_388_608)*2 + (8_388_608 + 4_194_304)*2 + 16_777_216)*3 = 276_824_064
    // attention = 4_194_304*2*3 = 25_165_824
    const t = calculateTflopsTrainingPerDevice(loadConfig('tiny'));
    expect(t.learnableWeight * 1e12).toBeCloseTo(276_824_064, 3);
    expect(t.attention * 1e12).toBeCloseTo(25_165_824, 3);
    expect(t.total * 1e12).toBeCloseTo(301_989_888, 3);
  });

  it('llama2-7b: about 6 * params * tokens plus causal attention', () => {
    const c = loadConfig('llama2-7b');
    const t = calculateTflopsTrainingPerDevice(c);
    // Per layer weights: qkv+o 4*4096^2, MLP 3*4096*11008; unembedding 4096*32000.
    const matmulParams = 32 * (4 * 4096 ** 2 + 3 * 4096 * 11008) + 4096 * 32000;
    const tokens = tokensPerDevicePerStep(c);
    expect(tokens).toBe(12 * 2048);
    expect(t.learnableWeight).toBeCloseTo((6 * matmulParams * tokens) / 1e12, 6);
    expect(t.attention).toBeCloseTo((3 * 32 * 2 * 12 * 2048 ** 2 * 32 * 128) / 1e12, 6);
  });

  it('scales with gradient_accumulation_steps and counts one activation for GELU', () => {
    const a = calculateTflopsTrainingPerDevice(loadConfig('small'));
    const b = calculateTflopsTrainingPerDevice(loadConfig('small', ['gradient_accumulation_steps=3']));
    expect(b.total).toBeCloseTo(3 * a.total, 12);
    const swiglu = calculateTflopsTrainingPerDevice(loadConfig('small', ['mlp_activations=[silu, linear]']));
    // one more B*S*F*D matmul per layer: 2*8*128*512*128*4 layers*3
    expect((swiglu.total - a.total) * 1e12).toBeCloseTo(2 * 8 * 128 * 512 * 128 * 4 * 3, 0);
  });
});
