import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/**
 * The public options of tenure, read from the entry points with the TypeScript checker — so a new
 * option, options parameter or options type shows up here without anyone listing it: the bad-input
 * and unknown-option tests each fail until it has its row.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const src = `${root}src/`;
const ENTRIES = ['src/index.ts', 'src/recipes/zk/index.ts', 'src/recipes/etcd/index.ts', 'src/recipes/redis/index.ts', 'src/recipes/postgres/index.ts', 'src/integrations/metrics/index.ts', 'src/integrations/inversify/index.ts', 'src/integrations/nestjs/index.ts'];
const TESTING = 'src/testing/index.ts';

/** One options object a caller hands to tenure: a parameter, or an options property holding one. */
export interface OptionsSite {
  /** `new RedisLock(options)`, `LeaseCandidate#campaign(options)`, `ZkSession.create(wait)`, or `PgElectionOptions.backoff` for a nested one. */
  label: string;
  /** Its keys, from its type. */
  keys: string[];
  /** What an unknown key `k` is reported as: `k` for a call's `options`, `wait.k` for another parameter, `backoff.k` nested. */
  prefix: string;
  /** From `tenure/testing`. */
  testing: boolean;
}

export interface PublicApi {
  /** Every option as `Interface.property` (inline types: `<site>.property`), the testing kit excluded. */
  options: string[];
  /** Every options object of every public constructor, static method, method and function, the testing kit's included. */
  sites: OptionsSite[];
}

let cached: PublicApi | undefined;

export function publicApi(): PublicApi {
  if (cached) return cached;
  const files = [...ENTRIES, TESTING].map((e) => root + e);
  const program = ts.createProgram(files, { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, skipLibCheck: true, noEmit: true, types: ['node'] });
  const c = program.getTypeChecker();
  const options = new Set<string>();
  const sites = new Map<string, OptionsSite>();

  // Ours: every property declared in src/ (a driver's options — ioredis, pg, etcd3 — are not).
  const ours = (t: ts.Type): boolean => {
    const props = c.getPropertiesOfType(t);
    return props.length > 0 && props.every((p) => p.declarations?.every((d) => d.getSourceFile().fileName.startsWith(src)));
  };
  // An options type: an `…Options` interface, or an anonymous object type (all optional for a parameter, which rules out data arguments).
  const optionsType = (t: ts.Type, parameter: boolean): ts.Type | undefined => {
    for (const m of t.isUnion() ? t.types : [t]) {
      if (!(m.flags & ts.TypeFlags.Object) || m.getCallSignatures().length || m.getConstructSignatures().length || c.getIndexInfosOfType(m).length || c.isArrayType(m) || c.isTupleType(m)) continue;
      const sym = m.getSymbol();
      if ((sym && sym.flags & ts.SymbolFlags.Class) || !ours(m)) continue;
      const name = m.aliasSymbol?.getName() ?? sym?.getName();
      // Error constructors take { cause, retryable }: tenure makes them on its failure paths, and making one must never throw.
      if (name === 'TenureErrorOptions') continue;
      if (name?.endsWith('Options')) return m;
      const anonymous = !sym || sym.flags & ts.SymbolFlags.TypeLiteral || m.aliasSymbol;
      if (anonymous && (!parameter || c.getPropertiesOfType(m).every((p) => p.flags & ts.SymbolFlags.Optional))) return m;
    }
    return undefined;
  };
  const add = (label: string, t: ts.Type, prefix: string, testing: boolean): void => {
    if (sites.has(label)) return;
    sites.set(label, { label, keys: c.getPropertiesOfType(t).map((p) => p.getName()), prefix, testing });
    for (const p of c.getPropertiesOfType(t)) {
      // Inherited properties are named where they are declared (RedisElectionOptions extends RedisLockOptions).
      const decl = p.declarations?.[0]?.parent;
      const owner = decl && ts.isInterfaceDeclaration(decl) ? decl.name.text : label;
      if (!testing) options.add(`${owner}.${p.getName()}`);
      const nested = optionsType(c.getNonNullableType(c.getTypeOfSymbol(p)), false);
      if (nested) add(`${owner}.${p.getName()}`, nested, `${p.getName()}.`, testing);
    }
  };
  const visit = (label: string, decl: ts.Declaration | undefined, signatures: readonly ts.Signature[], testing: boolean): void => {
    if (!decl?.getSourceFile().fileName.startsWith(src)) return;
    if (ts.getCombinedModifierFlags(decl) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) return;
    for (const sig of signatures) {
      for (const p of sig.getParameters()) {
        const t = optionsType(c.getNonNullableType(c.getTypeOfSymbol(p)), true);
        if (t) add(`${label}(${p.getName()})`, t, p.getName() === 'options' ? '' : `${p.getName()}.`, testing);
      }
    }
  };
  for (const file of files) {
    const testing = file.endsWith(TESTING);
    for (const exported of c.getExportsOfModule(c.getSymbolAtLocation(program.getSourceFile(file)!)!)) {
      const s = exported.flags & ts.SymbolFlags.Alias ? c.getAliasedSymbol(exported) : exported;
      if (s.flags & ts.SymbolFlags.Class) {
        const statics = c.getTypeOfSymbol(s);
        for (const sig of statics.getConstructSignatures()) visit(`new ${s.getName()}`, sig.getDeclaration(), [sig], testing);
        for (const m of c.getPropertiesOfType(statics)) {
          if (m.flags & ts.SymbolFlags.Method) visit(`${s.getName()}.${m.getName()}`, m.declarations?.[0], c.getTypeOfSymbol(m).getCallSignatures(), testing);
        }
        for (const m of c.getPropertiesOfType(c.getDeclaredTypeOfSymbol(s))) {
          if (!(m.flags & ts.SymbolFlags.Method) || m.getName().startsWith('#')) continue;
          // Named by the class that declares it: an inherited method is one site (LeaseCandidate#campaign).
          const d = m.declarations?.[0];
          const owner = d?.parent && ts.isClassDeclaration(d.parent) ? d.parent.name?.text : s.getName();
          visit(`${owner}#${m.getName()}`, d, c.getTypeOfSymbol(m).getCallSignatures(), testing);
        }
      } else if (s.flags & ts.SymbolFlags.Function) {
        visit(s.getName(), s.declarations?.[0], c.getTypeOfSymbol(s).getCallSignatures(), testing);
      } else if (!testing && s.getName().endsWith('Options') && s.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)) {
        // An exported options type no call takes (yet) still needs its rows.
        const t = c.getDeclaredTypeOfSymbol(s);
        if (s.getName() !== 'TenureErrorOptions') for (const p of c.getPropertiesOfType(t)) {
          const decl = p.declarations?.[0]?.parent;
          options.add(`${decl && ts.isInterfaceDeclaration(decl) ? decl.name.text : s.getName()}.${p.getName()}`);
        }
      }
    }
  }
  cached = { options: [...options].sort(), sites: [...sites.values()] };
  return cached;
}
