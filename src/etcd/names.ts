import { ConfigError } from '../core/errors.js';
import { requireString } from '../core/validate.js';
import { EtcdSession } from './session.js';

/**
 * A lock or election name is the etcd key prefix its participants share (`<name>/<lease hex>`),
 * the same layout as etcd's Go `concurrency` package and `etcdctl lock|elect`, so they interoperate.
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

/** A value to store: a string (UTF-8) or bytes. */
export function toValue(field: string, value: unknown): Buffer {
  if (typeof value === 'string') return Buffer.from(value);
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value);
  throw new ConfigError(field, 'must be a string or a Buffer');
}
