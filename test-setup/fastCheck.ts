/**
 * vitest setup file (every test file, in its worker): installs the run's fast-check seed
 * (chosen by test-setup/globalSetup.ts) as fast-check's global default, and when a test fails,
 * prints the command that replays it with the same seed.
 */
import fc from 'fast-check';
import { beforeEach, inject } from 'vitest';

const seed = inject('fcSeed');
fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });

beforeEach(({ task, onTestFailed }) => {
  onTestFailed(() => {
    const file = task.file?.filepath ?? '<file>';
    console.error(`[fast-check] this run's seed is ${seed}; replay: FC_SEED=${seed} npx vitest run ${file} -t ${JSON.stringify(task.name)}`);
  });
});
