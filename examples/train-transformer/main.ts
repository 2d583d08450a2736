/**
 * `pnpm start`: the main job (see mainJob.ts). Arguments are MaxText-style `key=value` overrides
 * of the `tiny` config, e.g. `pnpm start steps=50 backend=reference`.
 */
import { mainJob } from './mainJob';

const r = await mainJob(process.argv.slice(2));
if (r.resumeMaxDiff !== 0 || r.recompiles !== 0) {
  console.error(`main job: the resumed run diverged from the uninterrupted one (max loss difference ${r.resumeMaxDiff}) or a step recompiled (${r.recompiles})`);
  process.exit(1);
}
