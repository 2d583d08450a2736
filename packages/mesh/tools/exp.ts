import { cases, caseModules } from '../../work/main/packages/mesh/tools/stablehloCases';
import { setDefaultMatmulPrecision } from '@tpukit/core';
setDefaultMatmulPrecision('default');
const c = cases({ sharded: false }).find((x) => x.name === 'attention_grad')!;
for (const m of caseModules(c)) {
  const t = m.text();
  console.log(m.kind, t.length, (t.match(/attention[a-z_]*/g) ?? []).slice(0, 10), t.split('\n').filter(l => /func.func|return/.test(l)).slice(0, 12).join('\n'));
}
