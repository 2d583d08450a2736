/**
 * The public `lax` namespace (re-exports only): the operations of ops.ts, and the control-flow
 * primitives, which live in transforms/ beside the other higher-order primitives because their
 * rules transform sub-jaxprs. Code inside core imports ops.ts (or transforms/) directly, so the
 * namespace sits above transforms/ and no transformation imports it back.
 */
export * from './ops';
export { cond, switchBranches as switch } from '../transforms/cond';
export { scan } from '../transforms/scan';
export { optimizationBarrier } from '../transforms/checkpoint';
export { foriLoop, whileLoop } from '../transforms/while';
