import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cpuWall, median } from './timing';
type ModMod = typeof import('../packages/core/src/backends/systolic/attentionModule');
const srcs = [process.env.A!, process.env.B!];
const mods = await Promise.all(srcs.map(async (s) => (await import(pathToFileURL(resolve(s, 'backends/systolic/attentionModule.ts')).href)) as ModMod));
const { WA } = await import(pathToFileURL(resolve(srcs[1], 'wasm/webassemblyTypes.ts')).href);
const { wasmFeatures } = await import(pathToFileURL(resolve(srcs[1], 'wasm/features.ts')).href);
const rel = wasmFeatures().relaxedSimd;
const sp = 128, QB = 128;
const SRC = 65536, S = SRC + QB * sp * 4, DP = S + QB * sp * 4, DP0 = DP + QB * sp * 4, END = DP0 + QB * sp * 4;
const setups = mods.map((m) => {
  const memory = new WA.Memory({ initial: Math.ceil(END / 65536) + 1 });
  const kx = new WA.Instance(m.attentionModule(32, sp, rel, false, false).module, { env: { mem: memory } }).exports as any;
  const f = new Float32Array(memory.buffer);
  for (let t = 0; t < QB; t++) for (let j = 0; j < sp; j++) { f[(SRC >> 2) + t * sp + j] = j <= t ? 1 / (t + 1) : 0; f[(DP0 >> 2) + t * sp + j] = Math.random() * 2 - 1; }
  const u8 = new Uint8Array(memory.buffer);
  return { kx, u8 };
});
const sc = 1 / Math.sqrt(32);
const run = ({ kx, u8 }: any, restore: boolean) => {
  for (let it = 0; it < 64; it++) {
    if (restore) u8.copyWithin(DP, DP0, DP0 + QB * sp * 4);
    for (let t0 = 0; t0 < 128; t0 += 4) {
      const cols = Math.ceil((t0 + 4) / 8) * 8;
      kx.gradRowsP(SRC + t0 * sp * 4, S + t0 * sp * 4, DP + t0 * sp * 4, cols, 0, sc, sc, sc, sc);
    }
  }
};
const res: number[][] = [[], [], [], []];
for (let i = 0; i < 10; i++) for (const s of setups) run(s, true);
for (let r = 0; r < 40; r++) for (const v of r % 2 ? [1, 0] : [0, 1]) { res[v].push(cpuWall(() => run(setups[v], true)).cpu * 1000); res[2 + v].push(cpuWall(() => { for (let it = 0; it < 64; it++) setups[v].u8.copyWithin(DP, DP0, DP0 + QB * sp * 4); }).cpu * 1000); }
console.log('gradRowsP per call (64 items, + restore copies) us min/median: A', Math.min(...res[0]), median(res[0]), 'B', Math.min(...res[1]), median(res[1]), 'copies alone A', median(res[2]), 'B', median(res[3]));
