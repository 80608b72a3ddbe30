import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { expect, it } from 'vitest';

/**
 * The public API as a contract: every name each entry point exports (values and types), with its
 * kind. A change to this list is a change to what users can depend on, so it must be made on
 * purpose: run `npx vitest run test/package/exports.test.ts -u` and commit the new report.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const entries: Record<string, string> = {
  tenure: 'src/index.ts',
  'tenure/zk': 'src/recipes/zk/index.ts',
  'tenure/etcd': 'src/recipes/etcd/index.ts',
  'tenure/redis': 'src/recipes/redis/index.ts',
  'tenure/postgres': 'src/recipes/postgres/index.ts',
  'tenure/testing': 'src/testing/index.ts',
  'tenure/metrics': 'src/integrations/metrics/index.ts',
  'tenure/inversify': 'src/integrations/inversify/index.ts',
  'tenure/nestjs': 'src/integrations/nestjs/index.ts',
};

function kindOf(checker: ts.TypeChecker, sym: ts.Symbol): string {
  const s = sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym;
  const f = s.flags;
  if (f & ts.SymbolFlags.Class) return 'class';
  if (f & ts.SymbolFlags.Function) return 'function';
  if (f & ts.SymbolFlags.Interface) return 'interface';
  if (f & ts.SymbolFlags.TypeAlias) return 'type';
  if (f & ts.SymbolFlags.Enum) return 'enum';
  if (f & ts.SymbolFlags.Variable) return 'const';
  return 'other';
}

it('each entry point exports exactly the names in the committed API report', async () => {
  const program = ts.createProgram(
    Object.values(entries).map((e) => root + e),
    { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, skipLibCheck: true, noEmit: true, types: ['node'] },
  );
  const checker = program.getTypeChecker();
  const report: string[] = [];
  for (const [entry, file] of Object.entries(entries)) {
    const sf = program.getSourceFile(root + file)!;
    const mod = checker.getSymbolAtLocation(sf)!;
    const names = checker.getExportsOfModule(mod).map((s) => `${kindOf(checker, s)} ${s.getName()}`);
    report.push(`## ${entry}`, ...names.sort(), '');
  }
  await expect(report.join('\n')).toMatchFileSnapshot('./api-report.txt');
});
