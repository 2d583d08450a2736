/**
 * The views of wasm arenas handed out as resident donated outputs (program.ts `Resident`), each
 * mapped to its program so the view keeps that program's arena region reserved. Donation
 * (donation.ts) asks here before writing another executable's outputs into a donated array's
 * storage: a resident view belongs to its program's arena, which that program's next call
 * overwrites, so nothing else may land there.
 */
export const residentViews = new WeakMap<Float32Array, object>();

/** Whether `s` is a resident view of some program's arena. */
export const isResidentView = (s: ArrayBufferView): boolean => s instanceof Float32Array && residentViews.has(s);
