/**
 * The `_sharding` file of a pytree item, which Orbax reads when it restores WITHOUT a target
 * (`StandardCheckpointer().restore(path)`, `PyTreeCheckpointer().restore(path)`,
 * `CheckpointManager(dir).restore(step)`): a JSON object mapping each array's parameter name,
 * base64url-encoded with padding (Python's `base64.urlsafe_b64encode`), to a JSON *string*
 * holding Orbax's serialised sharding metadata. Without the file (or an entry) Orbax 0.12.4 fails
 * with "Sharding of jax.Array cannot be None".
 *
 * What Orbax itself writes names the saving machine's devices: a `SingleDeviceSharding` by
 * device string (`"cpu:0"`, looked up in `jax.local_devices()`) or a `NamedSharding` with the
 * mesh shape and a `device_mesh` of device ids (looked up in `jax.devices()`); restoring on a
 * machine without those devices fails ("Topology mismatch detected"). tpukit's devices are not
 * JAX devices, so orbax-ts writes the one form that resolves on any device set: a
 * `NamedSharding` with no `device_mesh` (Orbax then takes `jax.devices()`), mesh shape `[-1]`
 * (Orbax reshapes that list to the shape with numpy, so -1 means "all of them") and an empty
 * partition spec. A no-target restore therefore gives every array fully replicated over all of
 * `jax.devices()` (one device on a default CPU install). The layout the array was saved with
 * is kept in tpukit's own `_METADATA` section; to restore sharded, pass a target as in Orbax.
 */

/** Orbax's file name (`jax_array_handlers._SHARDING_FILE_NAME`). */
export const SHARDING_FILE = '_sharding';

/** The mesh axis of the replicated sharding orbax-ts records. */
export const REPLICATED_AXIS = 'replica';

/** The serialised sharding of every orbax-ts array (Python `json.dumps` spacing, as Orbax writes). */
export const REPLICATED_SHARDING = `{"sharding_type": "NamedSharding", "shape": [-1], "axis_names": ["${REPLICATED_AXIS}"], "partition_spec": []}`;

/** Orbax's key for a parameter in `_sharding`: `base64.urlsafe_b64encode(name.encode())`. */
export const shardingKey = (paramName: string): string => Buffer.from(paramName, 'utf8').toString('base64').replace(/\+/g, '-').replace(/\//g, '_');

/** The `_sharding` document for the arrays stored under `paramNames`. */
export function shardingDocument(paramNames: readonly string[]): Record<string, string> {
  const doc: Record<string, string> = {};
  for (const name of paramNames) doc[shardingKey(name)] = REPLICATED_SHARDING;
  return doc;
}
