/**
 * The main job (`pnpm start`): train the example transformer on embedded defaults (see
 * train.ts). `--steps N`, `--ckpt-dir DIR` and `--backend reference|systolic` override them.
 */
import { DEFAULTS, train } from './train';

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const steps = flag('steps');
const result = await train({
  steps: steps === undefined ? DEFAULTS.steps : Number(steps),
  checkpointDir: flag('ckpt-dir'),
  backend: flag('backend') ?? DEFAULTS.backend,
});
if (result.resumeMaxDiff !== 0) {
  console.error(`train: the resumed run diverged from the uninterrupted one (max loss difference ${result.resumeMaxDiff})`);
  process.exit(1);
}
