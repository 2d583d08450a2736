// Two entries: the library and the device worker-thread entry (Node 20 cannot start a .ts worker,
// so the worker is built to dist/worker.{js,cjs} and located next to the built library at run time).
import { defineConfig } from 'tsup';
import { packageConfig } from '../../tsup.base';

export default defineConfig(packageConfig({ index: 'src/index.ts', worker: 'src/worker.ts' }, { external: ['@tpukit/core', '@tpukit/xla-lite'] }));
