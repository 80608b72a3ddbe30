import { createHash } from 'node:crypto';
import type { ACL } from 'node-zookeeper-client';

/** The client's ACL object, as a validated `acl` option holds it. */
export type ClientAcl = ACL;
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

/**
 * One ACL entry: permissions (`zookeeper.Permission` bits) for an identity `scheme:id`. The
 * client's own `ACL` objects (`zookeeper.ACL.OPEN_ACL_UNSAFE`, …) have this shape and fit.
 */
export interface ZkAcl {
  /** `zookeeper.Permission` bits: READ 1, WRITE 2, CREATE 4, DELETE 8, ADMIN 16, ALL 31. */
  readonly permission: number;
  /** Who: `{ scheme: 'digest', id: 'user:<base64 sha1>' }`, `{ scheme: 'world', id: 'anyone' }`, … */
  readonly id: {
    /** The auth scheme: `digest`, `world`, `ip`, `auth`, … */
    readonly scheme: string;
    /** The identity within the scheme. */
    readonly id: string;
  };
}

/** All of ZooKeeper's permissions (`zookeeper.Permission.ALL`). */
const ALL = 31;

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
export function digestAcl(user: string, password: string, perms: number = ALL): ZkAcl {
  requireString('user', user, { pattern: /^[^:]+$/, patternHint: "contain no ':'" });
  requireString('password', password);
  const hash = createHash('sha1').update(`${user}:${password}`).digest('base64');
  if (!Number.isInteger(perms) || perms < 1 || perms > ALL) throw new ConfigError('perms', `must be zookeeper.Permission bits (1–31), got ${String(perms)}`);
  // A plain entry, not the client's ACL: it is made before a session loads the client (ZkSession.create).
  return { permission: perms, id: { scheme: 'digest', id: `${user}:${hash}` } };
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

/** Validates an `acl` option (after the session loaded the client) and returns the client's ACL objects for it. */
export function validateAcl(value: unknown): ClientAcl[] | undefined {
  if (value === undefined) return undefined;
  const entry = (a: unknown): ClientAcl | undefined => {
    if (a instanceof zookeeper.ACL) return a;
    const e = a as Partial<ZkAcl> | null;
    const p = e?.permission;
    if (typeof p !== 'number' || !Number.isInteger(p) || p < 1 || p > ALL || typeof e?.id?.scheme !== 'string' || e.id.scheme === '' || typeof e.id.id !== 'string') return undefined;
    return new zookeeper.ACL(p, new zookeeper.Id(e.id.scheme, e.id.id));
  };
  const acls = Array.isArray(value) ? value.map(entry) : [];
  if (acls.length === 0 || acls.some((a) => a === undefined)) throw new ConfigError('acl', 'must be a non-empty list of ACL entries (see digestAcl)');
  return acls as ClientAcl[];
}

/** ZooKeeper's NO_AUTH ("not authenticated for this node") and AUTH_FAILED as a {@link PermissionDeniedError}; others as they are. */
export function mapZkError(e: unknown, path?: string): unknown {
  if (!isZkCode(e, zookeeper.Exception.NO_AUTH) && !isZkCode(e, zookeeper.Exception.AUTH_FAILED)) return e;
  return new PermissionDeniedError('zookeeper', `${(e as Error).message}${path ? ` (${path})` : ''}`, { cause: e });
}
