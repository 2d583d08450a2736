/** The `debug` namespace (jax.debug's sharding helpers). */
export { visualizeArraySharding } from './visualize';
