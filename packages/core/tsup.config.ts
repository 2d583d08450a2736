import { defineConfig } from 'tsup';
import { packageConfig } from '../../tsup.base';

export default defineConfig(packageConfig({ index: 'src/index.ts', tfjs: 'src/tfjs.ts' }, {
  external: ['@tensorflow/tfjs-core'],
}));
