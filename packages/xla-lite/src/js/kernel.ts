/**
 * Code generation for fused elementwise computations: the fused body becomes one JavaScript
 * function (built once per fusion at compile time with `new Function`) that makes a single pass
 * over the data, keeping intermediates in registers and rounding each step to float32 with
 * `Math.fround` so results match the op-by-op program bit for bit on the common ops. Scalar
 * inputs are read once before the loop. Inputs and outputs are storage arrays (Float32Array for
 * float32, Uint8Array for bool); the generated loop allocates nothing.
 */
import { type HloComputation, type HloInstruction, numel } from '../hlo';
import { isReduce } from './rowLevels';

/** A generated kernel: reads `ins`, writes `out` (n elements) and, for a multi-output fusion, the extra outputs `more`. */
export type FusedKernel = (ins: ArrayLike<number>[], out: Float32Array | Uint8Array, n: number, more?: (Float32Array | Uint8Array)[]) => void;

const F = (e: string): string => `Math.fround(${e})`;

/** The float32 expression of one elementwise instruction over operand expressions `a` (shared by every kernel generator). */
export function expr(i: HloInstruction, a: string[]): string {
  const name = i.prim!.name;
  const [x, y, z] = a;
  switch (name) {
    case 'neg':
      return `(-${x})`;
    case 'exp':
      return F(`Math.exp(${x})`);
    case 'log':
      return F(`Math.log(${x})`);
    case 'tanh':
      return F(`Math.tanh(${x})`);
    case 'logistic':
      return F(`(${x} >= 0 ? 1 / (1 + Math.exp(-${x})) : Math.exp(${x}) / (1 + Math.exp(${x})))`);
    case 'sqrt':
      return F(`Math.sqrt(${x})`);
    case 'rsqrt':
      return F(`1 / Math.sqrt(${x})`);
    case 'abs':
      return `Math.abs(${x})`;
    case 'sin':
      return F(`Math.sin(${x})`);
    case 'cos':
      return F(`Math.cos(${x})`);
    case 'square':
      return F(`${x} * ${x}`);
    case 'sign':
      return `(${x} !== ${x} ? NaN : ${x} > 0 ? 1 : ${x} < 0 ? -1 : ${x})`;
    case 'floor':
      return `Math.floor(${x})`;
    case 'ceil':
      return `Math.ceil(${x})`;
    case 'log1p':
      return F(`Math.log1p(${x})`);
    case 'expm1':
      return F(`Math.expm1(${x})`);
    case 'integer_pow':
      return F(`Math.pow(${x}, ${Number((i.params as { y: number }).y)})`);
    case 'convert_element_type':
    case 'broadcast_in_dim':
    case 'stop_gradient':
      return x;
    case 'add':
      return F(`${x} + ${y}`);
    case 'sub':
      return F(`${x} - ${y}`);
    case 'mul':
      return F(`${x} * ${y}`);
    case 'div':
      return F(`${x} / ${y}`);
    case 'max':
      return `Math.max(${x}, ${y})`;
    case 'min':
      return `Math.min(${x}, ${y})`;
    case 'eq':
      return `(${x} === ${y} ? 1 : 0)`;
    case 'ne':
      return `(${x} !== ${y} ? 1 : 0)`;
    case 'lt':
      return `(${x} < ${y} ? 1 : 0)`;
    case 'le':
      return `(${x} <= ${y} ? 1 : 0)`;
    case 'gt':
      return `(${x} > ${y} ? 1 : 0)`;
    case 'ge':
      return `(${x} >= ${y} ? 1 : 0)`;
    case 'select_n':
      return `(${x} ? ${z} : ${y})`;
    default:
      throw new Error(`xla-lite kernel: no fused code for ${name}`);
  }
}

export const stridesOf = (shape: readonly number[]): number[] => {
  const st = new globalThis.Array<number>(shape.length);
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    st[d] = acc;
    acc *= shape[d];
  }
  return st;
};

/** Statements computing the coordinates `c0..` of flat loop index `i` over `loopShape`. */
export function coordsCode(loopShape: readonly number[]): string[] {
  const out = ['let r = i;'];
  for (let d = loopShape.length - 1; d >= 0; d--) out.push(`const c${d} = r % ${loopShape[d]}; r = (r - c${d}) / ${loopShape[d]};`);
  return out;
}

/**
 * The statement defining `v` as instruction `m`'s value at loop index `i`, its operands read
 * through `read`. A broadcast of a non-scalar operand reads that operand (a fusion parameter,
 * `in<k>`) at the loop coordinates `c0..` (see `coordsCode`); an iota is its coordinate. Shared
 * by every kernel generator.
 */
export function elementStatement(m: HloInstruction, v: string, read: (o: HloInstruction) => string): string {
  if (m.prim!.name === 'iota') return `const ${v} = c${(m.params as { dimension: number }).dimension};`;
  if (m.prim!.name === 'broadcast_in_dim' && numel(m.operands[0].shape) !== 1) {
    const src = m.operands[0];
    // Adds only size-1 dims: the same elements in the same order.
    if (numel(src.shape) === numel(m.shape)) return `const ${v} = ${read(src)};`;
    const dims = (m.params as { broadcastDimensions: readonly number[] }).broadcastDimensions;
    const st = stridesOf(src.shape.shape);
    const idx = src.shape.shape.map((sz, j) => (sz === 1 ? '' : `c${dims[j]} * ${st[j]}`)).filter(Boolean).join(' + ') || '0';
    return `const ${v} = in${src.paramIndex}[${idx}];`;
  }
  return `const ${v} = ${expr(m, m.operands.map(read))};`;
}

/** Whether `m`'s element statement reads the loop coordinates: a broadcast of a non-scalar, an iota. */
export const needsCoordinates = (m: HloInstruction): boolean => m.prim?.name === 'iota' || (m.prim?.name === 'broadcast_in_dim' && numel(m.operands[0].shape) !== 1);

/** Initial accumulator of a fused `reduce_sum` / `reduce_max`. */
export const reduceInit = (r: HloInstruction): string => (r.prim!.name === 'reduce_max' ? '-Infinity' : '0');

/** The statement folding `v` into accumulator `acc` (sum in float64; max propagating NaN). */
export function reduceStep(r: HloInstruction, acc: string, v: string): string {
  return r.prim!.name === 'reduce_max' ? `if (${v} > ${acc} || ${v} !== ${v}) { if (${acc} === ${acc}) ${acc} = ${v}; }` : `${acc} += ${v};`;
}

/**
 * The generated source of a fused computation (exposed for tests and debugging). Loop fusions
 * make one pass over the output; a fusion rooted at a reduction makes one pass over the
 * reduction's operand, computing the producers' values on the fly and accumulating in float64
 * (as the reference kernels do): rows when the reduced axes are trailing, columns (into a
 * float64 scratch row held by the kernel) when they are leading. A multi-output column
 * reduction (sibling fusion, passes/siblingFusion.ts: every output a reduction of the same
 * kind over the same axes) accumulates each output in its own scratch row in the same pass.
 */
export function kernelSource(body: HloComputation): string {
  const names = new Map<HloInstruction, string>();
  const pre: string[] = [];
  const loop: string[] = [];
  const root = body.outputs[0];
  const reduce = isReduce(root) ? root : null;
  const reduces = reduce ? body.outputs : [];
  const loopShape = (reduce ? reduce.operands[0].shape : root.shape).shape;
  body.params.forEach((p, k) => {
    const v = `p${k}`;
    names.set(p, v);
    if (numel(p.shape) === 1) pre.push(`const ${v} = ins[${k}][0];`);
    else pre.push(`const in${k} = ins[${k}];`);
  });
  const read = (o: HloInstruction): string => {
    const n = names.get(o)!;
    return o.opcode === 'parameter' && numel(o.shape) !== 1 ? `in${o.paramIndex}[i]` : n;
  };
  // Coordinates of the loop index, needed only by broadcasts of non-scalar operands and iotas.
  if (body.instructions.some(needsCoordinates)) loop.push(...coordsCode(loopShape));
  body.instructions.forEach((m, k) => {
    if (m.opcode === 'parameter' || reduces.includes(m)) return;
    const v = `t${k}`;
    names.set(m, v);
    loop.push(elementStatement(m, v, read));
  });
  if (!reduce) {
    // Extra outputs of a multi-output fusion go to `more`.
    const extra = body.outputs.slice(1).map((o, q) => `more[${q}][i] = ${read(o)};`);
    return `${pre.join('\n')}\nfor (let i = 0; i < n; i++) {\n  ${loop.join('\n  ')}\n  out[i] = ${read(root)};${extra.map((e) => `\n  ${e}`).join('')}\n}`;
  }
  const init = reduceInit(reduce);
  const step = (acc: string, v: string): string => reduceStep(reduce, acc, v);
  const axes = [...(reduce.params as { axes: readonly number[] }).axes].sort((a, b) => a - b);
  const K = axes.reduce((a, d) => a * loopShape[d], 1);
  const N = numel(reduce.shape);
  const v = read(reduce.operands[0]);
  if (axes[axes.length - 1] === loopShape.length - 1) {
    if (reduces.length > 1) throw new Error(`xla-lite kernel: ${body.name} has ${reduces.length} row reductions; only column reductions have several outputs`);
    // Trailing axes: each output is a contiguous row of K values.
    return `${pre.join('\n')}\nfor (let o = 0; o < ${N}; o++) {\n  let acc = ${init};\n  for (let i = o * ${K}, e = i + ${K}; i < e; i++) {\n    ${loop.join('\n    ')}\n    ${step('acc', v)}\n  }\n  out[o] = acc;\n}`;
  }
  // Leading axes: accumulate K rows of N values into a float64 scratch row (one per output, at q * N).
  const steps = reduces.map((r, q) => `let a${q} = acc[${q * N} + j];\n  ${step(`a${q}`, read(r.operands[0]))}\n  acc[${q * N} + j] = a${q};`);
  const outs = reduces.map((_, q) => (q === 0 ? `out[j] = acc[j];` : `more[${q - 1}][j] = acc[${q * N} + j];`));
  return `${pre.join('\n')}\nconst acc = scratch;\nacc.fill(${init});\nfor (let i = 0; i < ${K * N}; i++) {\n  const j = i % ${N};\n  ${loop.join('\n  ')}\n  ${steps.join('\n  ')}\n}\nfor (let j = 0; j < ${N}; j++) {\n  ${outs.join('\n  ')}\n}`;
}

export function compileKernel(body: HloComputation): FusedKernel {
  const root = body.outputs[0];
  const scratch = new Float64Array(isReduce(root) ? body.outputs.reduce((s, o) => s + numel(o.shape), 0) : 0);
  const fn = new Function('ins', 'out', 'n', 'scratch', 'more', kernelSource(body)) as (ins: ArrayLike<number>[], out: Float32Array | Uint8Array, n: number, scratch: Float64Array, more: (Float32Array | Uint8Array)[] | undefined) => void;
  return (ins, out, n, more) => fn(ins, out, n, scratch, more);
}
