// The fused attention (nn.dotProductAttention's default on the systolic backend) under a mesh:
// GSPMD jit of a grad step with a sharded batch, and shardMap bodies on the device threads (its
// primitives carry plain parameters, so the staged program can be sent there), forward and grad.
import { type Array, jit, nn, np, random, valueAndGrad } from '@tpukit/core';
import { describe, expect, it } from 'vitest';
import { type Mesh, NamedSharding, P, devicePut, makeMesh, shardMap } from '../src/index';
import { useCpuDevices } from './helpers';

let mesh: Mesh;
useCpuDevices(4, () => {
  mesh = makeMesh([2, 2], ['x', 'y']);
});

describe('fused attention on a mesh', () => {
  const q = random.normal(random.key(1), [4, 8, 2, 4]);
  const loss = (a: Array): Array => np.sum(np.square(nn.dotProductAttention(a, a, a, { isCausal: true })));
  const vals = (a: Array): number[] => [...a.dataSync()];

  it('a GSPMD-jitted grad step over a batch-sharded input equals the unsharded one', () => {
    const [l, g] = valueAndGrad(loss)(q) as [Array, Array];
    const [ls, gs] = jit(valueAndGrad(loss))(devicePut(q, new NamedSharding(mesh, P('x')))) as [Array, Array];
    expect(Math.abs((ls.item() as number) - (l.item() as number))).toBeLessThan(1e-3 * Math.abs(l.item() as number));
    vals(gs).forEach((x, i) => expect(Math.abs(x - vals(g)[i])).toBeLessThan(1e-3 * (1 + Math.abs(vals(g)[i]))));
  });

  it('shardMap bodies run on the device threads, forward and grad, equal to the vectorised shardMap', async () => {
    const fwd = shardMap((b: Array) => nn.dotProductAttention(b, b, b, { isCausal: true }), { mesh, inSpecs: P('x'), outSpecs: P('x') });
    expect(vals(await fwd.onDevices(q))).toEqual(vals(fwd(q)));
    const bwd = shardMap((b: Array) => (valueAndGrad(loss)(b) as Array[])[1], { mesh, inSpecs: P('x'), outSpecs: P('x') });
    expect(vals(await bwd.onDevices(q))).toEqual(vals(bwd(q)));
  });
});
