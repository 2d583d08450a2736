/**
 * MaxText's `calculate_tflops_training_per_device` (maxtext_utils.py, dense path): the model
 * FLOPs of one training step on one device, the numerator of TFLOP/s/device and of MFU. Matmul
 * FLOPs only; causal attention counts half of the full score and value matmuls; x3 for the
 * forward and backward passes; the embedding is counted once (the unembedding matmul; the lookup
 * is a gather); everything times gradient_accumulation_steps.
 */
import type { Config } from './config';

export interface StepTflops {
  /** TFLOPs per device per training step. */
  total: number;
  /** Of which in matmuls against learnable weights (MLP, QKV, output projection, unembedding). */
  learnableWeight: number;
  /** Of which in the attention score and value matmuls (causal: halved). */
  attention: number;
}

type FlopKeys = Pick<Config, 'per_device_batch_size' | 'max_target_length' | 'emb_dim' | 'num_query_heads' | 'num_kv_heads' | 'head_dim' | 'num_decoder_layers' | 'vocab_size' | 'mlp_dim' | 'mlp_activations' | 'gradient_accumulation_steps'>;

export function calculateTflopsTrainingPerDevice(c: FlopKeys): StepTflops {
  const B = c.per_device_batch_size;
  const S = c.max_target_length;
  const D = c.emb_dim;
  const F = c.mlp_dim;
  const h = c.head_dim;
  const L = c.num_decoder_layers;
  const ffn1 = 2 * B * S * F * D * c.mlp_activations.length;
  const ffn2 = 2 * B * S * F * D;
  const qkv = 2 * B * S * D * (c.num_query_heads + 2 * c.num_kv_heads) * h;
  const causalAttention = (4 * B * S * S * c.num_query_heads * h) / 2;
  const projection = 2 * B * S * D * c.num_query_heads * h;
  const embedding = 2 * B * S * D * c.vocab_size;
  const g = c.gradient_accumulation_steps;
  const learnableWeight = (((ffn1 + ffn2) * L + (qkv + projection) * L + embedding) * 3 * g) / 1e12;
  const attention = (causalAttention * L * 3 * g) / 1e12;
  return { total: learnableWeight + attention, learnableWeight, attention };
}

/** Tokens per device per step, as MaxText counts them. */
export function tokensPerDevicePerStep(c: Pick<Config, 'per_device_batch_size' | 'max_target_length' | 'gradient_accumulation_steps'>): number {
  return c.max_target_length * c.per_device_batch_size * c.gradient_accumulation_steps;
}
