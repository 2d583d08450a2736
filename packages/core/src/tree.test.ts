import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as tree from './tree';

const leafArb = fc.oneof(fc.integer(), fc.string({ maxLength: 3 }), fc.boolean());
/** Trees of leaves, nulls, lists and dicts, plus nodes that `extra` builds from two subtrees. */
const treesWith = (...extra: ((node: fc.Arbitrary<unknown>) => fc.Arbitrary<unknown>)[]): fc.Arbitrary<unknown> =>
  fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leafArb,
      fc.constant(null),
      fc.array(tie('node'), { maxLength: 3 }),
      fc.dictionary(fc.string({ minLength: 1, maxLength: 3 }), tie('node'), { maxKeys: 3 }),
      ...extra.map((x) => x(tie('node'))),
    ),
  })).node;
const treeArb = treesWith();

describe('tree', () => {
  it('flatten then unflatten is identity', () => {
    fc.assert(
      fc.property(treeArb, (t) => {
        const [ls, def] = tree.flatten(t);
        expect(def.unflatten(ls)).toEqual(t);
        expect(def.numLeaves).toBe(ls.length);
      }),
    );
  });

  it("each leaf's path leads to it, and a structure's text lists every node, dict keys sorted (dicts, lists, Maps, registered nodes)", () => {
    class Box {
      constructor(readonly x: unknown, readonly y: unknown) {}
    }
    tree.registerNode(Box, (b) => [[b.x, b.y], null], (_aux, [x, y]) => new Box(x, y), { keys: () => ['x', 'y'] });
    const richArb = treesWith(
      (node) => fc.array(fc.tuple(fc.string({ maxLength: 2 }), node), { maxLength: 3 }).map((es) => new Map(es)),
      (node) => fc.tuple(node, node).map(([x, y]) => new Box(x, y)),
    );
    const follow = (t: unknown, path: tree.KeyPath): unknown => {
      let node = t;
      for (const e of path) {
        if (e.kind === 'seq') node = (node as unknown[])[e.idx];
        else if (e.kind === 'dict') node = (node as Record<string, unknown>)[e.key];
        else if (e.kind === 'map') node = (node as Map<unknown, unknown>).get(e.key);
        else node = (node as Record<string, unknown>)[e.name];
      }
      return node;
    };
    // The structure's text, written independently of tree.ts's walk.
    const text = (t: unknown): string => {
      if (t === null) return 'null';
      if (Array.isArray(t)) return `[${t.map(text).join(', ')}]`;
      if (t instanceof Map) return `Map(${[...t].map(([k, v]) => `${String(k)} => ${text(v)}`).join(', ')})`;
      if (t instanceof Box) return `Box(${text(t.x)}, ${text(t.y)})`;
      if (typeof t === 'object') return `{${Object.keys(t as object).sort().map((k) => `${JSON.stringify(k)}: ${text((t as Record<string, unknown>)[k])}`).join(', ')}}`;
      return '*';
    };
    fc.assert(
      fc.property(richArb, (t) => {
        const [pairs, def] = tree.flattenWithPath(t);
        for (const [path, leaf] of pairs) expect(follow(t, path)).toBe(leaf);
        expect(String(def)).toBe(text(t));
        expect(def.unflatten(pairs.map((p) => p[1]))).toEqual(t);
      }),
    );
  });

  it('a hole in an array is an undefined node (as reading it gives), and unflatten fills it with undefined', () => {
    // eslint-disable-next-line no-sparse-arrays
    const [ls, def] = tree.flatten([, 1]);
    expect(ls).toEqual([1]);
    expect(String(def)).toBe('[undefined, *]');
    expect(def.equals(tree.structure([undefined, 1]))).toBe(true);
    const back = def.unflatten([2]) as unknown[];
    expect(back).toEqual([undefined, 2]);
    expect(0 in back).toBe(true);
  });

  it('visits object keys in sorted order, Maps in insertion order, null as an empty node', () => {
    expect(tree.leaves({ b: 1, a: [2, 3], c: null })).toEqual([2, 3, 1]);
    expect(tree.leaves(new Map<string, number>([['z', 1], ['a', 2]]))).toEqual([1, 2]);
    expect(tree.structure({ b: 1, a: [2, 3], c: null }).toString()).toBe('{"a": [*, *], "b": *, "c": null}');
  });

  it('map over several trees and paths', () => {
    const t = { w: [1, 2], b: 3 };
    expect(tree.map((x: number, y: number) => x + y, t, { w: [10, 20], b: 30 })).toEqual({ w: [11, 22], b: 33 });
    const [pairs] = tree.flattenWithPath({ params: { w: [5] } });
    expect(tree.keystr(pairs[0][0])).toBe("['params']['w'][0]");
    expect(tree.mapWithPath((p, x: number) => `${tree.keystr(p)}=${x}`, { a: 1 })).toEqual({ a: "['a']=1" });
  });

  it('map reports a structure mismatch with the path', () => {
    expect(() => tree.map((x: number, y: number) => x + y, { a: [1, 2] }, { a: [1] })).toThrow(/\['a'\]/);
    expect(() => tree.map((x: number, y: number) => x + y, { a: 1 }, { b: 1 })).toThrow(/different dict structure/);
  });

  it('unflatten checks the leaf count', () => {
    expect(() => tree.structure([1, 2]).unflatten([1])).toThrow(/2 leaves; got 1/);
  });

  it('registered classes are nodes', () => {
    class Pair {
      constructor(readonly a: unknown, readonly b: unknown) {}
    }
    tree.registerNode(Pair, (p) => [[p.a, p.b], null], (_aux, [a, b]) => new Pair(a, b), { keys: () => ['a', 'b'] });
    const t = new Pair(1, [2, 3]);
    expect(tree.leaves(t)).toEqual([1, 2, 3]);
    const m = tree.map((x: number) => x * 2, t) as unknown as Pair;
    expect(m).toBeInstanceOf(Pair);
    expect(m.b).toEqual([4, 6]);
    expect(tree.keystr(tree.flattenWithPath(t)[0][1][0])).toBe('.b[0]');
  });

  it('isLeaf stops descent', () => {
    expect(tree.leaves({ a: [1, 2] }, { isLeaf: (x) => Array.isArray(x) })).toEqual([[1, 2]]);
  });

  it('transpose swaps outer and inner structure', () => {
    const outer = tree.structure([0, 0]);
    const inner = tree.structure({ x: 0, y: 0 });
    expect(tree.transpose(outer, inner, [{ x: 1, y: 2 }, { x: 3, y: 4 }])).toEqual({ x: [1, 3], y: [2, 4] });
  });
});

describe('cyclic pytrees', () => {
  it('flatten, leaves, map and flattenWithPath name the path that closes the cycle', () => {
    const params: Record<string, unknown> = { w: 1, layers: [{ b: 2 }] };
    ((params.layers as unknown[])[0] as Record<string, unknown>).parent = params;
    const msg = "tree: the pytree has a cycle: the dict node at ['layers'][0]['parent'] is the same object as its ancestor at the root";
    expect(() => tree.flatten(params)).toThrow(msg);
    expect(() => tree.leaves(params)).toThrow(msg);
    expect(() => tree.map((x: number) => x + 1, params)).toThrow(msg);
    expect(() => tree.flattenWithPath(params)).toThrow(msg);
    const l: unknown[] = [1, [2]];
    (l[1] as unknown[]).push(l[1]);
    expect(() => tree.leaves(l)).toThrow("tree: the pytree has a cycle: the list node at [1][1] is the same object as its ancestor at [1]");
    const m = new Map<string, unknown>([['a', 1]]);
    m.set('self', m);
    expect(() => tree.leaves(m)).toThrow("the Map node at ['self'] is the same object as its ancestor at the root");
  });

  it('a shared (non-cyclic) subtree is still fine', () => {
    const shared = { a: 1 };
    expect(tree.leaves({ x: shared, y: [shared, shared] })).toEqual([1, 1, 1]);
  });
});
