// Shared tsup settings: every published package builds ESM + CJS + .d.ts from src/.
import type { Options } from 'tsup';

export function packageConfig(entry: Record<string, string>, extra: Partial<Options> = {}): Options {
  return {
    entry,
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
    splitting: true,
    shims: true,
    treeshake: false,
    ...extra,
  };
}
