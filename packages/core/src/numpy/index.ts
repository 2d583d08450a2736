/** The `np` namespace: jax.numpy's names in camelCase. */
export * from './creation';
export * from './math';
export * from './reductions';
export * from './shape';
export * from './linalg';
export * from './indexing';
export * from './joining';
export * from './padding';
export * from './rearranging';
export * from './diagonal';
export * from './sorting';
export * from './einsum';
export * from './nonzero';
export * from './grids';
