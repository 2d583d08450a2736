// Two entries: the library (the compiler registers itself with core's jit when imported) and
// `internal` (the compiler's own surface: IR, passes, kernel generators).
import { defineConfig } from 'tsup';
import { packageConfig } from '../../tsup.base';

export default defineConfig(packageConfig({ index: 'src/index.ts', internal: 'src/internal.ts' }, { external: ['@tpukit/core'] }));
