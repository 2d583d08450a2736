/**
 * Giles' single-precision erfinv coefficients, highest power first: for w < 5 (LT5) and w >= 5
 * (GE5). Shared by the lax-op erfinv (erfinv.ts) and the fused kernels (fused.ts) in a file of
 * their own, so neither imports the other's module (prng.ts imports fused.ts).
 */
export const LT5 = [2.81022636e-8, 3.43273939e-7, -3.5233877e-6, -4.39150654e-6, 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941];
export const GE5 = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682];
