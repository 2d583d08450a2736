/**
 * The local CPU device and the trivial sharding every unsharded array has. @tpukit/mesh adds
 * virtual devices and NamedSharding behind the same `Device` / `Sharding` interfaces.
 */
import type { Device, Index, Sharding } from './interfaces';
import type { Shape } from './shape';

export const cpuDevice: Device = Object.freeze({ id: 0, deviceKind: 'cpu', platform: 'cpu', processIndex: 0 });

export function devices(): Device[] {
  return [cpuDevice];
}

export class SingleDeviceSharding implements Sharding {
  readonly deviceSet: readonly Device[];
  readonly isFullyReplicated = true;
  constructor(readonly device: Device = cpuDevice) {
    this.deviceSet = [device];
  }
  devicesIndicesMap(shape: Shape): Map<Device, Index> {
    return new Map([[this.device, shape.map((d) => [0, d] as const)]]);
  }
  shardShape(shape: Shape): number[] {
    return shape.slice();
  }
  toString(): string {
    return `SingleDeviceSharding(device=${this.device.platform}:${this.device.id})`;
  }
}

export const defaultSharding = new SingleDeviceSharding();
