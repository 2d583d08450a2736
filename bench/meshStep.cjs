// The device program of `pnpm bench:mesh` as a CommonJS module a worker thread can load: it
// compiles meshStep.ts through tsx's in-thread CommonJS hook (module hooks registered with
// --import do not reach worker threads on Node 20). Being .cjs, it runs in mesh's CommonJS
// worker build, so the program and the worker share the CommonJS @tpukit/core.
const { require: tsxRequire } = require('tsx/cjs/api');

module.exports = tsxRequire('./meshStep.ts', __filename);
