// One vitest run over every package: each package is an inline project so it inherits the
// root settings (folder-glob projects would not; see shared/TOOLCHAIN.md).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Absolute, because each project below has its own root.
const setup = (file: string): string => fileURLToPath(new URL(`./test-setup/${file}`, import.meta.url));

const pkgs = ['core', 'xla-lite', 'mesh', 'grain-ts', 'orbax-ts', 'maxtext-ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One fast-check seed per run: fixed under CI, random locally, FC_SEED=n replays (test-setup/).
    globalSetup: [setup('globalSetup.ts')],
    setupFiles: [setup('fastCheck.ts')],
    // The systolic GEMM kernel is otherwise measured per CPU (core gemmTune.ts): the suite pins
    // 4 x 8 so every machine runs the same paths; the 5 x 8 kernel and the measured choice have
    // their own tests (gemmShape.test.ts and the K-blocked / pool tests' 5 x 8 engines).
    env: { TPUKIT_GEMM_KERNEL: process.env.TPUKIT_GEMM_KERNEL ?? '4x8' },
    projects: [
      ...pkgs.map((name) => ({
        extends: true as const,
        test: {
          name,
          root: `packages/${name}`,
          include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
        },
      })),
      // The systolic backend's tests again under the 5 x 8 kernel (the one measured fastest on
      // some CPUs, gemmTune.ts): its partial row panels take other paths through the engine and
      // the pool's jobs than 4 x 8's whole ones.
      {
        extends: true as const,
        test: {
          name: 'core-5x8',
          root: 'packages/core',
          include: ['src/backends/systolic/**/*.test.ts'],
          env: { TPUKIT_GEMM_KERNEL: '5x8' },
        },
      },
      { extends: true as const, test: { name: 'test-setup', root: 'test-setup', include: ['*.test.ts'] } },
      {
        extends: true as const,
        test: { name: 'examples', root: 'examples', include: ['**/*.test.ts'], exclude: ['**/node_modules/**'] },
      },
    ],
  },
});
