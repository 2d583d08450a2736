/**
 * A small WebAssembly assembler: builds binary modules from TypeScript at run time, so tpukit's
 * kernels need no external toolchain and the same code runs in Node and in a browser. It covers
 * what the kernels use: one imported (optionally shared) memory, functions with typed locals,
 * structured control flow, integer and float scalar ops, SIMD128 and relaxed SIMD. The systolic
 * backend generates its GEMM kernels with it; xla-lite reuses it for fused kernels.
 *
 * Usage: `const m = new ModuleBuilder(); m.importMemory('env', 'mem', { initial: 1 });
 * m.addFunction('f', ['i32'], ['i32'], (f) => f.get(0).i32Const(1).op(OP.i32_add));
 * const bytes = m.toBytes();`. Instructions are appended in stack-machine order.
 */

export type ValType = 'i32' | 'i64' | 'f32' | 'f64' | 'v128';

const VALTYPE: Record<ValType, number> = { i32: 0x7f, i64: 0x7e, f32: 0x7d, f64: 0x7c, v128: 0x7b };

/** Single-byte opcodes (the ones the kernels use; `FunctionBuilder.op` accepts any byte). */
export const OP = {
  unreachable: 0x00,
  nop: 0x01,
  block: 0x02,
  loop: 0x03,
  if: 0x04,
  else: 0x05,
  end: 0x0b,
  br: 0x0c,
  br_if: 0x0d,
  return: 0x0f,
  call: 0x10,
  drop: 0x1a,
  select: 0x1b,
  local_get: 0x20,
  local_set: 0x21,
  local_tee: 0x22,
  i32_load: 0x28,
  f32_load: 0x2a,
  f64_load: 0x2b,
  i32_load8_u: 0x2d,
  i32_load16_u: 0x2f,
  i32_store: 0x36,
  f32_store: 0x38,
  f64_store: 0x39,
  i32_store16: 0x3b,
  i32_const: 0x41,
  f32_const: 0x43,
  i32_eqz: 0x45,
  i32_eq: 0x46,
  i32_ne: 0x47,
  i32_lt_s: 0x48,
  i32_lt_u: 0x49,
  i32_gt_s: 0x4a,
  i32_gt_u: 0x4b,
  i32_le_s: 0x4c,
  i32_ge_s: 0x4e,
  i32_ge_u: 0x4f,
  i32_add: 0x6a,
  i32_sub: 0x6b,
  i32_mul: 0x6c,
  i32_div_u: 0x6e,
  i32_rem_u: 0x70,
  i32_and: 0x71,
  i32_or: 0x72,
  i32_xor: 0x73,
  i32_shl: 0x74,
  i32_shr_s: 0x75,
  i32_shr_u: 0x76,
  f32_add: 0x92,
  f32_sub: 0x93,
  f32_mul: 0x94,
  f32_max: 0x97,
  f64_add: 0xa0,
  f64_max: 0xa5,
  f32_demote_f64: 0xb6,
  f64_promote_f32: 0xbb,
} as const;

/** SIMD sub-opcodes (after the 0xfd prefix), including the relaxed-SIMD ones. */
export const SIMD = {
  v128_load: 0x00,
  v128_load16x4_u: 0x04,
  v128_load8_splat: 0x07,
  v128_load32_splat: 0x09,
  v128_store: 0x0b,
  v128_const: 0x0c,
  i8x16_shuffle: 0x0d,
  i32x4_splat: 0x11,
  f32x4_splat: 0x13,
  f64x2_splat: 0x14,
  f32x4_extract_lane: 0x1f,
  f32x4_replace_lane: 0x20,
  f64x2_extract_lane: 0x21,
  i32x4_eq: 0x37,
  i32x4_ne: 0x38,
  i32x4_lt_s: 0x39,
  i32x4_gt_u: 0x3c,
  f32x4_eq: 0x41,
  f32x4_ne: 0x42,
  f32x4_lt: 0x43,
  f32x4_gt: 0x44,
  f32x4_le: 0x45,
  f32x4_ge: 0x46,
  v128_not: 0x4d,
  v128_and: 0x4e,
  v128_andnot: 0x4f,
  v128_or: 0x50,
  v128_xor: 0x51,
  v128_bitselect: 0x52,
  v128_any_true: 0x53,
  v128_store8_lane: 0x58,
  v128_store32_lane: 0x5a,
  v128_store64_lane: 0x5b,
  v128_load32_zero: 0x5c,
  v128_load64_zero: 0x5d,
  f32x4_demote_f64x2_zero: 0x5e,
  f64x2_promote_low_f32x4: 0x5f,
  f32x4_ceil: 0x67,
  f32x4_floor: 0x68,
  f32x4_nearest: 0x6a,
  i16x8_narrow_i32x4_u: 0x86,
  i16x8_extend_low_i8x16_u: 0x89,
  i32x4_extend_low_i16x8_u: 0xa9,
  i32x4_shl: 0xab,
  i32x4_shr_s: 0xac,
  i32x4_shr_u: 0xad,
  i32x4_add: 0xae,
  i32x4_sub: 0xb1,
  f32x4_abs: 0xe0,
  f32x4_neg: 0xe1,
  f32x4_sqrt: 0xe3,
  f32x4_add: 0xe4,
  f32x4_sub: 0xe5,
  f32x4_mul: 0xe6,
  f32x4_div: 0xe7,
  f32x4_min: 0xe8,
  f32x4_max: 0xe9,
  // pmin / pmax (`b < a ? b : a`, `a < b ? b : a`): one minps / maxps on x64, where min / max
  // carry NaN and signed-zero fix-ups that V8 emits as ~8 instructions.
  f32x4_pmin: 0xea,
  f32x4_pmax: 0xeb,
  f64x2_add: 0xf0,
  f64x2_sub: 0xf1,
  f64x2_mul: 0xf2,
  f64x2_div: 0xf3,
  f64x2_max: 0xf5,
  i32x4_trunc_sat_f32x4_s: 0xf8,
  f32x4_convert_i32x4_s: 0xfa,
  f64x2_convert_low_i32x4_s: 0xfe,
  f32x4_relaxed_madd: 0x105,
  f32x4_relaxed_nmadd: 0x106,
  f32x4_relaxed_dot_bf16x8_add_f32x4: 0x114,
} as const;

/** Atomic sub-opcodes (after the 0xfe prefix). */
export const ATOMIC = {
  memory_atomic_notify: 0x00,
  memory_atomic_wait32: 0x01,
  i32_atomic_load: 0x10,
  i32_atomic_store: 0x17,
  i32_atomic_rmw_add: 0x1e,
} as const;

export function uleb(out: number[], value: number): void {
  let v = value >>> 0;
  if (value < 0 || !Number.isInteger(value) || value > 0xffffffff) throw new RangeError(`uleb: ${value} is not an unsigned 32-bit integer`);
  do {
    let byte = v & 0x7f;
    v >>>= 7;
    if (v !== 0) byte |= 0x80;
    out.push(byte);
  } while (v !== 0);
}

export function sleb(out: number[], value: number): void {
  if (!Number.isInteger(value) || value < -0x80000000 || value > 0xffffffff) throw new RangeError(`sleb: ${value} is not a 32-bit integer`);
  let v = value | 0;
  for (;;) {
    const byte = v & 0x7f;
    v >>= 7;
    if ((v === 0 && (byte & 0x40) === 0) || (v === -1 && (byte & 0x40) !== 0)) {
      out.push(byte);
      return;
    }
    out.push(byte | 0x80);
  }
}

function encodeString(out: number[], s: string): void {
  const bytes = new TextEncoder().encode(s);
  uleb(out, bytes.length);
  for (const b of bytes) out.push(b);
}

/** Natural alignment log2 for each memory op, used when an explicit alignment is not given. */
const LOG2 = { 1: 0, 2: 1, 4: 2, 8: 3, 16: 4 } as const;

/** Builds one function body. Methods return `this` so that code reads in stack order. */
export class FunctionBuilder {
  readonly code: number[] = [];
  readonly localTypes: ValType[] = [];
  constructor(readonly params: readonly ValType[], readonly results: readonly ValType[]) {}

  /** Declares a new local and returns its index. */
  local(type: ValType): number {
    this.localTypes.push(type);
    return this.params.length + this.localTypes.length - 1;
  }

  /** Appends raw bytes (an opcode and its immediates). */
  op(...bytes: number[]): this {
    for (const b of bytes) this.code.push(b);
    return this;
  }

  get(i: number): this { this.code.push(OP.local_get); uleb(this.code, i); return this; }
  set(i: number): this { this.code.push(OP.local_set); uleb(this.code, i); return this; }
  tee(i: number): this { this.code.push(OP.local_tee); uleb(this.code, i); return this; }
  i32Const(v: number): this { this.code.push(OP.i32_const); sleb(this.code, v); return this; }
  f32Const(v: number): this {
    this.code.push(OP.f32_const);
    const b = new Uint8Array(new Float32Array([v]).buffer);
    for (const x of b) this.code.push(x);
    return this;
  }
  call(fn: number): this { this.code.push(OP.call); uleb(this.code, fn); return this; }

  /** Structured control: `block`, `loop`, `if` take an optional result type (default none). */
  block(result?: ValType): this { return this.op(OP.block, result ? VALTYPE[result] : 0x40); }
  loop(result?: ValType): this { return this.op(OP.loop, result ? VALTYPE[result] : 0x40); }
  if(result?: ValType): this { return this.op(OP.if, result ? VALTYPE[result] : 0x40); }
  else(): this { return this.op(OP.else); }
  end(): this { return this.op(OP.end); }
  br(depth: number): this { this.code.push(OP.br); uleb(this.code, depth); return this; }
  brIf(depth: number): this { this.code.push(OP.br_if); uleb(this.code, depth); return this; }

  /** A scalar memory op with a constant byte offset; `bytes` is the access width. */
  mem(opcode: number, offset = 0, bytes: 1 | 2 | 4 | 8 | 16 = 4): this {
    this.code.push(opcode);
    uleb(this.code, LOG2[bytes]);
    uleb(this.code, offset);
    return this;
  }

  /** A SIMD instruction without immediates. */
  simd(sub: number): this { this.code.push(0xfd); uleb(this.code, sub); return this; }

  /** A SIMD memory op (`v128.load`, `load32_splat`, `store`, ...) with a constant byte offset. */
  simdMem(sub: number, offset = 0, bytes: 1 | 2 | 4 | 8 | 16 = 16): this {
    this.code.push(0xfd);
    uleb(this.code, sub);
    uleb(this.code, LOG2[bytes]);
    uleb(this.code, offset);
    return this;
  }

  /** `v128.const` from four 32-bit lanes. */
  v128Const(lanes: readonly [number, number, number, number]): this {
    this.simd(SIMD.v128_const);
    const b = new Uint8Array(new Uint32Array(lanes.map((x) => x >>> 0)).buffer);
    for (const x of b) this.code.push(x);
    return this;
  }

  /** An atomic memory op (prefix 0xfe) with natural alignment. */
  atomic(sub: number, offset = 0, bytes: 4 | 8 = 4): this {
    this.code.push(0xfe);
    uleb(this.code, sub);
    uleb(this.code, LOG2[bytes]);
    uleb(this.code, offset);
    return this;
  }
}

interface FuncDef {
  name: string | null;
  typeIndex: number;
  body: FunctionBuilder;
}

export interface MemoryImport {
  initial: number;
  maximum?: number;
  shared?: boolean;
}

/** Builds a module: types are deduplicated; imported functions come first in the index space. */
export class ModuleBuilder {
  private readonly types: string[] = [];
  private readonly typeSigs: Array<[readonly ValType[], readonly ValType[]]> = [];
  private readonly funcImports: Array<{ module: string; name: string; typeIndex: number }> = [];
  private readonly funcs: FuncDef[] = [];
  private memory: ({ module: string; name: string } & MemoryImport) | null = null;

  private typeIndex(params: readonly ValType[], results: readonly ValType[]): number {
    const key = `${params.join(',')}->${results.join(',')}`;
    let i = this.types.indexOf(key);
    if (i < 0) {
      i = this.types.length;
      this.types.push(key);
      this.typeSigs.push([params, results]);
    }
    return i;
  }

  importMemory(module: string, name: string, mem: MemoryImport): this {
    if (mem.shared && mem.maximum === undefined) throw new Error(`importMemory: a shared memory needs a maximum (pages); got none for ${module}.${name}`);
    this.memory = { module, name, ...mem };
    return this;
  }

  /** Imports a host function; returns its function index. Import all functions before adding any. */
  importFunction(module: string, name: string, params: readonly ValType[], results: readonly ValType[]): number {
    if (this.funcs.length > 0) throw new Error('importFunction: import host functions before defining module functions');
    this.funcImports.push({ module, name, typeIndex: this.typeIndex(params, results) });
    return this.funcImports.length - 1;
  }

  /** The index the next added function will get (for calls between generated functions). */
  nextFunctionIndex(): number {
    return this.funcImports.length + this.funcs.length;
  }

  /** Adds a function; `name` non-null exports it. Returns its function index. */
  addFunction(name: string | null, params: readonly ValType[], results: readonly ValType[], build: (f: FunctionBuilder) => void): number {
    const body = new FunctionBuilder(params, results);
    build(body);
    this.funcs.push({ name, typeIndex: this.typeIndex(params, results), body });
    return this.funcImports.length + this.funcs.length - 1;
  }

  toBytes(): Uint8Array {
    const out: number[] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
    const section = (id: number, content: number[]): void => {
      out.push(id);
      uleb(out, content.length);
      for (const b of content) out.push(b);
    };
    // 1: types
    const types: number[] = [];
    uleb(types, this.typeSigs.length);
    for (const [p, r] of this.typeSigs) {
      types.push(0x60);
      uleb(types, p.length);
      for (const t of p) types.push(VALTYPE[t]);
      uleb(types, r.length);
      for (const t of r) types.push(VALTYPE[t]);
    }
    section(1, types);
    // 2: imports
    const imports: number[] = [];
    uleb(imports, this.funcImports.length + (this.memory ? 1 : 0));
    for (const fi of this.funcImports) {
      encodeString(imports, fi.module);
      encodeString(imports, fi.name);
      imports.push(0x00);
      uleb(imports, fi.typeIndex);
    }
    if (this.memory) {
      const m = this.memory;
      encodeString(imports, m.module);
      encodeString(imports, m.name);
      imports.push(0x02);
      const flags = (m.maximum !== undefined ? 1 : 0) | (m.shared ? 2 : 0);
      imports.push(flags);
      uleb(imports, m.initial);
      if (m.maximum !== undefined) uleb(imports, m.maximum);
    }
    section(2, imports);
    // 3: function declarations
    const decls: number[] = [];
    uleb(decls, this.funcs.length);
    for (const f of this.funcs) uleb(decls, f.typeIndex);
    section(3, decls);
    // 7: exports
    const exports: number[] = [];
    const named = this.funcs.map((f, i) => [f, i] as const).filter(([f]) => f.name !== null);
    uleb(exports, named.length);
    for (const [f, i] of named) {
      encodeString(exports, f.name!);
      exports.push(0x00);
      uleb(exports, this.funcImports.length + i);
    }
    section(7, exports);
    // 10: code
    const code: number[] = [];
    uleb(code, this.funcs.length);
    for (const f of this.funcs) {
      const body: number[] = [];
      // Locals, run-length encoded by type.
      const runs: Array<[ValType, number]> = [];
      for (const t of f.body.localTypes) {
        const last = runs[runs.length - 1];
        if (last && last[0] === t) last[1]++;
        else runs.push([t, 1]);
      }
      uleb(body, runs.length);
      for (const [t, n] of runs) {
        uleb(body, n);
        body.push(VALTYPE[t]);
      }
      for (const b of f.body.code) body.push(b);
      body.push(OP.end);
      uleb(code, body.length);
      for (const b of body) code.push(b);
    }
    section(10, code);
    return new Uint8Array(out);
  }
}
