/**
 * The packing plan: chunked packing-kernel calls give the same packed bytes as one call over the
 * whole operand, in any order, and each chunk reads nothing at or past the staged address it
 * reports (the bytes there are poisoned); the stager copies operands in address order. The SIMD
 * kernels pack as the TypeScript packer does, in their NaN-free first pass and in the second
 * pass a NaN sends them to.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as bf16 from '../../bf16';
import { GemmEngine } from './gemmEngine';
import { GEMM_SHAPE_5X8, buildGemmModule } from './gemmModule';
import { WA } from '../../wasm/webassemblyTypes';
import { HI, packOperand } from './pack';
import { PACK_ROWS, packFunctionName, touchArgs } from './packKernels';
import { Stager, STAGE_CHUNK_BYTES, chunkCall, planPackJob } from './packPlan';

const engine = new GemmEngine({ relaxed: false });
// NaN patterns (float32, bf16) that no operand value below packs to.
const POISON = 0x7fc00001;
const POISON16 = 0x7fc1;

/**
 * A strided operand of `panels` panels of R rows and `kIn` k (rounded down to a multiple of 4 for
 * 'kc'): 'rc' has element (row, kk) at row + kk*ks, 'kc' at row*rs + kk; `pad` widens the stride.
 */
function operand(layout: 'rc' | 'kc', R: number, panels: number, kIn: number, pad: number, isBf16: boolean) {
  const k = layout === 'kc' ? Math.max(4, kIn - (kIn % 4)) : kIn;
  const rows = panels * R;
  const rs = layout === 'rc' ? 1 : k + pad;
  const ks = layout === 'rc' ? rows + pad : 1;
  const esz = isBf16 ? 2 : 4;
  return { k, rows, rs, ks, esz, elems: (rows - 1) * rs + (k - 1) * ks + 1 };
}

describe('packPlan', () => {
  it('chunks pack exactly what one call packs, each reading only below its staged address', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('rc' as const, 'kc' as const),
        fc.constantFrom(...PACK_ROWS),
        fc.boolean(),
        fc.integer({ min: 1, max: 9 }), // panels
        fc.integer({ min: 1, max: 40 }), // k (rounded down to a multiple of 4 for 'kc')
        fc.integer({ min: 0, max: 5 }), // extra row/k stride
        fc.integer({ min: 1, max: 12 }), // minimum chunks
        fc.integer({ min: 0, max: 1000 }), // order seed
        (layout, R, bf16, panels, kIn, pad, minChunks, seed) => {
          const { k, rows, rs, ks, esz, elems } = operand(layout, R, panels, kIn, pad, bf16);
          const src = 64;
          const kp = k + 3;
          const dstOne = Math.ceil((src + elems * esz) / 64) * 64;
          const dstChunks = dstOne + panels * kp * R * 4 + 64;
          engine.ensure(dstChunks + panels * kp * R * 4 + 64);
          const u32 = engine.u32;
          const fill = (n: number): number => (bf16 ? (n * 7919) & 0x7f7f : ((n * 2654435761) >>> 0) & 0xbf7fffff);
          const writeSource = (upTo: number): void => {
            for (let i = 0; i < elems; i++) {
              const addr = src + i * esz;
              const v = addr + esz <= upTo ? fill(i) : bf16 ? POISON16 : POISON;
              if (bf16) new Uint16Array(u32.buffer)[addr / 2] = v;
              else u32[addr / 4] = v;
            }
          };
          const fn = packFunctionName(layout, R, bf16, false);
          u32.fill(0, dstOne / 4, (dstChunks + panels * kp * R * 4) / 4);
          writeSource(Infinity);
          engine.runPackKernel(fn, src, rs, ks, panels, k, kp, dstOne);
          const job = planPackJob(fn, [src, rs, ks, panels, k, kp, dstChunks], R, esz, minChunks);
          expect(job.axis).toBe(layout === 'rc' ? 1 : 0);
          // Run the chunks in a shuffled order, each with the source poisoned from its staged address on.
          const order = Array.from({ length: job.chunks }, (_, i) => i);
          let s = seed;
          for (let i = order.length - 1; i > 0; i--) {
            s = (s * 1103515245 + 12345) >>> 0;
            const j = s % (i + 1);
            [order[i], order[j]] = [order[j], order[i]];
          }
          const call: number[] = [];
          for (const i of order) {
            const need = chunkCall(job, i, call);
            writeSource(need);
            engine.runPackKernel(fn, call[0], call[1], call[2], call[3], call[4], call[5], call[6]);
          }
          const one = u32.subarray(dstOne / 4, dstOne / 4 + panels * kp * R);
          const chunked = u32.subarray(dstChunks / 4, dstChunks / 4 + panels * kp * R);
          expect(Array.from(chunked)).toEqual(Array.from(one));
          expect(one.includes(0x7fc00000) || one.includes(POISON16 << 16)).toBe(false); // the full call saw no poison
        },
      ),
      { numRuns: 60 },
    );
  });

  it('the SIMD packing kernels pack as the TypeScript packer does (every layout, panel height, dtype, flushing)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('rc' as const, 'kc' as const),
        fc.constantFrom(...PACK_ROWS),
        fc.boolean(),
        fc.boolean(),
        fc.integer({ min: 1, max: 11 }), // panels: several blocks of 'rc' panels and a tail
        fc.integer({ min: 1, max: 37 }), // k (rounded down to a multiple of 4 for 'kc')
        fc.integer({ min: 0, max: 3 }), // extra row/k stride
        fc.integer({ min: 0, max: 1000 }),
        (layout, R, isBf16, flush, panels, kIn, pad, seed) => {
          const { k, rows, rs, ks, esz, elems } = operand(layout, R, panels, kIn, pad, isBf16);
          const src = 64;
          const dst = Math.ceil((src + elems * esz) / 64) * 64;
          const kp = k + (seed % 3) * 4; // packed k may be longer (zero padding, left to the edges)
          engine.ensure(dst + panels * kp * R * 4 + 64);
          const u32 = engine.u32;
          const u16 = new Uint16Array(u32.buffer);
          for (let i = 0; i < elems; i++) {
            // Normal values, subnormals, ties and NaN / inf now and then.
            const x = Math.sin(i * 0.7 + seed) * 2 ** ((i % 13) - 6) * (i % 17 === 0 ? 1e-39 : 1);
            const f = i % 29 === 5 ? Number.NaN : i % 31 === 7 ? -Infinity : x;
            if (isBf16) u16[src / 2 + i] = bf16.fromFloat32(f);
            else new Float32Array(u32.buffer)[src / 4 + i] = f;
          }
          u32.fill(0, dst / 4, dst / 4 + panels * kp * R);
          engine.runPackKernel(packFunctionName(layout, R, isBf16, flush), src, rs, ks, panels, k, kp, dst);
          const want = new Uint32Array(panels * kp * R);
          packOperand({ bits: isBf16 ? u16 : u32, bf16: isBf16, rows, k, rs, ks }, src / esz, R, [HI], kp, flush, want, 0);
          expect(Array.from(u32.subarray(dst / 4, dst / 4 + want.length))).toEqual(Array.from(want));
        },
      ),
      { numRuns: 80 },
    );
  });

  it('touch_rows reads one word of each 64-byte line each row overlaps (the xor of line values, row by row)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 64, max: 600 }), // src
        fc.integer({ min: 1, max: 300 }), // bytes per row
        fc.integer({ min: 0, max: 400 }), // stride past the row
        fc.integer({ min: 0, max: 6 }), // rows
        fc.integer({ min: 0, max: 1000 }),
        (src, rowBytes, gap, rows, seed) => {
          const stride = rowBytes + gap;
          const end = src + rows * stride + 64;
          engine.ensure(end + 64);
          // Every word of line L holds the line's value v(L): whichever word the sweep reads.
          const v = (line: number): number => (Math.imul(line + seed, 2654435761) ^ (line << 7)) | 0;
          const i32 = new Int32Array(engine.u32.buffer);
          for (let w = 0; w < (end + 64) / 4; w++) i32[w] = v(Math.floor((w * 4) / 64));
          let want = 0;
          for (let r = 0; r < rows; r++) {
            const first = Math.floor((src + r * stride) / 64);
            const last = Math.floor((src + r * stride + rowBytes - 1) / 64);
            for (let line = first; line <= last; line++) want ^= v(line);
          }
          expect(engine.exports.touch_rows(src, rowBytes, stride, rows)).toBe(want);
          expect(engine.exports.touch_rows(src, 0, stride, rows)).toBe(0);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('touchArgs covers every source element a packing call reads (both layouts, strided)', () => {
    fc.assert(
      fc.property(fc.constantFrom('rc' as const, 'kc' as const), fc.constantFrom(...PACK_ROWS), fc.boolean(), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 5 }), (layout, R, isBf16, panels, kIn, pad) => {
        const { k, rs, ks, esz } = operand(layout, R, panels, kIn, pad, isBf16);
        const src = 128;
        const [s0, rowBytes, stride, rows] = touchArgs([src, rs, ks, panels, k, k, 0], R, esz, []);
        // Each element (row, kk) at src + (row * rs + kk * ks) * esz lies inside one swept row.
        for (let row = 0; row < panels * R; row++) {
          for (let kk = 0; kk < k; kk++) {
            const at = src + (row * rs + kk * ks) * esz;
            const r = Math.floor((at - s0) / stride);
            expect(r >= 0 && r < rows && at + esz <= s0 + r * stride + rowBytes, `${layout} R${R} row ${row} k ${kk}`).toBe(true);
          }
        }
        // ...and the rows sweep nothing past the operand's last element.
        expect(s0 + (rows - 1) * stride + rowBytes).toBe(src + ((panels * R - 1) * rs + (k - 1) * ks + 1) * esz);
      }),
      { numRuns: 60 },
    );
  });

  it('plans at least the requested chunks (at most one per unit) and none for empty operands', () => {
    const job = planPackJob('f', [0, 1, 100, 10, 7, 8, 0], 8, 4, 16);
    expect(job).toMatchObject({ axis: 1, per: 1, chunks: 7 });
    expect(planPackJob('f', [0, 9, 1, 10, 8, 8, 0], 4, 4, 3)).toMatchObject({ axis: 0, per: 4, chunks: 3 });
    expect(planPackJob('f', [0, 9, 1, 0, 8, 8, 0], 4, 4, 3).chunks).toBe(0);
    expect(planPackJob('f', [0, 1, 9, 3, 0, 8, 0], 4, 4, 3).chunks).toBe(0);
  });

  it('stages operands in address order, a chunk at a time, and rejects overlaps', () => {
    const buf = new ArrayBuffer(4 * STAGE_CHUNK_BYTES);
    const a = Uint32Array.from({ length: STAGE_CHUNK_BYTES / 4 + 5 }, (_, i) => i + 1);
    const b = Uint16Array.from({ length: 9 }, (_, i) => 100 + i);
    const st = new Stager();
    st.reset(buf);
    const bAt = 64 + Math.ceil(a.byteLength / 64) * 64;
    st.add(a, 64);
    st.add(b, bAt);
    expect(() => st.add(b, bAt)).toThrow(/overlaps/);
    expect(st.end).toBe(bAt + 18);
    const seen: number[] = [];
    while (st.staged < st.end) seen.push(st.next());
    expect(seen).toEqual([64 + STAGE_CHUNK_BYTES, 64 + a.byteLength, bAt + 18]);
    expect(Array.from(new Uint32Array(buf, 64, a.length))).toEqual(Array.from(a));
    expect(Array.from(new Uint16Array(buf, bAt, b.length))).toEqual(Array.from(b));
    st.reset(buf);
    st.add(b, 0);
    st.to(1);
    expect(st.staged).toBe(18);
  });

  it('the SIMD packing kernels round every float32 class as bf16.fromFloat32 does (NaN, inf, subnormal, ties, flush)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffffffff }), { minLength: 64, maxLength: 64 }), fc.constantFrom('rc' as const, 'kc' as const), fc.boolean(), (bitsIn, layout, flush) => {
        // Specials and rounding ties mixed into random bit patterns.
        const special = [0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffbfffff, 0x00000001, 0x807fffff, 0x3f808000, 0x3f818000, 0x7f7fffff, 0x3f80ffff, 0x80000000];
        const bits = Uint32Array.from(bitsIn, (b, i) => (i % 5 === 0 ? special[(i / 5) % special.length] : b >>> 0));
        // 8 rows x 8 k: 'rc' element (row, k) at row + 8k; 'kc' at 8row + k.
        const src = 64;
        const dst = 1024;
        engine.ensure(4096);
        engine.u32.set(bits, src / 4);
        engine.runPackKernel(packFunctionName(layout, 8, false, flush), src, layout === 'rc' ? 1 : 8, layout === 'rc' ? 8 : 1, 1, 8, 8, dst);
        for (let row = 0; row < 8; row++) {
          for (let k = 0; k < 8; k++) {
            const x = bits[layout === 'rc' ? row + 8 * k : 8 * row + k];
            const want = bf16.fromFloat32(new Float32Array(new Uint32Array([x]).buffer)[0], { flushSubnormals: flush }) << 16;
            expect(engine.u32[dst / 4 + k * 8 + row] >>> 0, `${layout} ${flush ? 'flush ' : ''}0x${x.toString(16)}`).toBe(want >>> 0);
          }
        }
      }),
      { numRuns: 60 },
    );
  });

  it('the float32 two-pass kernels pack as the TypeScript packer and the one-pass kernels do: NaN-free sources, a NaN at each row in turn (only the second pass packs it right), opposite infinities', () => {
    // Both builds on the same memory, explicitly (the engine's follows TPUKIT_GEMM_PACK_NAN_PASS).
    type PackFn = (src: number, rs: number, ks: number, panels: number, k: number, kp: number, dst: number) => void;
    const build = (packNanPass: boolean): Record<string, PackFn> =>
      new WA.Instance(new WA.Module(buildGemmModule({ shape: GEMM_SHAPE_5X8, relaxed: false, shared: engine.shared, maxPages: engine.maxPages, packNanPass })), {
        env: { mem: engine.memory },
      }).exports as unknown as Record<string, PackFn>;
    const twoPass = build(true);
    const onePass = build(false);
    // The first pass's rounding (`convert`'s `finite`) and the exact one, of a NaN's bits.
    const firstPassBits = (b: number): number => ((b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000) >>> 0;
    const exactNanBits = (b: number): number => ((b | 0x400000) & 0xffff0000) >>> 0;
    // Values that round every way: ties (odd and even), carries into the exponent, the largest
    // finite values (rounding to inf), subnormals, signed zeros, an infinity (of the run's sign).
    const special = [0x3f808000, 0x3f818000, 0x3f80ffff, 0x3fffffff, 0x7f7fffff, 0xff7f8000, 0x00000001, 0x807fffff, 0x00008000, 0x80000000, 0, 0x7f800000];
    fc.assert(
      fc.property(
        fc.constantFrom('rc' as const, 'kc' as const),
        fc.constantFrom(...PACK_ROWS),
        fc.boolean(), // flush
        fc.integer({ min: 1, max: 11 }), // panels
        fc.integer({ min: 1, max: 29 }), // k
        fc.integer({ min: 0, max: 2 }), // extra stride
        fc.array(fc.integer({ min: 0, max: 0xffffffff }), { minLength: 1, maxLength: 64 }),
        fc.constantFrom('none' as const, 'nan' as const, 'opposite infinities' as const),
        fc.boolean(), // the sign of the source's infinities
        fc.nat(), // where the opposite infinity goes; the NaNs' k and payloads
        (layout, R, flush, panels, kIn, pad, pool, odd, negative, at) => {
          const { k, rows, rs, ks, elems } = operand(layout, R, panels, kIn, pad, false);
          const src = 64;
          const dst = Math.ceil((src + elems * 4) / 64) * 64;
          const dstOne = dst + panels * k * R * 4 + 64;
          engine.ensure(dstOne + panels * k * R * 4 + 64);
          const u32 = engine.u32;
          const inf = negative ? 0xff800000 : 0x7f800000;
          for (let i = 0; i < elems; i++) {
            let b = i % 3 === 0 ? special[(i / 3) % special.length] : pool[i % pool.length] >>> 0;
            if ((b & 0x7f800000) === 0x7f800000) b = inf; // NaN-free, infinities of one sign
            // With the NaNs, no partial sum may overflow (into an infinity of the other sign,
            // which would make the sum NaN without them): no finite value from 2^113 up.
            else if (odd === 'nan' && (b & 0x7f800000) >= 0x78000000) b &= 0xbfffffff;
            u32[src / 4 + i] = b;
          }
          const fn = packFunctionName(layout, R, false, flush);
          const want = new Uint32Array(panels * k * R);
          const check = (): void => {
            u32.fill(0xdeadbeef, dst / 4, (dstOne + panels * k * R * 4) / 4);
            twoPass[fn](src, rs, ks, panels, k, k, dst);
            onePass[fn](src, rs, ks, panels, k, k, dstOne);
            packOperand({ bits: u32, bf16: false, rows, k, rs, ks }, src / 4, R, [HI], k, flush, want, 0);
            const got = Array.from(u32.subarray(dst / 4, dst / 4 + want.length));
            expect(got).toEqual(Array.from(want));
            expect(Array.from(u32.subarray(dstOne / 4, dstOne / 4 + want.length))).toEqual(got);
          };
          // An element on the packed rows and k (not in a stride's gap).
          const element = (row: number, kk: number): number => src / 4 + row * rs + kk * ks;
          if (odd === 'nan') {
            // One NaN at a time, at every row (a random k): a source vector the first pass leaves
            // out of its sum leaves some row's NaN with the first pass's bits, which differ.
            let s = at >>> 0;
            for (let row = 0; row < rows; row++) {
              s = (Math.imul(s, 1103515245) + 12345) >>> 0;
              const e = element(row, (s >>> 8) % k);
              // sign, quiet or signalling, 6 high payload bits, low 16 bits 0x8001..0xffff (the
              // first pass's rounding carries out of them)
              const nan = ((s & 1 ? 0xff800000 : 0x7f800000) | (s & 2 ? 0x400000 : 0) | (((s >>> 2) & 0x3f) << 16) | (0x8001 + ((s >>> 8) % 0x7fff))) >>> 0;
              expect(firstPassBits(nan)).not.toBe(exactNanBits(nan));
              const saved = u32[e];
              u32[e] = nan;
              check();
              u32[e] = saved;
            }
          } else {
            if (odd === 'opposite infinities') u32[element(at % rows, Math.floor(at / rows) % k)] = (inf ^ 0x80000000) >>> 0;
            check();
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
