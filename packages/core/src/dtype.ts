/**
 * Dtypes with JAX's names, their storage, and JAX's type-promotion lattice (weak types
 * included). Every op that combines dtypes asks `resultType` here, so the rules live in one
 * place. See https://docs.jax.dev/en/latest/type_promotion.html for the lattice this encodes.
 */
import { showValue } from './describe';

export type DType = 'bool' | 'int8' | 'uint8' | 'int32' | 'uint32' | 'bfloat16' | 'float16' | 'float32';

export const DTYPES: readonly DType[] = ['bool', 'int8', 'uint8', 'int32', 'uint32', 'bfloat16', 'float16', 'float32'];

/** The typed array each dtype is stored in (bfloat16 and float16 as raw 16-bit patterns). */
export type StorageArray = Uint8Array | Int8Array | Int32Array | Uint32Array | Uint16Array | Float32Array;

/** What `data()` returns: 16-bit floats are decoded to float32. */
export type DataArray = Uint8Array | Int8Array | Int32Array | Uint32Array | Float32Array;

export interface DTypeInfo {
  readonly name: DType;
  readonly itemsize: number;
  readonly kind: 'bool' | 'int' | 'uint' | 'float';
  readonly storage: new (n: number) => StorageArray;
}

const INFO: Record<DType, DTypeInfo> = {
  bool: { name: 'bool', itemsize: 1, kind: 'bool', storage: Uint8Array },
  int8: { name: 'int8', itemsize: 1, kind: 'int', storage: Int8Array },
  uint8: { name: 'uint8', itemsize: 1, kind: 'uint', storage: Uint8Array },
  int32: { name: 'int32', itemsize: 4, kind: 'int', storage: Int32Array },
  uint32: { name: 'uint32', itemsize: 4, kind: 'uint', storage: Uint32Array },
  bfloat16: { name: 'bfloat16', itemsize: 2, kind: 'float', storage: Uint16Array },
  float16: { name: 'float16', itemsize: 2, kind: 'float', storage: Uint16Array },
  float32: { name: 'float32', itemsize: 4, kind: 'float', storage: Float32Array },
};

export function isDType(x: unknown): x is DType {
  return typeof x === 'string' && Object.prototype.hasOwnProperty.call(INFO, x);
}

/** Validates a user-given dtype; `op` and `arg` name the caller in the error. */
export function checkDType(x: unknown, op: string, arg = 'dtype'): DType {
  if (!isDType(x)) {
    throw new TypeError(`${op}: ${arg} must be one of ${DTYPES.join(', ')}; got ${showValue(x)}`);
  }
  return x;
}

export function dtypeInfo(d: DType): DTypeInfo {
  return INFO[d];
}
export const itemsize = (d: DType): number => INFO[d].itemsize;
export const isFloat = (d: DType): boolean => INFO[d].kind === 'float';
export const isInteger = (d: DType): boolean => INFO[d].kind === 'int' || INFO[d].kind === 'uint';
export const isUnsigned = (d: DType): boolean => INFO[d].kind === 'uint';
export const isSignedInt = (d: DType): boolean => INFO[d].kind === 'int';
/** bfloat16 and float16 are held as 16-bit patterns and decoded for arithmetic. */
export const is16BitFloat = (d: DType): boolean => d === 'bfloat16' || d === 'float16';

export function allocStorage(d: DType, n: number): StorageArray {
  return new INFO[d].storage(n);
}

/** Whether `x` is the storage type of dtype `d` (no allocation: hot paths ask per call). */
export function isStorageOf(x: StorageArray, d: DType): boolean {
  return x.constructor === INFO[d].storage;
}

/** Storage seen as same-width integers: copying through it moves bits (float NaN payloads included). */
export type BitView = Uint8Array | Uint16Array | Int32Array;

/** A same-width integer view of storage (the array itself when it already is one). */
export function bitView(x: StorageArray): BitView {
  if (x instanceof Uint8Array || x instanceof Uint16Array || x instanceof Int32Array) return x;
  if (x instanceof Int8Array) return new Uint8Array(x.buffer, x.byteOffset, x.length);
  return new Int32Array(x.buffer, x.byteOffset, x.length);
}

/** Integer range of a dtype, for overflow checks on weakly typed JS numbers. */
export function intRange(d: DType): [number, number] {
  switch (d) {
    case 'int8': return [-128, 127];
    case 'uint8': return [0, 255];
    case 'int32': return [-2147483648, 2147483647];
    case 'uint32': return [0, 4294967295];
    case 'bool': return [0, 1];
    default: throw new TypeError(`intRange: ${d} is not an integer dtype`);
  }
}

export function finfo(d: DType): { eps: number; max: number; min: number; tiny: number; bits: number } {
  switch (d) {
    case 'bfloat16': return { eps: 2 ** -7, max: 3.3895313892515355e38, min: -3.3895313892515355e38, tiny: 2 ** -126, bits: 16 };
    case 'float16': return { eps: 2 ** -10, max: 65504, min: -65504, tiny: 2 ** -14, bits: 16 };
    case 'float32': return { eps: 2 ** -23, max: 3.4028234663852886e38, min: -3.4028234663852886e38, tiny: 2 ** -126, bits: 32 };
    default: throw new TypeError(`finfo: ${d} is not a floating dtype`);
  }
}

// ---------------------------------------------------------------------------------------------
// Promotion. JAX's lattice (type_promotion.html), with the nodes we do not store (i16, u16,
// i64, u64, f64) kept as virtual nodes so that joins come out as in JAX, then canonicalised
// the way JAX does with x64 disabled (64-bit -> 32-bit). int16 has no storage here: it is
// widened to int32 (listed in the README's differences).

type Node = DType | 'i*' | 'f*' | 'int16' | 'uint16' | 'int64' | 'uint64' | 'float64';

const EDGES: Record<Node, Node[]> = {
  bool: ['i*'],
  'i*': ['uint8', 'int8'],
  uint8: ['int16', 'uint16'],
  uint16: ['int32', 'uint32'],
  uint32: ['int64', 'uint64'],
  int8: ['int16'],
  int16: ['int32'],
  int32: ['int64'],
  int64: ['f*'],
  uint64: ['f*'],
  'f*': ['bfloat16', 'float16'],
  bfloat16: ['float32'],
  float16: ['float32'],
  float32: ['float64'],
  float64: [],
};

const NODES = Object.keys(EDGES) as Node[];
const UPPER: Map<Node, Set<Node>> = new Map();
for (const n of NODES) {
  const seen = new Set<Node>([n]);
  const stack = [n];
  while (stack.length) for (const m of EDGES[stack.pop()!]) if (!seen.has(m)) { seen.add(m); stack.push(m); }
  UPPER.set(n, seen);
}

function join(a: Node, b: Node): Node {
  const ua = UPPER.get(a)!;
  const ub = UPPER.get(b)!;
  const common = NODES.filter((n) => ua.has(n) && ub.has(n));
  // The least upper bound is the common node every other common node is above.
  const lub = common.find((c) => common.every((o) => UPPER.get(c)!.has(o)));
  if (lub === undefined) throw new Error(`promoteTypes: no join for ${a} and ${b}`);
  return lub;
}

function canonical(n: Node): DType {
  switch (n) {
    case 'int16': case 'int64': return 'int32';
    case 'uint16': return 'uint32';
    case 'uint64': return 'uint32';
    case 'float64': return 'float32';
    case 'i*': return 'int32';
    case 'f*': return 'float32';
    default: return n;
  }
}

/** A dtype together with JAX's weak-type bit (the type of a bare JS number). */
export interface TypeWithWeak {
  dtype: DType;
  weak: boolean;
}

/** The lattice node of a (dtype, weak) pair: weak ints and floats become `i*` / `f*` (bool has no weak node). */
function nodeOf(t: TypeWithWeak, useWeak: boolean): Node {
  if (!useWeak || !t.weak || t.dtype === 'bool') return t.dtype;
  return isFloat(t.dtype) ? 'f*' : 'i*';
}

/** The default dtype of a kind, as `jnp.result_type` gives a weakly typed result. */
function defaultOfKind(n: Node): DType {
  const d = canonical(n);
  if (d === 'bool') return 'bool';
  if (isFloat(d)) return 'float32';
  return isUnsigned(d) ? 'uint32' : 'int32';
}

const LUB_CACHE = new Map<string, Node>();
function cachedJoin(a: Node, b: Node): Node {
  if (a === b) return a;
  const key = `${a}|${b}`;
  let r = LUB_CACHE.get(key);
  if (r === undefined) {
    r = join(a, b);
    LUB_CACHE.set(key, r);
  }
  return r;
}

/**
 * `jnp.result_type` over dtypes with weak bits, following JAX's `_lattice_result_type`:
 * - one input keeps its dtype and weak bit;
 * - inputs that all share one dtype, not all weak, give that dtype, strong;
 * - all-weak inputs join as their strong dtypes and stay weak;
 * - otherwise weak inputs act as `i*` / `f*` in the join (so `bfloat16 + <weak float>` stays
 *   bfloat16 and `int8 + <weak int>` stays int8), and the result is weak only if the join is
 *   `i*` or `f*`.
 * A weak result takes the default dtype of its kind (int32, uint32, float32, bool); 64-bit and
 * 16-bit integer joins are canonicalised to 32 bits (JAX with x64 disabled; tpukit has no int16).
 */
export function resultType(...types: TypeWithWeak[]): TypeWithWeak {
  if (types.length === 0) throw new TypeError('resultType: needs at least one type');
  let node: Node;
  let weak: boolean;
  const allWeak = types.every((t) => t.weak);
  if (types.length === 1) {
    node = types[0].dtype;
    weak = types[0].weak;
  } else if (!allWeak && types.every((t) => t.dtype === types[0].dtype)) {
    node = types[0].dtype;
    weak = false;
  } else if (allWeak) {
    node = types.map((t) => nodeOf(t, false)).reduce(cachedJoin);
    weak = true;
  } else {
    node = types.map((t) => nodeOf(t, true)).reduce(cachedJoin);
    weak = node === 'i*' || node === 'f*';
  }
  return weak ? { dtype: defaultOfKind(node), weak: true } : { dtype: canonical(node), weak: false };
}

/** `jnp.promote_types` on two strong dtypes. */
export function promoteTypes(a: DType, b: DType): DType {
  return resultType({ dtype: a, weak: false }, { dtype: b, weak: false }).dtype;
}

/** The dtype a JS scalar gets when it enters an op: integers are weak int32, others weak float32. */
export function scalarType(x: number | boolean): TypeWithWeak {
  if (typeof x === 'boolean') return { dtype: 'bool', weak: false };
  return Number.isInteger(x) ? { dtype: 'int32', weak: true } : { dtype: 'float32', weak: true };
}

/** Whether two views share bytes of one buffer. */
export function viewsOverlap(x: ArrayBufferView, y: ArrayBufferView): boolean {
  return x.buffer === y.buffer && x.byteOffset < y.byteOffset + y.byteLength && y.byteOffset < x.byteOffset + x.byteLength;
}
