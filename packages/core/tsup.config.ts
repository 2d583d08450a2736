// Three entries: the library (the user-facing API), `internal` (what compilers and packages
// building on core need: primitives, jaxpr internals, the compiler seam) and the tfjs bridge.
import { defineConfig } from 'tsup';
import { packageConfig } from '../../tsup.base';

export default defineConfig(packageConfig({ index: 'src/index.ts', internal: 'src/internal.ts', tfjs: 'src/backends/tfjs.ts' }, {
  external: ['@tensorflow/tfjs-core'],
}));
