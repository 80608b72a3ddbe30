import { createRequire } from 'node:module';
import { MissingPeerError } from './errors.js';

const require = createRequire(import.meta.url);

/**
 * Loads a backend's client package (an optional peer dependency) for the entry point that needs
 * it. A static `import` of a missing package fails while Node links the module graph, before any
 * of tenure's code runs, with a bare ERR_MODULE_NOT_FOUND; loading it here instead fails with a
 * {@link MissingPeerError} that says which package to install. The clients are CommonJS packages,
 * so `require` gives the same module object an `import` would.
 */
export function loadPeer<T>(entry: string, packageName: string): T {
  try {
    return require(packageName) as T;
  } catch (e) {
    if ((e as { code?: string }).code === 'MODULE_NOT_FOUND') throw new MissingPeerError(entry, packageName, { cause: e });
    throw e;
  }
}

/** Checks that a peer package is installed without loading it (for entries that only use its types). */
export function requirePeer(entry: string, packageName: string): void {
  try {
    require.resolve(packageName);
  } catch (e) {
    throw new MissingPeerError(entry, packageName, { cause: e });
  }
}

/** Like {@link loadPeer}, for an optional peer that is an ES module (import it with top-level await). */
export async function importPeer<T>(entry: string, packageName: string): Promise<T> {
  try {
    return (await import(packageName)) as T;
  } catch (e) {
    if ((e as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' && String((e as Error).message).includes(`'${packageName}'`)) throw new MissingPeerError(entry, packageName, { cause: e });
    throw e;
  }
}
