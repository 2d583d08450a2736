/**
 * The `debug_callback` primitive (jax.debug.callback's `debug_callback_p`): calls a host
 * function with the concrete values of its operands when the program runs, not when it is
 * traced. It has no outputs; it is an *effect*, marked by `rules.effect`, which every pass that
 * removes or merges work checks (`isEffectful`): core's partial evaluation keeps it (see
 * `transforms/partialEval.ts`), and xla-lite's DCE, CSE and constant folding leave it alone.
 *
 * Transformation rules follow JAX's:
 * - eval: the callback receives the operands as concrete Arrays, every time the program runs
 *   (eagerly, inside a compiled program, inside scan/while/cond bodies).
 * - jvp: prints the primals (the callback is bound on the primals; no tangent outputs).
 * - batch (vmap): unrolled over the mapped axis, one callback per batch element, in order.
 * - transpose: an error ("transpose doesn't support debugging callbacks"), as in JAX; under
 *   `grad` it never meets transposition because its operands are primals.
 * Ordering: `effect: 'ordered'` is JAX's `ordered=True`. Compiled programs run callbacks in
 * program order in both cases (no pass moves one effect past another); the flag is kept for
 * the StableHLO export and for parity with JAX, where unordered callbacks may be reordered.
 */
import type { Array } from '../array';
import * as lax from '../lax/ops';
import { definePrimitive, type Primitive } from '../primitive';
import { bind } from '../trace';
import type { BatchRule } from '../transforms/batching';
import type { JvpRule } from '../transforms/jvp';
import type { TransposeRule } from '../transforms/transpose';

export type DebugEffect = 'unordered' | 'ordered';

export interface DebugCallbackParams {
  /** Receives the operands as concrete Arrays (flat, in operand order). Its result is ignored. */
  readonly callback: (args: Array[]) => void;
  readonly effect: DebugEffect;
  /** What the callback is, for printed jaxprs and the StableHLO export (e.g. `print`). */
  readonly label: string;
}

export const debugCallbackP = definePrimitive<DebugCallbackParams>({
  name: 'debug_callback',
  hlo: 'custom-call',
  abstractEval: () => [],
  impl() {
    throw new Error('debug_callback: runs through its eval rule (a host callback), never as a backend kernel');
  },
});

debugCallbackP.rules.effect = true;

debugCallbackP.rules.eval = (args: Array[], { callback }: DebugCallbackParams): Array[] => {
  callback(args);
  return [];
};

debugCallbackP.rules.jvp = ((primals, _tangents, params: DebugCallbackParams) => {
  bind(debugCallbackP, primals, params);
  return [[], []];
}) satisfies JvpRule;

debugCallbackP.rules.batch = ((vals, dims, params: DebugCallbackParams, size) => {
  for (let i = 0; i < size; i++) {
    bind(debugCallbackP, vals.map((v, k) => (dims[k] === null ? v : lax.indexInDim(v, i, dims[k]!, false))), params);
  }
  return [[], []];
}) satisfies BatchRule;

debugCallbackP.rules.transpose = (() => {
  throw new Error('debug_callback: transpose doesn\'t support debugging callbacks (a debug callback was applied to a linear value); print primal values instead');
}) satisfies TransposeRule;

/** Whether a primitive has an effect that must never be removed, merged or evaluated early. */
export function isEffectful(p: Primitive): boolean {
  return p.rules.effect === true;
}
