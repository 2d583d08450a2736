import { describe, expect, it } from 'vitest';
import { formatStepLine, progressBar } from './metrics';

describe('metrics', () => {
  it("formats MaxText's line exactly, then the two MFUs", () => {
    const line = formatStepLine({ step: 12, seconds: 0.12345, tflopsPerSec: 0.0024461, tokensPerSec: 4147.42, totalWeights: 455, loss: 3.14159, mfuCpu: 0.0856, mfuTpu: null, tpuGeneration: 'v5p' });
    expect(line).toBe('completed step: 12, seconds: 0.123, TFLOP/s/device: 0.002, Tokens/s/device: 4147.420, total_weights: 455, loss: 3.142, MFU(cpu): 8.56%, MFU(v5p simulated): n/a');
  });

  it('draws a progress bar', () => {
    expect(progressBar(5, 10, 2.5, 10)).toBe('[#####.....] 5/10 loss 2.500');
  });
});
