import { createHash } from 'node:crypto';
import type { ACL } from 'node-zookeeper-client';
import { zookeeper } from './peer.js';
import { ConfigError, PermissionDeniedError } from '../../core/errors.js';
import { requireString } from '../../core/validate.js';
import { isZkCode } from './ops.js';

/**
 * ZooKeeper access control for tenure's nodes (Curator's ACLProvider idea): the session
 * authenticates with `authInfo` on every connection it makes (a new session after LOST too), and
 * every node a recipe creates — the lock path's parents, the lock path, each queued node — gets
 * the session's `acl`. With a digest ACL only the owner may create in the lock path or delete a
 * holder's node (ZooKeeper checks CREATE and DELETE on the parent).
 */

/** One ACL entry: permissions (`zookeeper.Permission` bits) for an identity `scheme:id`. */
export type ZkAcl = ACL;

/** Credentials a session presents, e.g. `{ scheme: 'digest', auth: 'user:password' }`. */
export interface ZkAuthInfo {
  /** The auth scheme, e.g. `digest`. */
  scheme: string;
  /** The scheme's credentials, e.g. `user:password`. */
  auth: string;
}

/**
 * The ACL entry for a digest user: `digest:<user>:base64(sha1(<user>:<password>))` with `perms`
 * (default all). Give `digestAcl(user, password)` as the session's `acl` and
 * `{ scheme: 'digest', auth: 'user:password' }` as its `authInfo`.
 */
export function digestAcl(user: string, password: string, perms: number = zookeeper.Permission.ALL): ZkAcl {
  requireString('user', user, { pattern: /^[^:]+$/, patternHint: "contain no ':'" });
  requireString('password', password);
  const hash = createHash('sha1').update(`${user}:${password}`).digest('base64');
  return new zookeeper.ACL(perms, new zookeeper.Id('digest', `${user}:${hash}`));
}

/** Validates a session's `authInfo` option. */
export function validateAuthInfo(value: unknown): ZkAuthInfo[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new ConfigError('authInfo', 'must be a list of { scheme, auth }');
  return value.map((a: unknown, i) => {
    const o = a as Partial<ZkAuthInfo> | null;
    return { scheme: requireString(`authInfo[${i}].scheme`, o?.scheme), auth: requireString(`authInfo[${i}].auth`, o?.auth) };
  });
}

/** Validates a session's `acl` option. */
export function validateAcl(value: unknown): ZkAcl[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0 || !value.every((a) => a instanceof zookeeper.ACL)) {
    throw new ConfigError('acl', 'must be a non-empty list of ACL entries (see digestAcl)');
  }
  return value as ZkAcl[];
}

/** ZooKeeper's NO_AUTH ("not authenticated for this node") and AUTH_FAILED as a {@link PermissionDeniedError}; others as they are. */
export function mapZkError(e: unknown, path?: string): unknown {
  if (!isZkCode(e, zookeeper.Exception.NO_AUTH) && !isZkCode(e, zookeeper.Exception.AUTH_FAILED)) return e;
  return new PermissionDeniedError('zookeeper', `${(e as Error).message}${path ? ` (${path})` : ''}`, { cause: e });
}
