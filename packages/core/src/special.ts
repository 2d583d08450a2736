/**
 * Special functions in float64 for the reference kernels: erf / erfc / erfinv, lgamma, digamma.
 * Results are rounded to the output dtype by the caller, so float64 accuracy of ~1e-13 is ample.
 */

const TWO_OVER_SQRT_PI = 1.1283791670955126;

export function erf(x: number): number {
  if (Number.isNaN(x) || x === 0) return x; // erf(-0) = -0
  const ax = Math.abs(x);
  if (ax < 2.5) {
    // Maclaurin series: 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)).
    const x2 = x * x;
    let term = x;
    let sum = x;
    for (let n = 1; n < 80; n++) {
      term *= -x2 / n;
      const c = term / (2 * n + 1);
      sum += c;
      if (Math.abs(c) < 1e-17 * Math.abs(sum)) break;
    }
    return TWO_OVER_SQRT_PI * sum;
  }
  const r = 1 - erfcLarge(ax);
  return x < 0 ? -r : r;
}

/** erfc for x >= 2.5 by the continued fraction (modified Lentz). */
function erfcLarge(x: number): number {
  if (x > 27) return 0;
  // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + 2/(x + ...)))))
  const tiny = 1e-300;
  let f = x;
  let c = x;
  let d = 0;
  for (let k = 1; k < 300; k++) {
    const a = k / 2;
    d = x + a * d;
    d = d === 0 ? tiny : d;
    c = x + a / c;
    c = c === 0 ? tiny : c;
    d = 1 / d;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return Math.exp(-x * x) / Math.sqrt(Math.PI) / f;
}

export function erfc(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x >= 2.5) return erfcLarge(x);
  if (x <= -2.5) return 2 - erfcLarge(-x);
  return 1 - erf(x);
}

/** Inverse error function: Giles' single-precision approximation refined by Newton steps. */
export function erfinv(y: number): number {
  if (Number.isNaN(y) || y < -1 || y > 1) return NaN;
  if (y === 1) return Infinity;
  if (y === -1) return -Infinity;
  let w = -Math.log((1 - y) * (1 + y));
  let x: number;
  if (w < 5) {
    w -= 2.5;
    let p = 2.81022636e-8;
    p = 3.43273939e-7 + p * w;
    p = -3.5233877e-6 + p * w;
    p = -4.39150654e-6 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
    x = p * y;
  } else {
    w = Math.sqrt(w) - 3;
    let p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
    x = p * y;
  }
  for (let i = 0; i < 3; i++) {
    const err = erf(x) - y;
    const deriv = TWO_OVER_SQRT_PI * Math.exp(-x * x);
    if (deriv === 0) break;
    x -= err / deriv;
  }
  return x;
}

// Lanczos approximation, g = 7, n = 9 (Numerical Recipes / Godfrey's coefficients).
const LANCZOS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
  12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
];

export function lgamma(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x === Infinity || x === -Infinity) return Infinity;
  if (x <= 0 && Number.isInteger(x)) return Infinity;
  if (x === 1 || x === 2) return 0; // exact zeros the approximation would miss by an ulp of 1
  if (x < 0.5) {
    // Reflection: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x)
    return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - lgamma(1 - x);
  }
  const z = x - 1;
  let a = LANCZOS[0];
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += LANCZOS[i] / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

export function digamma(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x <= 0 && Number.isInteger(x)) return NaN;
  let result = 0;
  if (x < 0) {
    // Reflection: psi(1 - x) - psi(x) = pi cot(pi x)
    result -= Math.PI / Math.tan(Math.PI * x);
    x = 1 - x;
  }
  while (x < 6) {
    result -= 1 / x;
    x += 1;
  }
  const inv = 1 / x;
  const inv2 = inv * inv;
  // Asymptotic series: log x - 1/2x - sum B_2k / (2k x^2k)
  result += Math.log(x) - 0.5 * inv
    - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 * (1 / 132)))));
  return result;
}
