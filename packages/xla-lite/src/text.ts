/**
 * `asText()`: prints a module the way XLA prints HLO (`HloModule`, one block per computation,
 * callees first, `ENTRY` last, `%name = type opcode(operands), attributes`, `ROOT` tuple),
 * with each value's layout (row-major `{n-1,...,0}` unless layout assignment chose another). Attributes use XLA's spellings where the op has one
 * (dimensions, lhs_contracting_dims, slice, direction, iota_dimension, calls, condition/body);
 * other core parameters are printed as `key=json`.
 */
import type { ShapedArray } from '@tpukit/core/internal';
import type { HloComputation, HloInstruction, HloModule } from './hlo';
import { operandPrecisions } from '@tpukit/core/internal';
import { exportOrderOf } from './passes/dotGroups';
import { exportViewOf } from './passes/exportView';
import { shardingAttrs, spmdAttrs } from './spmd/text';

const SHORT: Record<string, string> = { float32: 'f32', bfloat16: 'bf16', float16: 'f16', int32: 's32', uint32: 'u32', int8: 's8', uint8: 'u8', bool: 'pred' };

/** `f32[2,3]{1,0}`: the layout is minor-to-major, row-major (`{n-1,...,0}`) unless given. */
export function hloType(s: ShapedArray, minorToMajor: readonly number[] | null = null): string {
  const layout = (minorToMajor ?? s.shape.map((_, i) => s.shape.length - 1 - i)).join(',');
  return `${SHORT[s.dtype] ?? s.dtype}[${s.shape.join(',')}]{${layout}}`;
}

const tupleType = (ss: readonly ShapedArray[]): string => `(${ss.map((s) => hloType(s)).join(', ')})`;

export const instName = (i: HloInstruction): string => (i.opcode === 'parameter' ? `Arg_${i.paramIndex}.${i.id}` : `${i.opcode}.${i.id}`);

const set = (xs: readonly number[]): string => `{${xs.join(',')}}`;

function attrs(i: HloInstruction): string[] {
  const p = i.params as Record<string, any>;
  const out: string[] = [];
  const name = i.opcode === 'copy' ? 'copy' : (i.prim?.name ?? i.opcode);
  const spmd = spmdAttrs(i);
  if (spmd) return spmd;
  switch (name) {
    case 'copy':
      return out; // a layout change: the layouts in the types say it all
    case 'broadcast_in_dim':
      out.push(`dimensions=${set(p.broadcastDimensions)}`);
      break;
    case 'transpose':
      out.push(`dimensions=${set(p.permutation)}`);
      break;
    case 'dot_general': {
      const [[lc, rc], [lb, rb]] = p.dimensionNumbers;
      if (lb.length) out.push(`lhs_batch_dims=${set(lb)}`);
      out.push(`lhs_contracting_dims=${set(lc)}`);
      if (rb.length) out.push(`rhs_batch_dims=${set(rb)}`);
      out.push(`rhs_contracting_dims=${set(rc)}`);
      // As XLA: printed only when set (null runs at the process default, read when the dot runs).
      if (p.precision) out.push(`operand_precision={${operandPrecisions(p.precision).join(',')}}`);
      break;
    }
    case 'reduce_sum':
    case 'reduce_max':
    case 'reduce_min':
    case 'reduce_prod':
      out.push(`dimensions=${set(p.axes)}`, `to_apply=%${name.slice(7)}`);
      break;
    case 'slice':
      out.push(`slice={${p.startIndices.map((s: number, k: number) => `[${s}:${p.limitIndices[k]}:${p.strides?.[k] ?? 1}]`).join(', ')}}`);
      break;
    case 'iota':
      out.push(`iota_dimension=${p.dimension}`);
      break;
    case 'concatenate':
      out.push(`dimensions={${p.dimension}}`);
      break;
    case 'pad':
      out.push(`padding=${p.paddingConfig.map((c: number[]) => c.join('_')).join('x')}`);
      break;
    case 'get-tuple-element':
      out.push(`index=${p.index}`);
      break;
    case 'debug_callback':
      // As XLA prints JAX's host callbacks: a side-effecting custom call into the host.
      out.push('custom_call_target="xla_ffi_python_cpu_callback"', 'custom_call_has_side_effect=true', 'api_version=API_VERSION_TYPED_FFI', `metadata={op_name=${JSON.stringify(`${p.label}${p.effect === 'ordered' ? ' (ordered)' : ''}`)}}`);
      return out;
    case 'fusion':
      out.push(`kind=${p.kind}`, `calls=%${i.called[0].name}`);
      return out;
    case 'while':
      out.push(`condition=%${i.called[0].name}`, `body=%${i.called[1].name}`);
      return out;
    case 'cond':
      out.push(`branch_computations={${i.called.map((c) => `%${c.name}`).join(', ')}}`);
      return out;
    default:
      if (p.direction) out.push(`direction=${p.direction}`);
      for (const [k, v] of Object.entries(p)) {
        if (k === 'direction' || k === 'sharding' || k === 'spmd' || v === undefined || (typeof v === 'object' && v !== null && (v.constructor?.name === 'ClosedJaxpr' || (globalThis.Array.isArray(v) && v.some((x) => x?.constructor?.name === 'ClosedJaxpr'))))) continue;
        if (typeof v === 'function') continue;
        out.push(`${k.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase())}=${JSON.stringify(v)}`);
      }
      if (i.called.length) out.push(`calls={${i.called.map((c) => `%${c.name}`).join(', ')}}`);
      return out;
  }
  return out;
}

function constantText(i: HloInstruction): string {
  const l = i.literal!;
  const n = l.size;
  if (n > 8) return `{...}`;
  const v = l.dataSync() as ArrayLike<number>;
  const vals = globalThis.Array.from(v, (x) => (l.dtype === 'bool' ? (x ? 'true' : 'false') : String(x)));
  return l.shape.length === 0 ? vals[0] : `{${vals.join(', ')}}`;
}

function instructionText(i: HloInstruction, root: boolean): string {
  const ty = i.isTuple ? tupleType(i.shapes) : hloType(i.shape, i.layout);
  let body: string;
  if (i.opcode === 'parameter') body = `parameter(${i.paramIndex})`;
  else if (i.opcode === 'constant') body = `constant(${constantText(i)})`;
  else body = `${i.opcode}(${i.operands.map((o) => `%${instName(o)}`).join(', ')})`;
  const a = [...attrs(i), ...shardingAttrs(i)];
  return `  ${root ? 'ROOT ' : ''}%${instName(i)} = ${ty} ${body}${a.length ? ', ' + a.join(', ') : ''}`;
}

export function computationText(c0: HloComputation, entry: boolean): string {
  const c = exportViewOf(c0);
  const sig = `(${c.params.map((p) => `${instName(p)}: ${hloType(p.shape, p.layout)}`).join(', ')}) -> ${tupleType(c.outputs.map((o) => o.shape))}`;
  const lines = [`${entry ? 'ENTRY ' : ''}%${c.name} ${sig} {`];
  for (const i of exportOrderOf(c)) lines.push(instructionText(i, false));
  lines.push(`  ROOT %tuple = ${tupleType(c.outputs.map((o) => o.shape))} tuple(${c.outputs.map((o) => `%${instName(o)}`).join(', ')})`);
  lines.push('}');
  return lines.join('\n');
}

/** The whole module as HLO text. */
export function moduleText(m: HloModule): string {
  // (as `m.reachable()`, walking each computation in its export order: the called computations print in the same order with and without windows)
  const seen = new Set<HloComputation>();
  const comps: HloComputation[] = [];
  const visit = (c: HloComputation): void => {
    if (seen.has(c)) return;
    seen.add(c);
    for (const i of exportOrderOf(exportViewOf(c))) for (const s of i.called) visit(s);
    comps.push(c);
  };
  visit(m.entry);
  return [`HloModule ${m.name}`, '', ...comps.map((c) => computationText(c, c === m.entry) + '\n')].join('\n');
}
