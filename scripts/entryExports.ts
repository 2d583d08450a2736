/**
 * The names an entry file exports, one per line, sorted, each marked `value` or `type`
 * (a class or function is a value; an interface or type alias a type; a namespace
 * re-export `export * as np` a value). Used to keep a package's main entry to a committed
 * list, so that widening the public API is a conscious change
 * (`packages/core/test/publicApi.test.ts`).
 *
 * CLI: `tsx scripts/entryExports.ts packages/core/src/index.ts > packages/core/test/publicApi.txt`
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export function entryExports(file: string): string[] {
  const program = ts.createProgram([file], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'],
    types: ['node'],
  });
  const checker = program.getTypeChecker();
  const sf = program.getSourceFile(file);
  if (!sf) throw new Error(`entryExports: cannot read ${file}`);
  const mod = checker.getSymbolAtLocation(sf);
  if (!mod) return [];
  return checker
    .getExportsOfModule(mod)
    .map((e) => {
      const target = e.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(e) : e;
      return `${e.name} ${target.flags & ts.SymbolFlags.Value && !typeOnly(e) ? 'value' : 'type'}`;
    })
    .sort();
}

/** `export type { X }` / `export { type X }`: a class exported this way is no value at run time. */
function typeOnly(e: ts.Symbol): boolean {
  const d = e.declarations?.[0];
  return !!d && ts.isExportSpecifier(d) && (d.isTypeOnly || d.parent.parent.isTypeOnly);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: tsx scripts/entryExports.ts <entry.ts>');
    process.exit(2);
  }
  process.stdout.write(`${entryExports(path.resolve(file)).join('\n')}\n`);
}
