import { np, withBackend } from '@tpukit/core';
import { evalPrimitive } from '@tpukit/core/internal';
import { oneHotGatherP, oneHotSegmentSumP } from '@tpukit/xla-lite/internal';
withBackend('systolic', () => {
  const T = 2048, N = 128, V = 256;
  const vals = np.array(Float32Array.from({ length: T * N }, (_, i) => Math.sin(i))).reshape([T, N]);
  const table = np.array(Float32Array.from({ length: V * N }, (_, i) => Math.sin(i))).reshape([V, N]);
  const idx = np.array(Float32Array.from({ length: T }, (_, i) => (i * 37) % V));
  const p = { classes: V, precision: null, dtype: 'float32', nominalFlops: 0 };
  for (const [name, prim, args] of [['segsum', oneHotSegmentSumP, [vals, idx]], ['gather', oneHotGatherP, [table, idx]]] as const) {
    for (let w = 0; w < 20; w++) evalPrimitive(prim, args as any, p);
    const c0 = process.cpuUsage(); const t0 = performance.now(); const n = 200;
    for (let w = 0; w < n; w++) evalPrimitive(prim, args as any, p);
    const c = process.cpuUsage(c0); console.log(name, ((performance.now() - t0) / n).toFixed(3), 'ms wall', ((c.user + c.system) / 1000 / n).toFixed(3), 'ms cpu');
  }
});
