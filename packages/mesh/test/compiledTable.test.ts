/**
 * COST_MODEL.md's table of compiled programs: a two-layer MLP training step (valueAndGrad and
 * an SGD update inside one sharded jit), partitioned by xla-lite for 2, 4 and 8 devices with
 * data, FSDP and Megatron tensor parallel shardings, timed by `simulateStep` on v5p slices from
 * the compiled programs' own per-chip compute and collectives. The test regenerates the table
 * and checks that COST_MODEL.md holds it (`UPDATE_COST_MODEL=1` rewrites it).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Array, np, valueAndGrad } from '@tpukit/core';
import { jit } from '@tpukit/xla-lite';
import { beforeAll, expect, it } from 'vitest';
import { simulateStep } from '../src/cost/simulate';
import { makeMesh, NamedSharding, P, setCpuDeviceCount } from '../src/index';
import { generations, slice } from '../src/topology';

beforeAll(() => setCpuDeviceCount(8));

const D = 1024;
const FFN = 4096;
const TOKENS_PER_CHIP = 512;
const loss = (w1: Array, w2: Array, x: Array) => np.mean(np.square(np.matmul(np.maximum(np.matmul(x, w1), 0), w2)));
const step = (w1: Array, w2: Array, x: Array) => {
  const [l, [g1, g2]] = valueAndGrad(loss, { argnums: [0, 1] })(w1, w2, x) as [Array, [Array, Array]];
  return [np.subtract(w1, np.multiply(g1, 0.01)), np.subtract(w2, np.multiply(g2, 0.01)), l];
};
type Strategy = 'data' | 'fsdp' | 'tensor';
const specs: Record<Strategy, { w1: ReturnType<typeof P>; w2: ReturnType<typeof P>; x: ReturnType<typeof P> }> = {
  data: { w1: P(), w2: P(), x: P('x', null) },
  fsdp: { w1: P('x', null), w2: P('x', null), x: P('x', null) },
  tensor: { w1: P(null, 'x'), w2: P('x', null), x: P() },
};

function table(): string {
  const strategies: Strategy[] = ['data', 'fsdp', 'tensor'];
  const lines = [
    `| chips | v5p slice | ${strategies.map((s) => `${s}: compute, communication, MFU; collectives`).join(' | ')} |`,
    `|---|---|${strategies.map(() => '---').join('|')}|`,
  ];
  for (const n of [2, 4, 8]) {
    const mesh = makeMesh([n], ['x']);
    const topology = slice(generations.v5p, n);
    const x = np.zeros([TOKENS_PER_CHIP * n, D]);
    const [w1, w2] = [np.zeros([D, FFN]), np.zeros([FFN, D])];
    const cells = strategies.map((s) => {
      const ns = (spec: ReturnType<typeof P>) => new NamedSharding(mesh, spec);
      const sp = specs[s];
      const compiled = jit(step, { inShardings: [ns(sp.w1), ns(sp.w2), ns(sp.x)] }).lower(w1, w2, x).compile();
      const e = simulateStep(compiled, { topology });
      const counts = new Map<string, number>();
      for (const c of e.collectives) counts.set(c.kind, (counts.get(c.kind) ?? 0) + 1);
      const colls = [...counts].map(([k, v]) => `${v} ${k}`).join(', ');
      return `${(e.computeSeconds * 1e6).toFixed(1)} us, ${(e.communicationSeconds * 1e6).toFixed(1)} us, ${(e.mfu * 100).toFixed(1)}%; ${colls || 'none'}`;
    });
    lines.push(`| ${n} | ${topology.dims.join('x')} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

it('COST_MODEL.md holds the table simulateStep computes from the compiled programs', () => {
  const path = fileURLToPath(new URL('../COST_MODEL.md', import.meta.url));
  const doc = readFileSync(path, 'utf8');
  const t = table();
  console.log(t);
  const start = doc.indexOf('| chips | v5p slice | data: compute');
  if (process.env.UPDATE_COST_MODEL === '1' && start >= 0) {
    const end = doc.indexOf('\n\n', start);
    writeFileSync(path, doc.slice(0, start) + t + doc.slice(end));
    return;
  }
  expect(doc).toContain(t);
}, 120_000);
