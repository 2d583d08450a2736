// Config of the wasm byte check (see wasmDigest.setup.ts); not part of the normal test run.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: fileURLToPath(new URL('..', import.meta.url)),
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    setupFiles: ['./test/wasmDigest.setup.ts'],
    testTimeout: 60_000,
  },
});
