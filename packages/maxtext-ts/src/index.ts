/**
 * @tpukit/maxtext-ts: MaxText for TypeScript. This file only re-exports the public surface; the
 * optimizer library is its own entry point, `@tpukit/maxtext-ts/optim`.
 */
export { type Config, ConfigError, CONFIG_KEYS, configsDir, loadConfig, parseConfig, parseOverrides, type RawConfig, SHIPPED_CONFIGS } from './config';
export { calculateTflopsTrainingPerDevice, type StepTflops, tokensPerDevicePerStep } from './flops';
