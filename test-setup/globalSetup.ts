/**
 * vitest globalSetup (main process, once per project): chooses the fast-check seed for the whole
 * run (test-setup/fcSeed.ts), prints it once, and provides it to every project's workers, whose
 * setup file (test-setup/fastCheck.ts) installs it with `fc.configureGlobal`.
 */
import type { TestProject } from 'vitest/node';
import { chooseSeed } from './fcSeed';

declare module 'vitest' {
  export interface ProvidedContext {
    fcSeed: number;
  }
}

export default function setup(project: TestProject): void {
  // Every project runs this; the first one chooses and prints, the others reuse its choice.
  if (process.env.TPUKIT_FC_SEED_CHOSEN === undefined) {
    const { seed, why } = chooseSeed();
    process.env.TPUKIT_FC_SEED_CHOSEN = String(seed);
    console.log(`fast-check seed ${seed} (${why}); replay: FC_SEED=${seed} npx vitest run <file>`);
  }
  project.provide('fcSeed', Number(process.env.TPUKIT_FC_SEED_CHOSEN));
}
