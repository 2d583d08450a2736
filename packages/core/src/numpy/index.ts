/** The `np` namespace: jax.numpy's names in camelCase. */
export * from './creation';
export * from './math';
export * from './reductions';
export * from './shape';
export * from './linalg';
