/**
 * GSPMD in xla-lite: HloSharding derivation and text, the standard sharded-computation cases
 * from JAX's docs with the collectives the partitioner chose, sharded jit = unsharded jit
 * (fast-check), gradients, donation, the compile cache keyed on shardings, and bad inputs.
 */
import { type Array, grad, lax, nn, np, type Sharding, valueAndGrad } from '@tpukit/core';
import { bind, type Primitive } from '@tpukit/core/internal';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type CollectiveRuntime, fromCoreSharding, GSPMDSharding, HloSharding, InThreadCollectives, jit, setCollectiveRuntime } from '../src/internal';
import { close, collectives, GridSharding, M1, M2, P, put, rand, S } from './gridSharding';

describe('HloSharding', () => {
  it('derives XLA tile assignments from a mesh-like Sharding', () => {
    const hs = (s: Sharding, shape: number[]) => String(fromCoreSharding(s, shape, s.deviceSet, 'test'));
    expect(hs(S(M1, 'x', null), [4, 6])).toBe('{devices=[2,1]0,1}');
    expect(hs(S(M1, null, null), [4, 6])).toBe('{replicated}');
    expect(hs(S(M2, 'x', null), [4, 6])).toBe('{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}');
    expect(hs(S(M2, null, 'y'), [4, 6])).toBe('{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}');
    expect(hs(S(M2, 'y', 'x'), [4, 6])).toBe('{devices=[2,2]0,2,1,3}');
    expect(hs(S(M2, ['x', 'y'], null), [4, 6])).toBe('{devices=[4,1]0,1,2,3}');
  });

  it('parses and prints XLA text, including the iota forms', () => {
    for (const t of ['{replicated}', '{devices=[2,1]0,1}', '{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}', '{devices=[2,2]0,2,1,3}']) {
      expect(String(HloSharding.parse(t, 2, t === '{devices=[2,1]0,1}' ? 2 : 4))).toBe(t);
    }
    expect(String(HloSharding.parse('{devices=[2,2]<=[4]}', 2, 4))).toBe('{devices=[2,2]0,1,2,3}');
    expect(String(HloSharding.parse('{devices=[2,2]<=[2,2]T(1,0)}', 2, 4))).toBe('{devices=[2,2]0,2,1,3}');
    expect(HloSharding.parse('{devices=[2,1]1,0}', 2, 2).layout([4, 2])).toEqual([[[2, 4], [0, 2]], [[0, 2], [0, 2]]]);
  });

  it('rejects bad text and bad device lists with the reason', () => {
    expect(() => HloSharding.parse('{devices=[2]0,1}', 2, 2)).toThrow(/rank 2 needs 2/);
    expect(() => HloSharding.parse('{maximal device=1}', 2, 2)).toThrow(/expected \{replicated\}/);
    expect(() => HloSharding.parse('{devices=[2,1]0,1}', 2, 4)).toThrow(/lists 2 devices; the program runs on 4/);
    expect(() => new HloSharding([2, 1], 1, [0, 0])).toThrow(/permutation of 0..1/);
    expect(() => HloSharding.parse('{devices=[2,1]0,1}', 2, 2).layout([3, 2], 'argument 0')).toThrow(/dimension 0 of the argument 0 \[3,2\] \(size 3\) is not divisible by its 2 tiles/);
  });
});

/** Compiles f with these input shardings (and out shardings), checks it equals the unsharded f, returns the compiled text. */
function check(f: (...a: Array[]) => Array, args: Array[], inShardings: Sharding[], outShardings?: Sharding | Sharding[], tol = 1e-5): { text: string; out: Array; lowered: string } {
  const j = jit(f, { inShardings, outShardings });
  const lowered = j.lower(...args);
  const text = lowered.compile().asText();
  const out = j(...args);
  close(out, f(...args), tol, tol);
  return { text, out, lowered: lowered.asText() };
}

describe('the standard sharded computations (JAX sharded-computation docs)', () => {
  const x = rand([8, 16], 1);
  const w = rand([16, 8], 2);

  it("P('x', None) @ P(None, 'y'): each device computes its own block, no collective", () => {
    const { text, out } = check((a, b) => np.matmul(a, b), [x, w], [S(M2, 'x', null), S(M2, null, 'y')]);
    expect(collectives(text)).toEqual({});
    expect(text).toMatch(/f32\[4,4\]\{1,0\} dot\(/);
    expect(String(out.sharding)).toContain('{devices=[2,2]0,1,2,3}');
  });

  it("P(None, 'x') @ P('x', None): partial sums, one all-reduce", () => {
    const { text, out } = check((a, b) => np.matmul(a, b), [x, w], [S(M1, null, 'x'), S(M1, 'x', null)]);
    expect(collectives(text)).toEqual({ 'all-reduce': 1 });
    expect(text).toMatch(/all-reduce\(.*replica_groups=\{\{0,1\}\}, to_apply=%add/);
    expect(out.sharding.isFullyReplicated).toBe(true);
  });

  it("P(None, 'x') @ P('x', None) with out_shardings P('x', None): one reduce-scatter", () => {
    const { text, out } = check((a, b) => np.matmul(a, b), [x, w], [S(M1, null, 'x'), S(M1, 'x', null)], S(M1, 'x', null));
    expect(collectives(text)).toEqual({ 'reduce-scatter': 1 });
    expect(text).toMatch(/f32\[4,8\]\{1,0\} reduce-scatter\(.*dimensions=\{0\}/);
    expect(out.addressableShards.map((s) => s.index)).toEqual([[[0, 4], [0, 8]], [[4, 8], [0, 8]]]);
  });

  it('data parallel: batch split, weights replicated; the loss is one all-reduce, weight gradients all-reduced', () => {
    const loss = (w: Array, x: Array) => np.mean(np.square(np.tanh(np.matmul(x, w))));
    const { text } = check(loss, [w, x], [S(M1, null, null), S(M1, 'x', null)]);
    expect(collectives(text)).toEqual({ 'all-reduce': 1 });
    const g = check(grad(loss), [w, x], [S(M1, null, null), S(M1, 'x', null)]);
    expect(collectives(g.text)['all-reduce']).toBeGreaterThanOrEqual(1);
    expect(g.text).not.toMatch(/all-gather\(/);
    expect(g.out.sharding.isFullyReplicated).toBe(true);
  });

  it('FSDP: batch and weights split on the same axis; the weight is all-gathered before the dot', () => {
    const f = (w: Array, x: Array) => np.tanh(np.matmul(x, w));
    const { text, out } = check(f, [w, x], [S(M1, 'x', null), S(M1, 'x', null)]);
    expect(collectives(text)).toEqual({ 'all-gather': 1 });
    expect(text).toMatch(/f32\[16,8\]\{1,0\} all-gather\(%Arg_0\.\d+\), replica_groups=\{\{0,1\}\}, dimensions=\{0\}/);
    expect(String(out.sharding)).toContain('{devices=[2,1]0,1}');
    // Its gradient: the weight gradient lands sharded as the weight is, by a reduce-scatter.
    const loss = (w: Array, x: Array) => np.sum(f(w, x));
    const g = check(grad(loss), [w, x], [S(M1, 'x', null), S(M1, 'x', null)], S(M1, 'x', null));
    expect(collectives(g.text)['reduce-scatter']).toBe(1);
  });

  it('the partitioned program reports per-device cost: each device does half of the MLP dots', () => {
    const w1 = rand([16, 32], 3);
    const w2 = rand([32, 16], 4);
    const xx = rand([8, 16], 5);
    const mlp = (x: Array, w1: Array, w2: Array) => np.matmul(np.maximum(np.matmul(x, w1), 0), w2);
    const whole = jit(mlp).lower(xx, w1, w2).compile().costAnalysis();
    const part = jit(mlp, { inShardings: [S(M1, null, null), S(M1, null, 'x'), S(M1, 'x', null)] }).lower(xx, w1, w2).compile().costAnalysis();
    const dotFlops = 2 * 8 * 16 * 32 * 2;
    expect(whole.flops).toBeGreaterThanOrEqual(dotFlops);
    expect(part.flops).toBeGreaterThanOrEqual(dotFlops / 2);
    expect(part.flops).toBeLessThan(whole.flops * 0.6);
  });

  it('Megatron MLP: column- then row-parallel, one all-reduce and nothing else', () => {
    const w1 = rand([16, 32], 3);
    const w2 = rand([32, 16], 4);
    const xx = rand([8, 16], 5);
    const mlp = (x: Array, w1: Array, w2: Array) => np.matmul(np.maximum(np.matmul(x, w1), 0), w2);
    const { text, lowered } = check(mlp, [xx, w1, w2], [S(M1, null, null), S(M1, null, 'x'), S(M1, 'x', null)]);
    expect(collectives(text)).toEqual({ 'all-reduce': 1 });
    expect(lowered).toMatch(/maximum\(.*sharding=\{devices=\[1,2\]0,1\}/);
    expect(text).toMatch(/f32\[8,16\]\{1,0\} maximum\(/);
  });

  it('moving the split from rows to columns is an all-to-all', () => {
    const { text } = check((a) => np.multiply(a, 2), [x], [S(M1, 'x', null)], S(M1, null, 'x'));
    expect(collectives(text)).toEqual({ 'all-to-all': 1 });
    expect(text).toMatch(/all-to-all\(.*split_dimension=1, concat_dimension=0/);
  });

  it('the same tiles on other devices is a collective-permute', () => {
    const rev = new GridSharding(M1, P('x', null), [1, 0]);
    const { text, out } = check((a) => np.add(a, 1), [x], [S(M1, 'x', null)], rev);
    expect(collectives(text)).toEqual({ 'collective-permute': 1 });
    expect(text).toMatch(/source_target_pairs=\{\{1,0\},\{0,1\}\}/);
    expect(out.addressableShards.find((s) => s.device.id === 1)!.index[0]).toEqual([0, 4]);
  });

  it('a reduction over a split axis all-reduces; over an unsplit one it stays local', () => {
    expect(collectives(check((a) => np.sum(a, { axis: 0 }), [x], [S(M1, 'x', null)]).text)).toEqual({ 'all-reduce': 1 });
    expect(collectives(check((a) => np.max(a, { axis: 1 }), [x], [S(M1, 'x', null)]).text)).toEqual({});
    expect(check((a) => np.max(a, { axis: 0 }), [x], [S(M1, 'x', null)]).text).toMatch(/to_apply=%max/);
  });

  it('a wanted output split flows backwards: replicated input, the multiply runs on shards, no collective', () => {
    const { text, lowered } = check((a) => np.multiply(np.exp(a), 3), [x], [S(M1, null, null)], S(M1, 'x', null));
    expect(collectives(text)).toEqual({});
    expect(text).toMatch(/f32\[4,16\]\{1,0\} exponential\(/);
    expect(lowered).toMatch(/exponential\(.*sharding=\{devices=\[2,1\]0,1\}/);
  });

  it('scan over stacked layers: bodies are partitioned, Megatron inside the loop is one all-reduce per layer', () => {
    const w1 = rand([3, 16, 32], 12);
    const w2 = rand([3, 32, 16], 13);
    const xx = rand([8, 16], 14);
    const net = (x: Array, w1: Array, w2: Array) => lax.scan((h: Array, w: [Array, Array]) => [np.tanh(np.matmul(np.maximum(np.matmul(h, w[0]), 0), w[1])), np.sum(h)], x, [w1, w2]);
    const f = (x: Array, w1: Array, w2: Array) => {
      const [h, sums] = net(x, w1, w2);
      return np.add(np.sum(h), np.sum(sums));
    };
    const { text } = check(f, [xx, w1, w2], [S(M1, null, null), S(M1, null, null, 'x'), S(M1, null, 'x', null)], undefined, 1e-4);
    // The body works on [16,16] shards of each layer's weights and ends the layer with one all-reduce.
    const body = text.slice(text.indexOf('%scan_jaxpr'), text.indexOf('ENTRY'));
    expect(body).toMatch(/parameter\(1\), sharding=\{devices=\[1,2\]0,1\}/);
    expect(body).toMatch(/f32\[16,16\]\{1,0\} parameter\(2\)/);
    expect(collectives(body)).toEqual({ 'all-reduce': 1 });
    expect(text).toMatch(/scan\(%Arg_0\.\d+, %Arg_1\.\d+, %Arg_2\.\d+\), num_consts=0, num_carry=1, length=3, reverse=false, calls=\{%scan_jaxpr/);
    expect(text).not.toMatch(/all-gather\(/);
  });

  it('a scan of length 0 returns its carry and empty stacked outputs', () => {
    const f = (x: Array, xs: Array) => lax.scan((c: Array, v: Array) => [np.add(c, v), np.multiply(v, 2)], x, xs);
    const x = rand([4, 8], 16);
    const xs = np.zeros([0, 4, 8]);
    const [c, ys] = jit(f, { inShardings: [S(M1, 'x', null), S(M1, null, 'x', null)] })(x, xs) as unknown as [Array, Array];
    close(c, x);
    expect(ys.shape).toEqual([0, 4, 8]);
  });

  it('while and cond run their partitioned bodies; the loop carry keeps its split', () => {
    const xx = rand([8, 16], 15);
    const f = (x: Array) => {
      const [, y] = lax.whileLoop((c: [Array, Array]) => lax.lt(c[0], 3), (c: [Array, Array]) => [np.add(c[0], 1), np.multiply(np.cos(c[1]), 1.5)], [np.array(0, 'int32'), x]);
      return lax.cond(np.greater(np.sum(y), 0), (a: Array) => np.multiply(a, 2), (a: Array) => np.negative(a), y);
    };
    const { text, out } = check(f, [xx], [S(M1, 'x', null)]);
    expect(collectives(text)).toEqual({ 'all-reduce': 1 });
    expect(text).toMatch(/f32\[4,16\]\{1,0\} cos\(/);
    expect(String(out.sharding)).toContain('{devices=[2,1]0,1}');
  });

  it('ops without a partitioning rule run whole after an all-gather (cumsum, sort)', () => {
    const { text } = check((a) => np.cumsum(a, { axis: 0 }), [x], [S(M1, 'x', null)]);
    expect(collectives(text)).toEqual({ 'all-gather': 1 });
    check((a) => np.sort(a, { axis: 0 }), [x], [S(M1, 'x', null)]);
  });

  it('gather (embedding lookup): batch-split tokens and a feature-split table need no collective', () => {
    const table = rand([16, 8], 9);
    const tokens = np.array([[1, 5, 7, 0, 2, 15], [3, 3, 9, 12, 4, 8], [6, 1, 0, 11, 13, 14], [10, 2, 5, 7, 9, 1]], 'int32');
    const lookup = (t: Array, ids: Array) => np.take(t, ids, { axis: 0 });
    const a = check(lookup, [table, tokens], [S(M2, null, 'y'), S(M2, 'x', null)]);
    expect(collectives(a.text)).toEqual({});
    expect(a.text).toMatch(/f32\[2,6,4\]\{2,1,0\} gather\(/);
    expect(String(a.out.sharding)).toContain('{devices=[2,1,2]0,1,2,3}');
    // Its gradient is a scatter-add, which runs whole: correct, with gathers first.
    const loss = (t: Array, ids: Array) => np.sum(np.square(lookup(t, ids)));
    check(grad(loss), [table, tokens], [S(M2, null, 'y'), S(M2, 'x', null)]);
  });

  it('reshape and transpose keep the split when it stays on a major dimension', () => {
    const { text } = check((a) => np.transpose(np.reshape(a, [8, 4, 4]), [1, 0, 2]), [x], [S(M1, 'x', null)]);
    expect(collectives(text)).toEqual({});
    expect(text).toMatch(/f32\[4,4,4\]\{2,1,0\} reshape\(/);
  });
});

/** A stand-in for mesh's lax.withShardingConstraint: the `sharding_constraint` primitive contract xla-lite reads. */
const constraintP: Primitive = { name: 'sharding_constraint', hlo: 'custom-call', abstractEval: ([x]) => [x], impl: ([x]) => [x.data], rules: { eval: ([x]: Array[]) => [x] } };
const withShardingConstraint = (x: Array, sharding: Sharding): Array => bind(constraintP, [x], { sharding })[0];

/** A one-layer decoder (embedding gather, RMSNorm, causal attention with softmax, MLP, cross-entropy): a realistic graph. */
function decoderLoss(p: { embed: Array; wq: Array; wk: Array; wv: Array; wo: Array; w1: Array; w2: Array }, tokens: Array, targets: Array): Array {
  const norm = (x: Array) => np.multiply(x, lax.rsqrt(np.add(np.mean(np.square(x), { axis: -1, keepdims: true }), 1e-6)));
  const l = tokens.shape[1];
  const d = p.embed.shape[1];
  const x = np.take(p.embed, tokens, { axis: 0 });
  const h = norm(x);
  const q = np.matmul(h, p.wq);
  const k = np.matmul(h, p.wk);
  const v = np.matmul(h, p.wv);
  const scores = np.divide(np.matmul(q, np.transpose(k, [0, 2, 1])), Math.sqrt(d));
  const causal = np.tri(l, l, 0, 'bool');
  const att = nn.softmax(np.where(causal, scores, -1e9), { axis: -1 });
  const y = np.add(x, np.matmul(np.matmul(att, v), p.wo));
  const z = np.add(y, np.matmul(np.maximum(np.matmul(norm(y), p.w1), 0), p.w2));
  const logits = np.matmul(norm(z), np.transpose(p.embed));
  const logp = nn.logSoftmax(logits, { axis: -1 });
  return np.negative(np.mean(np.sum(np.multiply(logp, nn.oneHot(targets, p.embed.shape[0])), { axis: -1 })));
}

describe('a decoder training step', () => {
  const params = { embed: rand([32, 16], 40), wq: rand([16, 16], 41), wk: rand([16, 16], 42), wv: rand([16, 16], 43), wo: rand([16, 16], 44), w1: rand([16, 32], 45), w2: rand([32, 16], 46) };
  const tokens = np.array([[1, 5, 7, 0, 2, 15, 3, 9], [3, 3, 9, 12, 4, 8, 30, 31], [6, 1, 0, 11, 13, 14, 2, 2], [10, 2, 5, 7, 9, 1, 4, 20]], 'int32');
  const targets = np.array([[5, 7, 0, 2, 15, 3, 9, 1], [3, 9, 12, 4, 8, 30, 31, 0], [1, 0, 11, 13, 14, 2, 2, 6], [2, 5, 7, 9, 1, 4, 20, 10]], 'int32');
  const step = valueAndGrad(decoderLoss);
  const [wantLoss, wantGrads] = step(params, tokens, targets) as [Array, Record<string, Array>];
  const compare = (out: [Array, Record<string, Array>]) => {
    close(out[0], wantLoss, 1e-4, 1e-5);
    for (const k of Object.keys(wantGrads)) close(out[1][k], wantGrads[k], 1e-3, 1e-5);
  };

  it('data parallel (batch split, parameters replicated) equals the unsharded step', () => {
    const f = jit(step, { inShardings: [S(M1, null, null), S(M1, 'x', null), S(M1, 'x', null)] });
    compare(f(params, tokens, targets) as [Array, Record<string, Array>]);
    const c = collectives(f.lower(params, tokens, targets).compile().asText());
    // One all-reduce per weight gradient (7, the embedding's scatter-add included) and the loss; nothing is gathered.
    expect(c['all-reduce']).toBeGreaterThanOrEqual(7);
    expect(c['all-gather']).toBeUndefined();
  });

  it('FSDP x tensor parallel on a 2x2 mesh (parameters split over y, batch over x) equals the unsharded step', () => {
    const f = jit(step, { inShardings: [S(M2, 'y', null), S(M2, 'x', null), S(M2, 'x', null)] });
    compare(f(params, tokens, targets) as [Array, Record<string, Array>]);
  });
});

describe('sharded jit', () => {
  it('a sharding constraint fixes the sharding of a value; producers are computed split (custom_call @Sharding in StableHLO)', () => {
    const x = rand([8, 16], 11);
    const f = (a: Array) => np.multiply(withShardingConstraint(np.exp(a), S(M1, 'x', null)), 2);
    const j = jit(f, { inShardings: [S(M1, null, null)] });
    const low = j.lower(x);
    expect(low.asText()).toMatch(/custom-call\(%exponential\.\d+\), custom_call_target="Sharding", sharding=\{devices=\[2,1\]0,1\}/);
    expect(low.asStableHlo()).toContain('call_target_name = "Sharding", mhlo.sharding = "{devices=[2,1]0,1}"');
    const text = low.compile().asText();
    expect(collectives(text)).toEqual({});
    expect(text).toMatch(/f32\[4,16\]\{1,0\} exponential\(/);
    const y = j(x);
    close(y, np.multiply(np.exp(x), 2));
    expect(String(y.sharding)).toContain('{devices=[2,1]0,1}');
  });

  it('takes sharded arguments without inShardings and returns sharded results', () => {
    const x = rand([4, 4], 6);
    const xs = put(x, S(M1, 'x', null));
    const f = jit((a: Array) => np.sin(a));
    const y = f(xs);
    expect(y.sharding).toBeInstanceOf(GSPMDSharding);
    expect(String(y.sharding)).toContain('{devices=[2,1]0,1}');
    expect(y.addressableShards.map((s) => s.data.shape)).toEqual([[2, 4], [2, 4]]);
    close(y, np.sin(x));
  });

  it('runs collectives through the installed CollectiveRuntime (the seam for worker-thread devices)', () => {
    const calls: string[] = [];
    const inner = new InThreadCollectives();
    const counting: CollectiveRuntime = {
      allReduce: (v, g, op) => (calls.push(`all-reduce ${op} ${JSON.stringify(g)}`), inner.allReduce(v, g, op)),
      allGather: (v, g, d) => (calls.push('all-gather'), inner.allGather(v, g, d)),
      reduceScatter: (v, g, d, op) => (calls.push('reduce-scatter'), inner.reduceScatter(v, g, d, op)),
      allToAll: (v, g, s, c) => (calls.push('all-to-all'), inner.allToAll(v, g, s, c)),
      collectivePermute: (v, p) => (calls.push('collective-permute'), inner.collectivePermute(v, p)),
    };
    setCollectiveRuntime(counting);
    try {
      const x = rand([4, 8], 30);
      const y = jit((a: Array) => np.sum(a), { inShardings: [S(M1, 'x', null)] })(x);
      close(y, np.sum(x));
      expect(calls).toEqual(['all-reduce add [[0,1]]']);
    } finally {
      setCollectiveRuntime(null);
    }
  });

  it('results feed the next sharded jit as they are: its input is already split, no collective', () => {
    const x = rand([8, 4], 32);
    const y = jit((a: Array) => np.exp(a), { inShardings: [S(M1, 'x', null)] })(x);
    const g = jit((a: Array) => np.multiply(a, 3));
    expect(collectives(g.lower(y).compile().asText())).toEqual({});
    const z = g(y);
    expect(String(z.sharding)).toContain('{devices=[2,1]0,1}');
    close(z, np.multiply(np.exp(x), 3));
  });

  it('in/out shardings that are all null keep the ordinary single-device path', () => {
    const f = jit((a: Array) => np.sin(a), { inShardings: [null], outShardings: null });
    const x = rand([4, 4], 31);
    const y = f(x);
    expect(y.sharding.deviceSet).toHaveLength(1);
    close(y, np.sin(x));
  });

  it('keys the compile cache on shardings: same shapes, another sharding recompiles with the reason', () => {
    const x = rand([4, 4], 7);
    const f = jit((a: Array) => np.cos(a));
    f(put(x, S(M1, 'x', null)));
    f(put(x, S(M1, 'x', null)));
    f(put(x, S(M1, null, 'x')));
    const st = f.compileStats();
    expect(st.hits).toBe(1);
    expect(st.recompiles).toBe(1);
    expect(st.explanations[0]).toMatch(/argument 0 \(a\): sharding changed from GridSharding\(\{"x":2\}, P\("x", null\)\) to GridSharding\(\{"x":2\}, P\(null, "x"\)\)/);
  });

  it('donation deletes the donated sharded argument', () => {
    const f = jit((a: Array) => np.add(a, 1), { donateArgnums: 0, inShardings: [S(M1, 'x', null)] });
    const x = put(rand([4, 4], 8), S(M1, 'x', null));
    const y = f(x);
    expect(y.shape).toEqual([4, 4]);
    expect(x.isDeleted()).toBe(true);
    expect(() => f(x)).toThrow(/argument 0 \(a\) is deleted/);
  });

  it('exports StableHLO with mhlo.sharding on arguments and results', () => {
    const f = jit((a: Array, b: Array) => np.matmul(a, b), { inShardings: [S(M1, null, 'x'), S(M1, 'x', null)], outShardings: S(M1, 'x', null) });
    const t = f.lower(rand([4, 4], 1), rand([4, 4], 2)).asStableHlo();
    expect(t).toContain('module @jit_fn attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32}');
    expect(t).toContain('%arg0: tensor<4x4xf32> {mhlo.sharding = "{devices=[1,2]0,1}"}');
    expect(t).toContain('%arg1: tensor<4x4xf32> {mhlo.sharding = "{devices=[2,1]0,1}"}');
    expect(t).toMatch(/-> \(tensor<4x4xf32> \{mhlo.sharding = "\{devices=\[2,1\]0,1\}"\}\)/);
  });

  it('exports a closed-over constant as a module constant, not as a leading argument', () => {
    const w = rand([4, 4], 3);
    const f = jit((a: Array) => np.matmul(a, w), { inShardings: [S(M1, 'x', null)], outShardings: S(M1, 'x', null) });
    const t = f.lower(rand([4, 4], 1)).asStableHlo();
    expect(t).toMatch(/func\.func public @main\(%arg0: tensor<4x4xf32> \{mhlo.sharding = "\{devices=\[2,1\]0,1\}"\}\) ->/);
    expect(t).not.toContain('%arg1');
    expect(t).toContain('"stablehlo.constant"() {value = dense<');
  });

  it('bad inputs: a dimension not divisible by its shards, mismatched meshes, wrong outShardings count', () => {
    const f = jit((a: Array) => np.negative(a), { inShardings: [S(M1, 'x', null)] });
    expect(() => f(rand([3, 4], 1))).toThrow(/jit\(fn\): argument 0 \(a\): sharding GridSharding.* does not split shape \[3,4\] into even tiles/);
    const g = jit((a: Array, b: Array) => np.add(a, b), { inShardings: [S(M1, 'x', null), S({ x: 4 }, 'x', null)] });
    expect(() => g(rand([4, 4], 1), rand([4, 4], 2))).toThrow(/mismatched meshes: .*argument 0 \(a\) is sharded over devices \[0,1\] but .*argument 1 \(b\) over \[0,1,2,3\]/);
    const h = jit((a: Array) => np.negative(a), { inShardings: [S(M1, 'x', null)], outShardings: [S(M1, 'x', null), S(M1, 'x', null)] });
    expect(() => h(rand([4, 4], 1))).toThrow(/outShardings has 2 entries but the function returns 1 arrays/);
    const k = jit((a: Array) => np.negative(a), { inShardings: [S(M1, 'x', null), S(M1, 'x', null)] });
    expect(() => k(rand([4, 4], 1))).toThrow(/inShardings has 2 entries but the call passes 1 positional arguments/);
    const grid = S(M1, 'x', null);
    const rank3: Sharding = { deviceSet: grid.deviceSet, isFullyReplicated: false, shardShape: () => [2, 4, 1], devicesIndicesMap: () => new Map(grid.deviceSet.map((d, i) => [d, [[2 * i, 2 * i + 2], [0, 4], [0, 1]]])), toString: () => 'Rank3' };
    const r = jit((a: Array) => np.negative(a), { inShardings: [rank3] });
    expect(() => r(rand([4, 4], 1))).toThrow(/argument 0 \(a\): sharding Rank3 gives device 0 an index of rank 3 for shape \[4,4\] \(rank 2\)/);
  });

  it('bit-exact against the op-by-op program where no partial sums are combined (split dots keep whole contractions)', () => {
    const x = rand([8, 16], 21);
    const w = rand([16, 8], 22);
    const f = (a: Array, b: Array) => np.tanh(np.add(np.matmul(a, b), 1));
    const single = f(x, w).dataSync();
    const sharded = jit(f, { inShardings: [S(M2, 'x', null), S(M2, null, 'y')] })(x, w).dataSync();
    expect(globalThis.Array.from(sharded)).toEqual(globalThis.Array.from(single));
  });

  it('law: for random shapes and specs, sharded jit equals unsharded jit', () => {
    const axes: (string | readonly string[] | null)[] = [null, 'x', 'y', ['x', 'y'], ['y', 'x']];
    const used = (a: string | readonly string[] | null): string[] => (a === null ? [] : typeof a === 'string' ? [a] : [...a]);
    const spec2 = fc.tuple(fc.constantFrom(...axes), fc.constantFrom(...axes)).filter(([a, b]) => !used(a).some((x) => used(b).includes(x)));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), spec2, spec2, spec2, fc.integer({ min: 0, max: 3 }), (m, k, n, sa, sb, so, which) => {
        const a = rand([4 * m, 4 * k], m + 3 * k);
        const b = rand([4 * k, 4 * n], n + 5 * k);
        const fs = [
          (p: Array, q: Array) => np.tanh(np.matmul(p, q)),
          (p: Array, q: Array) => np.sum(np.multiply(np.matmul(p, q), 2), { axis: 1 }),
          (p: Array, q: Array) => np.add(np.transpose(np.matmul(p, q)), np.max(p)),
          (p: Array, q: Array) => np.reshape(np.add(np.matmul(p, q), np.sum(q, { axis: 0 })), [2 * m, 8 * n]),
        ];
        const f = fs[which];
        const outShape = f(a, b).shape;
        // Split an output dimension only where it divides evenly.
        const out = S(M2, ...so.slice(0, outShape.length).map((ax, d) => (outShape[d] % 2 ** used(ax).length === 0 ? ax : null)));
        const j = jit(f, { inShardings: [S(M2, ...sa), S(M2, ...sb)], outShardings: out });
        close(j(a, b), f(a, b), 1e-5, 1e-5);
      }),
      { numRuns: 40 },
    );
  });
});
