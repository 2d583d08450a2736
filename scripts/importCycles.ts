/**
 * Finds runtime import cycles among the TypeScript sources of a folder (test files excluded).
 *
 * An edge A -> B is a static `import` / `export ... from` in A of a relative path resolving to B.
 * Left out, because they are not evaluated when A is loaded or are erased by the build:
 * `import type` / `export type`, imports whose every named binding is marked `type`, and
 * dynamic `import()`. Any other import counts, even when its bindings are only used as types
 * (conservative: such an import may still be erased, but then it should say `type`).
 *
 * With `{ types: true }` (CLI: `--types` before the folders) type-only imports count too: a
 * type-level cycle is no runtime hazard, but it ties the files' design together all the same
 * (it is what `farm-studio look` draws as a circle). Dynamic `import()` never counts.
 *
 * CLI: `pnpm check:cycles` (`tsx scripts/importCycles.ts [--types] <dir>...`) prints each cycle
 * and exits 1 when there is one; core's, xla-lite's and grain-ts's importCycles tests run it in CI.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** What counts as an edge: runtime imports only (the default), or type-only ones too. */
export interface CycleOptions {
  types?: boolean;
}

/** The runtime (with `types`: all static) relative imports of one source file, resolved to absolute paths. */
export function runtimeImports(file: string, text = readFileSync(file, 'utf8'), { types = false }: CycleOptions = {}): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, false, ts.ScriptKind.TS);
  const out: string[] = [];
  for (const st of sf.statements) {
    let spec: ts.Expression | undefined;
    if (ts.isImportDeclaration(st)) {
      const c = st.importClause;
      if (!types && c?.isTypeOnly) continue;
      const nb = c?.namedBindings;
      if (!types && c && !c.name && nb && ts.isNamedImports(nb) && nb.elements.length > 0 && nb.elements.every((e) => e.isTypeOnly)) continue;
      spec = st.moduleSpecifier;
    } else if (ts.isExportDeclaration(st) && st.moduleSpecifier) {
      if (!types && st.isTypeOnly) continue;
      const ec = st.exportClause;
      if (!types && ec && ts.isNamedExports(ec) && ec.elements.length > 0 && ec.elements.every((e) => e.isTypeOnly)) continue;
      spec = st.moduleSpecifier;
    }
    if (!spec || !ts.isStringLiteral(spec) || !spec.text.startsWith('.')) continue;
    const target = resolveSource(path.resolve(path.dirname(file), spec.text));
    if (target) out.push(target);
  }
  return out;
}

function resolveSource(base: string): string | null {
  for (const c of [base, `${base}.ts`, base.replace(/\.js$/, '.ts'), path.join(base, 'index.ts')]) {
    if (existsSync(c) && statSync(c).isFile() && c.endsWith('.ts')) return c;
  }
  return null;
}

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) sources(p, out);
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/**
 * The runtime import cycles under `dir`: one per strongly connected component with more than
 * one file (or a file importing itself), given as a shortest cycle through the component's
 * first file, paths relative to `dir`, the first file repeated at the end.
 */
export function importCycles(dir: string, options: CycleOptions = {}): string[][] {
  const files = sources(path.resolve(dir)).sort();
  const inDir = new Set(files);
  const edges = new Map(files.map((f) => [f, runtimeImports(f, undefined, options).filter((t) => inDir.has(t))]));
  // Tarjan's strongly connected components (iterative).
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const sccs: string[][] = [];
  let next = 0;
  for (const root of files) {
    if (index.has(root)) continue;
    const work: [string, number][] = [[root, 0]];
    index.set(root, next);
    low.set(root, next++);
    stack.push(root);
    onStack.add(root);
    while (work.length) {
      const top = work[work.length - 1];
      const [v, i] = top;
      const out = edges.get(v)!;
      if (i < out.length) {
        top[1]++;
        const w = out[i];
        if (!index.has(w)) {
          index.set(w, next);
          low.set(w, next++);
          stack.push(w);
          onStack.add(w);
          work.push([w, 0]);
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
        continue;
      }
      work.pop();
      if (work.length) {
        const u = work[work.length - 1][0];
        low.set(u, Math.min(low.get(u)!, low.get(v)!));
      }
      if (low.get(v) === index.get(v)) {
        const comp: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          comp.push(w);
        } while (w !== v);
        if (comp.length > 1 || edges.get(v)!.includes(v)) sccs.push(comp.sort());
      }
    }
  }
  return sccs.map((comp) => shortestCycle(comp, edges).map((f) => path.relative(path.resolve(dir), f)));
}

function shortestCycle(comp: string[], edges: Map<string, string[]>): string[] {
  const start = comp[0];
  const members = new Set(comp);
  const prev = new Map<string, string>();
  const queue = [start];
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q];
    for (const w of edges.get(v)!) {
      if (!members.has(w)) continue;
      if (w === start) {
        const cycle = [start];
        for (let u = v; u !== start; u = prev.get(u)!) cycle.splice(1, 0, u);
        return [...cycle, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname);
if (isMain) {
  let found = 0;
  const args = process.argv.slice(2);
  const types = args.includes('--types');
  for (const dir of args.filter((a) => a !== '--types')) {
    for (const c of importCycles(dir, { types })) {
      found++;
      console.log(`${dir}: ${c.join(' -> ')}`);
    }
  }
  const kind = types ? 'import' : 'runtime import';
  console.log(found === 0 ? `no ${kind} cycles` : `${found} ${kind} cycle(s)`);
  process.exitCode = found === 0 ? 0 : 1;
}
