import { ConfigError } from '../../core/errors.js';
import { requireString } from '../../core/validate.js';
import { EtcdSession } from './session.js';

/**
 * A lock or election name is the etcd key prefix its participants share (`<name>/<lease hex>`),
 * the same layout as etcd's Go `concurrency` package and `etcdctl lock|elect`, so they interoperate.
 *
 * Hazard (shared with the Go package): names nest. The range of `jobs` (`jobs/…`) also holds the
 * keys of `jobs/nightly` (`jobs/nightly/…`), so a waiter on `jobs` may queue behind a holder of
 * `jobs/nightly`, and observers of `jobs` may report it. tenure refuses rather than misbehaves:
 * a participant of `jobs` that meets a key of a nested name ahead of it rejects with a
 * ConfigError (see {@link refuseNested}). Never use a name that is another name plus `/…`.
 */
export function requireName(field: string, value: unknown): string {
  const name = requireString(field, value, {
    maxLength: 512,
    pattern: /^[A-Za-z0-9._~:@+=,\-/]+$/,
    patternHint: 'use only letters, digits and . _ ~ : @ + = , - /',
  });
  if (name.endsWith('/') || name.includes('//')) throw new ConfigError(field, `must not end with '/' or contain '//', got ${JSON.stringify(name)}`);
  return name;
}

/** Throws unless `value` is a live EtcdSession. */
export function requireSession(value: unknown): EtcdSession {
  if (!(value instanceof EtcdSession)) throw new ConfigError('session', 'must be an EtcdSession (create one with EtcdSession.create)');
  return value;
}

/** Largest value tenure stores in a key (etcd refuses requests over 1.5 MiB by default). */
const MAX_VALUE_BYTES = 1024 * 1024;

/** A value to store: a string (UTF-8) or bytes, at most 1 MiB. */
export function toValue(field: string, value: unknown): Buffer {
  let b: Buffer;
  if (typeof value === 'string') b = Buffer.from(value);
  else if (Buffer.isBuffer(value)) b = value;
  else if (value instanceof Uint8Array) b = Buffer.from(value);
  else throw new ConfigError(field, 'must be a string or a Buffer');
  if (b.length > MAX_VALUE_BYTES) throw new ConfigError(field, `must be at most ${MAX_VALUE_BYTES} bytes, got ${b.length}`);
  return b;
}

/** Ends the tail hint's key; `#` is not allowed in names, so no participant key ends so. */
const TAIL = '#tail';

/**
 * The queue's tail hint, `<name>#tail`: the newest tenure participant's key name, put in the same
 * txn as that key and on the same lease (see queue.ts). Outside `<name>/`, so Go peers,
 * `etcdctl elect` and observers never take it for a participant.
 */
export function tailKey(name: string): Buffer {
  return Buffer.from(`${name}${TAIL}`);
}

/**
 * Throws a ConfigError when `key`, found under `prefix` (`<name>/`), belongs to a nested name
 * (`<name>/<more>/<lease hex>`, or that name's tail hint `<name>/<more>#tail`) rather than to a
 * participant of `<name>` itself.
 */
export function refuseNested(prefix: Buffer, key: Buffer | string): void {
  const rest = key.toString().slice(prefix.length);
  const cut = rest.endsWith(TAIL) ? rest.length - TAIL.length : rest.lastIndexOf('/');
  if (cut < 0) return;
  const name = prefix.toString().slice(0, -1);
  throw new ConfigError(
    'name',
    `'${name}' overlaps the nested name '${name}/${rest.slice(0, cut)}' (its keys lie in this name's range); use names that are not another name plus '/…'`,
  );
}
