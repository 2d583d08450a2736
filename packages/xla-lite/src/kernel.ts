/**
 * Code generation for fused elementwise computations: the fused body becomes one JavaScript
 * function (built once per fusion at compile time with `new Function`) that makes a single pass
 * over the data, keeping intermediates in registers and rounding each step to float32 with
 * `Math.fround` so results match the op-by-op program bit for bit on the common ops. Scalar
 * inputs are read once before the loop. Inputs and outputs are storage arrays (Float32Array for
 * float32, Uint8Array for bool); the generated loop allocates nothing.
 */
import { type HloComputation, type HloInstruction, numel } from './hlo';

export type FusedKernel = (ins: ArrayLike<number>[], out: Float32Array | Uint8Array, n: number) => void;

const F = (e: string): string => `Math.fround(${e})`;

function expr(i: HloInstruction, a: string[]): string {
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

/** The generated source of a fused computation's loop (exposed for tests and debugging). */
export function kernelSource(body: HloComputation): string {
  const names = new Map<HloInstruction, string>();
  const pre: string[] = [];
  const loop: string[] = [];
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
  body.instructions.forEach((m, k) => {
    if (m.opcode === 'parameter') return;
    const v = `t${k}`;
    names.set(m, v);
    loop.push(`const ${v} = ${expr(m, m.operands.map(read))};`);
  });
  const out = read(body.outputs[0]);
  return `${pre.join('\n')}\nfor (let i = 0; i < n; i++) {\n  ${loop.join('\n  ')}\n  out[i] = ${out};\n}`;
}

export function compileKernel(body: HloComputation): FusedKernel {
  return new Function('ins', 'out', 'n', kernelSource(body)) as FusedKernel;
}
