/**
 * The GPT step's q/k/v bias gradients alone (xla-lite's horizontal merges, passes/siblingFusion.ts):
 * grad of a causal attention over q = x + bq, k = x/2 + bk, v = tanh(x) + bv at the GPT's size
 * ([16, 128, 4, 32]) w.r.t. the three biases, compiled with the merges on (one kernel summing dq,
 * dk and dv in one pass) and off (three kernels), called alternately on one thread. Prints per
 * round the column-sum kernels' time per call (profile records, wall and CPU) and the whole call.
 * Only the bias sums are kInput fusions in this program (the other fusions are the three kLoop
 * ones making q, k and v, beside the attention's forward and backward instructions; the loss's
 * sum is dead under `grad`), so the 'fusion kInput' profile records are exactly those sums: one
 * 3-output kernel (on) or three (off).
 * Env: SUMS_ROUNDS (default 7), SUMS_CALLS (calls per arm per round, default 20).
 */
import { grad, nn, np, random, setBackend } from '@tpukit/core';
import { jit, profile, setKernelThreads } from '@tpukit/xla-lite';

setBackend('systolic');
setKernelThreads(1);
const [B, T, H, D] = [16, 128, 4, 32];
const x = random.normal(random.key(1), [B, T, H, D]);
const w = random.normal(random.key(2), [B, T, H, D]);
const bias = (s: number) => random.normal(random.key(s), [H, D]);
const loss = (bq: any, bk: any, bv: any, xx: any, ww: any): any =>
  np.sum(np.multiply(nn.dotProductAttention(np.add(xx, bq), np.add(np.multiply(xx, 0.5), bk), np.add(np.tanh(xx), bv), { isCausal: true }), ww));
const step = grad(loss, { argnums: [0, 1, 2] });
const args = [bias(3), bias(4), bias(5), x, w];
const arms = { on: jit(step).lower(...args).compile(), off: jit(step).lower(...args).compile({ horizontalSums: false }) };
const rounds = Number(process.env.SUMS_ROUNDS ?? 7);
const calls = Number(process.env.SUMS_CALLS ?? 20);
for (const c of Object.values(arms)) for (let i = 0; i < 5; i++) c.call(args);
const res: Record<string, { sumMs: number[]; sumCpu: number[]; callMs: number[] }> = { on: { sumMs: [], sumCpu: [], callMs: [] }, off: { sumMs: [], sumCpu: [], callMs: [] } };
profile.enable(true);
for (let r = 0; r < rounds; r++) {
  for (const [name, c] of Object.entries(arms)) {
    profile.reset();
    for (let i = 0; i < calls; i++) c.call(args);
    const rs = profile.records('wall');
    const sums = rs.filter((q) => q.category === 'fusion kInput');
    const whole = rs.find((q) => q.instruction === '(call)')!;
    res[name].sumMs.push((1000 * sums.reduce((a, q) => a + q.ms, 0)) / calls);
    res[name].sumCpu.push((1000 * sums.reduce((a, q) => a + q.cpuMs, 0)) / calls);
    res[name].callMs.push(whole.ms / whole.calls);
  }
}
const med = (a: number[]) => [...a].sort((p, q) => p - q)[a.length >> 1];
const min = (a: number[]) => Math.min(...a);
for (const [name, r] of Object.entries(res))
  console.log(`${name.padEnd(4)} column sums per call: wall min/median ${min(r.sumMs).toFixed(0)}/${med(r.sumMs).toFixed(0)} us, CPU ${min(r.sumCpu).toFixed(0)}/${med(r.sumCpu).toFixed(0)} us; whole call ${min(r.callMs).toFixed(2)}/${med(r.callMs).toFixed(2)} ms; rounds: ${r.sumCpu.map((v) => v.toFixed(0)).join(' ')}`);
