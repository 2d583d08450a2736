import { defineConfig } from 'tsup';
import { packageConfig } from '../../tsup.base';

export default defineConfig(packageConfig({ index: 'src/index.ts', writerWorker: 'src/writerWorker.ts' }, { external: ['@tpukit/core'] }));
