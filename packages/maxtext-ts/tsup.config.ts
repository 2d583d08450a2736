// Three entries: the trainer library, the optimizer library (`@tpukit/maxtext-ts/optim`) and the
// `maxtext` CLI (the package's bin).
import { defineConfig } from 'tsup';
import { packageConfig } from '../../tsup.base';

export default defineConfig(
  packageConfig({ index: 'src/index.ts', optim: 'src/optim/index.ts', cli: 'src/cli.ts' }, { external: ['@tpukit/core', '@tpukit/grain-ts', '@tpukit/mesh', '@tpukit/orbax-ts', '@tpukit/xla-lite'] }),
);
