// One entry: the library (the compiler registers itself with core's jit when imported).
import { defineConfig } from 'tsup';
import { packageConfig } from '../../tsup.base';

export default defineConfig(packageConfig({ index: 'src/index.ts' }, { external: ['@tpukit/core'] }));
