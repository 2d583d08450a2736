/**
 * The process's virtual CPU devices (XLA's `--xla_force_host_platform_device_count`). Their
 * number comes from `setCpuDeviceCount(n)`, else the `TPUKIT_CPU_DEVICES` environment variable,
 * else the machine's core count. Each device owns a worker thread (started on first use, see
 * `deviceRuntime.ts`) that runs that device's share of a program, so devices compute in parallel.
 */
import { availableParallelism } from 'node:os';
import type { Device } from '@tpukit/core';
import { DeviceWorker } from './deviceRuntime';
import { installCpuDeviceRunner } from './spmdRunner';

export class CpuDevice implements Device {
  readonly deviceKind = 'cpu';
  readonly platform = 'cpu';
  readonly processIndex = 0;
  #worker: DeviceWorker | null = null;

  constructor(readonly id: number) {}

  /** This device's worker thread (started on first use). */
  get worker(): DeviceWorker {
    if (this.#worker === null) this.#worker = new DeviceWorker(this.id, kernelThreadsPerDevice);
    return this.#worker;
  }

  /** Stops the worker thread, if one was started; a later `worker` starts a fresh one. */
  async close(): Promise<void> {
    const w = this.#worker;
    this.#worker = null;
    if (w) await w.close();
  }

  toString(): string {
    return `CpuDevice(id=${this.id})`;
  }
}

let requested: number | null = null;
const pool: CpuDevice[] = [];

function checkCount(n: unknown, what: string): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) {
    throw new RangeError(`${what}: the device count must be a positive integer; got ${JSON.stringify(n)}`);
  }
  return n;
}

function configuredCount(): number {
  if (requested !== null) return requested;
  const env = process.env.TPUKIT_CPU_DEVICES;
  if (env !== undefined && env !== '') {
    const n = Number(env);
    return checkCount(Number.isFinite(n) ? n : env, `TPUKIT_CPU_DEVICES=${env}`);
  }
  return availableParallelism();
}

/**
 * Sets how many CPU devices `devices()` returns (like `jax.config.update('jax_num_cpu_devices', n)`).
 * Devices keep their identity across calls: growing adds devices, shrinking drops (and stops
 * the workers of) the highest ids.
 */
export function setCpuDeviceCount(n: number): void {
  requested = checkCount(n, 'setCpuDeviceCount');
  for (const d of pool.splice(requested)) void d.close();
}

/** The CPU devices of this process, ids 0..n-1 (`jax.devices()`). */
export function devices(): CpuDevice[] {
  installCpuDeviceRunner();
  const n = configuredCount();
  while (pool.length < n) pool.push(new CpuDevice(pool.length));
  return pool.slice(0, n);
}

/**
 * Kernel threads each device's worker uses: the machine's cores shared out among the configured
 * devices, max(1, floor(cores / devices)) (2 devices on 2 cores: one each).
 */
export function kernelThreadsPerDevice(): number {
  return Math.max(1, Math.floor(availableParallelism() / configuredCount()));
}

/** `jax.device_count()`. */
export function deviceCount(): number {
  return devices().length;
}
