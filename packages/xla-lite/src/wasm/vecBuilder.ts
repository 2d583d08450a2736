/**
 * A thin expression layer over core's `FunctionBuilder` for SIMD code: an expression (`E`) is a
 * closure that pushes one v128 when emitted, so formulas compose as `b.add(b.mul(x, y), c)`
 * and are written out in stack order only when used. `let` evaluates an expression into a
 * fresh v128 local at that point (for values used more than once). The vector math
 * (`vmath.ts`) and the element-expression emitter (`emitExpr.ts`) are written with it.
 */
import { wasm } from '@tpukit/core/internal';

const { SIMD } = wasm;

export type E = () => void;

const f32Bits = (c: number): number => new Uint32Array(new Float32Array([c]).buffer)[0];

export class VecBuilder {
  constructor(readonly f: wasm.FunctionBuilder) {}

  get(local: number): E {
    return () => void this.f.get(local);
  }

  /** Evaluates `e` now into a new local; returns an expression reading it. */
  let(e: E): E {
    const l = this.f.local('v128');
    e();
    this.f.set(l);
    return this.get(l);
  }

  /** Evaluates `e` now into an existing local. */
  setTo(local: number, e: E): void {
    e();
    this.f.set(local);
  }

  /** f32x4 with every lane `c`. */
  k(c: number): E {
    const b = f32Bits(c);
    return () => void this.f.v128Const([b, b, b, b]);
  }

  /** i32x4 with every lane `c`. */
  ki(c: number): E {
    return () => void this.f.v128Const([c, c, c, c]);
  }

  op(sub: number, ...args: E[]): E {
    return () => {
      for (const a of args) a();
      this.f.simd(sub);
    };
  }

  add = (a: E, b: E): E => this.op(SIMD.f32x4_add, a, b);
  sub = (a: E, b: E): E => this.op(SIMD.f32x4_sub, a, b);
  mul = (a: E, b: E): E => this.op(SIMD.f32x4_mul, a, b);
  div = (a: E, b: E): E => this.op(SIMD.f32x4_div, a, b);
  /** Lanes of `a` where `mask` is set, else of `b`. */
  sel = (mask: E, a: E, b: E): E => this.op(SIMD.v128_bitselect, a, b, mask);
  and = (a: E, b: E): E => this.op(SIMD.v128_and, a, b);
  or = (a: E, b: E): E => this.op(SIMD.v128_or, a, b);
  xor = (a: E, b: E): E => this.op(SIMD.v128_xor, a, b);
  abs = (a: E): E => this.op(SIMD.f32x4_abs, a);
  /** Horner evaluation of `coeffs[0] * x^(n-1) + ... + coeffs[n-1]` (separate mul and add). */
  horner(x: E, coeffs: readonly number[]): E {
    let p = this.k(coeffs[0]);
    for (let i = 1; i < coeffs.length; i++) p = this.add(this.mul(p, x), this.k(coeffs[i]));
    return p;
  }

  /** An i8x16.shuffle of two vectors by 16 lane indices. */
  shuffle(a: E, b: E, lanes: readonly number[]): E {
    return () => {
      a();
      b();
      this.f.simd(SIMD.i8x16_shuffle).op(...lanes);
    };
  }
}
