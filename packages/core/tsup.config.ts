import { defineConfig } from 'tsup';
import { packageConfig } from '../../tsup.base';

export default defineConfig(packageConfig({ index: 'src/index.ts', tfjs: 'src/backends/tfjs.ts' }, {
  external: ['@tensorflow/tfjs-core'],
}));
