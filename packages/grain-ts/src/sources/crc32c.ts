/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), slicing-by-8, and TensorFlow's mask
 * for CRCs stored in TFRecord files: `((crc >>> 15) | (crc << 17)) + 0xa282ead8`.
 */

const TABLES = (() => {
  const t = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n];
    for (let k = 1; k < 8; k++) {
      c = (t[c & 0xff] ^ (c >>> 8)) >>> 0;
      t[k * 256 + n] = c;
    }
  }
  return t;
})();

/** CRC-32C of `bytes[start, end)`, continuing from `crc` (0 to start). */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length, crc = 0): number {
  const t = TABLES;
  let c = ~crc >>> 0;
  let i = start;
  while (i < end && (i & 7) !== 0) c = t[(c ^ bytes[i++]) & 0xff] ^ (c >>> 8);
  const stop8 = end - ((end - i) & 7);
  for (; i < stop8; i += 8) {
    const a = (c ^ (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24))) >>> 0;
    c = t[7 * 256 + (a & 0xff)] ^ t[6 * 256 + ((a >>> 8) & 0xff)] ^ t[5 * 256 + ((a >>> 16) & 0xff)] ^ t[4 * 256 + (a >>> 24)]
      ^ t[3 * 256 + bytes[i + 4]] ^ t[2 * 256 + bytes[i + 5]] ^ t[256 + bytes[i + 6]] ^ t[bytes[i + 7]];
  }
  while (i < end) c = t[(c ^ bytes[i++]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

/** TensorFlow's masked CRC (what TFRecord files store). */
export function maskCrc(crc: number): number {
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

export function maskedCrc32c(bytes: Uint8Array, start = 0, end = bytes.length): number {
  return maskCrc(crc32c(bytes, start, end));
}
