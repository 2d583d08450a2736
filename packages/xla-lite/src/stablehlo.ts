/**
 * StableHLO export: `Lowered.asStableHlo()` prints the (unoptimised) module as MLIR text in
 * StableHLO's generic operation form, which every MLIR parser accepts:
 * `%3 = "stablehlo.add"(%1, %2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>`, inside
 * `module @name { func.func public @main(...) -> (...) { ... } }`, with tensor types including
 * `bf16` and `i1`. Attributes follow the StableHLO spec (broadcast_dimensions, permutation,
 * #stablehlo.dot dimension numbers, #stablehlo<comparison_direction>, reduce regions). Ops that
 * have no StableHLO counterpart here (control flow, gather/scatter, cumulative ops, sort, RNG)
 * are emitted as `stablehlo.custom_call @tpukit.<primitive>`: valid MLIR, but a real XLA cannot
 * run them. The fused attention (`dot_product_attention`, `_fwd`, `_bwd`) and the one-hot
 * gathers / segment sums are instead expanded into standard ops (dot_general, the mask by
 * select, exp / reduce softmax with float32 accumulation; see passes/exportExpansion.ts), so
 * the text of a training step that uses them stays runnable by a real XLA. An optimised module (`Compiled.asStableHlo()`) exports each fusion's body inline
 * (StableHLO has no fusion op) and layout `copy`s as nothing (tensors carry no layout). A debug callback (`debug.print`) becomes what JAX emits for a host callback, a
 * `stablehlo.custom_call @xla_ffi_python_cpu_callback` (typed FFI, `api_version = 4`) with
 * `has_side_effect = true`, no results and a `{descriptor = N : ui64}` backend_config; the
 * callback lives only in this process (a `tpukit.callback` attribute names it), and ordered
 * callbacks are not threaded through a `!stablehlo.token` here. A sharding constraint (a
 * `sharding_constraint` primitive) becomes `stablehlo.custom_call @Sharding` with its
 * `mhlo.sharding`. No real XLA was available to compile
 * the output; tests check its structure.
 */
import type { ShapedArray } from '@tpukit/core/internal';
import type { HloComputation, HloInstruction, HloModule } from './hlo';
import { getPrimitive, operandPrecisions } from '@tpukit/core/internal';
import { expandForExport, hasExpansion } from './passes/exportExpansion';

const ELT: Record<string, string> = { float32: 'f32', bfloat16: 'bf16', float16: 'f16', int32: 'i32', uint32: 'ui32', int8: 'i8', uint8: 'ui8', bool: 'i1' };

/** `tensor<2x3xbf16>` (scalars: `tensor<f32>`). */
export function tensorType(s: ShapedArray): string {
  return `tensor<${s.shape.map((d) => `${d}x`).join('')}${ELT[s.dtype] ?? s.dtype}>`;
}

const REDUCER: Record<string, string> = { reduce_sum: 'add', reduce_max: 'maximum', reduce_min: 'minimum', reduce_prod: 'multiply', reduce_and: 'and', reduce_or: 'or' };
/** Primitives with their own case in `emitInstruction` below. */
const STRUCTURED = new Set(['integer_pow', 'square', 'broadcast_in_dim', 'transpose', 'squeeze', 'rev', 'iota', 'concatenate', 'select_n', 'slice', 'pad', 'dot_general', 'debug_callback']);

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

class Emitter {
  lines: string[] = [];
  private names = new Map<HloInstruction, string>();
  /** The output names of expanded multi-output instructions (read by get-tuple-element). */
  readonly outputs = new Map<HloInstruction, string[]>();
  private n = 0;

  constructor(private indent: string) {}

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
  body.params.forEach((p, k) => e.bind(p, e.name(i.operands[k])));
  for (const m of body.instructions) emitInstruction(e, m);
  const outs = body.outputs.map((o) => e.name(o));
  if (i.isTuple) e.outputs.set(i, outs);
  else e.bind(i, outs[0]);
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
  const body = expandForExport(i) ?? (i.opcode === 'fusion' ? i.called[0] : null);
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
  const name = i.prim!.name;
  const p = i.params as Record<string, any>;
  // with_sharding_constraint, as JAX lowers it under GSPMD.
  if (name === 'sharding_constraint') return e.op(r, 'stablehlo.custom_call', ins, `call_target_name = "Sharding", mhlo.sharding = ${JSON.stringify(String(p.sharding))}`, inTypes, outTypes);
  const prim = i.prim!;
  if (prim.stablehlo) return e.op(r, `stablehlo.${prim.stablehlo}`, ins, '', inTypes, outTypes);
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
    case 'dot_general': {
      const [[lc, rc], [lb, rb]] = p.dimensionNumbers;
      const dn = `#stablehlo.dot<lhs_batching_dimensions = [${lb.join(', ')}], rhs_batching_dimensions = [${rb.join(', ')}], lhs_contracting_dimensions = [${lc.join(', ')}], rhs_contracting_dimensions = [${rc.join(', ')}]>`;
      const pc = p.precision ? `, precision_config = [${operandPrecisions(p.precision).map((q) => `#stablehlo<precision ${q.toUpperCase()}>`).join(', ')}]` : '';
      return e.op(r, 'stablehlo.dot_general', ins, `dot_dimension_numbers = ${dn}${pc}`, inTypes, outTypes);
    }
    default:
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
    const initLit = x.dtype === 'bool' ? fmtScalar(initVal, 'bool') : x.dtype.startsWith('int') || x.dtype.startsWith('uint') ? String(name === 'reduce_max' ? (x.dtype === 'int32' ? -2147483648 : 0) : name === 'reduce_min' ? (x.dtype === 'int32' ? 2147483647 : 4294967295) : initVal) : fmtScalar(initVal, x.dtype);
    e.op(init, 'stablehlo.constant', [], `value = dense<${initLit}> : ${sty}`, [], [sty]);
    const region = ` ({\n^bb0(%lhs: ${sty}, %rhs: ${sty}):\n  %s = "stablehlo.${REDUCER[name]}"(%lhs, %rhs) : (${sty}, ${sty}) -> ${sty}\n  "stablehlo.return"(%s) : (${sty}) -> ()\n})`;
    return e.op(r, 'stablehlo.reduce', [ins[0], init], `dimensions = ${i64s(p.axes)}`, [inTypes[0], sty], outTypes, region);
  }
  // No StableHLO lowering here: a custom call naming the primitive, with its parameters as JSON.
  const cfg = JSON.stringify(Object.fromEntries(Object.entries(p).filter(([, v]) => typeof v !== 'object' || v === null || (globalThis.Array.isArray(v) && v.every((x) => typeof x !== 'object' || globalThis.Array.isArray(x))))));
  e.op(r, 'stablehlo.custom_call', ins, `call_target_name = "tpukit.${name}", backend_config = ${JSON.stringify(cfg)}`, inTypes, outTypes);
}

/** GSPMD shardings to attach (XLA's text form per argument and result), as JAX's lowering does. */
export interface StableHloShardings {
  readonly numPartitions: number;
  readonly args: readonly string[];
  readonly results: readonly string[];
}

const shardingAttr = (s: string | undefined): string => (s === undefined ? '' : ` {mhlo.sharding = ${JSON.stringify(s)}}`);

function funcText(c: HloComputation, name: string, sh: StableHloShardings | null): string {
  const e = new Emitter('    ');
  const args = c.params.map((p, k) => {
    e.bind(p, `%arg${k}`);
    return `%arg${k}: ${tensorType(p.shape)}${shardingAttr(sh?.args[k])}`;
  });
  for (const i of c.instructions) emitInstruction(e, i);
  const outs = c.outputs.map((o) => tensorType(o.shape));
  e.lines.push(`    "func.return"(${c.outputs.map((o) => e.name(o)).join(', ')}) : (${outs.join(', ')}) -> ()`);
  return [`  func.func public @${name}(${args.join(', ')}) -> (${outs.map((t, k) => t + shardingAttr(sh?.results[k])).join(', ')}) {`, ...e.lines, '  }'].join('\n');
}

/**
 * The module as StableHLO MLIR text (entry computation as `@main`). With `shardings`, the
 * arguments and results carry `mhlo.sharding` and the module `mhlo.num_partitions`, so a real
 * XLA partitions the program the same way.
 */
export function toStableHlo(m: HloModule, shardings: StableHloShardings | null = null): string {
  const modName = m.name.replace(/[^A-Za-z0-9_]/g, '_');
  const attrs = shardings ? ` attributes {mhlo.num_partitions = ${shardings.numPartitions} : i32, mhlo.num_replicas = 1 : i32}` : '';
  return `module @${modName}${attrs} {\n${funcText(m.entry, 'main', shardings)}\n}\n`;
}
