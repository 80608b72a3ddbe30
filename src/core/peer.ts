import { MissingPeerError } from './errors.js';

/**
 * Loads a backend's client package (an optional peer dependency) when the backend first needs it
 * — its session's `create()` — through `load`, which the caller writes as `() => import('etcd3')`:
 * a literal specifier, so esbuild, webpack and ncc see the peer and bundle it (a specifier built
 * from a variable, or a `createRequire(import.meta.url)`, is invisible to them, and the latter
 * crashes in a CommonJS bundle, where `import.meta.url` is empty). Loading on first use keeps
 * every entry point free of top-level await and of import-time effects, so each one can be
 * `require()`d and tree-shaken. A peer that is not installed rejects with a
 * {@link MissingPeerError} naming it, instead of Node's bare ERR_MODULE_NOT_FOUND.
 */
export async function importPeer<T>(entry: string, packageName: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (e) {
    if (isMissing(e, packageName)) throw new MissingPeerError(entry, packageName, { cause: e });
    throw e;
  }
}

/**
 * The `module.exports` of a CommonJS peer from what `import()` gave: Node's namespace has it as
 * `default`; a bundler's interop may spread it instead.
 */
export function commonjsExports<T>(ns: T): T {
  return (ns as { default?: T }).default ?? ns;
}

/** Node's "not found" for `packageName` itself (ESM: ERR_MODULE_NOT_FOUND; a CommonJS bundle's require: MODULE_NOT_FOUND), not for a file or a package it needs. */
function isMissing(e: unknown, packageName: string): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  const message = String((e as Error).message).split('\n')[0]!;
  return message.includes(`'${packageName}'`);
}
