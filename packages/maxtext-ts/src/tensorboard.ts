/**
 * TensorBoard event files, written without TensorFlow: each record is TFRecord-framed
 * (uint64 little-endian length, masked CRC-32C of the length, the bytes, masked CRC-32C of the
 * bytes) and holds one `tensorflow.Event` protobuf: the first carries `file_version
 * "brain.Event:2"`, the others a `Summary` of scalar values (`simple_value`). The protobuf is
 * encoded by hand (four field kinds are needed). Files are named
 * `events.out.tfevents.<seconds>.<host>` as TensorBoard's reader expects; each write is appended
 * and flushed so a crashed run keeps the scalars logged so far.
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { maskedCrc32c } from '@tpukit/grain-ts';

class ProtoWriter {
  readonly bytes: number[] = [];
  varint(v: number): this {
    let x = BigInt(v);
    do {
      let b = Number(x & 0x7fn);
      x >>= 7n;
      if (x > 0n) b |= 0x80;
      this.bytes.push(b);
    } while (x > 0n);
    return this;
  }
  tag(field: number, wire: number): this {
    return this.varint((field << 3) | wire);
  }
  double(field: number, v: number): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, v, true);
    this.tag(field, 1).bytes.push(...b);
    return this;
  }
  float(field: number, v: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.tag(field, 5).bytes.push(...b);
    return this;
  }
  int64(field: number, v: number): this {
    return this.tag(field, 0).varint(v);
  }
  bytesField(field: number, b: Uint8Array | number[]): this {
    this.tag(field, 2).varint(b.length).bytes.push(...b);
    return this;
  }
  string(field: number, s: string): this {
    return this.bytesField(field, new TextEncoder().encode(s));
  }
  done(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}

/** One TFRecord: length, masked CRC of the length, data, masked CRC of the data. */
export function tfrecordFrame(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length + 4);
  const dv = new DataView(out.buffer);
  dv.setBigUint64(0, BigInt(data.length), true);
  dv.setUint32(8, maskedCrc32c(out.subarray(0, 8)), true);
  out.set(data, 12);
  dv.setUint32(12 + data.length, maskedCrc32c(data), true);
  return out;
}

/** Event{wall_time=1, step=2, file_version=3 | summary=5{value=1{tag=1, simple_value=2}}}. */
export function encodeEvent(e: { wallTime: number; step?: number; fileVersion?: string; scalars?: Record<string, number> }): Uint8Array {
  const w = new ProtoWriter().double(1, e.wallTime);
  if (e.step !== undefined) w.int64(2, e.step);
  if (e.fileVersion !== undefined) w.string(3, e.fileVersion);
  if (e.scalars) {
    const summary = new ProtoWriter();
    for (const [tag, v] of Object.entries(e.scalars)) summary.bytesField(1, new ProtoWriter().string(1, tag).float(2, v).done());
    w.bytesField(5, summary.done());
  }
  return w.done();
}

export class EventFileWriter {
  readonly path: string;
  constructor(logdir: string, now = Date.now()) {
    if (typeof logdir !== 'string' || logdir === '') throw new TypeError(`EventFileWriter: logdir must be a non-empty path; got ${JSON.stringify(logdir)}`);
    mkdirSync(logdir, { recursive: true });
    this.path = join(logdir, `events.out.tfevents.${Math.floor(now / 1000)}.${hostname()}.${process.pid}`);
    writeFileSync(this.path, tfrecordFrame(encodeEvent({ wallTime: now / 1000, fileVersion: 'brain.Event:2' })));
  }

  /** Appends one Event with the scalars at `step`. Non-finite values are written as they are (TensorBoard shows NaN). */
  scalars(step: number, values: Record<string, number>, wallTime = Date.now() / 1000): void {
    if (!Number.isInteger(step) || step < 0) throw new RangeError(`EventFileWriter.scalars: step must be an integer >= 0; got ${step}`);
    appendFileSync(this.path, tfrecordFrame(encodeEvent({ wallTime, step, scalars: values })));
  }
}
