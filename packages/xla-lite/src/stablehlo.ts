/**
 * StableHLO export: `Lowered.asStableHlo()` prints the (unoptimised) module as MLIR text in
 * StableHLO's generic operation form, which every MLIR parser accepts:
 * `%3 = "stablehlo.add"(%1, %2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>`, inside
 * `module @name { func.func public @main(...) -> (...) { ... } }`, with tensor types including
 * `bf16` and `i1`. Attributes follow the StableHLO spec (broadcast_dimensions, permutation,
 * #stablehlo.dot dimension numbers, #stablehlo<comparison_direction>, regions for reduce,
 * reduce_window, sort, scatter, while and case), CHLO ops where JAX emits them, gather / scatter,
 * threefry expanded into uint32 ops, control flow (while, scan as JAX lowers it, cond), top_k
 * as a stable sort and a slice, and the call wrappers (nested jit, remat, custom_jvp /
 * custom_vjp calls) inline as their body / primal function. The only primitives left as
 * `stablehlo.custom_call @tpukit.<primitive>` (valid MLIR that a real XLA cannot run) are the
 * linearized `custom_lin` / `dot_product_attention_lin`, which are only transposed, never in a
 * program that runs forward (test/primitives.test.ts). The fused attention (`dot_product_attention`, `_fwd`, `_bwd`) and the one-hot
 * gathers / segment sums are instead expanded into standard ops (dot_general, the mask by
 * select, exp / reduce softmax with float32 accumulation; see passes/exportExpansion.ts), so
 * the text of a training step that uses them stays runnable by a real XLA. An optimised module (`Compiled.asStableHlo()`) exports each fusion's body inline
 * (StableHLO has no fusion op) and layout `copy`s as nothing (tensors carry no layout). A debug callback (`debug.print`) becomes what JAX emits for a host callback, a
 * `stablehlo.custom_call @xla_ffi_python_cpu_callback` (typed FFI, `api_version = 4`) with
 * `has_side_effect = true`, no results and a `{descriptor = N : ui64}` backend_config; the
 * callback lives only in this process (a `tpukit.callback` attribute names it), and ordered
 * callbacks are not threaded through a `!stablehlo.token` here. A sharding constraint (a
 * `sharding_constraint` primitive) becomes `stablehlo.custom_call @Sharding` with its
 * `mhlo.sharding`. Checked with a real XLA (jax 0.11.2, GPU and CPU; FIDELITY.md at the repo
 * root); the tests here check the structure.
 */
import type { Array } from '@tpukit/core';
import type { ShapedArray } from '@tpukit/core/internal';
import type { HloComputation, HloInstruction, HloModule } from './hlo';
import { getPrimitive, operandPrecisions } from '@tpukit/core/internal';
import { exportOrderOf } from './passes/dotGroups';
import { exportViewOf } from './passes/exportView';
import { expandForExport, hasExpansion } from './passes/exportExpansion';

const ELT: Record<string, string> = { float32: 'f32', bfloat16: 'bf16', float16: 'f16', int32: 'i32', uint32: 'ui32', int8: 'i8', uint8: 'ui8', bool: 'i1' };

/** `tensor<2x3xbf16>` (scalars: `tensor<f32>`). */
export function tensorType(s: ShapedArray): string {
  return `tensor<${s.shape.map((d) => `${d}x`).join('')}${ELT[s.dtype] ?? s.dtype}>`;
}

/** The combiner region of each scatter primitive (`null`: the update replaces the operand). */
const SCATTER_COMBINER: Record<string, string | null> = { scatter: null, 'scatter-add': 'add', 'scatter-mul': 'multiply', 'scatter-min': 'minimum', 'scatter-max': 'maximum' };
/** Primitives that are one StableHLO op of another name, with no attributes. */
const ONE_OP: Record<string, string> = {
  round: 'round_nearest_afz',
  round_nearest_even: 'round_nearest_even',
  is_finite: 'is_finite',
  shift_left: 'shift_left',
  shift_right_arithmetic: 'shift_right_arithmetic',
  shift_right_logical: 'shift_right_logical',
};

/** Primitives JAX lowers to one CHLO op (`chlo.*`), which XLA's StableHLO import legalizes. */
const CHLO: Record<string, string> = {
  acos: 'acos',
  acosh: 'acosh',
  asin: 'asin',
  asinh: 'asinh',
  atan: 'atan',
  atanh: 'atanh',
  cosh: 'cosh',
  sinh: 'sinh',
  erf: 'erf',
  erf_inv: 'erf_inv',
  erfc: 'erfc',
  digamma: 'digamma',
  lgamma: 'lgamma',
  nextafter: 'next_after',
};
/** The cumulative primitives: the reduce_window combiner of each. */
const CUMULATIVE: Record<string, string> = { cumsum: 'add', cumprod: 'multiply', cummax: 'maximum', cummin: 'minimum' };

const REDUCER: Record<string, string> = { reduce_sum: 'add', reduce_max: 'maximum', reduce_min: 'minimum', reduce_prod: 'multiply', reduce_and: 'and', reduce_or: 'or' };
/**
 * Call wrappers whose one sub-computation (`called[0]`: nested jit's jaxpr, remat's body, a
 * custom derivative's primal function) is exported inline, as its ops: what JAX's lowering of
 * them amounts to once XLA inlines its private `func.call`s (the derivative rules are gone by
 * export time, and remat's body runs as is in a forward pass).
 */
const WRAPPERS = ['pjit', 'remat', 'custom_jvp_call', 'custom_vjp_call'];
/** Primitives with their own case in `emitInstruction` below. */
const STRUCTURED = new Set([
  'integer_pow',
  'square',
  'broadcast_in_dim',
  'transpose',
  'squeeze',
  'rev',
  'iota',
  'concatenate',
  'select_n',
  'slice',
  'pad',
  'dot_general',
  'debug_callback',
  'gather',
  ...Object.keys(SCATTER_COMBINER),
  'dynamic_slice',
  'dynamic_update_slice',
  'bitcast_convert_type',
  'exp2',
  ...Object.keys(ONE_OP),
  ...Object.keys(CHLO),
  ...Object.keys(CUMULATIVE),
  'argmax',
  'argmin',
  'sort',
  'threefry2x32',
  'while',
  'scan',
  'cond',
  'top_k',
  ...WRAPPERS,
]);

/**
 * Whether a primitive exports as StableHLO ops (else as a `tpukit.<name>` custom call): one op
 * named by its record's `stablehlo` field, a comparison (its descriptor's `compare`), a reducer,
 * or a case of its own below.
 */
export function hasStableHlo(name: string): boolean {
  const p = getPrimitive(name);
  return p.stablehlo !== undefined || p.elementwise?.compare !== undefined || name in REDUCER || STRUCTURED.has(name) || hasExpansion(name);
}

const i64s = (xs: readonly number[]): string => (xs.length ? `array<i64: ${xs.join(', ')}>` : 'array<i64>');

function fmtScalar(v: number, dtype: string): string {
  if (dtype === 'bool') return v ? 'true' : 'false';
  if (!dtype.startsWith('float') && dtype !== 'bfloat16') return String(v);
  if (!Number.isFinite(v)) {
    if (dtype === 'float32') {
      const b = new DataView(new ArrayBuffer(4));
      b.setFloat32(0, v);
      return `0x${b.getUint32(0).toString(16).toUpperCase().padStart(8, '0')}`;
    }
    // 16-bit types as their bit patterns: float16 (5 exponent bits) and bfloat16 (8) differ.
    if (dtype === 'float16') return Number.isNaN(v) ? '0x7E00' : v > 0 ? '0x7C00' : '0xFC00';
    return Number.isNaN(v) ? '0x7FC0' : v > 0 ? '0x7F80' : '0xFF80';
  }
  const s = v.toExponential();
  return s.includes('.') ? s : s.replace('e', '.0e');
}

function denseLiteral(vals: ArrayLike<number>, shape: readonly number[], dtype: string): string {
  if (vals.length > 0 && globalThis.Array.prototype.every.call(vals, (x: number) => Object.is(x, vals[0]))) return `dense<${fmtScalar(vals[0], dtype)}>`;
  let k = 0;
  const nest = (d: number): string => (d === shape.length ? fmtScalar(vals[k++], dtype) : `[${globalThis.Array.from({ length: shape[d] }, () => nest(d + 1)).join(', ')}]`);
  return `dense<${nest(0)}>`;
}

/** `name = [a, b]`, or nothing for an empty list (the attribute's default). */
const dimList = (name: string, xs: readonly number[]): string[] => (xs.length ? [`${name} = [${xs.join(', ')}]`] : []);
/** The body of a #stablehlo.gather / #stablehlo.scatter: the non-empty dimension lists, then index_vector_dim. */
const dimNumbers = (lists: [string, readonly number[]][], indexVectorDim: number): string => [...lists.flatMap(([n, xs]) => dimList(n, xs)), `index_vector_dim = ${indexVectorDim}`].join(', ');
const isFloatType = (dt: string): boolean => dt.startsWith('float') || dt === 'bfloat16';
const compareType = (dt: string): string => (isFloatType(dt) ? 'FLOAT' : dt.startsWith('uint') || dt === 'bool' ? 'UNSIGNED' : 'SIGNED');

/** jax.lax's default fill for gather's 'fill' mode: NaN, the most negative signed, the largest unsigned, true. */
function gatherFill(dtype: string): number {
  if (isFloatType(dtype)) return NaN;
  if (dtype === 'bool') return 1;
  const bits = dtype.endsWith('8') ? 8 : 32; // the integer dtypes: int8, uint8, int32, uint32
  return dtype.startsWith('uint') ? 2 ** bits - 1 : -(2 ** (bits - 1));
}

class Emitter {
  lines: string[] = [];
  private names = new Map<HloInstruction, string>();
  /** The output names of expanded multi-output instructions (read by get-tuple-element). */
  readonly outputs = new Map<HloInstruction, string[]>();
  private n = 0;

  constructor(public indent: string) {}

  fresh(): string {
    return `%${this.n++}`;
  }
  name(i: HloInstruction): string {
    const n = this.names.get(i);
    if (n === undefined) throw new Error(`xla-lite export: ${i.prim?.name ?? i.opcode}.${i.id} has no single value to use${i.isTuple ? ' (a multi-output instruction is read only through get-tuple-element)' : ''}`);
    return n;
  }
  bind(i: HloInstruction, s: string): void {
    this.names.set(i, s);
  }
  /** A constant of `dtype` broadcast to `shape` (two ops); returns its name. */
  splat(v: number, dtype: string, shape: readonly number[]): string {
    const sty = tensorType({ shape: [], dtype: dtype as never, weakType: false });
    const c = this.fresh();
    this.op(c, 'stablehlo.constant', [], `value = dense<${fmtScalar(v, dtype)}> : ${sty}`, [], [sty]);
    if (shape.length === 0) return c;
    const b = this.fresh();
    this.op(b, 'stablehlo.broadcast_in_dim', [c], 'broadcast_dimensions = array<i64>', [sty], [tensorType({ shape, dtype: dtype as never, weakType: false })]);
    return b;
  }
  /** `limits` (one per index-vector entry) broadcast along the last dimension of `shape`. */
  vectorConstant(limits: readonly number[], dtype: string, shape: readonly number[]): string {
    const vty = tensorType({ shape: [limits.length], dtype: dtype as never, weakType: false });
    const c = this.fresh();
    this.op(c, 'stablehlo.constant', [], `value = ${denseLiteral(limits, [limits.length], dtype)} : ${vty}`, [], [vty]);
    const b = this.fresh();
    this.op(b, 'stablehlo.broadcast_in_dim', [c], `broadcast_dimensions = array<i64: ${shape.length - 1}>`, [vty], [tensorType({ shape, dtype: dtype as never, weakType: false })]);
    return b;
  }
  op(result: string | null, opName: string, operands: string[], attrs: string, inTypes: string[], outTypes: string[], region = ''): void {
    const out = outTypes.length === 1 ? outTypes[0] : `(${outTypes.join(', ')})`;
    this.lines.push(`${this.indent}${result ? `${result}${outTypes.length > 1 ? `:${outTypes.length}` : ''} = ` : ''}"${opName}"(${operands.join(', ')})${region}${attrs ? ` {${attrs}}` : ''} : (${inTypes.join(', ')}) -> ${out}`);
  }
}

const callbackIds = new WeakMap<object, number>();
let nextCallbackId = 1;
/** A stable per-process number for a host callback (the custom call's descriptor). */
function callbackId(cb: object): number {
  let id = callbackIds.get(cb);
  if (id === undefined) callbackIds.set(cb, (id = nextCallbackId++));
  return id;
}

/**
 * Emits `body` in place of `i`, its parameters bound to i's operands. A single-output `i` names
 * the body's output; a multi-output one records its outputs for its get-tuple-elements (a whole
 * tuple has no value: reading it throws, see `Emitter.name`).
 */
function emitInline(e: Emitter, i: HloInstruction, body: HloComputation): void {
  bindOutputs(e, i, emitCall(e, body, i.operands.map((o) => e.name(o))));
}

function emitInstruction(e: Emitter, i: HloInstruction): void {
  if (i.opcode === 'parameter') return;
  if (i.opcode === 'get-tuple-element') {
    const index = (i.params as { index: number }).index;
    const expanded = e.outputs.get(i.operands[0]);
    e.bind(i, expanded ? expanded[index] : `${e.name(i.operands[0])}#${index}`);
    return;
  }
  // A fused kernel of xla-lite's own (attention, one-hot gathers) exports as its standard-op
  // expansion; a fusion as its body (StableHLO has no fusion op): both inline, op by op.
  const body = expandForExport(i) ?? (i.opcode === 'fusion' || (i.prim && WRAPPERS.includes(i.prim.name)) ? i.called[0] : null);
  if (body) return emitInline(e, i, body);
  if (i.opcode === 'copy') {
    // A layout change only (layout assignment): StableHLO tensors carry no layout.
    e.bind(i, e.name(i.operands[0]));
    return;
  }
  const ins = i.operands.map((o) => e.name(o));
  const inTypes = i.operands.map((o) => tensorType(o.shape));
  const outTypes = i.shapes.map(tensorType);
  if (i.prim?.name === 'debug_callback') {
    // As current JAX lowers a host callback: a typed-FFI custom call with no results whose
    // backend_config holds an opaque descriptor (here: this process's id for the callback).
    const p = i.params as { callback: object; label: string; effect: string };
    const layouts = i.operands.map((o) => {
      const r = o.shape.shape.length;
      return r === 0 ? 'dense<> : tensor<0xindex>' : `dense<${r === 1 ? '0' : `[${globalThis.Array.from({ length: r }, (_, k) => r - 1 - k).join(', ')}]`}> : tensor<${r}xindex>`;
    });
    const attrs = `call_target_name = "xla_ffi_python_cpu_callback", api_version = 4 : i32, backend_config = {descriptor = ${callbackId(p.callback)} : ui64}, has_side_effect = true, operand_layouts = [${layouts.join(', ')}], result_layouts = [], tpukit.callback = ${JSON.stringify(`${p.label}${p.effect === 'ordered' ? ' (ordered)' : ''}`)}`;
    return e.op(null, 'stablehlo.custom_call', ins, attrs, inTypes, []);
  }
  const r = e.fresh();
  e.bind(i, r);
  if (i.opcode === 'constant') {
    const l = i.literal!;
    e.op(r, 'stablehlo.constant', [], `value = ${denseLiteral(l.dataSync() as ArrayLike<number>, l.shape, l.dtype)} : ${outTypes[0]}`, [], outTypes);
    return;
  }
  if (!i.prim) {
    // The per-device program of a partitioned (SPMD) executable: its collectives and per-device
    // slices have no StableHLO form here.
    throw new Error(
      `xla-lite export: ${i.opcode}.${i.id} (an instruction of a partitioned per-device program) has no StableHLO form; ` +
        'export the sharded program before partitioning with lower(...).asStableHlo(), which carries mhlo.sharding for XLA to partition',
    );
  }
  const name = i.prim.name;
  const p = i.params as Record<string, any>;
  // with_sharding_constraint, as JAX lowers it under GSPMD.
  if (name === 'sharding_constraint') return e.op(r, 'stablehlo.custom_call', ins, `call_target_name = "Sharding", mhlo.sharding = ${JSON.stringify(String(p.sharding))}`, inTypes, outTypes);
  const prim = i.prim!;
  if (prim.stablehlo) {
    e.op(r, `stablehlo.${prim.stablehlo}`, ins, '', inTypes, outTypes);
    // A several-result op (optimization_barrier): its get-tuple-elements read %r#k.
    if (i.isTuple) e.outputs.set(i, results(r, outTypes.length));
    return;
  }
  switch (name) {
    case 'integer_pow': {
      const c = e.fresh();
      const ty = tensorType(i.operands[0].shape);
      e.op(c, 'stablehlo.constant', [], `value = dense<${fmtScalar(p.y, i.operands[0].shape.dtype)}> : ${ty}`, [], [ty]);
      return e.op(r, 'stablehlo.power', [ins[0], c], '', [ty, ty], outTypes);
    }
    case 'square':
      return e.op(r, 'stablehlo.multiply', [ins[0], ins[0]], '', [inTypes[0], inTypes[0]], outTypes);
    case 'broadcast_in_dim':
      return e.op(r, 'stablehlo.broadcast_in_dim', ins, `broadcast_dimensions = ${i64s(p.broadcastDimensions)}`, inTypes, outTypes);
    case 'transpose':
      return e.op(r, 'stablehlo.transpose', ins, `permutation = ${i64s(p.permutation)}`, inTypes, outTypes);
    case 'squeeze':
      return e.op(r, 'stablehlo.reshape', ins, '', inTypes, outTypes);
    case 'rev':
      return e.op(r, 'stablehlo.reverse', ins, `dimensions = ${i64s(p.dimensions)}`, inTypes, outTypes);
    case 'iota':
      return e.op(r, 'stablehlo.iota', [], `iota_dimension = ${p.dimension} : i64`, [], outTypes);
    case 'concatenate':
      return e.op(r, 'stablehlo.concatenate', ins, `dimension = ${p.dimension} : i64`, inTypes, outTypes);
    case 'select_n':
      if (ins.length === 3 && i.operands[0].shape.dtype === 'bool') return e.op(r, 'stablehlo.select', [ins[0], ins[2], ins[1]], '', [inTypes[0], inTypes[2], inTypes[1]], outTypes);
      break;
    case 'slice': {
      const strides = p.strides ?? p.startIndices.map(() => 1);
      return e.op(r, 'stablehlo.slice', ins, `start_indices = ${i64s(p.startIndices)}, limit_indices = ${i64s(p.limitIndices)}, strides = ${i64s(strides)}`, inTypes, outTypes);
    }
    case 'pad': {
      const cfg: number[][] = p.paddingConfig;
      if (cfg.every((c) => c[0] >= 0 && c[1] >= 0))
        return e.op(r, 'stablehlo.pad', ins, `edge_padding_low = ${i64s(cfg.map((c) => c[0]))}, edge_padding_high = ${i64s(cfg.map((c) => c[1]))}, interior_padding = ${i64s(cfg.map((c) => c[2]))}`, inTypes, outTypes);
      break;
    }
    case 'gather':
      return emitGather(e, r, i, ins, inTypes, outTypes);
    case 'dynamic_slice':
      return e.op(r, 'stablehlo.dynamic_slice', ins, `slice_sizes = ${i64s(p.sliceSizes)}`, inTypes, outTypes);
    case 'dynamic_update_slice':
      return e.op(r, 'stablehlo.dynamic_update_slice', ins, '', inTypes, outTypes);
    case 'bitcast_convert_type':
      return e.op(r, 'stablehlo.bitcast_convert', ins, '', inTypes, outTypes);
    case 'exp2': {
      // As JAX lowers it: exp(log(2) * x).
      const ln2 = e.splat(Math.LN2, i.operands[0].shape.dtype, i.operands[0].shape.shape);
      const m = e.fresh();
      e.op(m, 'stablehlo.multiply', [ln2, ins[0]], '', [inTypes[0], inTypes[0]], outTypes);
      return e.op(r, 'stablehlo.exponential', [m], '', outTypes, outTypes);
    }
    case 'dot_general': {
      const [[lc, rc], [lb, rb]] = p.dimensionNumbers;
      const dn = `#stablehlo.dot<lhs_batching_dimensions = [${lb.join(', ')}], rhs_batching_dimensions = [${rb.join(', ')}], lhs_contracting_dimensions = [${lc.join(', ')}], rhs_contracting_dimensions = [${rc.join(', ')}]>`;
      const pc = p.precision ? `, precision_config = [${operandPrecisions(p.precision).map((q) => `#stablehlo<precision ${q.toUpperCase()}>`).join(', ')}]` : '';
      return e.op(r, 'stablehlo.dot_general', ins, `dot_dimension_numbers = ${dn}${pc}`, inTypes, outTypes);
    }
    default:
      if (name in SCATTER_COMBINER) return emitScatter(e, r, i, ins, inTypes, outTypes);
      if (ONE_OP[name]) return e.op(r, `stablehlo.${ONE_OP[name]}`, ins, '', inTypes, outTypes);
      if (CHLO[name]) return e.op(r, `chlo.${CHLO[name]}`, ins, '', inTypes, outTypes);
      if (CUMULATIVE[name]) return emitCumulative(e, r, i, ins, inTypes, outTypes);
      if (name === 'argmax' || name === 'argmin') return emitArgReduce(e, i, ins, inTypes);
      if (name === 'sort') return emitSort(e, r, i, ins, inTypes, outTypes);
      if (name === 'top_k') return emitTopK(e, i, ins, inTypes);
      if (name === 'threefry2x32') return emitThreefry(e, i, ins, inTypes);
      if (name === 'while') return emitWhile(e, i, ins, inTypes);
      if (name === 'scan') return emitScan(e, i, ins, inTypes);
      if (name === 'cond') return emitCond(e, i, ins, inTypes, outTypes);
      break;
  }
  const direction = prim.elementwise?.compare;
  if (direction) {
    const dt = i.operands[0].shape.dtype;
    const ct = dt.startsWith('float') || dt === 'bfloat16' ? 'FLOAT' : dt.startsWith('uint') || dt === 'bool' ? 'UNSIGNED' : 'SIGNED';
    return e.op(r, 'stablehlo.compare', ins, `comparison_direction = #stablehlo<comparison_direction ${direction}>, compare_type = #stablehlo<comparison_type ${ct}>`, inTypes, outTypes);
  }
  if (REDUCER[name]) {
    const x = i.operands[0].shape;
    const sty = tensorType({ shape: [], dtype: x.dtype, weakType: false });
    const init = e.fresh();
    const initVal = name === 'reduce_sum' || name === 'reduce_or' ? 0 : name === 'reduce_prod' || name === 'reduce_and' ? 1 : name === 'reduce_max' ? -Infinity : Infinity;
    const initLit = x.dtype === 'bool' ? fmtScalar(initVal, 'bool') : name === 'reduce_max' || name === 'reduce_min' ? extremeInit(x.dtype, name === 'reduce_max') : fmtScalar(initVal, x.dtype);
    e.op(init, 'stablehlo.constant', [], `value = dense<${initLit}> : ${sty}`, [], [sty]);
    return e.op(r, 'stablehlo.reduce', [ins[0], init], `dimensions = ${i64s(p.axes)}`, [inTypes[0], sty], outTypes, combinerRegion(REDUCER[name], sty));
  }
  // No StableHLO lowering here: a custom call naming the primitive, with its parameters as JSON.
  const cfg = JSON.stringify(Object.fromEntries(Object.entries(p).filter(([, v]) => typeof v !== 'object' || v === null || (globalThis.Array.isArray(v) && v.every((x) => typeof x !== 'object' || globalThis.Array.isArray(x))))));
  e.op(r, 'stablehlo.custom_call', ins, `call_target_name = "tpukit.${name}", backend_config = ${JSON.stringify(cfg)}`, inTypes, outTypes);
}

/** A scalar-combiner region (`^bb0(%lhs, %rhs)`): `op(lhs, rhs)`, or `rhs` when `op` is null. */
function combinerRegion(op: string | null, sty: string): string {
  const body = op === null ? '' : `  %s = "stablehlo.${op}"(%lhs, %rhs) : (${sty}, ${sty}) -> ${sty}\n`;
  return ` ({\n^bb0(%lhs: ${sty}, %rhs: ${sty}):\n${body}  "stablehlo.return"(${op === null ? '%rhs' : '%s'}) : (${sty}) -> ()\n})`;
}

/**
 * Whether each index vector of `indices` (its last dimension) lies in [0, upper] componentwise:
 * an i1 tensor of the batch shape (indices without the last dimension).
 */
function indicesInBounds(e: Emitter, idx: string, shape: readonly number[], dtype: string, upper: readonly number[]): string {
  const ity = tensorType({ shape, dtype: dtype as never, weakType: false });
  const bty = tensorType({ shape, dtype: 'bool', weakType: false });
  const cmp = (dir: string, rhs: string): string => {
    const c = e.fresh();
    e.op(c, 'stablehlo.compare', [idx, rhs], `comparison_direction = #stablehlo<comparison_direction ${dir}>, compare_type = #stablehlo<comparison_type ${compareType(dtype)}>`, [ity, ity], [bty]);
    return c;
  };
  const lo = cmp('GE', e.splat(0, dtype, shape));
  const hi = cmp('LE', e.vectorConstant(upper, dtype, shape));
  const both = e.fresh();
  e.op(both, 'stablehlo.and', [lo, hi], '', [bty, bty], [bty]);
  const t = e.fresh();
  const sty = 'tensor<i1>';
  e.op(t, 'stablehlo.constant', [], 'value = dense<true> : tensor<i1>', [], [sty]);
  const out = e.fresh();
  const outTy = tensorType({ shape: shape.slice(0, -1), dtype: 'bool', weakType: false });
  e.op(out, 'stablehlo.reduce', [both, t], `dimensions = array<i64: ${shape.length - 1}>`, [bty, sty], [outTy], combinerRegion('and', sty));
  return out;
}

/**
 * `gather` as `stablehlo.gather` (the index vector is the last dimension of the indices, as in
 * JAX). 'clip' and 'promise_in_bounds' are XLA's native clamping; 'fill' is lowered as JAX
 * lowers it: the clamped gather, then the fill value selected wherever a start index was out
 * of bounds (a slice that does not fit).
 */
function emitGather(e: Emitter, r: string, i: HloInstruction, ins: string[], inTypes: string[], outTypes: string[]): void {
  const p = i.params as { dimensionNumbers: Record<string, number[]>; sliceSizes: number[]; mode: string; fillValue: number | null; indicesAreSorted: boolean };
  const dn = p.dimensionNumbers;
  const [x, idx] = [i.operands[0].shape, i.operands[1].shape];
  const fields = dimNumbers([['offset_dims', dn.offsetDims], ['collapsed_slice_dims', dn.collapsedSliceDims], ['operand_batching_dims', dn.operandBatchingDims], ['start_indices_batching_dims', dn.startIndicesBatchingDims], ['start_index_map', dn.startIndexMap]], idx.shape.length - 1);
  const attrs = `dimension_numbers = #stablehlo.gather<${fields}>, indices_are_sorted = ${p.indicesAreSorted}, slice_sizes = ${i64s(p.sliceSizes)}`;
  if (p.mode !== 'fill') return e.op(r, 'stablehlo.gather', ins, attrs, inTypes, outTypes);
  const g = e.fresh();
  e.op(g, 'stablehlo.gather', ins, attrs, inTypes, outTypes);
  const ok = indicesInBounds(e, ins[1], idx.shape, idx.dtype, dn.startIndexMap.map((d) => x.shape[d] - p.sliceSizes[d]));
  const out = i.shapes[0];
  const batchDims = out.shape.map((_, d) => d).filter((d) => !dn.offsetDims.includes(d));
  const mty = tensorType({ shape: out.shape, dtype: 'bool', weakType: false });
  const mask = e.fresh();
  e.op(mask, 'stablehlo.broadcast_in_dim', [ok], `broadcast_dimensions = ${i64s(batchDims)}`, [tensorType({ shape: idx.shape.slice(0, -1), dtype: 'bool', weakType: false })], [mty]);
  const fill = e.splat(p.fillValue ?? gatherFill(out.dtype), out.dtype, out.shape);
  e.op(r, 'stablehlo.select', [mask, g, fill], '', [mty, outTypes[0], outTypes[0]], outTypes);
}

/**
 * The scatter family as `stablehlo.scatter` with the combiner as its update region. 'fill'
 * (FILL_OR_DROP) and 'promise_in_bounds' are XLA's native behaviour (an update window that does
 * not fit is skipped); 'clip' clamps the start indices first, as JAX lowers it.
 */
function emitScatter(e: Emitter, r: string, i: HloInstruction, ins: string[], inTypes: string[], outTypes: string[]): void {
  const p = i.params as { dimensionNumbers: Record<string, number[]>; mode: string; indicesAreSorted: boolean; uniqueIndices: boolean };
  const dn = p.dimensionNumbers;
  const [x, idx, upd] = i.operands.map((o) => o.shape);
  let indices = ins[1];
  if (p.mode === 'clip') {
    const windowDims = x.shape.map((_, d) => d).filter((d) => !dn.insertedWindowDims.includes(d) && !dn.operandBatchingDims.includes(d));
    const size = (d: number): number => (windowDims.includes(d) ? upd.shape[dn.updateWindowDims[windowDims.indexOf(d)]] : 1);
    const lo = e.splat(0, idx.dtype, idx.shape);
    const hi = e.vectorConstant(dn.scatterDimsToOperandDims.map((d) => x.shape[d] - size(d)), idx.dtype, idx.shape);
    indices = e.fresh();
    e.op(indices, 'stablehlo.clamp', [lo, ins[1], hi], '', [inTypes[1], inTypes[1], inTypes[1]], [inTypes[1]]);
  }
  const fields = dimNumbers([['update_window_dims', dn.updateWindowDims], ['inserted_window_dims', dn.insertedWindowDims], ['input_batching_dims', dn.operandBatchingDims], ['scatter_indices_batching_dims', dn.scatterIndicesBatchingDims], ['scatter_dims_to_operand_dims', dn.scatterDimsToOperandDims]], idx.shape.length - 1);
  const sty = tensorType({ shape: [], dtype: x.dtype, weakType: false });
  const attrs = `scatter_dimension_numbers = #stablehlo.scatter<${fields}>, indices_are_sorted = ${p.indicesAreSorted}, unique_indices = ${p.uniqueIndices}`;
  e.op(r, 'stablehlo.scatter', [ins[0], indices, ins[2]], attrs, inTypes, outTypes, combinerRegion(SCATTER_COMBINER[i.prim!.name], sty));
}

const scalarType = (dtype: string): string => tensorType({ shape: [], dtype: dtype as never, weakType: false });
const isIntType = (dt: string): boolean => dt.startsWith('int') || dt.startsWith('uint');
/** The identity of max (`-inf`, or the smallest integer) / min as a literal of `dtype`. */
function extremeInit(dtype: string, forMax: boolean): string {
  if (!isIntType(dtype)) return fmtScalar(forMax ? -Infinity : Infinity, dtype);
  const bits = dtype.endsWith('8') ? 8 : 32;
  if (dtype.startsWith('uint')) return String(forMax ? 0 : 2 ** bits - 1);
  return String(forMax ? -(2 ** (bits - 1)) : 2 ** (bits - 1) - 1);
}
/** A region-local compare line: `%name = compare(a, b)` on scalars of `dtype`. */
const cmpLine = (name: string, a: string, b: string, dir: string, dtype: string): string =>
  `  ${name} = "stablehlo.compare"(${a}, ${b}) {comparison_direction = #stablehlo<comparison_direction ${dir}>, compare_type = #stablehlo<comparison_type ${compareType(dtype)}>} : (${scalarType(dtype)}, ${scalarType(dtype)}) -> tensor<i1>`;
const binLine = (name: string, op: string, a: string, b: string, ty: string): string => `  ${name} = "stablehlo.${op}"(${a}, ${b}) : (${ty}, ${ty}) -> ${ty}`;

/**
 * cumsum / cumprod / cummax / cummin as JAX lowers them for TPU: a `reduce_window` along the
 * axis with a window of the axis length, padded in front (behind for `reverse`).
 */
function emitCumulative(e: Emitter, r: string, i: HloInstruction, ins: string[], inTypes: string[], outTypes: string[]): void {
  const p = i.params as { axis: number; reverse: boolean };
  const x = i.operands[0].shape;
  const name = i.prim!.name;
  const n = x.shape[p.axis];
  const init = e.fresh();
  const sty = scalarType(x.dtype);
  const lit = name === 'cumsum' ? (isIntType(x.dtype) ? '0' : fmtScalar(0, x.dtype)) : name === 'cumprod' ? (isIntType(x.dtype) ? '1' : fmtScalar(1, x.dtype)) : extremeInit(x.dtype, name === 'cummax');
  e.op(init, 'stablehlo.constant', [], `value = dense<${lit}> : ${sty}`, [], [sty]);
  const window = x.shape.map((_, d) => (d === p.axis ? n : 1));
  const pad = x.shape.map((_, d) => (d === p.axis ? (p.reverse ? [0, n - 1] : [n - 1, 0]) : [0, 0]));
  const attrs = `window_dimensions = ${i64s(window)}, padding = dense<[${pad.map(([a, b]) => `[${a}, ${b}]`).join(', ')}]> : tensor<${x.shape.length}x2xi64>`;
  e.op(r, 'stablehlo.reduce_window', [ins[0], init], attrs, [inTypes[0], sty], outTypes, combinerRegion(CUMULATIVE[name], sty));
}

/**
 * argmax / argmin as JAX lowers them: a two-operand `reduce` over (values, iota) that keeps the
 * larger (smaller) value, a NaN over a number, and on ties the smaller index.
 */
function emitArgReduce(e: Emitter, i: HloInstruction, ins: string[], inTypes: string[]): void {
  const p = i.params as { axis: number; indexDtype: string };
  const x = i.operands[0].shape;
  const forMax = i.prim!.name === 'argmax';
  const ity = tensorType({ shape: x.shape, dtype: p.indexDtype as never, weakType: false });
  const iota = e.fresh();
  e.op(iota, 'stablehlo.iota', [], `iota_dimension = ${p.axis} : i64`, [], [ity]);
  const [sv, si] = [scalarType(x.dtype), scalarType(p.indexDtype)];
  const [v0, i0] = [e.fresh(), e.fresh()];
  e.op(v0, 'stablehlo.constant', [], `value = dense<${extremeInit(x.dtype, forMax)}> : ${sv}`, [], [sv]);
  e.op(i0, 'stablehlo.constant', [], `value = dense<0> : ${si}`, [], [si]);
  const b = 'tensor<i1>';
  const region = [
    ` ({\n^bb0(%av: ${sv}, %ai: ${si}, %bv: ${sv}, %bi: ${si}):`,
    cmpLine('%better', '%av', '%bv', forMax ? 'GT' : 'LT', x.dtype),
    cmpLine('%isnan', '%av', '%av', 'NE', x.dtype),
    binLine('%pickv', 'or', '%better', '%isnan', b),
    cmpLine('%same', '%av', '%bv', 'EQ', x.dtype),
    cmpLine('%first', '%ai', '%bi', 'LT', p.indexDtype),
    binLine('%tie', 'and', '%same', '%first', b),
    binLine('%picki', 'or', '%pickv', '%tie', b),
    `  %v = "stablehlo.select"(%pickv, %av, %bv) : (${b}, ${sv}, ${sv}) -> ${sv}`,
    `  %i = "stablehlo.select"(%picki, %ai, %bi) : (${b}, ${si}, ${si}) -> ${si}`,
    `  "stablehlo.return"(%v, %i) : (${sv}, ${si}) -> ()\n})`,
  ].join('\n');
  const out = i.shapes[0];
  const red = e.fresh();
  e.op(red, 'stablehlo.reduce', [ins[0], iota, v0, i0], `dimensions = array<i64: ${p.axis}>`, [inTypes[0], ity, sv, si], [tensorType({ shape: out.shape, dtype: x.dtype, weakType: false }), tensorType(out)], region);
  e.bind(i, `${red}#1`);
}

/**
 * `sort` as a stable `stablehlo.sort` whose comparator orders the first `numKeys` operands
 * lexicographically, floats ascending with NaNs last (core's sort order; -0 equals 0).
 */
function emitSort(e: Emitter, r: string, i: HloInstruction, ins: string[], inTypes: string[], outTypes: string[]): void {
  const p = i.params as { dimension: number; numKeys: number };
  const dts = i.operands.map((o) => o.shape.dtype);
  const b = 'tensor<i1>';
  const args = dts.map((dt, k) => `%a${k}: ${scalarType(dt)}, %b${k}: ${scalarType(dt)}`).join(', ');
  const lines = [` ({\n^bb0(${args}):`];
  // lt(x, y): x < y, or y is NaN and x is not. Lexicographic: lt0 | (eq0 & (lt1 | (eq1 & ...))).
  const lt = (k: number, x: string, y: string, tag: string): string => {
    if (!isFloatType(dts[k])) {
      lines.push(cmpLine(`%${tag}`, x, y, 'LT', dts[k]));
      return `%${tag}`;
    }
    lines.push(cmpLine(`%${tag}l`, x, y, 'LT', dts[k]), cmpLine(`%${tag}yn`, y, y, 'NE', dts[k]), cmpLine(`%${tag}xo`, x, x, 'EQ', dts[k]));
    lines.push(binLine(`%${tag}n`, 'and', `%${tag}yn`, `%${tag}xo`, b), binLine(`%${tag}`, 'or', `%${tag}l`, `%${tag}n`, b));
    return `%${tag}`;
  };
  let acc: string | null = null;
  for (let k = p.numKeys - 1; k >= 0; k--) {
    const less = lt(k, `%a${k}`, `%b${k}`, `lt${k}`);
    if (acc === null) {
      acc = less;
      continue;
    }
    const more = lt(k, `%b${k}`, `%a${k}`, `gt${k}`);
    lines.push(binLine(`%ne${k}`, 'or', less, more, b));
    lines.push(`  %t${k} = "stablehlo.constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>`);
    lines.push(binLine(`%eq${k}`, 'xor', `%ne${k}`, `%t${k}`, b));
    lines.push(binLine(`%and${k}`, 'and', `%eq${k}`, acc, b));
    lines.push(binLine(`%lex${k}`, 'or', less, `%and${k}`, b));
    acc = `%lex${k}`;
  }
  lines.push(`  "stablehlo.return"(${acc}) : (${b}) -> ()\n})`);
  e.op(r, 'stablehlo.sort', ins, `dimension = ${p.dimension} : i64, is_stable = true`, inTypes, outTypes, lines.join('\n'));
}

/**
 * `top_k` as a stable descending `stablehlo.sort` of (x, iota) along the last dimension, then a
 * slice of the first k of each: core's order (NaN largest, -0 equal to 0, ties keep the lower
 * index first). Unlike `chlo.top_k` this states the order of NaNs and ties explicitly.
 */
function emitTopK(e: Emitter, i: HloInstruction, ins: string[], inTypes: string[]): void {
  const x = i.operands[0].shape;
  const last = x.shape.length - 1;
  const ity = tensorType({ shape: x.shape, dtype: 'int32', weakType: false });
  const iota = e.fresh();
  e.op(iota, 'stablehlo.iota', [], `iota_dimension = ${last} : i64`, [], [ity]);
  const [sv, si, b] = [scalarType(x.dtype), scalarType('int32'), 'tensor<i1>'];
  const lines = [` ({\n^bb0(%a0: ${sv}, %b0: ${sv}, %a1: ${si}, %b1: ${si}):`, cmpLine('%gt', '%a0', '%b0', 'GT', x.dtype)];
  let before = '%gt';
  if (isFloatType(x.dtype)) {
    // a before b: a > b, or a is NaN and b is not.
    lines.push(cmpLine('%an', '%a0', '%a0', 'NE', x.dtype), cmpLine('%bo', '%b0', '%b0', 'EQ', x.dtype), binLine('%nan', 'and', '%an', '%bo', b), binLine('%first', 'or', '%gt', '%nan', b));
    before = '%first';
  }
  lines.push(`  "stablehlo.return"(${before}) : (${b}) -> ()\n})`);
  const s = e.fresh();
  e.op(s, 'stablehlo.sort', [ins[0], iota], `dimension = ${last} : i64, is_stable = true`, [inTypes[0], ity], [inTypes[0], ity], lines.join('\n'));
  const limits = i.shapes[0].shape;
  const attrs = `start_indices = ${i64s(limits.map(() => 0))}, limit_indices = ${i64s(limits)}, strides = ${i64s(limits.map(() => 1))}`;
  const outs = i.shapes.map((o, k) => {
    const r = e.fresh();
    e.op(r, 'stablehlo.slice', [`${s}#${k}`], attrs, [k === 0 ? inTypes[0] : ity], [tensorType(o)]);
    return r;
  });
  e.outputs.set(i, outs);
}

/**
 * The threefry2x32 block cipher expanded into uint32 ops (JAX's CPU/GPU lowering: 20 rounds of
 * add / rotate / xor with 5 key injections), so random draws inside a jitted function export
 * as standard ops. The four operands are broadcast to the output shape first.
 */
function emitThreefry(e: Emitter, i: HloInstruction, ins: string[], inTypes: string[]): void {
  const shape = i.shapes[0].shape;
  const ty = tensorType({ shape, dtype: 'uint32', weakType: false });
  const consts = new Map<number, string>();
  const k = (v: number): string => {
    let c = consts.get(v);
    if (c === undefined) consts.set(v, (c = e.splat(v >>> 0, 'uint32', shape)));
    return c;
  };
  const [k0, k1, x0, x1] = ins.map((n, j) => {
    const s = i.operands[j].shape.shape;
    if (s.length === shape.length && s.every((d, q) => d === shape[q])) return n;
    const out = e.fresh();
    const lead = shape.length - s.length;
    e.op(out, 'stablehlo.broadcast_in_dim', [n], `broadcast_dimensions = ${i64s(s.map((_, q) => q + lead))}`, [inTypes[j]], [ty]);
    return out;
  });
  const bin = (op: string, a: string, b: string): string => {
    const out = e.fresh();
    e.op(out, `stablehlo.${op}`, [a, b], '', [ty, ty], [ty]);
    return out;
  };
  const ks = [k0, k1, bin('xor', bin('xor', k0, k1), k(0x1bd11bda))];
  const rot = [
    [13, 15, 26, 6],
    [17, 29, 16, 24],
  ];
  let a = bin('add', x0, ks[0]);
  let b = bin('add', x1, ks[1]);
  for (let block = 0; block < 5; block++) {
    for (const rr of rot[block % 2]) {
      a = bin('add', a, b);
      b = bin('xor', bin('or', bin('shift_left', b, k(rr)), bin('shift_right_logical', b, k(32 - rr))), a);
    }
    a = bin('add', a, ks[(block + 1) % 3]);
    b = bin('add', bin('add', b, ks[(block + 2) % 3]), k(block + 1));
  }
  e.outputs.set(i, [a, b]);
}

/** Runs `fn` with the emitter writing into a fresh list of region lines, and returns them. */
function withLines(e: Emitter, fn: () => void): string[] {
  const [lines, indent] = [e.lines, e.indent];
  e.lines = [];
  e.indent = '  ';
  try {
    fn();
    return e.lines;
  } finally {
    [e.lines, e.indent] = [lines, indent];
  }
}

/** Emits sub-computation `comp` inline with its parameters bound to `args`; its output names. */
function emitCall(e: Emitter, comp: HloComputation, args: readonly string[]): string[] {
  comp.params.forEach((p, k) => e.bind(p, args[k]));
  for (const m of comp.instructions) emitInstruction(e, m);
  return comp.outputs.map((o) => e.name(o));
}

/** The names of a `count`-result op's results (`%7#0`, ... or `%7` alone). */
const results = (r: string, count: number): string[] => (count === 1 ? [r] : globalThis.Array.from({ length: count }, (_, k) => `${r}#${k}`));

/** Binds a control-flow instruction's outputs: a tuple's for its get-tuple-elements, else the one value. */
function bindOutputs(e: Emitter, i: HloInstruction, names: string[]): void {
  if (i.isTuple) e.outputs.set(i, names);
  else e.bind(i, names[0]);
}

/** `stablehlo.while` over `state` (types `types`): the cond and body regions as given. */
function whileOp(e: Emitter, state: string[], types: string[], cond: (args: string[]) => string, body: (args: string[]) => string[]): string[] {
  const tag = e.fresh().slice(1);
  const args = (p: string): string[] => types.map((_, k) => `%${p}${tag}_${k}`);
  const header = (names: string[]): string => `^bb0(${names.map((n, k) => `${n}: ${types[k]}`).join(', ')}):`;
  const [ca, ba] = [args('wc'), args('wb')];
  let pred = '';
  const condLines = withLines(e, () => (pred = cond(ca)));
  let next: string[] = [];
  const bodyLines = withLines(e, () => (next = body(ba)));
  const region = [
    ` ({\n${header(ca)}`,
    ...condLines,
    `  "stablehlo.return"(${pred}) : (tensor<i1>) -> ()\n}, {\n${header(ba)}`,
    ...bodyLines,
    `  "stablehlo.return"(${next.join(', ')}) : (${types.join(', ')}) -> ()\n})`,
  ].join('\n');
  const r = e.fresh();
  e.op(r, 'stablehlo.while', state, '', types, types, region);
  return results(r, types.length);
}

/**
 * `while` as `stablehlo.while`: the loop state is every operand (the cond's and the body's
 * constants ride along unchanged), the cond region runs the cond computation on its constants
 * and the carry, the body region the body computation on its constants and the carry.
 */
function emitWhile(e: Emitter, i: HloInstruction, ins: string[], inTypes: string[]): void {
  const p = i.params as { condNconsts: number; bodyNconsts: number };
  // Lowering keeps the params' order (condJaxpr, bodyJaxpr); the cond is the one with a bool output.
  const [c0, c1] = i.called;
  const [condC, bodyC] = c0.outputs.length === 1 && c0.outputs[0].shape.dtype === 'bool' ? [c0, c1] : [c1, c0];
  const [cn, bn] = [p.condNconsts, p.bodyNconsts];
  const outs = whileOp(
    e,
    ins,
    inTypes,
    (a) => emitCall(e, condC, [...a.slice(0, cn), ...a.slice(cn + bn)])[0],
    (a) => [...a.slice(0, cn + bn), ...emitCall(e, bodyC, a.slice(cn))],
  );
  bindOutputs(e, i, outs.slice(cn + bn));
}

/**
 * `scan` as JAX lowers it: a `stablehlo.while` over (i, consts, carry, xs, ys) that slices
 * x_i out of each xs with `dynamic_slice`, runs the body, and writes y_i into each ys with
 * `dynamic_update_slice` (i counts down from length - 1 with `reverse`).
 */
function emitScan(e: Emitter, i: HloInstruction, ins: string[], inTypes: string[]): void {
  const p = i.params as { numConsts: number; numCarry: number; length: number; reverse: boolean };
  const [nc, nk] = [p.numConsts, p.numCarry];
  const xs = i.operands.slice(nc + nk).map((o) => o.shape);
  const ys = i.shapes.slice(nk);
  const i32 = 'tensor<i32>';
  const state = [e.splat(0, 'int32', []), ...ins, ...ys.map((y) => e.splat(0, y.dtype, y.shape))];
  const types = [i32, ...inTypes, ...ys.map(tensorType)];
  const nx = xs.length;
  const sliceAt = (idx: string, rank: number): string[] => [idx, ...globalThis.Array.from({ length: rank - 1 }, () => e.splat(0, 'int32', []))];
  const outs = whileOp(
    e,
    state,
    types,
    (a) => {
      const lim = e.splat(p.length, 'int32', []);
      const r = e.fresh();
      e.op(r, 'stablehlo.compare', [a[0], lim], 'comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>', [i32, i32], ['tensor<i1>']);
      return r;
    },
    (a) => {
      let idx = a[0];
      if (p.reverse) {
        idx = e.fresh();
        e.op(idx, 'stablehlo.subtract', [e.splat(p.length - 1, 'int32', []), a[0]], '', [i32, i32], [i32]);
      }
      const xsNow = xs.map((x, k) => {
        const one = [1, ...x.shape.slice(1)];
        const oneTy = tensorType({ shape: one, dtype: x.dtype, weakType: false });
        const sl = e.fresh();
        e.op(sl, 'stablehlo.dynamic_slice', [a[1 + nc + nk + k], ...sliceAt(idx, x.shape.length)], `slice_sizes = ${i64s(one)}`, [tensorType(x), ...x.shape.map(() => i32)], [oneTy]);
        const r = e.fresh();
        e.op(r, 'stablehlo.reshape', [sl], '', [oneTy], [tensorType({ shape: x.shape.slice(1), dtype: x.dtype, weakType: false })]);
        return r;
      });
      const bodyOuts = emitCall(e, i.called[0], [...a.slice(1, 1 + nc + nk), ...xsNow]);
      const ysNext = ys.map((y, k) => {
        const one = [1, ...y.shape.slice(1)];
        const oneTy = tensorType({ shape: one, dtype: y.dtype, weakType: false });
        const yt = bodyOuts[nk + k];
        const rs = e.fresh();
        e.op(rs, 'stablehlo.reshape', [yt], '', [tensorType({ shape: y.shape.slice(1), dtype: y.dtype, weakType: false })], [oneTy]);
        const up = e.fresh();
        e.op(up, 'stablehlo.dynamic_update_slice', [a[1 + nc + nk + nx + k], rs, ...sliceAt(idx, y.shape.length)], '', [tensorType(y), oneTy, ...y.shape.map(() => i32)], [tensorType(y)]);
        return up;
      });
      const inc = e.fresh();
      e.op(inc, 'stablehlo.add', [a[0], e.splat(1, 'int32', [])], '', [i32, i32], [i32]);
      return [inc, ...a.slice(1, 1 + nc), ...bodyOuts.slice(0, nk), ...a.slice(1 + nc + nk, 1 + nc + nk + nx), ...ysNext];
    },
  );
  bindOutputs(e, i, [...outs.slice(1 + nc, 1 + nc + nk), ...outs.slice(1 + nc + nk + nx)]);
}

/**
 * `cond` as `stablehlo.case` on the branch index clamped to [0, branches - 1] (as core's cond
 * and JAX clamp it); each branch region uses the operands from above, as JAX's lowering does.
 */
function emitCond(e: Emitter, i: HloInstruction, ins: string[], inTypes: string[], outTypes: string[]): void {
  const n = i.called.length;
  const idx = e.fresh();
  e.op(idx, 'stablehlo.clamp', [e.splat(0, 'int32', []), ins[0], e.splat(n - 1, 'int32', [])], '', [inTypes[0], inTypes[0], inTypes[0]], [inTypes[0]]);
  const regions = i.called.map((b) => {
    let outs: string[] = [];
    const lines = withLines(e, () => (outs = emitCall(e, b, ins.slice(1))));
    return ['{', ...lines, `  "stablehlo.return"(${outs.join(', ')}) : (${outTypes.join(', ')}) -> ()`, '}'].join('\n');
  });
  const r = e.fresh();
  e.op(r, 'stablehlo.case', [idx], '', [inTypes[0]], outTypes, ` (${regions.join(', ')})`);
  bindOutputs(e, i, results(r, outTypes.length));
}

/** GSPMD shardings to attach (XLA's text form per argument and result), as JAX's lowering does. */
export interface StableHloShardings {
  readonly numPartitions: number;
  readonly args: readonly string[];
  readonly results: readonly string[];
}

const shardingAttr = (s: string | undefined): string => (s === undefined ? '' : ` {mhlo.sharding = ${JSON.stringify(s)}}`);

function funcText(c0: HloComputation, name: string, sh: StableHloShardings | null, consts: readonly Array[]): string {
  // (the computation as the exporters see it: before horizontal loop fusion, passes/exportView.ts)
  const c = exportViewOf(c0);
  const e = new Emitter('    ');
  // Hoisted constants (the leading parameters) become constants; the arguments are renumbered.
  consts.forEach((v, k) => {
    const ty = tensorType(c.params[k].shape);
    const r = e.fresh();
    e.op(r, 'stablehlo.constant', [], `value = ${denseLiteral(v.dataSync() as ArrayLike<number>, v.shape, v.dtype)} : ${ty}`, [], [ty]);
    e.bind(c.params[k], r);
  });
  const args = c.params.slice(consts.length).map((p, k) => {
    e.bind(p, `%arg${k}`);
    return `%arg${k}: ${tensorType(p.shape)}${shardingAttr(sh?.args[k])}`;
  });
  for (const i of exportOrderOf(c)) emitInstruction(e, i);
  const outs = c.outputs.map((o) => tensorType(o.shape));
  e.lines.push(`    "func.return"(${c.outputs.map((o) => e.name(o)).join(', ')}) : (${outs.join(', ')}) -> ()`);
  return [`  func.func public @${name}(${args.join(', ')}) -> (${outs.map((t, k) => t + shardingAttr(sh?.results[k])).join(', ')}) {`, ...e.lines, '  }'].join('\n');
}

/**
 * The module as StableHLO MLIR text (entry computation as `@main`). With `shardings`, the
 * arguments and results carry `mhlo.sharding` and the module `mhlo.num_partitions`, so a real
 * XLA partitions the program the same way.
 */
export function toStableHlo(m: HloModule, shardings: StableHloShardings | null = null, consts: readonly Array[] = []): string {
  const modName = m.name.replace(/[^A-Za-z0-9_]/g, '_');
  const attrs = shardings ? ` attributes {mhlo.num_partitions = ${shardings.numPartitions} : i32, mhlo.num_replicas = 1 : i32}` : '';
  if (consts.length > m.entry.params.length) throw new Error(`xla-lite export: ${consts.length} hoisted constants for ${m.entry.params.length} parameters`);
  return `module @${modName}${attrs} {\n${funcText(m.entry, 'main', shardings, consts)}\n}\n`;
}
