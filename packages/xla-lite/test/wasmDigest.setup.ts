/**
 * The byte check for refactors of the WebAssembly code generator (`pnpm --filter
 * @tpukit/xla-lite wasm-digest`): runs xla-lite's tests with a fixed fast-check seed and appends
 * one line per generated module (test file, test name, sha256 of the bytes) to $DIGEST_OUT.
 * Run it before and after a change that must not change the code, sort both files and compare;
 * used to show the split of `wasm/emitKernel.ts` by fusion kind is byte-identical (563 modules).
 */
import { createHash } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { wasm } from '@tpukit/core/internal';
import fc from 'fast-check';
import { beforeEach, expect } from 'vitest';

const out = process.env.DIGEST_OUT;
if (!out) throw new Error('wasm-digest: set DIGEST_OUT to the file the digests are appended to');
fc.configureGlobal({ seed: 42 });
let current = '';
beforeEach(() => {
  current = expect.getState().currentTestName ?? '';
});
const proto = wasm.ModuleBuilder.prototype;
const toBytes = proto.toBytes;
proto.toBytes = function (this: wasm.ModuleBuilder): Uint8Array {
  const bytes = toBytes.call(this);
  appendFileSync(out, `${expect.getState().testPath}\t${current}\t${createHash('sha256').update(bytes).digest('hex')}\n`);
  return bytes;
};
